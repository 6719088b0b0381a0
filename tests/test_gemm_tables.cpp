// The kernel model's GEMMs against tables of measured GEMMs, one device
// each: cuBLASLt calls timed on an H100 (dtsim-calibrate's profile), Baidu
// DeepBench's V100 table, and OpenXLA's matmul tables for sm_90 and sm_100.
// The shape figures of the H100, the V100 and Blackwell are fitted to them
// (tests/validation/fit_gemm*.py); these tests hold the fits. Last, the
// H100's streaming kernels against the copies its calibration timed.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dtsim/hw/cost_model.hpp"
#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/hw/profile.hpp"
#include "kernel_model_of.hpp"

using namespace dtsim;
using test_support::model_of;

namespace {

// A measured table the repository keeps, by its path from the source root.
nlohmann::json measured(const char* relative) {
  return nlohmann::json::parse(std::ifstream(std::filesystem::path(DTSIM_SOURCE_DIR) / relative));
}

// The bundled H100 model against the whole GEMM calls measured on an H100
// (calibrate/profiles/h100-sxm/profile.json: cuBLASLt, bf16, at the boost
// clock the calibration idles back to). Aligned calls hold the tile model;
// calls whose inner dimension is not a multiple of 16 bytes (an unpadded
// vocabulary's data gradient, k = 50257) run 3-7x slower, which the
// `misaligned_k` figures carry.
TEST(KernelModel, GemmMatchesTheCallsMeasuredOnAnH100) {
  const nlohmann::json profile = measured("calibrate/profiles/h100-sxm/profile.json");
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  double aligned_total = 0, worst_misaligned = 0;
  int aligned = 0, misaligned = 0;
  for (const auto& c : profile.at("kernels").at("gemm_calls")) {
    const std::int64_t m = c.at("m"), n = c.at("n"), k = c.at("k"), count = c.at("count");
    const double flops = 2.0 * m * n * k * count;
    if (c.at("dtype") != "bf16" || flops < 1e11) continue;  // large enough to be compute-bound
    const double predicted = h100.gemm({m, n, k, count}, hw::Dtype::kBf16, 2).value();
    const double error = predicted / (c.at("median_us").get<double>() * 1e-6) - 1;
    if (hw::k_alignment_bytes(k, 2) < 16) {
      fmt::print("  misaligned {}x{}x{}: {:+.1f}%\n", m, n, k, 100 * error);
      worst_misaligned = std::max(worst_misaligned, std::abs(error));
      ++misaligned;
    } else {
      aligned_total += std::abs(error);
      ++aligned;
    }
  }
  ASSERT_GT(aligned, 100);
  ASSERT_GE(misaligned, 5);
  fmt::print("{} aligned calls: mean |error| {:.1f}%; {} misaligned: worst {:.1f}%\n", aligned,
             100 * aligned_total / aligned, misaligned, 100 * worst_misaligned);
  EXPECT_LE(aligned_total / aligned, 0.06);
  EXPECT_LE(worst_misaligned, 0.10);  // without the figures: -71% to -85% (3.4-6.8x too fast)
}

// How far a table's GEMMs fall below its fastest one, against how far the
// model's fall below the model's time for that one: the mean |error| of the
// shape model whatever the level (a table measured on another GPU or clock
// than the device's anchor). `rows` holds (m, n, k, seconds).
struct ShapeCheck {
  double mean = 0;   ///< mean |error| of the shapes against the fastest
  double level = 0;  ///< the model's time over the table's at the fastest
};
ShapeCheck shapes_against_fastest(const hw::KernelModel& km, hw::Dtype dtype, double operand_bytes,
                                  const std::vector<std::array<double, 4>>& rows) {
  auto flops = [](const std::array<double, 4>& r) { return 2.0 * r[0] * r[1] * r[2]; };
  auto model_s = [&](const std::array<double, 4>& r) {
    const model::GemmShape shape{static_cast<std::int64_t>(r[0]), static_cast<std::int64_t>(r[1]),
                                 static_cast<std::int64_t>(r[2]), 1};
    return km.gemm(shape, dtype, operand_bytes).value();
  };
  const auto fastest = *std::max_element(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    return flops(a) / a[3] < flops(b) / b[3];
  });
  ShapeCheck out;
  out.level = model_s(fastest) / fastest[3];
  for (const auto& r : rows) out.mean += std::abs(model_s(r) / r[3] / out.level - 1);
  out.mean /= static_cast<double>(rows.size());
  return out;
}

// OpenXLA's sm_100 table as (m, n, k, seconds) rows, timed by one of its
// columns (bf16_tflops, fp8_e4m3_tflops).
std::vector<std::array<double, 4>> xla_sm100_rows(const char* column) {
  const nlohmann::json table = measured("tests/validation/xla-sm100-gemm.json");
  std::vector<std::array<double, 4>> rows;
  for (const auto& r : table.at("rows")) {
    const double m = r.at("m"), n = r.at("n"), k = r.at("k");
    rows.push_back({m, n, k, 2.0 * m * n * k / (r.at(column).get<double>() * 1e12)});
  }
  return rows;
}

