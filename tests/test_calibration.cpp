// The calibration harness's pieces without running a calibration: the
// latency-bandwidth fit, GEMM-table and size-table interpolation, the kernel
// decomposition both the executor and the profile cost model use, the
// profile round trip with its provenance, and measured collectives in net.
#include <cmath>
#include <random>

#include <gtest/gtest.h>
#include <mpi.h>

#include "calibrate/calibration_command.hpp"
#include "calibrate/profile_writer.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/linear_fit.hpp"
#include "dtsim/hw/cost_model.hpp"
#include "dtsim/hw/kernel_calls.hpp"
#include "dtsim/hw/measured.hpp"
#include "dtsim/hw/profile.hpp"

namespace {

using dtsim::core::Bytes;
using dtsim::core::Seconds;

TEST(LinearFit, RecoversLatencyAndBandwidthOfASyntheticSeries) {
  std::vector<dtsim::core::SizeSample> samples;
  for (double b = 1024; b <= 64e6; b *= 4) samples.push_back({Bytes(b), Seconds(5e-6 + b / 2e9)});
  const dtsim::core::LinearFit fit = dtsim::core::fit_latency_bandwidth(samples);
  EXPECT_NEAR(fit.latency.value(), 5e-6, 1e-9);
  EXPECT_NEAR(fit.bandwidth.value(), 2e9, 1e3);
}

TEST(LinearFit, ToleratesNoiseAndWeighsSmallSizes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  std::vector<dtsim::core::SizeSample> samples;
  for (double b = 1024; b <= 64e6; b *= 4) samples.push_back({Bytes(b), Seconds((3e-6 + b / 8e9) * noise(rng))});
  const dtsim::core::LinearFit fit = dtsim::core::fit_latency_bandwidth(samples);
  // Relative weighting keeps the latency within the noise; plain least squares would lose it to the 64 MB point.
  EXPECT_NEAR(fit.latency.value(), 3e-6, 0.3e-6);
  EXPECT_NEAR(fit.bandwidth.value(), 8e9, 0.5e9);
}

TEST(LinearFit, RejectsASingleSize) {
  std::vector<dtsim::core::SizeSample> one{{Bytes(1024), Seconds(1e-6)}, {Bytes(1024), Seconds(1.1e-6)}};
  EXPECT_THROW(dtsim::core::fit_latency_bandwidth(one), std::invalid_argument);
}

// A rate that is linear in log2 of each dimension is what trilinear
// interpolation in log space reproduces exactly between grid points.
double synthetic_rate(double m, double n, double k) { return 1e9 * (1 + std::log2(m) + 2 * std::log2(n) + 0.5 * std::log2(k)); }

std::vector<dtsim::hw::GemmSample> grid(const std::vector<std::int64_t>& sizes) {
  std::vector<dtsim::hw::GemmSample> out;
  for (auto m : sizes) {
    for (auto n : sizes) {
      for (auto k : sizes) {
        const double flops = 2.0 * static_cast<double>(m * n * k);
        out.push_back({m, n, k, Seconds(flops / synthetic_rate(double(m), double(n), double(k)))});
      }
    }
  }
  return out;
}

TEST(GemmTable, InterpolatesTheRateBetweenGridPointsAndClampsOutside) {
  const dtsim::hw::GemmTable table(grid({32, 128, 512}));
  EXPECT_NEAR(table.rate({128, 128, 128, 1}).value(), synthetic_rate(128, 128, 128), 1);
  EXPECT_NEAR(table.rate({64, 256, 100, 1}).value(), synthetic_rate(64, 256, 100), 1e-3 * synthetic_rate(64, 256, 100));
  const double flops = 2.0 * 64 * 256 * 100;
  EXPECT_NEAR(table.time({64, 256, 100, 1}).value(), flops / synthetic_rate(64, 256, 100), 1e-9);
  // Beyond the grid the rate stays at the edge's.
  EXPECT_NEAR(table.rate({4096, 8, 512, 1}).value(), synthetic_rate(512, 32, 512), 1);
  EXPECT_NEAR(table.best().value(), synthetic_rate(512, 512, 512), 1);
}

TEST(GemmTable, NamesAMissingGridPoint) {
  auto samples = grid({32, 128});
  samples.pop_back();
  try {
    dtsim::hw::GemmTable table(samples);
    FAIL() << "an incomplete grid was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "the GEMM grid has no sample for m=128 n=128 k=128");
  }
}

TEST(SizeTable, InterpolatesOnLogAxesAndScalesPastTheLargest) {
  const dtsim::core::SizeTable table({{Bytes(1000), Seconds(1e-6)}, {Bytes(100000), Seconds(100e-6)}});
  EXPECT_NEAR(table.time(Bytes(10000)).value(), 10e-6, 1e-12);
  EXPECT_DOUBLE_EQ(table.time(Bytes(10)).value(), 1e-6);
  EXPECT_NEAR(table.time(Bytes(400000)).value(), 400e-6, 1e-12);
}

TEST(KernelCalls, ForwardIsOneGemmBackwardIsDataAndWeightGradients) {
  dtsim::hw::OpWork w;
  w.kind = dtsim::model::OpKind::kGemm;
  w.gemm = {256, 1024, 512, 1};
  w.flops = dtsim::core::Flops(2.0 * 256 * 1024 * 512);
  auto forward = dtsim::hw::kernel_calls(w);
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_EQ(forward[0].gemm.m, 256);
  EXPECT_EQ(forward[0].gemm.n, 1024);
  EXPECT_EQ(forward[0].gemm.k, 512);
  w.flops = w.flops * 2;
  auto backward = dtsim::hw::kernel_calls(w);
  ASSERT_EQ(backward.size(), 2u);
  EXPECT_EQ((std::array{backward[0].gemm.m, backward[0].gemm.n, backward[0].gemm.k}), (std::array<std::int64_t, 3>{256, 512, 1024}));
  EXPECT_EQ((std::array{backward[1].gemm.m, backward[1].gemm.n, backward[1].gemm.k}), (std::array<std::int64_t, 3>{512, 1024, 256}));
}

TEST(KernelCalls, OneGradientPassRunsAsItsOwnGemm) {
  // Megatron reduces the input gradient between the two passes: each is then
  // a kernel of its own, oriented as in the whole backward.
  dtsim::hw::OpWork w;
  w.kind = dtsim::model::OpKind::kGemm;
  w.gemm = {256, 1024, 512, 1};
  w.flops = dtsim::core::Flops(2.0 * 256 * 1024 * 512);
  w.gradient_pass = dtsim::hw::GradientPass::kData;
  auto data = dtsim::hw::kernel_calls(w);
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ((std::array{data[0].gemm.m, data[0].gemm.n, data[0].gemm.k}), (std::array<std::int64_t, 3>{256, 512, 1024}));
  w.gradient_pass = dtsim::hw::GradientPass::kWeight;
  auto weight = dtsim::hw::kernel_calls(w);
  ASSERT_EQ(weight.size(), 1u);
  EXPECT_EQ((std::array{weight[0].gemm.m, weight[0].gemm.n, weight[0].gemm.k}), (std::array<std::int64_t, 3>{512, 1024, 256}));
}

TEST(KernelCalls, UnfusedAttentionRunsItsHeadsAndASoftmaxPass) {
  dtsim::hw::OpWork w;
  w.kind = dtsim::model::OpKind::kAttention;
  w.gemm = {128, 128, 32, 16};  // 16 GEMMs of 128 x 32 by 32 x 128
  w.flops = dtsim::core::Flops(2.0 * 128 * 128 * 32 * 16);
  w.bytes_moved = Bytes(1e6);
  auto calls = dtsim::hw::kernel_calls(w);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].count, 16);
  EXPECT_EQ(calls[1].family, dtsim::hw::KernelFamily::kReduction);
  EXPECT_DOUBLE_EQ(calls[1].bytes.value(), 1e6);
}

