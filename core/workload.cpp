#include "core/workload.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <sstream>

#include "core/error.h"

namespace moe {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------------------------------------
// The schema: every key the loader accepts, with the JSON type it must have. Unknown-key checks,
// suggestions and --set all read this one table; the typed reads in from_json() must match it.

enum class Kind {
  kString,          // any string
  kInt,             // any int64 (ranges are checked by resolve_and_validate, which names the fix)
  kUint,            // non-negative, up to 2^64 - 1 (the seed)
  kNumber,          // integer or floating point
  kBool,            // true or false
  kEnum,            // a string from `choices`
  kSize,            // a positive integer or "auto" (the mesh; "auto" is stored as 0)
  kOptionalNumber,  // a number or null (stored as 0)
};

struct KeySpec {
  std::string path;
  Kind kind;
  std::vector<std::string> choices;  // kEnum only
};

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = {
      {"name", Kind::kString, {}},
      {"model.hidden", Kind::kInt, {}},
      {"model.ffn", Kind::kInt, {}},
      {"model.experts", Kind::kInt, {}},
      {"model.topk", Kind::kInt, {}},
      {"router.score", Kind::kEnum, {"softmax", "sigmoid"}},
      {"router.softmax_after_topk", Kind::kBool, {}},
      {"router.normalize_topk", Kind::kBool, {}},
      {"router.scaling", Kind::kNumber, {}},
      {"router.groups", Kind::kInt, {}},
      {"router.group_topk", Kind::kInt, {}},
      {"router.expert_bias", Kind::kBool, {}},
      {"router.aux_coeff", Kind::kNumber, {}},
      {"router.z_coeff", Kind::kNumber, {}},
      {"routing.mode", Kind::kEnum, {"learned", "uniform", "balanced", "powerlaw", "hot"}},
      {"routing.skew", Kind::kNumber, {}},
      {"routing.hot_fraction", Kind::kNumber, {}},
      {"routing.hot_experts", Kind::kInt, {}},
      {"tokens_per_rank", Kind::kInt, {}},
      {"mesh.ep", Kind::kSize, {}},
      {"mesh.fsdp", Kind::kSize, {}},
      {"dtype", Kind::kEnum, {"bf16", "fp32"}},
      {"expert_grad_dtype", Kind::kEnum, {"fp32", "bf16"}},
      {"dispatch", Kind::kEnum, {"alltoall"}},
      {"capacity_factor", Kind::kOptionalNumber, {}},
      {"drop_policy", Kind::kEnum, {"probability", "position"}},
      {"align", Kind::kInt, {}},
      {"steps", Kind::kInt, {}},
      {"warmup", Kind::kInt, {}},
      {"seed", Kind::kUint, {}},
      {"check", Kind::kEnum, {"first", "every", "off"}},
      {"reference", Kind::kEnum, {"auto", "cpu", "gpu"}},
      {"roofline", Kind::kBool, {}},
  };
  return keys;
}

const std::vector<std::string> kSections = {"model", "router", "routing", "mesh"};
const std::vector<std::string> kRequired = {"model.hidden", "model.ffn", "model.experts",
                                            "model.topk", "tokens_per_rank"};

const KeySpec* find_key(const std::string& path) {
  for (const KeySpec& k : schema())
    if (k.path == path) return &k;
  return nullptr;
}

bool is_section(const std::string& name) {
  return std::find(kSections.begin(), kSections.end(), name) != kSections.end();
}

