// DeepSpeed's ZeRO-1/2 gradient path (plan/lower_deepspeed.cpp), as
// deepspeed/runtime/zero/stage_1_and_2.py runs it: the hooks' copies into the
// bucket, each bucket all-reduced, the compute stream waiting for the
// previous bucket, the host's sync after the backward and the step's bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dtsim/driver/simulation.hpp"

using namespace dtsim;

namespace {

driver::Simulation run(const std::string& strategy) {
  return driver::simulate({"gpt3-1.3b", "dgx-a100", strategy, 1, std::nullopt, std::nullopt, false, {}, {}});
}

const plan::Kernel& kernel_of(const driver::Simulation& s, const plan::Task& t) {
  return s.tasks.kernels[static_cast<std::size_t>(t.payload)];
}

bool named(const plan::Kernel& k, const std::string& suffix) {
  return k.name.size() >= suffix.size() && k.name.compare(k.name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

double params_of(const driver::Simulation& s) {
  double params = 0;
  for (const model::Layer& l : s.graph.layers) {
    for (const model::Op& op : l.ops) params += op.params;
  }
  return params;
}

// The backward's gradient reductions on the data-parallel stream, in program order.
std::vector<std::uint32_t> reductions(const driver::Simulation& s) {
  std::vector<std::uint32_t> ids;
  for (std::uint32_t id = 0; id < s.tasks.tasks.size(); ++id) {
    const plan::Task& t = s.tasks.tasks[id];
    if (t.kind == plan::TaskKind::kComm && t.stream == plan::Stream::kDpComm && t.phase == plan::Phase::kBackward) {
      ids.push_back(id);
    }
  }
  return ids;
}

std::vector<std::uint32_t> deps_of(const driver::Simulation& s, const plan::Task& t) {
  return {s.tasks.deps.begin() + t.deps_begin, s.tasks.deps.begin() + t.deps_end};
}

bool has(const std::vector<std::uint32_t>& v, std::uint32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

// use_multi_rank_bucket_allreduce, DeepSpeed's default since v0.12.4: each
// bucket is all-reduced, where PyTorch's ZeRO-2 (FSDP SHARD_GRAD_OP)
// reduce-scatters the same bytes.
TEST(DeepSpeed, EachBucketIsAllReduced) {
  const driver::Simulation ds = run("framework=deepspeed,zero=2,dp=8,mbs=1,gbs=8,overlap=on");
  const driver::Simulation torch = run("framework=pytorch,zero=2,dp=8,mbs=1,gbs=8,grad_reduce=bf16");
  ASSERT_FALSE(reductions(ds).empty());
  for (std::uint32_t id : reductions(ds)) {
    EXPECT_EQ(ds.tasks.calls[static_cast<std::size_t>(ds.tasks.tasks[id].payload)].op, plan::CommOp::kAllReduce);
  }
  for (std::uint32_t id : reductions(torch)) {
    EXPECT_EQ(torch.tasks.calls[static_cast<std::size_t>(torch.tasks.tasks[id].payload)].op, plan::CommOp::kReduceScatter);
  }
}

// contiguous_gradients: every backward that reduces (each one under ZeRO-2,
// the step's last under ZeRO-1) copies its 16-bit gradients into the bucket
// on the compute stream, read and written: 4 bytes a parameter.
TEST(DeepSpeed, TheHooksCopyEveryGradientIntoTheBucket) {
  auto copied = [](const driver::Simulation& s) {
    double bytes = 0;
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.kind != plan::TaskKind::kCompute || !named(kernel_of(s, t), ".grad_to_bucket")) continue;
      EXPECT_EQ(t.stream, plan::Stream::kCompute);
      for (const hw::OpWork& w : kernel_of(s, t).ops) bytes += w.bytes_moved.value();
    }
    return bytes;
  };
  const driver::Simulation two = run("framework=deepspeed,zero=2,dp=8,mbs=1,gbs=32");
  const double params = params_of(two);
  EXPECT_NEAR(copied(two), 4 * 4.0 * params, 1e-6 * params);  // four micro-batches
  EXPECT_NEAR(copied(run("framework=deepspeed,zero=1,dp=8,mbs=1,gbs=32")), 4.0 * params, 1e-6 * params);
  EXPECT_EQ(copied(run("framework=pytorch,zero=2,dp=8,mbs=1,gbs=32")), 0.0);
}

// average_tensor: before a bucket's reduction is launched the compute stream
// waits for the reduction stream, so the backward goes on only once the
// bucket before it is reduced. Without overlap_comm the reductions run on
// the compute stream and nothing waits.
TEST(DeepSpeed, TheBackwardWaitsForThePreviousBucket) {
  const driver::Simulation s = run("framework=deepspeed,zero=2,dp=8,mbs=1,gbs=8,overlap=on,bucket=100 MiB");
  const std::vector<std::uint32_t> reduced = reductions(s);
  ASSERT_GE(reduced.size(), 3u);
  std::size_t waits = 0;
  for (std::uint32_t id = 0; id < s.tasks.tasks.size(); ++id) {
    const plan::Task& t = s.tasks.tasks[id];
    if (t.kind != plan::TaskKind::kCompute || kernel_of(s, t).name != "deepspeed.wait_for_reduction") continue;
    EXPECT_TRUE(kernel_of(s, t).ops.empty());  // a stream wait, no kernel
    // It waits for the reduction launched before the latest one.
    std::uint32_t latest = 0, before = 0;
    for (std::uint32_t r : reduced) {
      if (r < id) before = std::exchange(latest, r);
    }
    EXPECT_TRUE(has(deps_of(s, t), before)) << id;
    ++waits;
  }
  EXPECT_EQ(waits, reduced.size() - 1);
  for (const plan::Kernel& k : run("framework=deepspeed,zero=2,dp=8,mbs=1,gbs=8,overlap=off,bucket=100 MiB").tasks.kernels) {
    EXPECT_NE(k.name, "deepspeed.wait_for_reduction");
  }
}

// independent_gradient_partition_epilogue synchronizes the device under
// overlap_comm: the host launches the step once every reduction is done.
TEST(DeepSpeed, TheHostWaitsForTheReductionsBeforeTheStep) {
  const driver::Simulation s = run("framework=deepspeed,zero=2,dp=8,mbs=1,gbs=8,overlap=on");
  std::optional<std::uint32_t> sync, adam;
  for (std::uint32_t id = 0; id < s.tasks.tasks.size(); ++id) {
    const plan::Task& t = s.tasks.tasks[id];
    if (t.kind != plan::TaskKind::kCompute) continue;
    if (kernel_of(s, t).name == "deepspeed.sync_after_backward") sync = id;
    if (kernel_of(s, t).name == "optimizer.adam") adam = id;
  }
  ASSERT_TRUE(sync && adam);
  EXPECT_TRUE(kernel_of(s, s.tasks.tasks[*sync]).host_sync);
  EXPECT_LT(*sync, *adam);
  for (std::uint32_t r : reductions(s)) EXPECT_TRUE(has(deps_of(s, s.tasks.tasks[*sync]), r));
}

// The step per parameter of the partition: the norm over g.double() (18),
// the flattened gradients cast to fp32 (10), unscale and clip (8), FusedAdam
// (28) and the 16-bit copy (6); fp16's overflow check 28 more. Megatron's
// step over fp32 main gradients streams 38 a parameter of its shard, and
// zeroes its whole buffer (4 a parameter of the stage: 32 of the shard's 8).
TEST(DeepSpeed, TheStepStreamsSeventyBytesAParameter) {
  auto step_bytes = [](const driver::Simulation& s) {
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.kind == plan::TaskKind::kCompute && kernel_of(s, t).name == "optimizer.adam") {
        return kernel_of(s, t).ops.at(0).bytes_moved.value();
      }
    }
    return 0.0;
  };
  const driver::Simulation bf16 = run("framework=deepspeed,zero=2,dp=8,mbs=1,gbs=8,dtype=bf16");
  const double partition = params_of(bf16) / 8;
  EXPECT_NEAR(step_bytes(bf16), 70.0 * partition, 1e-6 * partition);
  EXPECT_NEAR(step_bytes(run("framework=deepspeed,zero=1,dp=8,mbs=1,gbs=8,dtype=fp16")), 98.0 * partition, 1e-6 * partition);
  EXPECT_NEAR(step_bytes(run("framework=megatron,zero=1,dp=8,mbs=1,gbs=8,dtype=bf16")), 70.0 * partition, 1e-6 * partition);
}
