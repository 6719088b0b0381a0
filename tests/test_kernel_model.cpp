// The kernel model against the kernel cases of ../shared/validation/
// published-runs.json (maximum achievable matmul per GPU and dtype, the
// FlashAttention-2 and -3 tables) and against its own closed forms: waves,
// stream-K, the causal mask, FP8. The GEMMs against whole measured tables
// (an H100's calls, DeepBench's V100, XLA's sm_90 and sm_100) are in
// test_gemm_tables.cpp.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dtsim/core/input_error.hpp"
#include "dtsim/hw/cost_model.hpp"
#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/hw/profile.hpp"
#include "kernel_model_of.hpp"
#include "published_runs.hpp"

using namespace dtsim;
using test_support::model_of;

namespace {

// The catalog's name for a source's GPU; empty when dtsim has no such device.
std::string catalog_name(const std::string& gpu) {
  static const std::map<std::string, std::string> names = {
      {"A100 SXM", "A100-SXM-80GB"}, {"H100 SXM", "H100-SXM"}, {"H200 SXM", "H200-SXM"},  {"B200 SXM", "B200"},
      {"GB200 SXM", "GB200"},        {"MI300X", "MI300X"},    {"A100-SXM4-80GB", "A100-SXM-80GB"},
      {"H100-SXM5-80GB", "H100-SXM"}, {"GH200 SXM", "GH200"}, {"GH200 SXM (900W, 141GiB)", "GH200"},
      {"B300 SXM", "B300"},          {"MI355X", "MI355X"}};
  auto it = names.find(gpu);
  return it == names.end() ? "" : it->second;
}

enum class Pass { kForward, kBackward, kBoth };

// TFLOP/s of one of the FlashAttention papers' benchmark points (hidden size
// 2048, 16k tokens a batch) as they count them: the forward's FLOPs, the
// backward's 2.5 times as many, the causal half only.
double paper_attention_tflops(const hw::KernelModel& model, const hw::AttentionKernel& kernel, Pass pass,
                              std::int64_t head_dim, bool causal, std::int64_t seq) {
  const std::int64_t sequences_x_heads = (2048 / head_dim) * (16384 / seq);
  const double fwd = model.attention(kernel, sequences_x_heads, seq, head_dim, causal, false).value();
  const double bwd = model.attention(kernel, sequences_x_heads, seq, head_dim, causal, true).value();
  const double flops = hw::attention_flops(sequences_x_heads, seq, head_dim, causal, false);
  switch (pass) {
    case Pass::kForward: return flops / fwd / 1e12;
    case Pass::kBackward: return 2.5 * flops / bwd / 1e12;
    case Pass::kBoth: return 3.5 * flops / (fwd + bwd) / 1e12;
  }
  return 0;
}

TEST(KernelModel, GemmReproducesMaximumAchievableMatmul) {
  const nlohmann::json cases = validation::published_cases("kernel_gemm");
  if (cases.empty()) GTEST_SKIP() << "no ../shared/validation/published-runs.json";
  hw::DeviceCatalog catalog;
  double total = 0;
  int n = 0;
  for (const auto& c : cases) {
    const std::string device = catalog_name(c["hardware"]["gpu"]);
    if (device.empty()) {
      fmt::print("  {:<28} skipped: {} is not in dtsim's catalog\n", c["id"].get<std::string>(),
                 c["hardware"]["gpu"].get<std::string>());
      continue;
    }
    const std::string shape = c["kernel"]["best_shape_MxNxK"];
    std::int64_t m = 0, nn = 0, k = 0;
    ASSERT_EQ(std::sscanf(shape.c_str(), "%ldx%ldx%ld", &m, &nn, &k), 3);
    const hw::Dtype dtype = c["kernel"]["dtype"] == "bf16" ? hw::Dtype::kBf16 : hw::Dtype::kFp8;
    const hw::KernelModel model = model_of(catalog, device);
    const double t = model.gemm({m, nn, k, 1}, dtype, hw::operand_bytes(dtype)).value();
    const double predicted = 2.0 * m * nn * k / t / 1e12, measured = c["measured"]["tflops"];
    const double error = predicted / measured - 1;
    fmt::print("  {:<28} {:>8.1f} {:>8.1f} {:>+6.1f}%\n", c["id"].get<std::string>(), measured, predicted, 100 * error);
    total += std::abs(error);
    ++n;
  }
  ASSERT_GT(n, 0);
  // Every device the catalog has anchors on these very rows (H200 bf16 on the
  // H100's): this holds the anchoring and the parsing of the figures, exactly.
  EXPECT_LE(total / n, 0.01);
}

TEST(KernelModel, AttentionMatchesTheFlashAttentionTables) {
  const nlohmann::json cases = validation::published_cases("kernel_attention");
  if (cases.empty()) GTEST_SKIP() << "no ../shared/validation/published-runs.json";
  hw::DeviceCatalog catalog;
  double total = 0, worst = 0;
  int n = 0;
  auto check = [&](const std::string& id, const hw::KernelModel& model, const std::string& kernel_name, Pass pass,
                   std::int64_t hd, bool causal, std::int64_t seq, double measured) {
    const hw::AttentionKernel* kernel = model.figures().find_attention(kernel_name);
    ASSERT_NE(kernel, nullptr) << kernel_name;
    const double predicted = paper_attention_tflops(model, *kernel, pass, hd, causal, seq);
    const double error = predicted / measured - 1;
    fmt::print("  {:<40} {:>6} {:>7.0f} {:>7.0f} {:>+6.1f}%\n", id, seq, measured, predicted, 100 * error);
    total += std::abs(error);
    worst = std::max(worst, std::abs(error));
    ++n;
  };
  for (const auto& c : cases) {
    const std::string id = c["id"];
    const hw::KernelModel model = model_of(catalog, catalog_name(c["hardware"]["gpu"]));
    if (c["measured"].contains("points")) {
      const Pass pass = id.find("fwd_bwd") != std::string::npos ? Pass::kBoth
                        : id.find("_fwd_") != std::string::npos ? Pass::kForward
                                                                 : Pass::kBackward;
      for (const auto& p : c["measured"]["points"]) {
        check(id, model, "flash2", pass, c["kernel"]["head_dim"], c["kernel"]["causal"], p["seq_len"], p["tflops"]);
      }
    } else {
      for (const auto& [key, value] : c["measured"]["fig5_fa3_fwd_at_16k_approx"].items()) {
        const std::int64_t hd = std::stoi(key.substr(2));
        check(id + "." + key, model, "flash3", Pass::kForward, hd, key.find("_causal") != std::string::npos, 16384, value);
      }
    }
  }
  fmt::print("attention: {} points, mean |error| {:.1f}%, worst {:.1f}%\n", n, 100 * total / n, 100 * worst);
  EXPECT_LE(total / n, 0.10);  // issue 12: kernel cases within 10% on average
}

// A wave of exactly one tile per SM, then one row of tiles more: without
// stream-K (Volta's cuBLAS) the extra tiles cost a second wave, of which
// smaller tiles (more of them, each a little slower) win back a part. The
// V100's tiles are laid out 16 x 5 over its 80 SMs: a single row of 80 tiles
// (n of one tile) reads so much more than it computes that HBM, not the
// waves, would set its time.
TEST(KernelModel, OneTileMoreThanTheSmsCostsAWave) {
  hw::DeviceCatalog catalog;
  const hw::KernelModel v100 = model_of(catalog, "V100-SXM2-32GB");
  const auto& f = v100.figures();
  ASSERT_EQ(f.stream_k_efficiency, 0.0);
  ASSERT_EQ(f.sms % 5, 0);
  const std::int64_t k = 8192, tm = f.tiles.front().m, tn = f.tiles.front().n, rows = f.sms / 5;
  const double one = (v100.gemm({tm * rows, tn * 5, k, 1}, hw::Dtype::kFp16, 2).value() - f.gemm_launch.value());
  const double two = (v100.gemm({tm * rows + tm, tn * 5, k, 1}, hw::Dtype::kFp16, 2).value() - f.gemm_launch.value());
  EXPECT_GT(two / one, 1.5);
  EXPECT_LE(two / one, 2.0 + 1e-9);
  // The H100's figures, fitted to its measured grid, have 128x128 tiles at
  // nearly the large tiles' rate: they win back more than half of the tail.
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  const auto& g = h100.figures();
  const std::int64_t hm = g.tiles.front().m, hn = g.tiles.front().n;
  const double h_one = h100.gemm({hm * g.sms, hn, k, 1}, hw::Dtype::kBf16, 2).value();
  const double h_two = h100.gemm({hm * g.sms + hm, hn, k, 1}, hw::Dtype::kBf16, 2).value();
  EXPECT_LT(h_two / h_one, 1.5);
  // Stream-K, where it pays (an A100's estimate), spreads the tail over every SM.
  const hw::KernelModel a100 = model_of(catalog, "A100-SXM-80GB");
  const auto& a = a100.figures();
  ASSERT_GT(a.stream_k_efficiency, 0.8);
  const std::int64_t am = a.tiles.front().m, an = a.tiles.front().n;
  const double a_one = a100.gemm({am * a.sms, an, k, 1}, hw::Dtype::kBf16, 2).value();
  const double a_two = a100.gemm({am * a.sms + am, an, k, 1}, hw::Dtype::kBf16, 2).value();
  EXPECT_LT(a_two / a_one, 1.25);
}

TEST(KernelModel, CausalAttentionComputesHalfAndFp8GemmsRunAtTheirOwnRate) {
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  const hw::AttentionKernel* fa3 = h100.figures().find_attention("flash3");
  ASSERT_NE(fa3, nullptr);
  const double full = h100.attention(*fa3, 64, 16384, 128, false, false).value();
  const double causal = h100.attention(*fa3, 64, 16384, 128, true, false).value();
  // Half the FLOPs at the causal efficiency and a slightly shorter ramp.
  EXPECT_NEAR(causal / full, 0.5 / fa3->causal_efficiency, 0.02);
  const double bf16 = h100.gemm({8192, 8192, 8192, 1}, hw::Dtype::kBf16, 2).value();
  const double fp8 = h100.gemm({8192, 8192, 8192, 1}, hw::Dtype::kFp8, 1).value();
  EXPECT_LT(fp8, bf16 * 0.6);   // faster: the measured 1,403 against 795 TFLOP/s
  EXPECT_GT(fp8, bf16 * 0.5);   // but not the datasheet's 2x
  // An HBM-bound GEMM (one token row): bytes, not FLOPs, set its time.
  const double skinny = h100.gemm({1, 8192, 8192, 1}, hw::Dtype::kBf16, 2).value();
  EXPECT_NEAR(skinny, 4e-6 + 8192.0 * 8192 * 2 / (3.35e12 * 0.9), 2e-6);
}

// A training step holds the device at its power limit: its tensor-core
// kernels run at the held share of their burst rate that the device's matmul
// measurements give (H200: 755 of 850 TFLOP/s; the H100 is the same die at
// the same 700 W), its streaming kernels at their own rate.
TEST(KernelModel, SustainedClocksSlowTensorCoreKernelsByTheMeasuredShare) {
  hw::DeviceCatalog catalog;
  const hw::Device h100 = catalog.with_kernel_figures(*catalog.find("H100-SXM"));
  const hw::KernelModel burst(h100, h100.kernel_figures, hw::Clocks::kBurst);
  const hw::KernelModel held(h100, h100.kernel_figures, hw::Clocks::kSustained);
  ASSERT_TRUE(h100.kernel_figures->sustained.has_value());
  EXPECT_NEAR(held.held_fraction(), 755.0 / 850.0, 1e-12);
  const double launch = h100.kernel_figures->gemm_launch.value();
  const model::GemmShape big{8192, 8192, 8192, 1};
  EXPECT_NEAR((held.gemm(big, hw::Dtype::kBf16, 2).value() - launch) /
                  (burst.gemm(big, hw::Dtype::kBf16, 2).value() - launch),
              850.0 / 755.0, 1e-9);
  const hw::AttentionKernel* fa3 = h100.kernel_figures->find_attention("flash3");
  ASSERT_NE(fa3, nullptr);
  EXPECT_NEAR((held.attention(*fa3, 64, 8192, 128, true, true).value() - launch) /
                  (burst.attention(*fa3, 64, 8192, 128, true, true).value() - launch),
              850.0 / 755.0, 1e-9);
  EXPECT_DOUBLE_EQ(held.stream(core::Bytes(1e9)).value(), burst.stream(core::Bytes(1e9)).value());
  // The anchor stays the burst that was measured.
  EXPECT_DOUBLE_EQ(held.anchor_rate(hw::Dtype::kBf16).value(), burst.anchor_rate(hw::Dtype::kBf16).value());
  // A device without a sustained measurement keeps its burst rate.
  const hw::Device v100 = catalog.with_kernel_figures(*catalog.find("V100-SXM2-32GB"));
  EXPECT_EQ(hw::KernelModel(v100, v100.kernel_figures, hw::Clocks::kSustained).held_fraction(), 1.0);
}

// The NVL72 GPUs have no sustained-matmul measurement of their own: they
// hold their sibling die's share (GB200: the B200's, GB300: the B300's), a
// lower bound at their higher power limits, not their burst rate.
TEST(KernelModel, Nvl72GpusHoldTheirSiblingDiesShare) {
  hw::DeviceCatalog catalog;
  auto held = [&](const char* name) {
    const hw::Device d = catalog.with_kernel_figures(*catalog.find(name));
    return hw::KernelModel(d, d.kernel_figures, hw::Clocks::kSustained).held_fraction();
  };
  EXPECT_NEAR(held("GB200"), 1439.0 / 1737.0, 1e-12);
  EXPECT_DOUBLE_EQ(held("GB200"), held("B200"));
  EXPECT_NEAR(held("GB300"), 1519.0 / 1892.0, 1e-12);
  EXPECT_DOUBLE_EQ(held("GB300"), held("B300"));
}

TEST(KernelModel, AHeldRateAboveTheBurstIsOneLineNamingTheField) {
  nlohmann::json p = nlohmann::json::parse(R"({"schema": "dtsim.profile/1", "device": "H100-SXM",
    "kernel_model": {"sms": 132, "gemm": {"tiles": [{"m": 128, "n": 256, "efficiency": 1.0}], "pipeline_k": 128,
    "launch": "4 us", "anchors": [{"dtype": "bf16", "rate": "794.5 TFLOP/s", "m": 2048, "n": 2048, "k": 13312,
    "source": "x"}], "source": "x"}, "memory": {"fraction": 0.9, "launch": "2 us", "source": "x"},
    "sustained": {"burst": "850 TFLOP/s", "held": "900 TFLOP/s", "source": "x"}}})");
  try {
    hw::parse_profile(p, "bad.json");
    FAIL() << "accepted a held rate above the burst";
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "bad.json: /kernel_model/sustained/held: expected a positive figure no higher than burst "
                           "(850 TFLOP/s), got 900 TFLOP/s");
  }
}