std::string last_part(const std::string& path) { return path.substr(path.rfind('.') + 1); }

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// A JSON value as the user wrote it, cut short so one bad value cannot flood the terminal.
std::string show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Suggestions: the closest candidate within edit distance 2 (optimal string alignment, so that a
// swapped pair of letters counts as one edit).

int edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = int(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = int(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

// "" when nothing is close; the first candidate wins a tie.
std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 3;
  for (const std::string& c : candidates) {
    if (word.size() > c.size() + 2 || c.size() > word.size() + 2) continue;  // too far anyway
    int d = edit_distance(word, c);
    if (d < best_d) best = c, best_d = d;
  }
  return best;
}

[[noreturn]] void unknown_key(const std::string& path, const std::string& source) {
  std::ostringstream os;
  os << "unknown key '" << path << "' in " << source;
  std::vector<std::string> candidates = kSections;
  for (const KeySpec& k : schema()) candidates.push_back(k.path);
  std::string guess = closest(path, candidates);
  // A right key at the wrong level ("hidden" at the top, "router.ep"): match on its last part.
  if (guess.empty()) {
    for (const KeySpec& k : schema())
      if (last_part(k.path) == last_part(path)) guess = k.path;
  }
  if (!guess.empty()) {
    os << "; did you mean '" << guess << "'?";
  } else {
    // List the keys of the level the unknown key sits in.
    const size_t dot = path.find('.');
    const std::string section = dot == std::string::npos ? "" : path.substr(0, dot);
    std::vector<std::string> known;
    if (!is_section(section)) {
      for (const KeySpec& k : schema()) {
        std::string top = k.path.substr(0, k.path.find('.'));
        if (std::find(known.begin(), known.end(), top) == known.end()) known.push_back(top);
      }
      os << "; known keys: " << join(known, ", ");
    } else {
      for (const KeySpec& k : schema())
        if (k.path.rfind(section + ".", 0) == 0) known.push_back(last_part(k.path));
      os << "; known " << section << " keys: " << join(known, ", ");
    }
  }
  throw UserError(os.str());
}

// The value at "key" or "section.key", or nullptr when absent.
const json* lookup(const json& root, const std::string& path) {
  const size_t dot = path.find('.');
  const json* node = &root;
  if (dot != std::string::npos) {
    auto it = root.find(path.substr(0, dot));
    if (it == root.end() || !it->is_object()) return nullptr;
    node = &*it;
  }
  auto it = node->find(path.substr(dot + 1));  // npos + 1 == 0: the whole path
  return it == node->end() ? nullptr : &*it;
}

// ---------------------------------------------------------------------------------------------
// Loading: structure checks first (unknown keys, sections are objects, required keys), then one
// typed read per key. A read leaves the field at its default when the key is absent.

void check_structure(const json& root, const std::string& source) {
  MOE_USER_CHECK(root.is_object(),
                 source << ": expected a JSON object ({...}) at the top level, got " << show(root));
  for (const auto& item : root.items()) {
    const std::string& key = item.key();
    if (is_section(key)) {
      MOE_USER_CHECK(item.value().is_object(), "key '" << key << "' in " << source
                                                       << ": expected an object ({...}), got "
                                                       << show(item.value()));
      for (const auto& sub : item.value().items()) {
        const std::string path = key + "." + sub.key();
        if (!find_key(path)) unknown_key(path, source);
      }
    } else if (key.find('.') != std::string::npos && find_key(key)) {
      // {"router.groups": 2} would be silently ignored: keys nest, they are not dotted.
      const size_t dot = key.find('.');
      throw UserError("key '" + key + "' in " + source + " must be nested: write \"" +
                      key.substr(0, dot) + "\": {\"" + key.substr(dot + 1) + "\": ...}");
    } else if (!find_key(key)) {
      unknown_key(key, source);
    }
  }
  std::vector<std::string> missing;
  for (const std::string& path : kRequired)
    if (!lookup(root, path)) missing.push_back(path);
  MOE_USER_CHECK(missing.empty(), source << ": missing required key"
                                         << (missing.size() > 1 ? "s" : "") << " "
                                         << join(missing, ", ")
                                         << "; every workload gives model.hidden, model.ffn, "
                                            "model.experts, model.topk and tokens_per_rank");
}

class Reader {
 public:
  Reader(const json& root, const std::string& source) : root_(root), source_(source) {}

  void get(const char* path, std::string& out) {
    if (const json* v = find(path, Kind::kString)) {
      if (!v->is_string()) fail(path, "expected a string", *v);
      out = v->get<std::string>();
    }
  }

  void get(const char* path, int64_t& out) {
    if (const json* v = find(path, Kind::kInt)) out = to_int64(path, *v, "an integer");
  }

  void get(const char* path, uint64_t& out) {
    if (const json* v = find(path, Kind::kUint)) {
      if (v->is_number_unsigned()) {
        out = v->get<uint64_t>();
      } else if (v->is_number_integer() && v->get<int64_t>() >= 0) {
        out = uint64_t(v->get<int64_t>());
      } else {
        fail(path, "expected a non-negative integer (up to 2^64 - 1)", *v);
      }
    }
  }

  void get(const char* path, double& out) {
    if (const json* v = find(path, Kind::kNumber)) {
      if (!v->is_number()) fail(path, "expected a number", *v);
      out = v->get<double>();
    }
  }

  void get(const char* path, bool& out) {
    if (const json* v = find(path, Kind::kBool)) {
      if (!v->is_boolean()) fail(path, "expected true or false", *v);
      out = v->get<bool>();
    }
  }

  // One of the key's choices; returns false when the key is absent.
  bool get_choice(const char* path, std::string& out) {
    const json* v = find(path, Kind::kEnum);
    if (!v) return false;
    const std::vector<std::string>& choices = find_key(path)->choices;
    std::vector<std::string> quoted;
    for (const std::string& c : choices) quoted.push_back("\"" + c + "\"");
    const std::string expected = "expected one of " + join(quoted, ", ");
    if (!v->is_string()) fail(path, expected, *v);
    out = v->get<std::string>();
    if (std::find(choices.begin(), choices.end(), out) != choices.end()) return true;
    std::string guess = closest(out, choices);
    fail(path, expected, *v, guess.empty() ? "" : "; did you mean \"" + guess + "\"?");
  }

  // A number or null (stored as 0).
  void get_optional(const char* path, double& out) {
    if (const json* v = find(path, Kind::kOptionalNumber)) {
      if (v->is_null()) {
        out = 0;
        return;
      }
      if (!v->is_number()) fail(path, "expected a number or null", *v);
      out = v->get<double>();
    }
  }

  // A mesh size: a positive integer, or "auto" stored as 0.
  void get_size(const char* path, int64_t& out) {
    if (const json* v = find(path, Kind::kSize)) {
      const char* expected = "expected a positive integer or \"auto\"";
      if (v->is_string() && v->get<std::string>() == "auto") {
        out = 0;
        return;
      }
      if (!v->is_number_integer()) fail(path, expected, *v);
      out = to_int64(path, *v, "a positive integer or \"auto\"");
      if (out <= 0) fail(path, expected, *v);
    }
  }

 private:
  const json* find(const char* path, Kind kind) const {
    const KeySpec* key = find_key(path);
    MOE_CHECK(key && key->kind == kind, "reader and schema disagree on key " << path);
    return lookup(root_, path);
  }

  int64_t to_int64(const char* path, const json& v, const std::string& what) {
    if (!v.is_number_integer()) fail(path, "expected " + what, v);
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(path, "expected " + what + " (this one is out of range)", v);
    return v.get<int64_t>();
  }

  [[noreturn]] void fail(const char* path, const std::string& expected, const json& got,
                         const std::string& hint = "") {
    throw UserError("key '" + std::string(path) + "' in " + source_ + ": " + expected + ", got " +
                    show(got) + hint);
  }

  const json& root_;
  const std::string& source_;
};

Workload from_json(const json& root, const std::string& source) {
  check_structure(root, source);
  Workload w;
  Reader r(root, source);
  r.get("name", w.name);
  r.get("model.hidden", w.model.hidden);
  r.get("model.ffn", w.model.ffn);
  r.get("model.experts", w.model.experts);
  r.get("model.topk", w.model.topk);
  r.get_choice("router.score", w.router.score);
  r.get("router.softmax_after_topk", w.router.softmax_after_topk);
  r.get("router.normalize_topk", w.router.normalize_topk);
  r.get("router.scaling", w.router.scaling);
  r.get("router.groups", w.router.groups);
  r.get("router.group_topk", w.router.group_topk);
  r.get("router.expert_bias", w.router.expert_bias);
  r.get("router.aux_coeff", w.router.aux_coeff);
  r.get("router.z_coeff", w.router.z_coeff);
  r.get_choice("routing.mode", w.routing.mode);
  r.get("routing.skew", w.routing.skew);
  r.get("routing.hot_fraction", w.routing.hot_fraction);
  r.get("routing.hot_experts", w.routing.hot_experts);
  r.get("tokens_per_rank", w.tokens_per_rank);
  r.get_size("mesh.ep", w.mesh.ep);
  r.get_size("mesh.fsdp", w.mesh.fsdp);
  std::string choice;
  if (r.get_choice("dtype", choice)) w.dtype = choice == "bf16" ? DType::kBf16 : DType::kFp32;
  if (r.get_choice("expert_grad_dtype", choice))
    w.expert_grad_dtype = choice == "bf16" ? DType::kBf16 : DType::kFp32;
  r.get_choice("dispatch", w.dispatch);
  r.get_optional("capacity_factor", w.capacity_factor);
  r.get_choice("drop_policy", w.drop_policy);
  r.get("align", w.align);
  r.get("steps", w.steps);
  r.get("warmup", w.warmup);
  r.get("seed", w.seed);
  if (r.get_choice("check", choice)) {
    w.check = choice == "first"   ? CheckMode::kFirst
              : choice == "every" ? CheckMode::kEvery
                                  : CheckMode::kOff;
  }
  r.get_choice("reference", w.reference);
  r.get("roofline", w.roofline);
  return w;
}

std::string trim(const std::string& s) {
  const char* space = " \t\r\n";
  size_t b = s.find_first_not_of(space);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

// The JSON value for "--set key=text", by the key's kind. Anything that does not parse as the
// kind is passed on as a string, so that the loader reports it with the key's expected type.
json override_value(const KeySpec& key, const std::string& text) {
  const bool quoted = text.size() >= 2 && text.front() == '"' && text.back() == '"';
  switch (key.kind) {
    case Kind::kString:
    case Kind::kEnum:
      // Raw text, so that name=42 stays the string "42"; a quoted value is unquoted by JSON.
      if (quoted) {
        json v = json::parse(text, nullptr, false);
        if (v.is_string()) return v;
      }
      return json(text);
    case Kind::kBool:
      if (text == "1") return json(true);
      if (text == "0") return json(false);
      break;
    default:
      break;
  }
  json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() ? json(text) : v;
}

// Saturating int64 arithmetic: an absurd config reads as "too big" instead of wrapping around.
int64_t prod(std::initializer_list<int64_t> xs) {
  int64_t p = 1;
  for (int64_t x : xs)
    if (__builtin_mul_overflow(p, x, &p)) return INT64_MAX;
  return p;
}

int64_t sum(std::initializer_list<int64_t> xs) {
  int64_t s = 0;
  for (int64_t x : xs)
    if (__builtin_add_overflow(s, x, &s)) return INT64_MAX;
  return s;
}

// "1, 2, 4, 8" for 8; pairs up to sqrt(n), so that an absurd n cannot hang an error message.
std::string divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  std::vector<std::string> out;
  for (int64_t d : low) out.push_back(std::to_string(d));
  return join(out, ", ");
}

}  // namespace

const char* dtype_name(DType d) { return d == DType::kBf16 ? "bf16" : "fp32"; }

const char* check_mode_name(CheckMode m) {
  return m == CheckMode::kOff ? "off" : m == CheckMode::kFirst ? "first" : "every";
}

Workload workload_from_json_text(const std::string& text, const std::string& source_name) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte counts the bytes read, up to and including the offending one.
    const size_t at = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        line++;
        column = 1;
      } else {
        column++;
      }
    }
    // nlohmann's text after its own prefix: "syntax error while parsing ... - unexpected '}'".
    std::string what = e.what();
    size_t syntax = what.find("syntax error");
    if (syntax != std::string::npos) what = what.substr(syntax);
    throw UserError("malformed JSON in " + source_name + " at line " + std::to_string(line) +
                    ", column " + std::to_string(column) + ": " + what);
  }
  return from_json(root, source_name);
}

