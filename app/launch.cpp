#include "app/launch.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/bounded_wait.h"
#include "core/error.h"

namespace moe {

int gpu_for_rank(int local_rank, int local_ranks, int visible_gpus) {
  MOE_CHECK(0 <= local_rank && local_rank < local_ranks,
            "local rank " << local_rank << " of " << local_ranks);
  MOE_USER_CHECK(visible_gpus > 0, "no GPU is visible to this process; use --backend cpu");
  if (local_ranks <= visible_gpus) return local_rank;
  // A launcher that gives each rank its own GPU shows it as the only one: device 0. Only one
  // rank per host could tell this apart from several ranks told to share one GPU, and then
  // there is nothing to share.
  if (visible_gpus == 1) return 0;
  MOE_USER_CHECK(false, local_ranks
                            << " ranks on this host but " << visible_gpus
                            << " GPUs visible to each: some would share a GPU. Launch one rank per "
                               "GPU: at most "
                            << visible_gpus
                            << " ranks per host (mpirun -np, or a hostfile's slots), or give each "
                               "rank its own GPU (Slurm --gpus-per-task=1, or CUDA_VISIBLE_DEVICES "
                               "set per rank)");
  return -1;
}

int local_rank_and_size(MPI_Comm world, int* local_size) {
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
  int r = 0, n = 1;
  MPI_Comm_rank(local, &r);
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  if (local_size) *local_size = n;
  return r;
}

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string nvidia_driver_version_from(const std::string& proc_text) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ...": the first word
  // of the first line made of digits and dots with at least one dot (the date has none).
  std::istringstream first_line(proc_text.substr(0, proc_text.find('\n')));
  std::string word;
  while (first_line >> word) {
    const bool digits_and_dots = std::isdigit(static_cast<unsigned char>(word[0])) &&
                                 word.find_first_not_of("0123456789.") == std::string::npos;
    if (digits_and_dots && word.find('.') != std::string::npos) return word;
  }
  return "";
}

std::string nvidia_driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  if (!f) return "";
  std::ostringstream text;
  text << f.rdbuf();
  return nvidia_driver_version_from(text.str());
}

std::string RankPlace::describe() const {
  std::ostringstream os;
  os << "rank " << rank << " on " << host;
  if (gpu >= 0) os << ": GPU " << gpu << " (" << pci_bus_id << ", " << gpu_name << ")";
  return os.str();
}

std::string gpu_uuid_string(const unsigned char bytes[16]) {
  std::string s = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(hex, sizeof hex, "%02x", unsigned(bytes[i]));
    s += hex;
  }
  return s;
}

void check_no_shared_gpu(const std::vector<RankPlace>& places) {
  for (size_t i = 0; i < places.size(); ++i)
    for (size_t j = i + 1; j < places.size(); ++j) {
      const RankPlace &a = places[i], &b = places[j];
      if (a.gpu < 0 || a.host != b.host || a.uuid != b.uuid) continue;
      MOE_USER_CHECK(false, "ranks " << a.rank << " and " << b.rank << " on " << a.host
                                     << " both run on GPU " << a.pci_bus_id << " (" << a.uuid
                                     << "): each sees it as its only GPU, so the launcher showed "
                                        "them the same one. Give each rank its own GPU (Slurm "
                                        "--gpus-per-task=1, or a different CUDA_VISIBLE_DEVICES "
                                        "per rank), or let every rank see all of the host's GPUs");
    }
}

namespace {

// A place travels as one fixed-size record of fields separated by a byte no host or GPU name
// holds, so that one all-gather carries every rank's.
constexpr int kRecordBytes = 1024;
constexpr char kSep = '\x1f';

std::string encode(const RankPlace& p) {
  std::string s = p.host + kSep + std::to_string(p.gpu) + kSep + p.pci_bus_id + kSep + p.uuid +
                  kSep + p.gpu_name;
  s.resize(kRecordBytes - 1);  // truncates only names past any real one; keeps a NUL at the end
  return s;
}

RankPlace decode(const char* record, int rank) {
  std::string fields[5];
  std::istringstream in(std::string(record, strnlen(record, kRecordBytes)));
  for (std::string& f : fields) std::getline(in, f, kSep);
  RankPlace p;
  p.rank = rank;
  p.host = fields[0];
  p.gpu = fields[1].empty() ? -1 : std::atoi(fields[1].c_str());
  p.pci_bus_id = fields[2];
  p.uuid = fields[3];
  p.gpu_name = fields[4];
  return p;
}

}  // namespace

std::vector<RankPlace> gather_places(const RankPlace& mine, MPI_Comm world, double timeout_s) {
  int size = 1;
  MPI_Comm_size(world, &size);
  std::string send = encode(mine);
  send.resize(kRecordBytes, '\0');
  std::vector<char> all(size_t(size) * kRecordBytes);
  allgather_bounded(send.data(), all.data(), kRecordBytes, MPI_CHAR, world,
                    "the gather of ranks' hosts and GPUs", timeout_s);
  std::vector<RankPlace> places;
  for (int r = 0; r < size; ++r) places.push_back(decode(all.data() + size_t(r) * kRecordBytes, r));
  return places;
}

std::string describe_hosts(const std::vector<RankPlace>& places) {
  std::ostringstream os;
  for (size_t i = 0; i < places.size();) {
    size_t j = i;
    while (j + 1 < places.size() && places[j + 1].host == places[i].host) ++j;
    os << (i ? ", " : "") << "rank " << places[i].rank;
    if (j > i) os << "-" << places[j].rank;
    os << " on " << places[i].host;
    i = j + 1;
  }
  return os.str();
}

}  // namespace moe