TEST(KernelModel, ABadFigureIsOneLineNamingTheField) {
  nlohmann::json p = nlohmann::json::parse(R"({"schema": "dtsim.profile/1", "device": "H100-SXM",
    "kernel_model": {"sms": 132, "gemm": {"tiles": [{"m": 128, "n": 256, "efficiency": 1.5}], "pipeline_k": 128,
    "launch": "4 us", "anchors": [], "source": "x"}, "memory": {"fraction": 0.9, "launch": "2 us", "source": "x"}}})");
  try {
    hw::parse_profile(p, "bad.json");
    FAIL() << "accepted an efficiency of 1.5";
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "bad.json: /kernel_model/gemm/tiles/0/efficiency: expected a fraction in (0, 1], got 1.5");
  }
}

// Unfused attention's GEMM efficiency is a measured fraction with its
// source: above 1, or without the source, one line naming the field.
TEST(KernelModel, UnfusedAttentionGemmEfficiencyIsAFractionWithItsSource) {
  auto error_of = [](const char* unfused) -> std::string {
    nlohmann::json p = nlohmann::json::parse(std::string(R"({"schema": "dtsim.profile/1", "device": "A100-SXM-80GB",
      "kernel_model": {"sms": 108, "gemm": {"tiles": [{"m": 128, "n": 256, "efficiency": 1.0}], "pipeline_k": 128,
      "launch": "4 us", "anchors": [{"dtype": "bf16", "rate": "271.2 TFLOP/s", "m": 1024, "n": 10240, "k": 5120,
      "source": "x"}], "source": "x"}, "memory": {"fraction": 0.85, "launch": "2 us", "source": "x"},
      "attention": {"megatron": "flash2", "pytorch": "flash2", "kernels": [{"name": "flash2",
      "forward_utilization": 0.7, "backward_utilization": 0.6, "ramp_tokens": 256, "head_dim_knee": 16,
      "causal_efficiency": 0.95, "source": "x"}], "unfused": )") + unfused + "}}}");
    try {
      const hw::Profile profile = hw::parse_profile(p, "bad.json");
      return fmt::format("accepted: {}", profile.kernel_model->unfused_attention_gemm_efficiency);
    } catch (const core::InputError& e) {
      return e.what();
    }
  };
  EXPECT_EQ(error_of(R"({"gemm_efficiency": 0.5, "source": "x"})"), "accepted: 0.5");
  EXPECT_EQ(error_of(R"({"gemm_efficiency": 1.5, "source": "x"})"),
            "bad.json: /kernel_model/attention/unfused/gemm_efficiency: expected a fraction in (0, 1], got 1.5");
  EXPECT_EQ(error_of(R"({"gemm_efficiency": 0.5})"), "bad.json: /kernel_model/attention/unfused/source: missing field: expected a string");
}