Workload load_workload_file(const std::string& path) {
  std::error_code ec;
  MOE_USER_CHECK(std::filesystem::is_regular_file(path, ec),
                 "workload file '" << path
                                   << "' not found (relative paths start from the current "
                                      "directory "
                                   << std::filesystem::current_path(ec).string()
                                   << "; the shipped workloads are in configs/)");
  std::ifstream in(path, std::ios::binary);
  MOE_USER_CHECK(in, "cannot open workload file '" << path << "': " << std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  MOE_USER_CHECK(!in.bad(), "cannot read workload file '" << path << "': " << std::strerror(errno));
  return workload_from_json_text(text.str(), path);
}

void apply_override(Workload& w, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  MOE_USER_CHECK(eq != std::string::npos, "--set '"
                                              << assignment << "' has no '='; write "
                                              << "--set key.path=value, e.g. --set model.topk=4");
  const std::string path = trim(assignment.substr(0, eq));
  const std::string text = trim(assignment.substr(eq + 1));
  const std::string source = "--set " + assignment;
  const KeySpec* key = find_key(path);
  if (!key) {
    MOE_USER_CHECK(!is_section(path), "'" << path << "' in " << source << " is a section, not a "
                                          << "key; set one of its keys, e.g. --set " << path << "."
                                          << (path == "model"     ? "hidden"
                                              : path == "router"  ? "score"
                                              : path == "routing" ? "mode"
                                                                  : "ep")
                                          << "=...");
    unknown_key(path, source);
  }
  // Round trip through the JSON form, so that --set and the file share every type check.
  json root = workload_to_json(w);
  const size_t dot = path.find('.');
  if (dot == std::string::npos) {
    root[path] = override_value(*key, text);
  } else {
    root[path.substr(0, dot)][path.substr(dot + 1)] = override_value(*key, text);
  }
  w = from_json(root, source);
}

void resolve_and_validate(Workload& w, int world_size) {
  MOE_CHECK(world_size >= 1, "world size " << world_size);
  const int64_t world = world_size;
  const ModelShape& m = w.model;
  const RouterConfig& r = w.router;

  // Sizes first: the mesh and router checks below divide by them.
  auto positive = [](const char* key, int64_t v) {
    MOE_USER_CHECK(v > 0, key << " = " << v << " must be a positive integer; set it in the "
                              << "workload file or with --set " << key << "=N");
  };
  positive("model.hidden", m.hidden);
  positive("model.ffn", m.ffn);
  positive("model.experts", m.experts);
  positive("model.topk", m.topk);
  positive("tokens_per_rank", w.tokens_per_rank);
  MOE_USER_CHECK(w.steps >= 1, "steps = " << w.steps << " must be >= 1 (the timed steps); "
                                          << "set e.g. --set steps=20");
  MOE_USER_CHECK(w.warmup >= 0, "warmup = " << w.warmup << " must be >= 0 (untimed steps "
                                            << "before timing); set e.g. --set warmup=3");
  MOE_USER_CHECK(w.expert_grad_dtype == DType::kFp32 || w.dtype == DType::kBf16,
                 "expert_grad_dtype = \"bf16\" with dtype = \"fp32\": gradients narrower than "
                 "the weights they train; set expert_grad_dtype to \"fp32\" or dtype to \"bf16\"");
  MOE_USER_CHECK(m.topk <= m.experts,
                 "model.topk = " << m.topk << " exceeds model.experts = " << m.experts
                                 << " (a token cannot pick more experts than exist); "
                                 << "set model.topk <= " << m.experts);

  // Mesh: 0 means "auto". With both auto, EP goes as wide as the experts and the world allow
  // (ep = gcd), and the rest of the world becomes FSDP.
  int64_t ep = w.mesh.ep, fsdp = w.mesh.fsdp;
  MOE_USER_CHECK(ep >= 0, "mesh.ep = " << ep << " must be a positive integer or \"auto\"");
  MOE_USER_CHECK(fsdp >= 0, "mesh.fsdp = " << fsdp << " must be a positive integer or \"auto\"");
  const int64_t E = m.experts;
  const std::string world_from = " (the number of ranks, from mpirun -np)";
  const std::string valid_ep = "valid mesh.ep values for " + std::to_string(E) + " experts on " +
                               std::to_string(world) + " ranks: " + divisors(std::gcd(E, world));
  if (ep == 0 && fsdp == 0) {
    ep = std::gcd(E, world);
    fsdp = world / ep;
  } else if (ep == 0) {
    MOE_USER_CHECK(world % fsdp == 0, "mesh.fsdp = " << fsdp << " does not divide the world size "
                                                     << world << world_from << "; set mesh.fsdp "
                                                     << "to one of " << divisors(world)
                                                     << " or \"auto\"");
    ep = world / fsdp;
    MOE_USER_CHECK(E % ep == 0, "mesh.ep = " << ep << " (derived: world size " << world
                                             << " / mesh.fsdp " << fsdp << ") does not divide "
                                             << "model.experts = " << E << "; " << valid_ep);
  } else if (fsdp == 0) {
    MOE_USER_CHECK(world % ep == 0, "mesh.ep = " << ep << " does not divide the world size "
                                                 << world << world_from << ", so mesh.fsdp "
                                                 << "cannot be derived; " << valid_ep);
    fsdp = world / ep;
  }
  MOE_USER_CHECK(E % ep == 0, "model.experts = " << E << " is not divisible by mesh.ep = " << ep
                                                 << " (each EP rank holds experts / ep); "
                                                 << valid_ep);
  MOE_USER_CHECK(prod({ep, fsdp}) == world,
                 "mesh.ep (" << ep << ") x mesh.fsdp (" << fsdp << ") = " << prod({ep, fsdp})
                             << " but the world size is " << world << world_from
                             << "; make ep x fsdp = " << world
                             << " or set one of them to \"auto\"");

  // Router (MATH.md steps 2-6).
  MOE_USER_CHECK(r.score == "softmax" || r.score == "sigmoid",
                 "router.score = \"" << r.score << "\" is not one of \"softmax\", \"sigmoid\"");
  MOE_USER_CHECK(!r.softmax_after_topk || r.score == "softmax",
                 "router.softmax_after_topk = true needs router.score = \"softmax\" (got \""
                     << r.score << "\"); the top-k softmax replaces softmax scores only: set "
                     << "router.softmax_after_topk=false or router.score=softmax");
  MOE_USER_CHECK(std::isfinite(r.scaling) && r.scaling > 0,
                 "router.scaling = " << r.scaling << " must be a finite number > 0 (1 = no "
                                     << "scaling)");
  MOE_USER_CHECK(std::isfinite(r.aux_coeff) && r.aux_coeff >= 0,
                 "router.aux_coeff = " << r.aux_coeff << " must be a finite number >= 0 (0 = no "
                                       << "load-balancing loss)");
  MOE_USER_CHECK(std::isfinite(r.z_coeff) && r.z_coeff >= 0,
                 "router.z_coeff = " << r.z_coeff << " must be a finite number >= 0 (0 = no "
                                     << "z-loss)");
  MOE_USER_CHECK(r.groups >= 1, "router.groups = " << r.groups << " must be >= 1 (1 = no "
                                                   << "group-limited routing)");
  MOE_USER_CHECK(E % r.groups == 0, "router.groups = " << r.groups << " does not divide "
                                                       << "model.experts = " << E << " (groups "
                                                       << "are equal and contiguous); valid "
                                                       << "router.groups: " << divisors(E));
  MOE_USER_CHECK(r.group_topk >= 1 && r.group_topk <= r.groups,
                 "router.group_topk = " << r.group_topk
                                        << " must be between 1 and router.groups = " << r.groups);
  if (r.groups > 1) {
    MOE_USER_CHECK(m.topk % r.group_topk == 0,
                   "model.topk = " << m.topk << " is not divisible by router.group_topk = "
                                   << r.group_topk << " (a group's score sums its top "
                                   << "topk / group_topk experts); pick a router.group_topk that "
                                   << "divides " << m.topk);
    const int64_t selectable = r.group_topk * (E / r.groups);
    MOE_USER_CHECK(m.topk <= selectable,
                   "model.topk = " << m.topk << " exceeds the " << selectable << " experts in the "
                                   << "router.group_topk = " << r.group_topk << " kept groups of "
                                   << E / r.groups << " experts; raise router.group_topk or "
                                   << "lower router.groups or model.topk");
  }
  MOE_USER_CHECK(w.dispatch == "alltoall", "dispatch = \"" << w.dispatch << "\" is not supported; "
                                                           << "the only dispatch is \"alltoall\"");

  const RoutingConfig& rt = w.routing;
  MOE_USER_CHECK(std::isfinite(rt.skew) && rt.skew >= 0,
                 "routing.skew = " << rt.skew << " must be a finite number >= 0 (0 = uniform; "
                                   << "1 to 2 is a typical power-law skew)");
  MOE_USER_CHECK(rt.hot_fraction >= 0 && rt.hot_fraction <= 1,
                 "routing.hot_fraction = " << rt.hot_fraction
                                           << " must be between 0 and 1 (the share of tokens "
                                              "sent to the hot experts)");
  MOE_USER_CHECK(rt.hot_experts >= 1 && rt.hot_experts <= m.experts,
                 "routing.hot_experts = " << rt.hot_experts << " must be between 1 and "
                                          << "model.experts = " << m.experts);
  MOE_USER_CHECK(w.capacity_factor == 0 || (std::isfinite(w.capacity_factor) &&
                                            w.capacity_factor > 0 && w.capacity_factor <= 1e6),
                 "capacity_factor = " << w.capacity_factor
                                      << " must be a number > 0 (1 = each expert takes its "
                                         "balanced share of rows) or null for dropless routing");
  MOE_USER_CHECK(w.align >= 1 && w.align <= 4096,
                 "align = " << w.align << " must be between 1 and 4096 (1 = no padding; 16 or "
                            << "128 pad each expert's rows for the tensor-core GEMM tiles)");

  // One rank may receive every row of its EP group: T * K * ep rows, indexed with int32.
  const int64_t rows = prod({w.tokens_per_rank, m.topk, ep});
  MOE_USER_CHECK(rows <= INT32_MAX,
                 "tokens_per_rank (" << w.tokens_per_rank << ") x model.topk (" << m.topk
                                     << ") x mesh.ep (" << ep << ") = " << rows << " rows that one "
                                     << "rank may receive, more than int32 row indices hold "
                                     << "(2^31 - 1); lower tokens_per_rank");
  // The reference gathers each rank's [T, H] tokens as one MPI message, counted in an int.
  const int64_t elements = prod({w.tokens_per_rank, m.hidden});
  MOE_USER_CHECK(elements <= INT32_MAX,
                 "tokens_per_rank (" << w.tokens_per_rank << ") x model.hidden (" << m.hidden
                                     << ") = " << elements << " elements in one rank's tokens, "
                                     << "more than one MPI message holds (2^31 - 1); lower "
                                     << "tokens_per_rank");
  // Only a workload that passed every check gets its mesh resolved.
  w.mesh.ep = ep;
  w.mesh.fsdp = fsdp;
}

// Bytes of one rank, each term commented below. S = storage_bytes per stored element; G per expert
// weight gradient (2 for bf16 gradients where the backend stores bf16, else 4); other gradients
// are fp32 and the reference float64. E_l = E / ep local experts; P = E_l * 3HF their parameters
// (w_in [E_l, H, 2F] + w_out [E_l, F, H]); R = T * K rows each way through the all-to-all
// (balanced routing). The reference's buffers count when check != off; it holds every expert and
// the world's tokens, so it dominates small workloads.
int64_t estimate_rank_bytes(const Workload& w_in, int world_size, int storage_bytes) {
  MOE_CHECK(storage_bytes > 0, "storage_bytes " << storage_bytes);
  Workload w = w_in;
  if (w.mesh.ep == 0 || w.mesh.fsdp == 0) resolve_and_validate(w, world_size);
  const int64_t S = storage_bytes, H = w.model.hidden, F = w.model.ffn, E = w.model.experts;
  const int64_t K = w.model.topk, T = w.tokens_per_rank, W = world_size;
  const int64_t fsdp = w.mesh.fsdp, E_local = E / w.mesh.ep;
  const int64_t G = w.expert_grad_dtype == DType::kBf16 && S == 2 ? 2 : 4;
  const int64_t P = prod({E_local, 3, H, F});
  const int64_t P_shard = P == INT64_MAX ? P : (P + fsdp - 1) / fsdp;
  // Alignment pads each local expert's rows up to a multiple of `align` on the receiving side.
  const int64_t R = sum({prod({T, K}), prod({E_local, w.align - 1})});

  int64_t bytes = 0;
  auto add = [&bytes](std::initializer_list<int64_t> factors) {
    bytes = sum({bytes, prod(factors)});
  };
  add({H, E, S});  // w_gate
  add({H, E, 4});  // its fp32 grad
  if (w.router.expert_bias) add({E, 4});
  add({P, S});  // the (all-gathered) experts
  add({P, G});  // their grads
  if (fsdp > 1) {
    add({P_shard, S});  // this rank's FSDP shard of its experts
    add({P_shard, G});  // grad shard after the reduce-scatter
  }
  add({4, T, H, S});  // x, dout, out, dx
  add({3, T, E, 4});  // logits, scores, dlogits
  add({2, T, K, 4});  // idx, p
  add({4, R, H, S});  // expert-major input and output, and their grads
  // Send-order x, y and dy, except at ep 1 with align 1, where the send order is the expert-major
  // order and they are the buffers above; the all-to-all's landing buffer where there is one.
  if (!send_order_is_expert_major(w.mesh.ep, w.align)) add({3, T, K, H, S});
  if (w.mesh.ep > 1) add({R, H, S});
  add({2, R, 2, F, S});  // h, dh
  add({2, R, F, S});     // a, da
  if (w.check != CheckMode::kOff) bytes = sum({bytes, estimate_reference_bytes(w, W, false).host});
  return bytes;
}

ReferenceBytes estimate_reference_bytes(const Workload& w_in, int world_size, bool on_gpu) {
  Workload w = w_in;
  if (w.mesh.ep == 0 || w.mesh.fsdp == 0) resolve_and_validate(w, world_size);
  const int64_t H = w.model.hidden, F = w.model.ffn, E = w.model.experts, K = w.model.topk;
  const int64_t T = w.tokens_per_rank, W = world_size, E_local = E / w.mesh.ep;
  // The fsdp ranks of one EP position split the weight gradients of their experts.
  const int64_t P = prod({(E_local + w.mesh.fsdp - 1) / w.mesh.fsdp, 3, H, F});
  ReferenceBytes b;
  auto add = [](int64_t& to, std::initializer_list<int64_t> factors) {
    to = sum({to, prod(factors)});
  };
  if (!on_gpu) add(b.host, {E, 3, H, F, 8});  // every expert's weights, float64
  add(b.host, {2, W, T, H, 8});               // the world's x and dout
  add(b.host, {W, T, K, 16});                 // the world's routing: idx, p, the backend's idx
  add(b.host, {W, T, E, 8});                  // the world's logits
  add(b.host, {2, T, H, 8});                  // out, dx
  add(b.host, {P, 8});                        // dw_in, dw_out of this rank's experts
  add(b.host, {H, E, 8});                     // dw_gate
  // The backend's results copied to the host as floats for the comparison (MoeLayer::
  // download_outputs with the check's OutputsWanted: no expert weights, and the gradients of
  // this rank's share of its experts only).
  add(b.host, {P, 4});        // dw_in, dw_out of this rank's experts
  add(b.host, {4, T, H, 4});  // x, dout, out, dx
  add(b.host, {2, H, E, 4});  // w_gate, dw_gate
  add(b.host, {T, K, 9});     // idx, p, dropped
  if (on_gpu) {
    add(b.device, {2, W, T, H, 4});  // the world's x and dout, fp32
    add(b.device, {W, T, E, 4});     // logits
    add(b.device, {H, E, 8});        // w_gate and its gradient
    add(b.device, {4, 3, H, F});     // one expert's weights, fp32
    add(b.device, {4, 3, H, F});     // and their gradients
    add(b.device, {2, T, H, 4});     // out, dx
    // A chunk of one expert's rows: at most 2 GiB of activations (kernels/cuda/reference.cu).
    add(b.device, {int64_t(2) << 30});
  }
  return b;
}

int64_t estimate_rank_bytes(const Workload& w, int world_size) {
  return estimate_rank_bytes(w, world_size, 4);  // the CPU backend stores floats
}

json workload_to_json(const Workload& w) {
  auto size = [](int64_t v) { return v == 0 ? json("auto") : json(v); };
  return json{
      {"name", w.name},
      {"model",
       {{"hidden", w.model.hidden},
        {"ffn", w.model.ffn},
        {"experts", w.model.experts},
        {"topk", w.model.topk}}},
      {"router",
       {{"score", w.router.score},
        {"softmax_after_topk", w.router.softmax_after_topk},
        {"normalize_topk", w.router.normalize_topk},
        {"scaling", w.router.scaling},
        {"groups", w.router.groups},
        {"group_topk", w.router.group_topk},
        {"expert_bias", w.router.expert_bias},
        {"aux_coeff", w.router.aux_coeff},
        {"z_coeff", w.router.z_coeff}}},
      {"routing",
       {{"mode", w.routing.mode},
        {"skew", w.routing.skew},
        {"hot_fraction", w.routing.hot_fraction},
        {"hot_experts", w.routing.hot_experts}}},
      {"tokens_per_rank", w.tokens_per_rank},
      {"mesh", {{"ep", size(w.mesh.ep)}, {"fsdp", size(w.mesh.fsdp)}}},
      {"dtype", dtype_name(w.dtype)},
      {"expert_grad_dtype", dtype_name(w.expert_grad_dtype)},
      {"dispatch", w.dispatch},
      {"capacity_factor", w.capacity_factor > 0 ? json(w.capacity_factor) : json(nullptr)},
      {"drop_policy", w.drop_policy},
      {"align", w.align},
      {"steps", w.steps},
      {"warmup", w.warmup},
      {"seed", w.seed},
      {"check", check_mode_name(w.check)},
      {"reference", w.reference},
      {"roofline", w.roofline},
  };
}

}  // namespace moe
