// The kernels an MoE block runs around its experts besides their GEMMs and
// all-to-alls (plan/moe_dispatch.hpp): Megatron-Core's router, token
// dispatcher and permutations, counted from its code, and the bytes the
// permutations move.
#include <gtest/gtest.h>

#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/kernel_calls.hpp"

using namespace dtsim;

namespace {

driver::Simulation qwen(const std::string& strategy) {
  return driver::simulate({"qwen3-30b-a3b", "dgx-h100", strategy, std::nullopt, std::nullopt, std::nullopt, false, {}, {}});
}

struct Glue {
  int launches = 0;
  double bytes = 0;
  int works = 0;
};

// Rank 0's dispatch work (elementwise work that names its launches: under
// framework=megatron with its fusions nothing else does; `single`: one
// launch, which tells an eager model's permutations from its rotary chain)
// in one pass of the first MoE block, micro-batch 0.
Glue glue(const driver::Simulation& sim, plan::Phase phase, bool single = false) {
  int block = -1;
  for (const plan::Task& t : sim.tasks.tasks) {
    if (t.rank == 0 && t.kind == plan::TaskKind::kCompute && t.layer >= 0) {
      for (const hw::OpWork& w : sim.tasks.kernels[static_cast<std::size_t>(t.payload)].ops) {
        if (w.kind == model::OpKind::kGemm && w.concurrent_kernels > 0 && block < 0) block = t.layer;
      }
    }
  }
  Glue g;
  for (const plan::Task& t : sim.tasks.tasks) {
    if (t.rank != 0 || t.kind != plan::TaskKind::kCompute || t.layer != block || t.micro_batch != 0 || t.phase != phase) {
      continue;
    }
    for (const hw::OpWork& w : sim.tasks.kernels[static_cast<std::size_t>(t.payload)].ops) {
      if (w.kind != model::OpKind::kElementwise || w.eager_launches <= 0) continue;
      if (single && w.eager_launches != 1) continue;
      g.launches += w.eager_launches;
      g.bytes += w.bytes_moved.value();
      ++g.works;
    }
  }
  return g;
}

// Qwen3-30B-A3B: hidden 2048, top 8 of 128 experts; 4,096 tokens a micro-batch in bf16.
constexpr double kRouted = 4096.0 * 8 * 2048 * 2;

}  // namespace

// ep 8 (16 local experts): forward, routing 6, the dispatcher's counts 12
// (with the counts' all-gather and the copies to the host), the permutation 4,
// the routing weights' all-to-all 1, the sort by local expert 2, the sort
// back 2, the way back 1: 28; backward 11. The permutations move each token
// once and its 8 copies (both ways), the sorts read and write every copy.
TEST(MoeDispatch, MegatronCoreRunsTheRoutersTheDispatchersAndThePermutationsKernels) {
  const driver::Simulation ep8 = qwen("framework=megatron,ep=8,gbs=16,mbs=1,dtype=bf16,zero=1");
  const Glue forward = glue(ep8, plan::Phase::kForward);
  const Glue backward = glue(ep8, plan::Phase::kBackward);
  EXPECT_EQ(forward.launches, 28);
  EXPECT_EQ(backward.launches, 11);
  EXPECT_EQ(forward.works, 4);
  EXPECT_DOUBLE_EQ(forward.bytes, kRouted * (2 * 9.0 / 8 + 2 * 2));
  EXPECT_DOUBLE_EQ(backward.bytes, forward.bytes);
  // Without expert parallelism no all-gather, no all-to-all, one copy to the
  // host; the 128 local experts are still sorted.
  const driver::Simulation ep1 = qwen("framework=megatron,gbs=16,mbs=1,dtype=bf16,zero=1");
  EXPECT_EQ(glue(ep1, plan::Phase::kForward).launches, 6 + 3 + 4 + 2 + 2 + 1);
  EXPECT_EQ(glue(ep1, plan::Phase::kBackward).launches, 7 + 1 + 1 + 1);
  // An eager PyTorch model: the permutations' bytes, one kernel each way.
  const driver::Simulation eager = qwen("framework=pytorch,ep=8,gbs=16,mbs=1,dtype=bf16,zero=1");
  EXPECT_EQ(glue(eager, plan::Phase::kForward, true).works, 2);
  EXPECT_DOUBLE_EQ(glue(eager, plan::Phase::kForward, true).bytes, kRouted * 2 * 9.0 / 8);
}

// The routing, the counts and the permutation run before the dispatcher's
// sync: the host waits for them, then launches the rest.
TEST(MoeDispatch, TheSyncWaitsForTheRoutingAndThePermutation) {
  const driver::Simulation sim = qwen("framework=megatron,ep=8,gbs=16,mbs=1,dtype=bf16,zero=1");
  int synced = 0;
  for (const plan::Task& t : sim.tasks.tasks) {
    const plan::Kernel& k = sim.tasks.kernels[static_cast<std::size_t>(t.payload)];
    if (t.rank != 0 || t.kind != plan::TaskKind::kCompute || !k.host_sync) continue;
    ASSERT_FALSE(k.ops.empty());
    EXPECT_EQ(k.ops.back().eager_launches, 22);
    EXPECT_DOUBLE_EQ(k.ops.back().bytes_moved.value(), kRouted * 9.0 / 8);
    ++synced;
  }
  EXPECT_EQ(synced, 48 * 2);  // 48 MoE blocks, 2 micro-batches
}

