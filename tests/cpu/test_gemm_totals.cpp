// `moebench gemm`'s totals (app/gemm_totals.h): the six expert GEMMs summed per method and at the
// fastest method of each, per arithmetic, the dense and weights rows left out, and FP8's speedup
// over bf16's fastest mix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/gemm_totals.h"
#include "core/grouped_gemm.h"

namespace moe {
namespace {

// Six GEMMs of `method` at base_ms + i (i the GEMM's index), each quantizing q ms of it.
void add_six(std::vector<GemmTime>& rows, const std::string& method, Precision p, double base_ms,
             double q = 0) {
  for (int i = 0; i < kNumExpertGemms; ++i)
    rows.push_back({kExpertGemmNames[i], method, p, base_ms + i, q});
}

TEST(GemmTotals, SumsEachMethodAndTheFastestOfEachGemm) {
  std::vector<GemmTime> rows;
  add_six(rows, "lt_multistream", Precision::kBf16, 10.0);  // 10..15: 75
  add_six(rows, "grouped_sm90", Precision::kBf16, 9.0);     // 9..14: 69
  rows[0].median_ms = 1.0;  // lt's up the fastest of up: 1 + (10 + ... + 14) = 61
  rows.push_back({"dense", "cublaslt", Precision::kBf16, 100.0, 0});
  const std::vector<PrecisionTotals> t = gemm_totals(rows);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].precision, Precision::kBf16);
  ASSERT_EQ(t[0].by_method.size(), 2u);
  EXPECT_EQ(t[0].by_method[0].first, "lt_multistream");
  EXPECT_DOUBLE_EQ(t[0].by_method[0].second.ms, 1.0 + 11 + 12 + 13 + 14 + 15);
  EXPECT_EQ(t[0].by_method[0].second.gemms, 6);
  EXPECT_DOUBLE_EQ(t[0].by_method[1].second.ms, 69.0);
  EXPECT_DOUBLE_EQ(t[0].fastest_each.ms, 1.0 + 10 + 11 + 12 + 13 + 14);
  EXPECT_EQ(t[0].fastest_each.gemms, 6);
  EXPECT_EQ(t[0].speedup_vs_bf16, 0.0);
}

TEST(GemmTotals, Fp8AgainstBf16WithItsQuantizationAndWithoutItsWeightsRow) {
  std::vector<GemmTime> rows;
  add_six(rows, "lt_multistream", Precision::kBf16, 10.0);  // 75
  rows.push_back({"weights", "fp8_tensor", Precision::kFp8Tensor, 50.0, 50.0});
  add_six(rows, "fp8_tensor:lt_multistream", Precision::kFp8Tensor, 5.0, 0.5);  // 45
  rows.push_back({"dense", "fp8_tensor", Precision::kFp8Tensor, 1.0, 0});
  const std::vector<PrecisionTotals> t = gemm_totals(rows);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].precision, Precision::kFp8Tensor);
  EXPECT_DOUBLE_EQ(t[1].fastest_each.ms, 45.0);
  EXPECT_DOUBLE_EQ(t[1].fastest_each.quantize_ms, 3.0);
  EXPECT_DOUBLE_EQ(t[1].speedup_vs_bf16, 75.0 / 45.0);
  const std::string text = format_gemm_totals(t);
  EXPECT_NE(text.find("# totals, bf16: lt_multistream 75.000 ms; the fastest method of each "
                      "75.000 ms\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# totals, fp8_tensor: fp8_tensor:lt_multistream 45.000 ms (quantization "
                      "3.000); the fastest method of each 45.000 ms (quantization 3.000): 1.67x "
                      "bf16's\n"),
            std::string::npos)
      << text;
  const nlohmann::json j = gemm_totals_json(t);
  EXPECT_EQ(j[1]["precision"], "fp8_tensor");
  EXPECT_DOUBLE_EQ(j[1]["methods"]["fp8_tensor:lt_multistream"]["ms"].get<double>(), 45.0);
  EXPECT_TRUE(j[0]["speedup_vs_bf16"].is_null());
}

TEST(GemmTotals, AMethodWithoutEveryGemmSaysHowManyItSums) {
  std::vector<GemmTime> rows;
  add_six(rows, "grouped_sm90", Precision::kBf16, 1.0);
  rows.pop_back();
  EXPECT_NE(format_gemm_totals(gemm_totals(rows)).find("15.000 ms over 5 GEMMs"),
            std::string::npos);
  EXPECT_TRUE(gemm_totals({{"dense", "cublaslt", Precision::kBf16, 1.0, 0}}).empty());
}

}  // namespace
}  // namespace moe