// What parse_profile says of an H100 profile whose gemm object has these
// fields besides its tiles and an anchor: "accepted", or its one line.
std::string gemm_fields_error(const std::string& fields) {
  nlohmann::json p = nlohmann::json::parse(R"({"schema": "dtsim.profile/1", "device": "H100-SXM",
    "kernel_model": {"sms": 132, "gemm": {"tiles": [{"m": 128, "n": 256, "efficiency": 1.0}], "pipeline_k": 128,
    "launch": "4 us", "anchors": [{"dtype": "bf16", "rate": "800 TFLOP/s", "m": 8192, "n": 8192, "k": 8192,
    "source": "x"}], )" + fields + R"(, "source": "x"},
    "memory": {"fraction": 0.9, "launch": "2 us", "source": "x"}}})");
  try {
    hw::parse_profile(p, "bad.json");
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "accepted";
}

// `persistent` says why the device's GEMMs are and how they ran beside held
// SMs: without its source or its points, or with points out of order, it is an error.
TEST(KernelModel, PersistentGemmsNeedTheirSourceAndMeasurement) {
  auto error_of = [](const char* persistent) { return gemm_fields_error(std::string(R"("persistent": )") + persistent); };
  EXPECT_EQ(error_of("{}"), "bad.json: /kernel_model/gemm/persistent/source: missing field: expected a string");
  EXPECT_EQ(error_of(R"({"source": "x", "beside_held_sms": []})"),
            "bad.json: /kernel_model/gemm/persistent/beside_held_sms: expected at least one {held_sms, slowdown}");
  EXPECT_EQ(error_of(R"({"source": "x", "beside_held_sms": [{"held_sms": 8, "slowdown": 1.3}, {"held_sms": 4, "slowdown": 1.2}]})"),
            "bad.json: /kernel_model/gemm/persistent/beside_held_sms/1/held_sms: expected the points in ascending held SMs, each once");
  EXPECT_EQ(error_of(R"({"source": "x", "beside_held_sms": [{"held_sms": 8, "slowdown": 0.5}]})"),
            "bad.json: /kernel_model/gemm/persistent/beside_held_sms/0/slowdown: expected 1 to 100, got 0.5");
  // The Hopper dies carry the H100's measurement; the A100 and Blackwell have none.
  hw::DeviceCatalog catalog;
  auto beside_held = [&](const char* name) {
    const hw::Device* found = catalog.find(name);
    if (found == nullptr) throw std::runtime_error(std::string("no device ") + name);
    const hw::Device d = catalog.with_kernel_figures(*found);
    if (!d.kernel_figures) throw std::runtime_error(std::string("no kernel figures for ") + name);
    return d.kernel_figures->gemm_beside_held_sms;
  };
  const std::vector<hw::HeldSmsSlowdown> h100 = beside_held("H100-SXM");
  ASSERT_FALSE(h100.empty());
  for (const hw::HeldSmsSlowdown& p : h100) {
    // Between the SMs left alone and a whole second wave, as measured.
    EXPECT_GE(p.slowdown, 1.1) << p.held_sms;
    EXPECT_LT(p.slowdown, 2.0 * 132.0 / (132.0 - p.held_sms)) << p.held_sms;
  }
  for (const char* hopper : {"H200-SXM", "H800-SXM", "GH200"}) {
    const std::vector<hw::HeldSmsSlowdown> same = beside_held(hopper);
    ASSERT_EQ(same.size(), h100.size()) << hopper;
    for (std::size_t i = 0; i < h100.size(); ++i) EXPECT_EQ(same[i].slowdown, h100[i].slowdown) << hopper;
  }
  auto persistent = [&](const char* name) { return !beside_held(name).empty(); };
  for (const char* other : {"A100-SXM-80GB", "B200", "MI300X"}) EXPECT_FALSE(persistent(other)) << other;
}