// FP8 GEMMs on the H100 (calibrate/profiles/h100-sxm/profile.json:
// cuBLASLt e4m3, the heuristic's best algorithm, median of 7). Their shape
// figures are the bf16 fit's; what differs is the fixed part of a tile, a
// pipeline fill and an epilogue that move the same bytes as in 16 bits while
// the k loop runs twice as fast, so it is worth twice the k iterations
// (hw::KernelModel's comment). Nothing is fitted to these: with the bf16
// pipeline_k the grid's shapes were 12.6% off its fastest and the model's
// calls 4.6% off (10.1% and 4.0% now; `tests/validation/fit_gemm.py --fp8`:
// a pipeline_k chosen for this grid alone would be 448 where the rule
// gives 416). The grid ran its FP8 half at 1830 MHz where the bf16 half
// held 1950, so its fastest point, the level here, is itself held back.
TEST(KernelModel, Fp8GemmsMatchWhatAnH100Measured) {
  const nlohmann::json profile = measured("calibrate/profiles/h100-sxm/profile.json");
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  std::vector<std::array<double, 4>> grid;
  for (const auto& g : profile.at("kernels").at("gemm_by_dtype").at("fp8")) {
    const double m = g.at("m"), n = g.at("n"), k = g.at("k");
    if (2.0 * m * n * k >= 2e9) grid.push_back({m, n, k, g.at("median_us").get<double>() * 1e-6});
  }
  const ShapeCheck shapes = shapes_against_fastest(h100, hw::Dtype::kFp8, 1, grid);
  double calls_total = 0;
  int calls = 0;
  for (const auto& c : profile.at("kernels").at("gemm_calls")) {
    const std::int64_t m = c.at("m"), n = c.at("n"), k = c.at("k"), count = c.at("count");
    if (c.at("dtype") != "fp8" || 2.0 * m * n * k * count < 1e11 || hw::k_alignment_bytes(k, 1) < 16) continue;
    const double predicted = h100.gemm({m, n, k, count}, hw::Dtype::kFp8, 1).value();
    calls_total += std::abs(predicted / (c.at("median_us").get<double>() * 1e-6) - 1);
    ++calls;
  }
  fmt::print("{} grid GEMMs: shapes within {:.1f}% of the grid's fastest; {} aligned calls: mean |error| {:.1f}%\n",
             grid.size(), 100 * shapes.mean, calls, 100 * calls_total / calls);
  ASSERT_GT(grid.size(), 150U);
  ASSERT_GT(calls, 200);
  EXPECT_LE(shapes.mean, 0.11);
  EXPECT_LE(calls_total / calls, 0.044);
}

// The V100's GEMMs against Baidu DeepBench's V100 table (cublasGemmEx on
// the tensor cores, CUDA 10.1, a DGX-1's SXM2 parts): the anchor is the
// table's fastest GEMM, and the training-sized rows (2 GFLOP or more, both
// output sides 128 or more) hold the shape figures fitted to them
// (tests/validation/fit_gemm_v100.py): 5.2%, 6.2% with the estimates of
// before. With the anchor of before (74% of peak, measured on the PCIe
// part) they ran 12-21% slow, 17.5% on average.
TEST(KernelModel, GemmMatchesDeepBenchsV100Table) {
  const nlohmann::json table = measured("tests/validation/deepbench-v100.json");
  hw::DeviceCatalog catalog;
  const hw::KernelModel v100 = model_of(catalog, "V100-SXM2-32GB");
  double total = 0, fastest = 0;
  int n = 0;
  for (const auto& r : table.at("rows")) {
    const std::int64_t m = r.at("m"), nn = r.at("n"), k = r.at("k");
    const double flops = 2.0 * m * nn * k, measured = r.at("ms").get<double>() * 1e-3;
    if (flops < 2e9 || std::min(m, nn) < 128) continue;
    const double error = v100.gemm({m, nn, k, 1}, hw::Dtype::kFp16, 2).value() / measured - 1;
    fmt::print("  {}x{}x{} {}{}: {:+.1f}%\n", m, nn, k, r.at("a_transpose").get<bool>() ? "T" : "N",
               r.at("b_transpose").get<bool>() ? "T" : "N", 100 * error);
    total += std::abs(error);
    fastest = std::max(fastest, flops / measured);
    ++n;
  }
  ASSERT_GE(n, 30);
  fmt::print("{} GEMMs: mean |time error| {:.1f}%\n", n, 100 * total / n);
  EXPECT_LE(total / n, 0.06);
  EXPECT_NEAR(v100.anchor_rate(hw::Dtype::kFp16).value(), fastest, 1e-3 * fastest);
}

