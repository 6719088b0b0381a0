// Whole predictions through the driver: properties that must hold whatever
// the constants, so that a wrong mechanism fails even when goldens are updated.
#include <gtest/gtest.h>

#include "dtsim/driver/simulation.hpp"

using namespace dtsim;

namespace {
driver::Simulation run(const std::string& strategy, std::optional<int> nodes = std::nullopt, bool full = false,
                       const std::string& model = "gpt3-1.3b", const std::string& cluster = "dgx-a100") {
  return driver::simulate({model, cluster, strategy, nodes, std::nullopt, std::nullopt, full});
}
}  // namespace

TEST(Simulation, FullModeAgreesWithOneRankPerStageOnSymmetricInput) {
  driver::Simulation rep = run("ddp,gbs=32", 2);
  driver::Simulation full = run("ddp,gbs=32", 2, true);
  EXPECT_EQ(rep.timeline.makespan, full.timeline.makespan);
  EXPECT_DOUBLE_EQ(rep.report.mfu, full.report.mfu);
  EXPECT_EQ(full.tasks.simulated.size(), 16u);
  EXPECT_EQ(rep.tasks.simulated.size(), 1u);
}

TEST(Simulation, OverlapHidesGradientCommunication) {
  driver::Simulation on = run("ddp,gbs=32", 4);
  driver::Simulation off = run("ddp,gbs=32,overlap=off", 4);
  EXPECT_LT(on.report.breakdown.exposed_comm.dp, off.report.breakdown.exposed_comm.dp);
  EXPECT_LT(on.report.step_time, off.report.step_time);
  // Without overlap every bucket waits for the whole backward: exposed time is the sum of all-reduces.
  EXPECT_GT(off.report.breakdown.exposed_comm.dp.value(), 0);
}

TEST(Simulation, GradientAccumulationScalesComputeNotCommunication) {
  driver::Simulation one = run("ddp,gbs=8", 1);
  driver::Simulation two = run("ddp,gbs=16", 1);
  driver::Simulation four = run("ddp,gbs=32", 1);
  EXPECT_EQ(four.report.micro_batches, 4);
  // Each micro-batch adds one forward and backward; the optimizer step and the
  // gradient all-reduce happen once per step.
  const double per_micro_batch = (two.report.breakdown.compute - one.report.breakdown.compute).value();
  EXPECT_NEAR((four.report.breakdown.compute - two.report.breakdown.compute).value(), 2 * per_micro_batch, 1e-6);
  EXPECT_NEAR(four.report.breakdown.exposed_comm.dp.value(), one.report.breakdown.exposed_comm.dp.value(), 1e-6);
  EXPECT_NEAR(four.report.model_flops_per_step / one.report.model_flops_per_step, 4.0, 1e-9);
}

TEST(Simulation, ModelFlopsAreSixTimesParametersTimesTokensPlusAttention) {
  driver::Simulation s = run("one_device,gbs=4", std::nullopt, false, "llama2-7b", "dgx-h100");
  const double tokens = 4.0 * 4096, params = s.graph.parameter_count();
  const double layers = 32, hidden = 4096, seq = 4096;
  // 6·N·T for the weights (the embedding lookup does no matmul) plus 12·L·h·s·T for attention scores.
  const double embedding = 32000.0 * 4096;
  double expected = 6 * (params - embedding - layers * 2 * hidden - hidden) * tokens + 12 * layers * hidden * seq * tokens;
  EXPECT_NEAR(s.report.model_flops_per_step.value() / expected, 1.0, 1e-9);
}

TEST(Simulation, ZeroStagesCutMemoryInOrder) {
  auto peak = [](const std::string& s) {
    return run(s, std::nullopt, false, "llama2-7b", "dgx-h100").report.peak_bytes.value();
  };
  double ddp = peak("ddp"), z1 = peak("zero1"), z2 = peak("zero2"), z3 = peak("zero3");
  EXPECT_GT(ddp, z1);
  EXPECT_GT(z1, z2);
  EXPECT_GT(z2, z3);
}

TEST(Simulation, OneDeviceHasNoCommunication) {
  driver::Simulation s = run("one_device,gbs=2");
  EXPECT_EQ(s.report.gpus, 1);
  EXPECT_EQ(s.report.breakdown.exposed_comm.total().value(), 0);
  EXPECT_TRUE(s.tasks.calls.empty());
}

TEST(Simulation, FullModeAgreesWithDefaultModeUnderTensorAndPipelineParallelism) {
  const std::string strategy = "tp=4,pp=2,gbs=16,sp=on,recompute=selective,attention=standard";
  driver::Simulation rep = run(strategy, 2);
  driver::Simulation full = run(strategy, 2, true);
  EXPECT_EQ(rep.timeline.makespan, full.timeline.makespan);
  EXPECT_DOUBLE_EQ(rep.report.peak_bytes.value(), full.report.peak_bytes.value());
  EXPECT_EQ(rep.tasks.simulated.size(), 2u);
  EXPECT_EQ(full.tasks.simulated.size(), 16u);
}

TEST(Simulation, FullRecomputationCostsAForwardAndSavesMemory) {
  const std::string base = "tp=8,gbs=8,attention=standard";
  driver::Simulation none = run(base, 1);
  driver::Simulation full = run(base + ",recompute=full", 1);
  EXPECT_DOUBLE_EQ(full.report.model_flops_per_step.value(), none.report.model_flops_per_step.value());
  // Hardware FLOPs grow by one forward of the blocks: 4/3 of the model FLOPs, less the head that is not recomputed.
  EXPECT_GT(full.report.hardware_flops_per_step / none.report.hardware_flops_per_step, 1.25);
  EXPECT_LT(full.report.hardware_flops_per_step / none.report.hardware_flops_per_step, 1.34);
  EXPECT_LT(full.report.peak_bytes, none.report.peak_bytes);
}