dtsim::calibrate::Series constant(double seconds) { return {{Seconds(seconds), Seconds(seconds * 1.01), Seconds(seconds)}}; }

dtsim::calibrate::Measurements synthetic_measurements() {
  dtsim::calibrate::Measurements m;
  for (const auto& s : grid({32, 512})) m.gemm.push_back({s.m, s.n, s.k, constant(s.time.value())});
  for (auto& family : m.memory) {
    for (double b = 4096; b <= 4194304; b *= 4) family.push_back({Bytes(b), constant(1e-6 + b / 10e9)});
  }
  dtsim::calibrate::CollectivePoints ar{"all_reduce", 2, {}};
  for (double b = 1024; b <= 16e6; b *= 4) ar.points.push_back({Bytes(b), constant(2e-6 + b / 4e9)});
  m.collectives.push_back(ar);
  m.machine_memory = Bytes(8.0 * 1073741824);
  return m;
}

TEST(Profile, RoundTripsWithProvenanceAndFits) {
  const nlohmann::json provenance = dtsim::calibrate::collect_provenance("--quick", 2);
  for (const char* key : {"machine", "cpu_model", "cores", "ranks", "blas", "mpi", "compiler", "dtsim_version",
                          "arguments", "date"}) {
    EXPECT_TRUE(provenance.contains(key)) << key;
  }
  EXPECT_EQ(provenance.at("date").get<std::string>().size(), 20u);  // 2026-11-21T10:00:00Z
  const nlohmann::json doc = dtsim::calibrate::to_profile(synthetic_measurements(), provenance);
  const dtsim::hw::Profile p = dtsim::hw::parse_profile(doc, "profile.json");
  EXPECT_EQ(p.device, "CPU");
  EXPECT_EQ(p.provenance.at("arguments"), "--quick");
  ASSERT_TRUE(p.figures.has_value());
  EXPECT_NEAR(p.figures->peak.value(), synthetic_rate(512, 512, 512), 1e-3 * synthetic_rate(512, 512, 512));
  EXPECT_NEAR(p.figures->memory.value(), 8.0 * 1073741824, 0.01 * 1073741824);
  ASSERT_TRUE(p.kernels);
  EXPECT_NEAR(p.kernels->table(dtsim::hw::KernelFamily::kCopy).time(Bytes(65536)).value(), 1e-6 + 65536 / 10e9, 1e-8);
  ASSERT_EQ(p.collectives.size(), 1u);
  EXPECT_NEAR(p.collectives[0].fit.latency.value(), 2e-6, 0.05e-6);
  EXPECT_NEAR(p.collectives[0].fit.bandwidth.value(), 4e9, 0.05e9);
}

