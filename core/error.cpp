#include "core/error.h"

#include <mpi.h>

namespace moe {

int world_rank_or_minus_one() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void throw_error(const char* file, int line, const std::string& what) {
  std::ostringstream os;
  os << "rank " << world_rank_or_minus_one() << ": " << what << " (" << file << ":" << line << ")";
  throw Error(os.str());
}

}  // namespace moe