// The H100's GEMM figures, fitted to cuBLASLt calls measured on an H100,
// against ten GEMMs of OpenXLA's matmul table for sm_90 (XLA's compiled
// dot, CUPTI kernel medians): an outside check, nothing fitted to it.
TEST(KernelModel, H100FiguresMatchXlasSm90Table) {
  const nlohmann::json table = measured("tests/validation/xla-sm90-gemm.json");
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  double total = 0;
  for (const auto& r : table.at("rows")) {
    const std::int64_t m = r.at("m"), n = r.at("n"), k = r.at("k");
    const double measured = 2.0 * m * n * k / (r.at("bf16_tflops").get<double>() * 1e12);
    const double error = h100.gemm({m, n, k, 1}, hw::Dtype::kBf16, 2).value() / measured - 1;
    fmt::print("  {}x{}x{}: {:+.1f}%\n", m, n, k, 100 * error);
    total += std::abs(error);
  }
  const double mean = total / static_cast<double>(table.at("rows").size());
  fmt::print("{} GEMMs: mean |time error| {:.1f}%\n", table.at("rows").size(), 100 * mean);
  EXPECT_LE(mean, 0.05);
}

// Blackwell's GEMM shape figures against OpenXLA's matmul table for sm_100
// (bf16, m, n, k in 1024..4096, CUPTI kernel medians), fitted to it by
// tests/validation/fit_gemm_b200.py as the H100's are to its measured grid:
// how far each shape falls below the table's fastest (4096^3) is the shape
// model's to reproduce; the level stays the published maximum-achievable
// anchor's, which the table's GPU runs 7-10% below. With the estimates
// of before (stream-K at 0.9, pipeline_k 128) the shapes were 7.3% off
// here (2.3% now).
TEST(KernelModel, BlackwellShapesMatchXlasSm100Table) {
  hw::DeviceCatalog catalog;
  const std::vector<std::array<double, 4>> rows = xla_sm100_rows("bf16_tflops");
  const ShapeCheck shapes = shapes_against_fastest(model_of(catalog, "B200"), hw::Dtype::kBf16, 2, rows);
  fmt::print("{} GEMMs: shapes within {:.1f}% of the table's fastest; the model's level {:+.1f}% against it\n", rows.size(),
             100 * shapes.mean, 100 * (shapes.level - 1));
  ASSERT_EQ(rows.size(), 27U);
  EXPECT_LE(shapes.mean, 0.03);
  EXPECT_LT(shapes.level, 1.0);  // the published anchor's GPU is the faster one
  EXPECT_GT(shapes.level, 0.85);
}

// The same rule on Blackwell, against the FP8 half of OpenXLA's sm_100
// table (e4m3 x e4m3 -> bf16, the 27 shapes of the bf16 test): with the bf16
// pipeline_k the shapes were 7.8% off the table's fastest, 5.9% now. The
// table's small FP8 GEMMs gain less still over bf16 than the rule gives
// (1.16x at 1024^3): a pipeline_k fitted to them alone lands anywhere from
// 1000 to 2000 (the rule: 836).
TEST(KernelModel, BlackwellFp8ShapesMatchXlasSm100Table) {
  hw::DeviceCatalog catalog;
  const std::vector<std::array<double, 4>> rows = xla_sm100_rows("fp8_e4m3_tflops");
  const ShapeCheck shapes = shapes_against_fastest(model_of(catalog, "B200"), hw::Dtype::kFp8, 1, rows);
  fmt::print("{} FP8 GEMMs: shapes within {:.1f}% of the table's fastest; the model's level {:+.1f}% against it\n",
             rows.size(), 100 * shapes.mean, 100 * (shapes.level - 1));
  ASSERT_EQ(rows.size(), 27U);
  EXPECT_LE(shapes.mean, 0.07);
}

// The H100's streaming figure (memory.fraction 0.9 of the 3.35 TB/s
// datasheet rate) against the streaming kernels dtsim-calibrate timed on an
// H100 (kernels copy, elementwise and reduction): from 256 MiB up, where
// nothing stays in the 50 MiB L2, they ran 2.88-3.02 TB/s and the model is
// within 2.5% of each.
TEST(KernelModel, StreamingMatchesTheKernelsMeasuredOnAnH100) {
  const nlohmann::json kernels = measured("calibrate/profiles/h100-sxm/profile.json").at("kernels");
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  double worst = 0;
  int checked = 0;
  for (const char* family : {"copy", "elementwise", "reduction"}) {
    for (const auto& r : kernels.at(family)) {
      const double bytes = r.at("bytes");
      if (bytes < 256.0 * (1 << 20)) continue;
      const double error = h100.stream(core::Bytes(bytes)).value() / (r.at("median_us").get<double>() * 1e-6) - 1;
      fmt::print("  {} {:.0f} MiB: {:+.1f}%\n", family, bytes / (1 << 20), 100 * error);
      worst = std::max(worst, std::abs(error));
      ++checked;
    }
  }
  EXPECT_GE(checked, 9);
  EXPECT_LE(worst, 0.025);
}

}  // namespace
