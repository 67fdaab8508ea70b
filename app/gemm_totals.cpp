#include "app/gemm_totals.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/grouped_gemm.h"

namespace moe {
namespace {

bool is_expert_gemm(const GemmTime& r) {
  return std::find(kExpertGemmNames.begin(), kExpertGemmNames.end(), r.gemm) !=
         kExpertGemmNames.end();
}

void add(GemmSum& s, const GemmTime& r) {
  s.ms += r.median_ms;
  s.quantize_ms += r.quantize_ms;
  ++s.gemms;
}

std::string sum_text(const GemmSum& s, bool fp8) {
  char buf[96];
  if (fp8)
    std::snprintf(buf, sizeof buf, "%.3f ms (quantization %.3f)", s.ms, s.quantize_ms);
  else
    std::snprintf(buf, sizeof buf, "%.3f ms", s.ms);
  std::string t = buf;
  if (s.gemms != kNumExpertGemms) t += " over " + std::to_string(s.gemms) + " GEMMs";
  return t;
}

nlohmann::json sum_json(const GemmSum& s) {
  return {{"ms", s.ms}, {"quantize_ms", s.quantize_ms}, {"gemms", s.gemms}};
}

}  // namespace

std::vector<PrecisionTotals> gemm_totals(const std::vector<GemmTime>& rows) {
  std::vector<PrecisionTotals> out;
  for (Precision p : {Precision::kBf16, Precision::kFp8Tensor, Precision::kFp8Block}) {
    PrecisionTotals t;
    t.precision = p;
    std::map<std::string, const GemmTime*> fastest;  // per expert GEMM
    for (const GemmTime& r : rows) {
      if (r.precision != p || !is_expert_gemm(r)) continue;
      auto m = std::find_if(t.by_method.begin(), t.by_method.end(),
                            [&](const auto& e) { return e.first == r.method; });
      if (m == t.by_method.end()) m = t.by_method.insert(t.by_method.end(), {r.method, {}});
      add(m->second, r);
      const GemmTime*& f = fastest[r.gemm];
      if (!f || r.median_ms < f->median_ms) f = &r;
    }
    if (t.by_method.empty()) continue;
    for (const auto& [gemm, r] : fastest) add(t.fastest_each, *r);
    out.push_back(t);
  }
  if (!out.empty() && out.front().precision == Precision::kBf16)
    for (PrecisionTotals& t : out)
      if (t.precision != Precision::kBf16 && t.fastest_each.ms > 0)
        t.speedup_vs_bf16 = out.front().fastest_each.ms / t.fastest_each.ms;
  return out;
}

std::string format_gemm_totals(const std::vector<PrecisionTotals>& totals) {
  std::string s;
  for (const PrecisionTotals& t : totals) {
    const bool fp8 = t.precision != Precision::kBf16;
    s += std::string("# totals, ") + name_of(t.precision) + ": ";
    for (size_t i = 0; i < t.by_method.size(); ++i)
      s += (i ? ", " : "") + t.by_method[i].first + " " + sum_text(t.by_method[i].second, fp8);
    s += "; the fastest method of each " + sum_text(t.fastest_each, fp8);
    if (t.speedup_vs_bf16 > 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, ": %.2fx bf16's", t.speedup_vs_bf16);
      s += buf;
    }
    s += "\n";
  }
  return s;
}

nlohmann::json gemm_totals_json(const std::vector<PrecisionTotals>& totals) {
  nlohmann::json j = nlohmann::json::array();
  for (const PrecisionTotals& t : totals) {
    nlohmann::json methods = nlohmann::json::object();
    for (const auto& [method, sum] : t.by_method) methods[method] = sum_json(sum);
    j.push_back({{"precision", name_of(t.precision)},
                 {"methods", methods},
                 {"fastest_each", sum_json(t.fastest_each)},
                 {"speedup_vs_bf16", t.speedup_vs_bf16 > 0 ? nlohmann::json(t.speedup_vs_bf16)
                                                           : nlohmann::json(nullptr)}});
  }
  return j;
}

}  // namespace moe
