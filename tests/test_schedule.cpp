// Pipeline schedules against their closed forms, on a model whose stages are
// identical and whose transfers cost nothing (a layer graph of norm ops: no
// parameters, no activation transfer size), so the only idle time is the bubble.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dtsim/driver/simulation.hpp"
#include "dtsim/plan/schedule.hpp"
#include "scratch_dir.hpp"

using namespace dtsim;

namespace {

std::string uniform_model(int layers) {
  nlohmann::json doc{{"name", "uniform"}, {"kind", "graph"}, {"layers", nlohmann::json::array()}};
  for (int i = 0; i < layers; ++i) {
    // A memory-bound layer of 0.27 G elements a sample that outputs only its
    // 1024 channels' means: a stage's compute takes milliseconds, the
    // 2 KiB it sends the next stage microseconds, so the schedule's bubble
    // shows as its closed form has it (free transfers) to a part in 10^3.
    doc["layers"].push_back(
        {{"name", "layer" + std::to_string(i)},
         {"ops",
          {{{"name", "norm"}, {"type", "norm"}, {"channels", 1024}, {"input_size", 512}},
           {{"name", "mean"}, {"type", "pool"}, {"channels", 1024}, {"input_size", 512}, {"output_size", 1}}}}});
  }
  static const ScratchDir scratch;  // removed at exit
  const std::string path = scratch.file("uniform_" + std::to_string(layers) + ".json");
  std::ofstream(path) << doc.dump();
  return path;
}

// Kernels this small are shorter than their launches: the host is taken out
// (host_launch=0), as a CUDA graph would, so that the bubble is the schedule's.
driver::Simulation run(const std::string& strategy) {
  return driver::simulate({uniform_model(16), "dgx-h100", strategy + ",host_launch=0,autocast=off", std::nullopt, std::nullopt,
                           std::nullopt, false, {}, {}});
}

// How near the closed forms the bubble comes: the transfers between stages
// are not free (see uniform_model), and interleaving makes vpp times as many.
constexpr double kClosedFormTolerance = 1e-3;

// The bubble's share of the pipelined part of the step: the optimizer step
// that follows it is not part of any schedule's closed form.
double bubble_fraction(const driver::Simulation& s) {
  double optimizer_s = 0;
  for (std::size_t id = 0; id < s.tasks.tasks.size(); ++id) {
    const plan::Task& t = s.tasks.tasks[id];
    if (t.rank == s.report.breakdown.rank && t.phase == plan::Phase::kOptimizer) {
      optimizer_s += core::to_seconds(s.timeline.spans[id].end - s.timeline.spans[id].start).value();
    }
  }
  return s.report.breakdown.bubble.value() / (s.report.step_time.value() - optimizer_s);
}

}  // namespace

TEST(Schedule, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (int m : {4, 8, 16}) {
    driver::Simulation s = run("gpus=4,pp=4,gbs=" + std::to_string(m));
    const double p = 4;
    EXPECT_NEAR(bubble_fraction(s), (p - 1) / (m + p - 1), kClosedFormTolerance) << "m=" << m;
  }
}

TEST(Schedule, GpipeHasTheSameBubbleAsOneFOneB) {
  driver::Simulation s = run("gpus=4,pp=4,gbs=8,schedule=gpipe");
  EXPECT_NEAR(bubble_fraction(s), 3.0 / 11.0, kClosedFormTolerance);
}

TEST(Schedule, InterleavedBubbleShrinksByTheVirtualStages) {
  for (int v : {2, 4}) {
    driver::Simulation s = run("gpus=4,pp=4,gbs=8,vpp=" + std::to_string(v));
    const double p = 4, m = 8;
    EXPECT_NEAR(bubble_fraction(s), (p - 1) / (v * m + p - 1), kClosedFormTolerance) << "v=" << v;
  }
}

// 1F1B: stage i holds the activations of p - i micro-batches at its peak; GPipe holds all m.
TEST(Schedule, InFlightMicroBatchesPerStage) {
  driver::Simulation one = run("gpus=4,pp=4,gbs=8");
  driver::Simulation gpipe = run("gpus=4,pp=4,gbs=8,schedule=gpipe");
  const double per_micro_batch = gpipe.report.per_stage[0].activations.value() / 8;
  ASSERT_GT(per_micro_batch, 0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(one.report.per_stage[static_cast<std::size_t>(i)].activations.value(), (4 - i) * per_micro_batch);
    EXPECT_DOUBLE_EQ(gpipe.report.per_stage[static_cast<std::size_t>(i)].activations.value(), 8 * per_micro_batch);
  }
}

TEST(Schedule, EveryPassRunsOnceInEachSchedule) {
  for (auto schedule : {plan::Schedule::kGpipe, plan::Schedule::kOneFOneB, plan::Schedule::kInterleaved}) {
    const int chunks = schedule == plan::Schedule::kInterleaved ? 2 : 1;
    for (int stage = 0; stage < 4; ++stage) {
      auto order = plan::stage_order(schedule, stage, 4, 8, chunks);
      EXPECT_EQ(order.size(), 2u * 8 * chunks);
      std::set<std::tuple<int, int, bool>> seen;
      for (const auto& p : order) seen.insert({p.micro_batch, p.chunk, p.backward});
      EXPECT_EQ(seen.size(), order.size());
    }
  }
}

// Megatron-Core's one more warm-up forward under EP overlap: the stage runs
// its schedule's warm-up plus one before the first backward, and after it
// each forward is followed by a backward of an earlier micro-batch.
TEST(Schedule, ExtraWarmupRunsOneMoreForwardBeforeTheSteadyState) {
  for (int stage = 0; stage < 4; ++stage) {
    auto forwards_before_backward = [](const std::vector<plan::PassStep>& order) {
      return std::find_if(order.begin(), order.end(), [](const plan::PassStep& s) { return s.backward; }) - order.begin();
    };
    const auto plain = plan::stage_order(plan::Schedule::kInterleaved, stage, 4, 16, 2);
    const auto extra = plan::stage_order(plan::Schedule::kInterleaved, stage, 4, 16, 2, 1);
    EXPECT_EQ(forwards_before_backward(extra), forwards_before_backward(plain) + 1) << stage;
    EXPECT_EQ(extra.size(), plain.size());
  }
  // Without a pipeline the pairs are F1 B0, F2 B1, ...: never a micro-batch's own.
  const auto single = plan::stage_order(plan::Schedule::kOneFOneB, 0, 1, 4, 1, 1);
  ASSERT_EQ(single.size(), 8U);
  EXPECT_FALSE(single[0].backward);
  EXPECT_EQ(single[1].micro_batch, 1);
  EXPECT_EQ(single[2].micro_batch, 0);
  EXPECT_TRUE(single[2].backward);
}