TEST(Profile, CostModelSumsTheTablesOverKernelCalls) {
  const nlohmann::json doc = dtsim::calibrate::to_profile(synthetic_measurements(), nlohmann::json::object());
  const dtsim::hw::Profile p = dtsim::hw::parse_profile(doc, "profile.json");
  dtsim::hw::Device cpu;
  dtsim::hw::CostModel model(cpu, p.efficiency, p.kernels);
  dtsim::hw::OpWork w;
  w.kind = dtsim::model::OpKind::kGemm;
  w.gemm = {128, 128, 128, 1};
  w.flops = dtsim::core::Flops(2.0 * 2 * 128 * 128 * 128);  // a backward: two GEMMs
  EXPECT_NEAR(model.time(w, dtsim::hw::Dtype::kFp32).value(), 2 * p.kernels->gemm.time({128, 128, 128, 1}).value(), 1e-12);
}

// --stream-sizes 4KiB:auto: the tables' last point past twice the last-level
// cache, so that scaling past it scales a bandwidth from memory. A 64 MiB
// point ran at 17 GB/s and 256 MiB at 14.5 on a CI machine with a 480 MiB
// cache (2026-12-06).
TEST(StreamingLimit, StepsPastTwiceTheCacheWithinHalfTheMemory) {
  using dtsim::calibrate::streaming_limit;
  constexpr double MiB = 1048576, GiB = 1024 * MiB;
  EXPECT_EQ(streaming_limit(Bytes(480 * MiB), Bytes(20 * GiB), 2).value(), 1 * GiB);
  EXPECT_EQ(streaming_limit(Bytes(32 * MiB), Bytes(20 * GiB), 2).value(), 64 * MiB) << "64 MiB at least";
  EXPECT_EQ(streaming_limit(Bytes(0), Bytes(20 * GiB), 2).value(), 64 * MiB) << "an unknown cache";
  EXPECT_EQ(streaming_limit(Bytes(40 * MiB), Bytes(20 * GiB), 2).value(), 256 * MiB) << "80 MiB is past 64";
  // Two ranks' buffers of 1.5 GiB each are over half of 2 GiB; 384 MiB each is not.
  EXPECT_EQ(streaming_limit(Bytes(480 * MiB), Bytes(2 * GiB), 2).value(), 256 * MiB);
  EXPECT_EQ(streaming_limit(Bytes(480 * MiB), Bytes(0), 2).value(), 64 * MiB) << "never under 64 MiB";
}

