#include "app/cli.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "app/backend.h"

namespace moe {

int launcher_rank() {
  // Open MPI, MPICH/Hydra and PMIx launchers, then Slurm's srun.
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return 0;
}

std::string closest_name(const std::string& typed, const std::vector<std::string>& names) {
  // Optimal string alignment distance: "comapre" is one slip from "compare", not two.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  std::string best;
  size_t best_d = 0;
  for (const std::string& n : names) {
    const size_t dn = distance(typed, n);
    // A third of the name may be wrong (at least one letter, at most two): "rnu" is run, "kesy"
    // is keys, "xyz" is nothing.
    const size_t allowed = std::clamp<size_t>(n.size() / 3, 1, 2);
    if (dn <= allowed && (best.empty() || dn < best_d)) best = n, best_d = dn;
  }
  return best;
}

std::string unknown_subcommand_message(int argc, const char* const* argv,
                                       const std::vector<std::string>& names) {
  // The top level takes flags only (-h, --help, --version): its first other word is the
  // subcommand.
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.empty() || a[0] == '-') continue;
    if (std::find(names.begin(), names.end(), a) != names.end()) return "";
    std::string msg = "unknown subcommand '" + a + "'";
    if (const std::string near = closest_name(a, names); !near.empty())
      return msg + "; did you mean '" + near + "'?";
    msg += "; the subcommands are";
    for (size_t k = 0; k < names.size(); ++k) msg += (k ? ", " : " ") + names[k];
    return msg + " (moebench --help)";
  }
  return "";
}

void setup_logging(int rank) {
  const char* no_color = std::getenv("NO_COLOR");
  const spdlog::color_mode mode =
      no_color && *no_color ? spdlog::color_mode::never : spdlog::color_mode::automatic;
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(mode);
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("moebench", std::move(sink)));
  spdlog::set_pattern(rank == 0 ? "[%H:%M:%S] %^%l%$: %v"
                                : "[%H:%M:%S] rank " + std::to_string(rank) + " %^%l%$: %v");
}

std::string version_text() {
  std::string s = std::string("moebench ") + MOE_VERSION + "\ncommit " + MOE_GIT_COMMIT +
                  " (when the build was configured)\n";
  const std::string libs = backend_build_versions();
  return s + "backends: cpu" + (libs.empty() ? " (built without CUDA)" : ", cuda (" + libs + ")");
}

CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi)
          return "Value " + text + " not in range " + CLI::detail::to_string(lo) + " to " +
                 CLI::detail::to_string(hi) + " (a finite number)";
        return std::string();
      },
      "FLOAT in [" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]",
      "finite_range");
}

}  // namespace moe