// What a collective's memory traffic adds to a GEMM beside it
// (`beside_traffic`) is the measurement's: at each held-block count, the
// median over its shapes of the GEMM's time beside copying blocks over its
// time beside spinning ones, at the median copy rate
// (calibrate/profiles/h100-sxm/framework-checks/gemm-beside-traffic.json).
// The H800 (the same die and HBM3) carries it; the H200 and GH200, whose
// faster memory the same traffic loads less, and the A100 have none. Points
// out of order, or a slowdown below 1, are one line naming the field.
TEST(KernelModel, GemmBesideTrafficIsTheMeasurementsMedian) {
  const std::filesystem::path root(DTSIM_SOURCE_DIR);
  const nlohmann::json measured =
      nlohmann::json::parse(std::ifstream(root / "calibrate/profiles/h100-sxm/framework-checks/gemm-beside-traffic.json"));
  std::map<int, std::vector<double>> ratios, rates;
  for (const nlohmann::json& row : measured.at("rows")) {
    const int blocks = row.at("blocks_held");
    ratios[blocks].push_back(row.at("copying_us").get<double>() / row.at("spinning_us").get<double>());
    rates[blocks].push_back(row.at("copy_bytes_per_s"));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  hw::DeviceCatalog catalog;
  auto traffic_of = [&](const char* name) {
    const hw::Device d = catalog.with_kernel_figures(*catalog.find(name));
    return d.kernel_figures->gemm_beside_traffic;
  };
  for (const char* name : {"H100-SXM", "H800-SXM"}) {
    const std::vector<hw::TrafficSlowdown> points = traffic_of(name);
    ASSERT_EQ(points.size(), ratios.size()) << name;
    std::size_t i = 0;
    for (const auto& [blocks, r] : ratios) {
      EXPECT_NEAR(points[i].slowdown, median(r), 0.0005) << name << " at " << blocks << " blocks";
      EXPECT_NEAR(points[i].traffic.value(), median(rates[blocks]), 0.5e9) << name << " at " << blocks << " blocks";
      ++i;
    }
  }
  for (const char* other : {"H200-SXM", "GH200", "A100-SXM-80GB", "B200"}) EXPECT_TRUE(traffic_of(other).empty()) << other;

  auto error_of = [](const char* traffic) { return gemm_fields_error(std::string(R"("beside_traffic": )") + traffic); };
  EXPECT_EQ(error_of(R"({"source": "x", "points": [{"traffic": "500 GB/s", "slowdown": 1.01}]})"), "accepted");
  EXPECT_EQ(error_of(R"({"points": [{"traffic": "500 GB/s", "slowdown": 1.01}]})"),
            "bad.json: /kernel_model/gemm/beside_traffic/source: missing field: expected a string");
  EXPECT_EQ(error_of(R"({"source": "x", "points": [{"traffic": "900 GB/s", "slowdown": 1.03}, {"traffic": "500 GB/s", "slowdown": 1.01}]})"),
            "bad.json: /kernel_model/gemm/beside_traffic/points/1/traffic: expected the points in ascending traffic, each once");
  EXPECT_EQ(error_of(R"({"source": "x", "points": [{"traffic": "500 GB/s", "slowdown": 0.9}]})"),
            "bad.json: /kernel_model/gemm/beside_traffic/points/0/slowdown: expected 1 to 100, got 0.9");
}

TEST(KernelModel, OnlyAMisalignedInnerDimensionCostsAndFp8AlignsTo16Bytes) {
  EXPECT_EQ(hw::k_alignment_bytes(4096, 2), 16);
  EXPECT_EQ(hw::k_alignment_bytes(50257, 2), 2);
  EXPECT_EQ(hw::k_alignment_bytes(6282, 2), 4);
  EXPECT_EQ(hw::k_alignment_bytes(12564, 2), 8);
  EXPECT_EQ(hw::k_alignment_bytes(4104, 1), 8);  // FP8 needs k a multiple of 16 elements
  EXPECT_EQ(hw::k_alignment_bytes(4097, 0.5), 0);
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  const double aligned = h100.gemm({2048, 2048, 50264, 1}, hw::Dtype::kBf16, 2).value();
  EXPECT_GT(h100.gemm({2048, 2048, 50257, 1}, hw::Dtype::kBf16, 2).value(), 5 * aligned);
  // An odd output width costs nothing here (gemm() lays the matrices out as
  // dtsim's executor does: only the rows the k loop reads are misaligned).
  EXPECT_NEAR(h100.gemm({2048, 50257, 2048, 1}, hw::Dtype::kBf16, 2).value(),
              h100.gemm({2048, 50264, 2048, 1}, hw::Dtype::kBf16, 2).value(), 0.01 * aligned);
  // A device without the measurement keeps the aligned rate.
  const hw::KernelModel a100 = model_of(catalog, "A100-SXM-80GB");
  EXPECT_NEAR(a100.gemm({2048, 2048, 50257, 1}, hw::Dtype::kBf16, 2).value(),
              a100.gemm({2048, 2048, 50264, 1}, hw::Dtype::kBf16, 2).value(), 1e-5);
}

// PyTorch's logits are row-major, [tokens, vocabulary]: with an unpadded
// vocabulary of 50257 every pass of the output layer has a leading dimension
// that is not 16-byte aligned, and cuBLAS ran all three in its align1
// kernels (cutlass_75_..._align1) in the eager steps profiled on an H100
// (calibrate/profiles/h100-sxm/framework-checks/pytorch-steps.json).
// dtsim's executor, whose output is column-major, pays for the data
// gradient alone. The model's misaligned rate is the executor's
// measurement (0.15 of the aligned rate); PyTorch's kernels reached 0.15
// forward and 0.21-0.24 for the gradients, so the row-major head is 16-23%
// slow against them; the executor's layout would be 45-50% fast.
TEST(KernelModel, PyTorchsRowMajorHeadRunsAllThreePassesMisaligned) {
  const std::filesystem::path root(DTSIM_SOURCE_DIR);
  const nlohmann::json steps =
      nlohmann::json::parse(std::ifstream(root / "calibrate/profiles/h100-sxm/framework-checks/pytorch-steps.json"));
  hw::DeviceCatalog catalog;
  const hw::Device h100 = catalog.with_kernel_figures(*catalog.find("H100-SXM"));
  int checked = 0;
  for (const auto& run : steps.at("runs")) {
    double measured_us = 0;
    for (const auto& k : run.at("kernels")) {
      if (k.at("name").get<std::string>().find("align1") != std::string::npos) measured_us += k.at("us").get<double>();
    }
    if (measured_us == 0) continue;  // an aligned vocabulary (Llama's 32000)
    const nlohmann::json model = nlohmann::json::parse(std::ifstream(root / run.at("model").get<std::string>()));
    const std::int64_t m = run.at("mbs").get<std::int64_t>() * model.at("seq_len").get<std::int64_t>();
    const std::int64_t n = model.at("vocab"), k = model.at("hidden");
    const double pass_flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    hw::OpWork forward;
    forward.kind = model::OpKind::kGemm;
    forward.gemm = {m, n, k, 1};
    forward.flops = core::Flops(pass_flops);
    hw::OpWork backward = forward;
    backward.flops = core::Flops(2 * pass_flops);
    backward.backward = true;
    auto head = [&](hw::GemmLayout layout) {
      hw::CostModel cost(h100, hw::Efficiency{}, nullptr, "");
      cost.set_layout(layout);
      return (cost.time(forward, hw::Dtype::kBf16) + cost.time(backward, hw::Dtype::kBf16)).value() * 1e6;
    };
    const double row_major = head(hw::GemmLayout::kRowMajor), executor = head(hw::GemmLayout::kExecutor);
    fmt::print("  {} mbs {}: align1 kernels {:.1f} ms; row-major {:.1f} ms ({:+.1f}%), executor's layout {:.1f} ms ({:+.1f}%)\n",
               run.at("model").get<std::string>(), run.at("mbs").get<int>(), measured_us / 1e3, row_major / 1e3,
               100 * (row_major / measured_us - 1), executor / 1e3, 100 * (executor / measured_us - 1));
    EXPECT_LT(std::abs(row_major / measured_us - 1), 0.25) << run.at("model");
    EXPECT_LT(executor / measured_us, 0.6) << run.at("model");
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST(KernelModel, MisalignedRatesOutOfOrderAreOneLineNamingTheField) {
  nlohmann::json p = nlohmann::json::parse(R"({"schema": "dtsim.profile/1", "device": "H100-SXM",
    "kernel_model": {"sms": 132, "gemm": {"tiles": [{"m": 128, "n": 256, "efficiency": 1.0}], "pipeline_k": 128,
    "launch": "4 us", "anchors": [{"dtype": "bf16", "rate": "794.5 TFLOP/s", "m": 2048, "n": 2048, "k": 13312,
    "source": "x"}], "misaligned_k": {"rates": [{"alignment_bytes": 4, "efficiency": 0.3},
    {"alignment_bytes": 2, "efficiency": 0.15}], "source": "x"}, "source": "x"},
    "memory": {"fraction": 0.9, "launch": "2 us", "source": "x"}}})");
  try {
    hw::parse_profile(p, "bad.json");
    FAIL() << "accepted rates out of order";
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "bad.json: /kernel_model/gemm/misaligned_k/rates/1/alignment_bytes: expected the rates in "
                           "ascending alignment, each once");
  }
}

}  // namespace