TEST(StreamingLimit, AutoResolvesAndOtherRangesStayAsGiven) {
  dtsim::calibrate::CommandOptions o;
  const dtsim::calibrate::CalibrationOptions automatic = dtsim::calibrate::to_calibration(o);
  EXPECT_EQ(automatic.min_stream.value(), 4096);
  EXPECT_GE(automatic.max_stream.value(), 64.0 * 1048576);
  o.stream_sizes = "4KiB:16MiB";
  EXPECT_EQ(dtsim::calibrate::to_calibration(o).max_stream.value(), 16.0 * 1048576);
  o.stream_sizes = "auto:16MiB";
  EXPECT_THROW(dtsim::calibrate::to_calibration(o), dtsim::core::InputError);
}

// validate's own calibration adds the plan's GEMM calls measured whole: the
// cost model takes such a call's median, the grid's interpolation only for
// the calls it lacks.
TEST(Profile, AMeasuredCallCostsItsMedianBeforeTheGrid) {
  dtsim::calibrate::Measurements m = synthetic_measurements();
  const dtsim::hw::KernelCall call{dtsim::hw::KernelFamily::kGemm, {64, 1024, 1024, 1}, 1, Bytes(0)};
  m.gemm_calls.push_back({call, dtsim::hw::Dtype::kFp32, constant(7e-3)});
  const dtsim::hw::Profile p = dtsim::hw::parse_profile(dtsim::calibrate::to_profile(m, nlohmann::json::object()),
                                                        "profile.json");
  ASSERT_TRUE(p.kernels);
  EXPECT_DOUBLE_EQ(p.kernels->time(call).value(), 7e-3);
  const dtsim::hw::KernelCall other{dtsim::hw::KernelFamily::kGemm, {128, 1024, 1024, 1}, 1, Bytes(0)};
  EXPECT_DOUBLE_EQ(p.kernels->time(other).value(), p.kernels->gemm.time(other.gemm).value());
  EXPECT_NE(p.kernels->gemm.time(call.gemm).value(), 7e-3);
}

TEST(Profile, RejectsAnIncompleteKernelSection) {
  nlohmann::json doc = dtsim::calibrate::to_profile(synthetic_measurements(), nlohmann::json::object());
  doc["kernels"]["copy"] = nlohmann::json::array({doc["kernels"]["copy"][0]});
  EXPECT_THROW(dtsim::hw::parse_profile(doc, "profile.json"), dtsim::core::InputError);
}

// A collective's samples cost it (net::CalibratedCollective): one sample alone
// cannot be interpolated, and is one line naming the field.
TEST(Profile, RejectsACollectiveOfOneSample) {
  nlohmann::json doc = dtsim::calibrate::to_profile(synthetic_measurements(), nlohmann::json::object());
  doc["collectives"][0]["samples"] = nlohmann::json::array({doc["collectives"][0]["samples"][0]});
  try {
    dtsim::hw::parse_profile(doc, "profile.json");
    FAIL() << "a collective of one sample was accepted";
  } catch (const dtsim::core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("samples"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at least two sizes"), std::string::npos) << e.what();
  }
  doc["collectives"][0]["samples"] = nlohmann::json::array();  // none: the fit costs it
  EXPECT_EQ(dtsim::hw::parse_profile(doc, "profile.json").collectives[0].medians.samples().size(), 0u);
}

}  // namespace
