#pragma once
// The command line's habits, apart from its options (app/main.cpp): which rank prints before MPI
// starts, a suggestion for a mistyped subcommand, where logs go and in what colour, --version.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace moe {

// This process's rank as the launcher (mpirun, srun) announced it in the environment, 0 when
// there is none: help, --version and usage errors are answered before MPI_Init (which leaves a
// session directory behind), and only one rank of a launched job should print them.
int launcher_rank();

// The name in `names` closest to `typed` (edit distance, a swap of neighbours counting once) when
// it is close enough to be a likely typo, else "".
std::string closest_name(const std::string& typed, const std::vector<std::string>& names);

// "" when argv's subcommand (its first word that is not an option) is one of `names` or absent;
// else the message for it: "unknown subcommand 'runn'; did you mean 'run'?".
std::string unknown_subcommand_message(int argc, const char* const* argv,
                                       const std::vector<std::string>& names);

// Logs go to stderr (stdout carries the report, or the result JSON with --out -), coloured only
// where stderr is a colour terminal and NO_COLOR is unset or empty (https://no-color.org).
void setup_logging(int rank);

// A number option's check: finite and within [lo, hi]. CLI::Range lets NaN through (every
// comparison with it is false), and a NaN --timeout-s would never time out.
CLI::Validator finite_range(double lo, double hi);

// What `moebench --version` prints: version, the commit it was configured at, and the versions of
// the libraries a CUDA build was built against.
std::string version_text();

}  // namespace moe