TEST(KernelModel, SlidingWindowAttentionComputesItsBand) {
  // A causal window of w over s queries computes s·w − w²/2 pairs: 3/4 of the causal triangle at w = s/2.
  EXPECT_DOUBLE_EQ(hw::keys_per_query(8192, true, 4096), (8192.0 * 4096 - 4096.0 * 4096 / 2) / 8192);
  EXPECT_DOUBLE_EQ(hw::keys_per_query(8192, true, 0), 4096);
  EXPECT_DOUBLE_EQ(hw::keys_per_query(4096, true, 8192), 2048);  // a window past the sequence changes nothing
  hw::DeviceCatalog catalog;
  const hw::KernelModel km = model_of(catalog, "H100-SXM");
  const hw::AttentionKernel& fa = *km.figures().find_attention("flash3");
  const double full = km.attention(fa, 32, 32768, 128, true, false).value();
  const double local = km.attention(fa, 32, 32768, 128, true, false, 4096).value();
  // 4,096 keys of 32,768: about a quarter of the causal work; the shorter rows run a little less efficiently.
  EXPECT_LT(local, 0.26 * full);
  EXPECT_GT(local, 0.20 * full);
  EXPECT_DOUBLE_EQ(km.attention(fa, 32, 4096, 128, true, false, 4096).value(), km.attention(fa, 32, 4096, 128, true, false).value());
}