// The host launches them: the replay's launch count of the kernel the sync
// ends is its GEMM's and its norm's and the 22 of the routing, the counts
// and the permutation.
TEST(MoeDispatch, TheHostLaunchesEveryOneOfThem) {
  const driver::Simulation sim = qwen("framework=megatron,ep=8,gbs=16,mbs=1,dtype=bf16,zero=1");
  for (const plan::Task& t : sim.tasks.tasks) {
    const auto k = static_cast<std::size_t>(t.payload);
    if (t.rank != 0 || t.kind != plan::TaskKind::kCompute || !sim.tasks.kernels[k].host_sync) continue;
    int others = 0;
    for (const hw::OpWork& w : sim.tasks.kernels[k].ops) others += w.eager_launches == 22 ? 0 : hw::host_launches(w);
    EXPECT_EQ(sim.costs.kernel_launches[k], static_cast<std::uint32_t>(others + 22));
    EXPECT_GE(others, 2);  // at least the router's GEMM and the norm before it
    return;
  }
  FAIL() << "no dispatcher sync";
}

// A collective right after another, with no kernel between, works on its
// output and waits for it: under sequence parallelism, the tp all-gather of
// the tokens and then their dispatch (experts split over tp, not an expert
// grid). Until 2026-11-28 the second waited for the kernel before both, and
// on another stream nothing waited for the first (a combine's all-to-all
// and the tp all-reduce after it ran side by side).
TEST(MoeDispatch, ACollectiveRightAfterAnotherWaitsForIt) {
  const driver::Simulation sim = driver::simulate(
      {"mixtral-8x7b", "superpod-h100", "tp=2,sp=on,ep=8,gbs=64,zero=1", 4, std::nullopt, std::nullopt, false, {}, {}});
  const plan::TaskGraph& g = sim.tasks;
  int chained = 0;
  std::int64_t previous = -1;  // the rank's last task, if a collective
  for (std::uint32_t id = 0; id < g.tasks.size(); ++id) {
    const plan::Task& t = g.tasks[id];
    if (t.rank != g.tasks[0].rank || t.stream == plan::Stream::kDpComm) continue;
    if (t.kind != plan::TaskKind::kComm) {
      previous = -1;
      continue;
    }
    if (previous >= 0 && g.tasks[static_cast<std::size_t>(previous)].stream != t.stream) {
      bool waits = false;
      for (std::uint32_t d = t.deps_begin; d < t.deps_end; ++d) waits = waits || g.deps[d] == previous;
      EXPECT_TRUE(waits) << "task " << id;
      ++chained;
    }
    previous = id;
  }
  EXPECT_GT(chained, 0);
}

// Megatron-Core's partial CUDA graphs (cuda_graph=moe_router+moe_preprocess):
// the pre-MLP norm, the router's GEMM, the routing, the counts and the
// permutation replay as one graph per pass; the copies to the host (4 with
// ep > 1) stay outside it. With moe_router alone the counts and the
// permutation launch as before.
TEST(MoeDispatch, CudaGraphsOfTheRouterAndThePreprocessingLaunchOnce) {
  const std::string base = "framework=megatron,ep=8,gbs=16,mbs=1,dtype=bf16,zero=1";
  const driver::Simulation both = qwen(base + ",cuda_graph=moe_router+moe_preprocess");
  EXPECT_EQ(glue(both, plan::Phase::kForward).launches, (1 + 4) + 3 + 2 + 1);
  EXPECT_EQ(glue(both, plan::Phase::kBackward).launches, 1 + 2 + 1 + 1);
  const driver::Simulation router = qwen(base + ",cuda_graph=moe_router");
  EXPECT_EQ(glue(router, plan::Phase::kForward).launches, (1 + 12 + 4) + 3 + 2 + 1);
  EXPECT_EQ(glue(router, plan::Phase::kBackward).launches, (1 + 1) + 2 + 1 + 1);
  // The norm and the router's GEMM are inside the graph: the host launches neither.
  int graphed = 0;
  for (const plan::Kernel& k : both.tasks.kernels) {
    for (const hw::OpWork& w : k.ops) {
      if (w.graphed) {
        EXPECT_EQ(hw::host_launches(w), 0);
        ++graphed;
      }
    }
  }
  EXPECT_GT(graphed, 0);
  // Fewer launches, a shorter step on these host-bound small experts; the GPU's work is the same.
  const driver::Simulation eager = qwen(base);
  EXPECT_LT(both.timeline.makespan.count, eager.timeline.makespan.count);
  EXPECT_NEAR(both.report.hardware_tflops_per_gpu * static_cast<double>(both.timeline.makespan.count),
                   eager.report.hardware_tflops_per_gpu * static_cast<double>(eager.timeline.makespan.count),
              1e-6 * eager.report.hardware_tflops_per_gpu * static_cast<double>(eager.timeline.makespan.count));
}
