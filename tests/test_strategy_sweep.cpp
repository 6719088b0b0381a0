// Random valid strategies (a fixed seed, so every run sees the same ones) on
// small models and clusters, with --full and the flow network mixed in. In the
// plain build this checks every prediction is sane and a rerun is identical;
// under the ASan+UBSan half of scripts/test.sh it is the sanitizer sweep.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"

namespace dtsim {
namespace {

template <class T>
const T& pick(std::mt19937& rng, const std::vector<T>& from) {
  return from[std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(rng)];
}

std::string random_strategy(std::mt19937& rng) {
  std::string s = pick<std::string>(rng, {"tp=1", "tp=2", "tp=4", "tp=2,sp=on"});
  // Expert layouts (refused on the dense models): experts split as tp, or whole on an ep group spanning tp ranks.
  s += pick<std::string>(rng, {"", "", "", ",ep=2", ",ep=2,etp=1,sp=on"});
  s += pick<std::string>(rng, {"", ",pp=2", ",pp=2,schedule=gpipe", ",pp=2,schedule=interleaved,vpp=2", ",cp=2"});
  s += pick<std::string>(rng, {",mbs=1", ",mbs=2"});
  s += pick<std::string>(rng, {"", ",gbs=16", ",gbs=32"});
  s += pick<std::string>(rng, {"", ",zero=1", ",zero=2", ",zero=3", ",zero=1,param_overlap=on"});
  s += pick<std::string>(rng, {"", ",overlap=off", ",bucket=8MiB"});
  s += pick<std::string>(rng, {"", ",recompute=full", ",recompute=selective"});
  s += pick<std::string>(rng, {",dtype=bf16", ",dtype=fp16", ",dtype=fp8", ",dtype=fp32"});
  s += pick<std::string>(rng, {"", ",framework=megatron", ",framework=pytorch", ",attention=standard"});
  s += pick<std::string>(rng, {"", ",collective=ring", ",collective=tree", ",protocol=ll128"});
  return s;
}

TEST(StrategySweep, RandomValidStrategiesSimulateSanelyAndRerunIdentically) {
  std::mt19937 rng(20261123);
  const std::vector<std::string> models{"tiny-gpt", "gpt3-1.3b", "mixtral-8x7b"};
  const std::vector<std::pair<std::string, int>> clusters{{"dgx-h100", 1}, {"dgx-a100", 2}, {"superpod-h100", 2}, {"hgx-h200", 1}};
  int valid = 0, refused = 0;
  for (int i = 0; i < 800 && valid < 160; ++i) {
    driver::SimulationRequest request;
    request.model = pick(rng, models);
    const auto& [cluster, nodes] = pick(rng, clusters);
    request.cluster = cluster;
    request.nodes = nodes;
    request.strategy = random_strategy(rng);
    request.full = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) request.network = sim::NetworkMode::kFlow;
    const std::string what = request.model + " on " + cluster + " x" + std::to_string(nodes) + ": " + request.strategy +
                             (request.full ? " --full" : "") + (request.network == sim::NetworkMode::kFlow ? " --network flow" : "");
    try {
      const driver::Simulation a = driver::simulate(request);
      ++valid;
      const report::Report& r = a.report;
      EXPECT_TRUE(std::isfinite(r.step_time.value()) && r.step_time.value() > 0) << what;
      EXPECT_GT(r.mfu, 0) << what;
      EXPECT_LT(r.mfu, 1) << what;
      EXPECT_GT(r.peak_bytes.value(), 0) << what;
      if (valid % 4 == 0) {
        const driver::Simulation b = driver::simulate(request);
        EXPECT_EQ(a.timeline.makespan, b.timeline.makespan) << what << ": a rerun differs";
        EXPECT_EQ(r.events, b.report.events) << what;
      }
    } catch (const core::InputError&) {
      ++refused;  // an impossible combination (tp not dividing heads, fp8 on a device without it, ...)
    }
  }
  std::printf("%d valid strategies simulated, %d refused as impossible\n", valid, refused);
  EXPECT_GE(valid, 160);
}

}  // namespace
}  // namespace dtsim
