#include "app/catalog.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "core/workload.h"

namespace moe {
namespace fs = std::filesystem;

std::string committed_configs_dir() { return std::string(MOE_SOURCE_DIR) + "/configs"; }

std::vector<CommittedWorkload> committed_workloads(const std::string& dir) {
  std::vector<CommittedWorkload> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".json" || !it->is_regular_file(ec)) continue;
    std::string name = p.lexically_relative(dir).replace_extension().generic_string();
    out.push_back({name, p.string()});
  }
  std::sort(out.begin(), out.end(),
            [](const CommittedWorkload& a, const CommittedWorkload& b) { return a.name < b.name; });
  return out;
}

namespace {

std::string names_of(const std::vector<CommittedWorkload>& ws) {
  std::string s;
  for (const CommittedWorkload& w : ws) s += (s.empty() ? "" : ", ") + w.name;
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string resolve_config(const std::string& arg, const std::string& dir) {
  std::error_code ec;
  if (fs::exists(arg, ec)) return arg;
  MOE_USER_CHECK(!arg.empty(), "--config is empty; give a workload file or a committed "
                                   << "workload's name (`moebench list` shows them)");
  std::string name = arg;
  if (ends_with(name, ".json")) name.resize(name.size() - 5);
  if (name.rfind("configs/", 0) == 0) name = name.substr(8);
  const std::vector<CommittedWorkload> all = committed_workloads(dir);
  MOE_USER_CHECK(!all.empty(), "--config " << arg << ": no such file, and no committed workloads "
                                           << "under " << dir << " (the source tree this program "
                                           << "was built from) to find it among; give a path");
  std::vector<CommittedWorkload> found;
  for (const CommittedWorkload& w : all)
    if (w.name == name) return w.path;
  for (const CommittedWorkload& w : all)
    if (ends_with(w.name, "/" + name)) found.push_back(w);
  MOE_USER_CHECK(found.size() <= 1, "--config " << arg << ": no such file, and " << found.size()
                                                << " committed workloads have that name: "
                                                << names_of(found) << "; give one of them");
  MOE_USER_CHECK(found.size() == 1,
                 "--config " << arg << ": no such file, and no committed "
                             << "workload of that name; committed workloads: " << names_of(all)
                             << " (`moebench list` shows their shapes)");
  return found[0].path;
}

std::string committed_workloads_table(const std::string& dir) {
  const std::vector<CommittedWorkload> all = committed_workloads(dir);
  std::ostringstream os;
  os << "# committed workloads in " << dir << ": run one with `moebench run --config NAME`\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-24s %7s %7s %7s %5s %15s  %s\n", "NAME", "hidden", "ffn",
                "experts", "topk", "tokens_per_rank", "name key");
  os << line;
  for (const CommittedWorkload& c : all) {
    try {
      const Workload w = load_workload_file(c.path);
      std::snprintf(line, sizeof line, "%-24s %7lld %7lld %7lld %5lld %15lld  %s\n", c.name.c_str(),
                    (long long)w.model.hidden, (long long)w.model.ffn, (long long)w.model.experts,
                    (long long)w.model.topk, (long long)w.tokens_per_rank, w.name.c_str());
      os << line;
    } catch (const UserError& e) {
      os << c.name << "  (does not load: " << e.what() << ")\n";
    }
  }
  if (all.empty()) os << "(none: " << dir << " holds no *.json)\n";
  return os.str();
}

}  // namespace moe