// The H100's attention figures against the kernel measurements they were
// fitted to (tests/validation/fit_attention.py): PyTorch SDPA's FlashAttention-2
// and cuDNN backends measured on an H100, and FlashAttention-3's own figures.
// Every point from 512 to 16k tokens, both passes, both masks.
TEST(KernelModel, AttentionMatchesTheKernelsMeasuredOnAnH100) {
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  struct Point {
    std::string kernel;
    std::int64_t seq, head_dim, sequences_x_heads;
    bool causal, backward;
    double tflops;
  };
  std::vector<Point> points;
  const auto root = std::filesystem::path(DTSIM_SOURCE_DIR);
  const nlohmann::json sdpa = nlohmann::json::parse(std::ifstream(root / "calibrate/profiles/h100-sxm/attention-sdpa.json"));
  for (const auto& r : sdpa.at("rows")) {
    const std::int64_t batch = r.at("batch"), heads = r.at("heads"), seq = r.at("seq"), hd = r.at("head_dim");
    const bool causal = r.at("causal");
    // The script's q, k and v are leaves whose .grad persists: its backward
    // also adds each new gradient into the old one (read two bf16 tensors,
    // write one, three times), which a training step does not run.
    const double accumulate = 3 * h100.stream(core::Bytes(3.0 * 2 * batch * seq * heads * hd)).value();
    const double backward_s = r.at("backward_us").get<double>() * 1e-6 - accumulate;
    const double flops = hw::attention_flops(batch * heads, seq, hd, causal, false);
    points.push_back({r.at("kernel"), seq, hd, batch * heads, causal, false, r.at("forward_tflops")});
    points.push_back({r.at("kernel"), seq, hd, batch * heads, causal, true, 2.5 * flops / backward_s / 1e12});
  }
  const nlohmann::json fa3 = nlohmann::json::parse(std::ifstream(root / "tests/validation/flash-attention-3-figures.json"));
  for (const auto& s : fa3.at("series")) {
    if (s.at("kernel") != "flash3") continue;  // the other series measured older library versions than the SDPA rows
    const std::int64_t hd = s.at("head_dim");
    for (std::size_t i = 0; i < s.at("tflops").size(); ++i) {
      const std::int64_t seq = fa3.at("sequence_lengths")[i];
      points.push_back({"flash3", seq, hd, (2048 / hd) * (16384 / seq), s.at("causal"), s.at("pass") == "bwd", s.at("tflops")[i]});
    }
  }
  std::map<std::string, std::pair<double, int>> by_kernel;
  double worst = 0, worst_from_1k = 0;
  for (const Point& p : points) {
    const hw::AttentionKernel* kernel = h100.figures().find_attention(p.kernel);
    ASSERT_NE(kernel, nullptr) << p.kernel;
    const double t = h100.attention(*kernel, p.sequences_x_heads, p.seq, p.head_dim, p.causal, p.backward).value();
    const double flops = hw::attention_flops(p.sequences_x_heads, p.seq, p.head_dim, p.causal, false) * (p.backward ? 2.5 : 1.0);
    const double error = flops / t / 1e12 / p.tflops - 1;
    by_kernel[p.kernel].first += std::abs(error);
    by_kernel[p.kernel].second += 1;
    worst = std::max(worst, std::abs(error));
    if (p.seq >= 1024) worst_from_1k = std::max(worst_from_1k, std::abs(error));
  }
  for (const auto& [name, sum] : by_kernel) {
    fmt::print("  {:<8} {:>3} points: mean |error| {:.1f}%\n", name, sum.second, 100 * sum.first / sum.second);
    EXPECT_LE(sum.first / sum.second, 0.05) << name;
  }
  fmt::print("  worst {:.1f}%, from 1k tokens {:.1f}%\n", 100 * worst, 100 * worst_from_1k);
  EXPECT_EQ(by_kernel.size(), 3u);
  // One ramp for both passes had the backward 29% (FlashAttention-2) and 61% (cuDNN) fast at 512 causal tokens.
  EXPECT_LE(worst, 0.21);
  EXPECT_LE(worst_from_1k, 0.12);
}

