// What frameworks do to gradients besides computing and reducing them:
// Megatron's in-place average of each bucket before its collective, and the
// dense table an embedding's backward writes (and Megatron adds into its
// main gradient). Each is a streaming kernel whose bytes the code fixes.
#include <gtest/gtest.h>

#include <string>

#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"

using namespace dtsim;

namespace {

driver::Simulation run(const std::string& strategy, int nodes = 1) {
  return driver::simulate({"gpt3-1.3b", "dgx-a100", strategy, nodes, std::nullopt, std::nullopt, false, {}, {}});
}

const plan::Kernel& kernel_of(const driver::Simulation& s, std::uint32_t id) {
  return s.tasks.kernels[static_cast<std::size_t>(s.tasks.tasks[id].payload)];
}

double bytes_of(const plan::Kernel& k, std::optional<model::OpKind> kind = std::nullopt) {
  double bytes = 0;
  for (const hw::OpWork& w : k.ops) {
    if (!kind || w.kind == *kind) bytes += w.bytes_moved.value();
  }
  return bytes;
}

bool ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every parameter of the model (one rank's share under no sharding).
double all_params(const driver::Simulation& s) {
  double p = 0;
  for (const model::Layer& l : s.graph.layers) {
    for (const model::Op& op : l.ops) p += op.params;
  }
  return p;
}

// The lookup table's parameters on one rank.
double table_params(const driver::Simulation& s, int tp) {
  for (const model::Layer& l : s.graph.layers) {
    for (const model::Op& op : l.ops) {
      if (op.kind == model::OpKind::kEmbedding) return op.params / tp;
    }
  }
  return 0;
}

// The embedding backward's lookup bytes, per micro-batch.
double embedding_backward_bytes(const driver::Simulation& s) {
  for (const plan::Kernel& k : s.tasks.kernels) {
    if (k.name == "embedding.bwd") return bytes_of(k, model::OpKind::kEmbedding);
  }
  return 0;
}

}  // namespace

// start_grad_sync: grad_data *= gradient_scaling_factor (1/dp) on the compute
// stream before each bucket's reduce-scatter or all-reduce, read and written.
TEST(GradientUpkeep, MegatronAveragesEachBucketInPlaceBeforeItsCollective) {
  for (const std::string& strategy : {std::string("framework=megatron,dp=8,mbs=1,gbs=16,zero=1"),
                                      std::string("framework=megatron,dp=8,mbs=1,gbs=16,overlap=off")}) {
    const driver::Simulation s = run(strategy);
    int reductions = 0;
    for (std::uint32_t id = 0; id < s.tasks.tasks.size(); ++id) {
      const plan::Task& t = s.tasks.tasks[id];
      if (t.kind != plan::TaskKind::kComm || t.stream != plan::Stream::kDpComm || t.phase != plan::Phase::kBackward) continue;
      ++reductions;
      const double reduced = s.tasks.calls[static_cast<std::size_t>(t.payload)].bytes.value();
      bool scaled = false;
      for (std::uint32_t d = t.deps_begin; d < t.deps_end; ++d) {
        const std::uint32_t dep = s.tasks.deps[d];
        if (s.tasks.tasks[dep].kind != plan::TaskKind::kCompute || !ends_with(kernel_of(s, dep).name, "grad_scale")) continue;
        EXPECT_NEAR(bytes_of(kernel_of(s, dep)), 2.0 * reduced, 1e-9 * reduced) << strategy;
        EXPECT_EQ(s.tasks.tasks[dep].stream, plan::Stream::kCompute);
        scaled = true;
      }
      EXPECT_TRUE(scaled) << strategy << ": reduction " << id << " not averaged first";
    }
    EXPECT_GT(reductions, 0) << strategy;
  }
  // PyTorch's DDP and FSDP are not charged it here; one replica reduces nothing.
  for (const std::string& strategy : {std::string("framework=pytorch,dp=8,mbs=1,gbs=16"), std::string("framework=megatron,dp=1,mbs=1,gbs=2")}) {
    for (const plan::Kernel& k : run(strategy).tasks.kernels) EXPECT_FALSE(ends_with(k.name, "grad_scale")) << strategy;
  }
}

// embedding_dense_backward zeroes the rank's whole table before it sums the
// tokens' rows in: 2 bytes a row element in 16 bits, 4 under autocast's fp32
// table; Megatron then adds it into its main gradient (read both, write one).
TEST(GradientUpkeep, AnEmbeddingsGradientIsADenseTable) {
  const driver::Simulation fsdp = run("framework=pytorch,zero=3,dp=8,mbs=1,gbs=8");
  const double table = table_params(fsdp, 1);
  ASSERT_GT(table, 0);
  const double fsdp_bytes = embedding_backward_bytes(fsdp);
  EXPECT_GE(fsdp_bytes, 2.0 * table);
  // Under autocast the table is fp32: 2 more bytes a row element.
  const double autocast_bytes = embedding_backward_bytes(run("framework=pytorch,dp=8,mbs=1,gbs=8"));
  EXPECT_NEAR(autocast_bytes - fsdp_bytes, 2.0 * table, 1e-6 * table);
  // Megatron's fp32 main gradient: 4 + 2 read, 4 written; in bf16, 2 + 2 and 2.
  const double megatron = embedding_backward_bytes(run("framework=megatron,dp=8,mbs=1,gbs=8,grad_reduce=fp32"));
  const double megatron_bf16 = embedding_backward_bytes(run("framework=megatron,dp=8,mbs=1,gbs=8,grad_reduce=bf16"));
  EXPECT_NEAR(megatron - fsdp_bytes, 10.0 * table, 1e-6 * table);
  EXPECT_NEAR(megatron_bf16 - fsdp_bytes, 6.0 * table, 1e-6 * table);
  // Tensor parallelism splits the vocabulary, and the table with it.
  const double tp2 = embedding_backward_bytes(run("framework=megatron,tp=2,dp=4,mbs=1,gbs=8,grad_reduce=fp32"));
  EXPECT_LT(tp2, 0.6 * megatron);
}

// Megatron's optimizer step (megatron/optimizer/optimizer.py; Megatron-Core's
// DistributedOptimizer over its shard), bytes a parameter: fp16 copies its
// 16-bit main gradients to fp32 (6) and unscales them (8), the norm reads
// them (4), FusedAdam moves 28, the fp32 weights are copied into the 16-bit
// ones (6), and the main_grad buffer is zeroed (2 in fp16, 4 in fp32), all
// of it, not the distributed optimizer's shard.
TEST(GradientUpkeep, MegatronsStepMakesItsOwnPassesOverTheGradients) {
  auto step_bytes = [](const driver::Simulation& s) {
    for (const plan::Kernel& k : s.tasks.kernels) {
      if (k.name == "optimizer.adam") return bytes_of(k);
    }
    return 0.0;
  };
  const auto params = all_params;
  const driver::Simulation fp16 = run("framework=megatron,dp=8,mbs=1,gbs=8,dtype=fp16,overlap=off");
  EXPECT_NEAR(step_bytes(fp16), 54.0 * params(fp16), 1e-6 * params(fp16));
  const driver::Simulation bf16 = run("framework=megatron,dp=8,mbs=1,gbs=8,dtype=bf16");
  EXPECT_NEAR(step_bytes(bf16), 42.0 * params(bf16), 1e-6 * params(bf16));  // 38 + 4, no main copy nor unscaling
  const driver::Simulation fp32 = run("framework=megatron,dp=8,mbs=1,gbs=8,dtype=fp32");
  EXPECT_NEAR(step_bytes(fp32), 36.0 * params(fp32), 1e-6 * params(fp32));  // norm, Adam, the buffer
  const driver::Simulation sharded = run("framework=megatron,dp=8,mbs=1,gbs=8,dtype=bf16,zero=1");
  EXPECT_NEAR(step_bytes(sharded), (38.0 / 8 + 4.0) * params(sharded), 1e-6 * params(sharded));
  // PyTorch's loop over apex's FusedAdam: the norm, Adam writing the 16-bit weights, the gradients zeroed.
  const driver::Simulation pytorch = run("framework=pytorch,dp=8,mbs=1,gbs=8,dtype=bf16,optimizer=fused");
  EXPECT_NEAR(step_bytes(pytorch), 38.0 * params(pytorch), 1e-6 * params(pytorch));
}

// Megatron-LM's fp16 runs keep 16-bit main gradients, which its linear
// layers cannot accumulate into inside the weight-gradient GEMM: the DDP
// hook adds each micro-batch's gradient into the buffer (main_grad.add_,
// 6 bytes a parameter), one streaming kernel a block a micro-batch after its
// backward. fp32 main gradients (bf16, or --accumulate-allreduce-grads-in-fp32)
// are accumulated inside the GEMM; PyTorch is not Megatron.
TEST(GradientUpkeep, MegatronsFp16GradientsAreAddedIntoTheirBufferEveryMicroBatch) {
  auto adds = [](const std::string& strategy) {
    const driver::Simulation s = run(strategy);
    int count = 0;
    for (std::uint32_t id = 0; id < s.tasks.tasks.size(); ++id) {
      const plan::Task& t = s.tasks.tasks[id];
      if (t.kind != plan::TaskKind::kCompute || !ends_with(kernel_of(s, id).name, ".main_grad_add")) continue;
      EXPECT_EQ(t.phase, plan::Phase::kBackward);
      const model::Layer& layer = s.graph.layers[static_cast<std::size_t>(t.layer)];
      double params = 0;
      for (const model::Op& op : layer.ops) params += op.kind == model::OpKind::kEmbedding ? 0.0 : op.params;
      EXPECT_NEAR(bytes_of(kernel_of(s, id)), 6.0 * params, 1e-6 * params) << kernel_of(s, id).name;
      ++count;
    }
    return count;
  };
  // gpt3-1.3b: 24 blocks, the embedding layer (its learned positions; the
  // word table adds inside its own backward) and the head (its final norm;
  // the output layer is tied to the table), 4 micro-batches.
  const int layers = 24 + 2;
  EXPECT_EQ(adds("framework=megatron,dp=8,mbs=1,gbs=32,dtype=fp16"), 4 * layers);
  EXPECT_EQ(adds("framework=megatron,dp=8,mbs=1,gbs=32,dtype=fp16,grad_reduce=fp32"), 0);
  EXPECT_EQ(adds("framework=megatron,dp=8,mbs=1,gbs=32,dtype=bf16"), 0);
  EXPECT_EQ(adds("framework=pytorch,dp=8,mbs=1,gbs=32,dtype=fp16"), 0);
}

// DeepSpeed's BF16_Optimizer (bf16_optimizer=on) sums each micro-batch's bf16
// gradients into fp32 ones after the backward (update_hp_grads: the cast and
// the add, 18 bytes a parameter of the stage), before the gradient goes
// upstream; it runs only under bf16 and ZeRO stage 0 (its own sharded step).
TEST(GradientUpkeep, DeepSpeedsBf16OptimizerSumsFp32GradientsEveryMicroBatch) {
  const std::string base = "framework=megatron,pp=2,dp=4,mbs=1,gbs=16,dtype=bf16,zero=1,grad_reduce=fp32";
  const driver::Simulation s = run(base + ",bf16_optimizer=on");
  int sums = 0;
  for (std::uint32_t id = 0; id < s.tasks.tasks.size(); ++id) {
    if (s.tasks.tasks[id].kind != plan::TaskKind::kCompute || !ends_with(kernel_of(s, id).name, ".hp_grads_add")) continue;
    EXPECT_EQ(s.tasks.tasks[id].phase, plan::Phase::kBackward);
    EXPECT_GT(bytes_of(kernel_of(s, id)), 0.0);
    ++sums;
  }
  // One rank a stage is lowered, 4 micro-batches each (gbs 16 over dp 4).
  EXPECT_EQ(sums, 2 * 4);
  double stage_bytes = 0;
  for (const plan::Kernel& k : s.tasks.kernels) {
    if (ends_with(k.name, ".hp_grads_add")) stage_bytes += bytes_of(k);
  }
  const double params = all_params(s);
  EXPECT_NEAR(stage_bytes, 18.0 * params, 1e-6 * params);  // the two stages' kernels: every parameter once
  for (const plan::Kernel& k : run(base).tasks.kernels) EXPECT_FALSE(ends_with(k.name, ".hp_grads_add"));
  EXPECT_GT(s.report.step_time, run(base).report.step_time);
  EXPECT_THROW(run("framework=megatron,dp=8,mbs=1,gbs=8,dtype=fp16,bf16_optimizer=on"), core::InputError);
  EXPECT_THROW(run("framework=megatron,dp=8,mbs=1,gbs=8,dtype=bf16,zero=2,bf16_optimizer=on"), core::InputError);
}