// The B200's FlashAttention-4 figures (forward from the FlashAttention-4
// paper, backward assumed at FlashAttention-3's backward-to-forward ratio)
// against the kernel's own benchmark on an sm_100 GPU
// (tests/validation/flash-attention-4-figures.json): both masks, both passes,
// and the backward before and after its 2-CTA path. Held to the issue's
// kernel target, each point within 10% and their mean within 5%.
TEST(KernelModel, FlashAttention4MatchesItsSm100Benchmarks) {
  hw::DeviceCatalog catalog;
  const auto root = std::filesystem::path(DTSIM_SOURCE_DIR);
  const nlohmann::json fa4 = nlohmann::json::parse(std::ifstream(root / "tests/validation/flash-attention-4-figures.json"));
  const hw::KernelModel b200 = model_of(catalog, fa4.at("device").get<std::string>());
  const hw::AttentionKernel* kernel = b200.figures().find_attention(fa4.at("kernel").get<std::string>());
  ASSERT_NE(kernel, nullptr);
  const nlohmann::json& shape = fa4.at("shape");
  const std::int64_t sequences_x_heads = shape.at("batch").get<std::int64_t>() * shape.at("heads").get<std::int64_t>();
  const std::int64_t seq = shape.at("seq"), head_dim = shape.at("head_dim");
  double sum = 0;
  int points = 0;
  for (const auto& p : fa4.at("points")) {
    const bool causal = p.at("causal"), backward = p.at("pass") == "bwd";
    const double flops = hw::attention_flops(sequences_x_heads, seq, head_dim, causal, false) * (backward ? 2.5 : 1.0);
    const double measured = p.at("tflops");
    // The benchmark's printed time reproduces its printed rate by FlashAttention's FLOP count.
    EXPECT_NEAR(flops / (p.at("ms").get<double>() * 1e-3) / 1e12, measured, 0.005 * measured);
    const double predicted = flops / b200.attention(*kernel, sequences_x_heads, seq, head_dim, causal, backward).value() / 1e12;
    const double error = predicted / measured - 1;
    fmt::print("  {:<6} {} {:<32} measured {:7.1f} predicted {:7.1f} TFLOP/s {:+.1f}%\n", causal ? "causal" : "full",
               p.at("pass").get<std::string>(), p.at("variant").get<std::string>(), measured, predicted, 100 * error);
    EXPECT_LE(std::abs(error), 0.10) << p.dump();
    sum += std::abs(error);
    ++points;
  }
  ASSERT_EQ(points, 6);
  fmt::print("  mean |error| {:.1f}%\n", 100 * sum / points);
  EXPECT_LE(sum / points, 0.05);
}

// Unfused attention's kernels as dtsim costs them (two batched GEMMs and a
// softmax at the streaming rate; dtsim's own executor ran these within 3% on
// an H100) against PyTorch's unfused attention in FlashAttention-3's Figure 5
// (baddbmm, torch.softmax, einsum; no mask, no dropout): PyTorch's kernels
// ran 1.3x (8k) to 2x (512 tokens) slower than dtsim costs, a gap no
// measurement here splits between its GEMMs and its softmax. The bounds
// hold today's gap so that it cannot grow (or close) unseen.
TEST(KernelModel, UnfusedAttentionAgainstFlashAttention3sStandardAttention) {
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  const auto root = std::filesystem::path(DTSIM_SOURCE_DIR);
  const nlohmann::json fa3 = nlohmann::json::parse(std::ifstream(root / "tests/validation/flash-attention-3-figures.json"));
  int points = 0;
  double lowest = 1e9, highest = 0;
  for (const auto& s : fa3.at("series")) {
    if (s.at("kernel") != "standard") continue;
    const std::int64_t d = s.at("head_dim");
    for (std::size_t i = 0; i < s.at("tflops").size(); ++i) {
      if (s.at("tflops")[i].is_null()) continue;  // out of memory
      const std::int64_t seq = fa3.at("sequence_lengths")[i];
      const std::int64_t heads = (2048 / d) * (16384 / seq);  // sequences x heads
      const double scores = static_cast<double>(heads) * static_cast<double>(seq * seq);
      const double t = h100.gemm({seq, seq, d, heads}, hw::Dtype::kFp16, 2).value() +
                       h100.gemm({seq, d, seq, heads}, hw::Dtype::kFp16, 2).value() +
                       h100.stream(core::Bytes(2 * 2 * scores)).value();  // softmax: read and write the fp16 scores
      const double flops = hw::attention_flops(heads, seq, d, false, false);
      const double ratio = flops / t / 1e12 / s.at("tflops")[i].get<double>();
      fmt::print("  standard attention forward, {:>5} tokens: dtsim {:.0f} TFLOP/s, measured {:.0f}: {:.2f}x\n", seq,
                 flops / t / 1e12, s.at("tflops")[i].get<double>(), ratio);
      lowest = std::min(lowest, ratio);
      highest = std::max(highest, ratio);
      ++points;
    }
  }
  EXPECT_EQ(points, 5);
  EXPECT_GE(lowest, 1.2);
  EXPECT_LE(highest, 2.2);
}

// FlashAttention-2's forward+backward bars as its authors published them in
// their repository (tests/validation/flash-attention-2-figures.json, the
// paper's Figures 4 and 7 read from the images themselves, which
// ../shared's transcription of them departs from in four series). On the
// A100 they check FlashAttention-2's figures, fitted to that transcription,
// and set FlashAttention-1's (tests/validation/fit_flash1.py). The H100's
// FlashAttention-2 figures follow PyTorch's SDPA backend measured in 2026,
// which these 2023 bars of the flash-attn package outran: that gap is held
// as it is, as is the distance from dtsim's `triton` (flash_attn_triton.py,
// the kernel llm-foundry ran) to the image's Triton bars (OpenAI's
// triton.ops.flash_attention, another kernel).
TEST(KernelModel, AttentionMatchesFlashAttention2sOwnFigures) {
  hw::DeviceCatalog catalog;
  const auto root = std::filesystem::path(DTSIM_SOURCE_DIR);
  const nlohmann::json fa2 = nlohmann::json::parse(std::ifstream(root / "tests/validation/flash-attention-2-figures.json"));
  struct Errors {
    double abs_sum = 0, sum = 0, worst = 0;
    int n = 0;
    void add(double e) {
      abs_sum += std::abs(e), sum += e, worst = std::max(worst, std::abs(e)), ++n;
    }
    double mean_abs() const { return abs_sum / n; }
    double mean() const { return sum / n; }
  };
  std::map<std::string, Errors> by_series;  // "device kernel", and "... causal" for the masked series
  for (const auto& s : fa2.at("series")) {
    const std::string device = s.at("device"), kernel_name = s.at("kernel");
    if (kernel_name == "pytorch" || kernel_name == "xformers") continue;  // unfused: checked elsewhere; xformers: not modelled
    const hw::KernelModel model = model_of(catalog, device);
    const hw::AttentionKernel* kernel = model.figures().find_attention(kernel_name);
    if (kernel == nullptr) continue;  // the H100 has no FlashAttention-1 figure
    const std::int64_t hd = s.at("head_dim");
    const bool causal = s.at("causal");
    std::string line;
    for (std::size_t i = 0; i < s.at("tflops").size(); ++i) {
      if (s.at("tflops")[i].is_null()) continue;  // out of memory
      const double predicted = paper_attention_tflops(model, *kernel, Pass::kBoth, hd, causal, fa2.at("sequence_lengths")[i]);
      const double error = predicted / s.at("tflops")[i].get<double>() - 1;
      by_series[device + " " + kernel_name].add(error);
      if (causal) by_series[device + " " + kernel_name + " causal"].add(error);
      line += fmt::format(" {:>+6.1f}%", 100 * error);
    }
    fmt::print("  {:<14} {:<7} head {:>3} {:<9}{}\n", device, kernel_name, hd, causal ? "causal" : "no mask", line);
  }
  for (const auto& [name, e] : by_series) {
    fmt::print("  {:<32} {:>2} points: mean |error| {:>5.1f}%, mean {:>+6.1f}%, worst {:.1f}%\n", name, e.n,
               100 * e.mean_abs(), 100 * e.mean(), 100 * e.worst);
  }
  ASSERT_EQ(by_series.at("A100-SXM-80GB flash2").n, 24);
  EXPECT_LE(by_series.at("A100-SXM-80GB flash2").mean_abs(), 0.03);
  EXPECT_LE(by_series.at("A100-SXM-80GB flash2").worst, 0.10);
  // Half of FlashAttention-2's figures, as FlashAttention-1's were, read 16.3%.
  EXPECT_LE(by_series.at("A100-SXM-80GB flash1").mean_abs(), 0.11);
  EXPECT_LE(by_series.at("A100-SXM-80GB flash1 causal").worst, 0.12);
  // The gaps held as they are: the 2023 flash-attn package on the H100 ran
  // 12.7% faster than dtsim's SDPA-measured figures on average; OpenAI's
  // Triton kernel on the A100 ran slower than dtsim's `triton`, 7.9% on average.
  EXPECT_NEAR(by_series.at("H100-SXM flash2").mean(), -0.127, 0.03);
  EXPECT_NEAR(by_series.at("A100-SXM-80GB triton").mean(), 0.079, 0.03);
}

// The H200, H800 and GH200 are the H100's GH100 die: their attention runs the
// same kernels on the same SMs, so their figures must not drift from the
// H100's (the H200's FlashAttention-2 backward once stayed 20% faster after
// the H100's was measured).
TEST(KernelModel, HopperSiblingsShareTheH100sAttentionFigures) {
  hw::DeviceCatalog catalog;
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  for (const std::string sibling : {"H200-SXM", "H800-SXM", "GH200"}) {
    const hw::KernelModel other = model_of(catalog, sibling);
    ASSERT_EQ(other.figures().attention.size(), h100.figures().attention.size()) << sibling;
    for (const hw::AttentionKernel& a : h100.figures().attention) {
      const hw::AttentionKernel* b = other.figures().find_attention(a.name);
      ASSERT_NE(b, nullptr) << sibling << " " << a.name;
      const auto shape = [](const hw::AttentionKernel& k) {
        return std::vector<double>{k.forward_utilization,  k.backward_utilization,   k.ramp_tokens,      k.backward_ramp_tokens,
                                   k.head_dim_knee,        k.backward_head_dim_knee, k.causal_efficiency};
      };
      EXPECT_EQ(shape(a), shape(*b)) << sibling << " " << a.name;
    }
  }
}

// A kernel measured in one pass keeps one shape: without backward_ramp_tokens
// and backward_head_dim_knee, the backward takes the forward's.
TEST(KernelModel, TheBackwardsShapeDefaultsToTheForwards) {
  hw::DeviceCatalog catalog;
  const hw::KernelModel a100 = model_of(catalog, "A100-SXM-80GB");
  const hw::AttentionKernel* fa2 = a100.figures().find_attention("flash2");
  ASSERT_NE(fa2, nullptr);
  EXPECT_EQ(fa2->backward_ramp_tokens, fa2->ramp_tokens);
  EXPECT_EQ(fa2->backward_head_dim_knee, fa2->head_dim_knee);
  const hw::KernelModel h100 = model_of(catalog, "H100-SXM");
  const hw::AttentionKernel* cudnn = h100.figures().find_attention("cudnn");
  ASSERT_NE(cudnn, nullptr);
  EXPECT_GT(cudnn->backward_ramp_tokens, cudnn->ramp_tokens);
}
