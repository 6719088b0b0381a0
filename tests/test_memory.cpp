#include <gtest/gtest.h>

#include "dtsim/plan/memory.hpp"

using namespace dtsim;

namespace {
plan::ResolvedStrategy with(int dp, int zero, hw::Dtype dtype = hw::Dtype::kBf16) {
  plan::ResolvedStrategy r;
  r.s.dp = dp;
  r.s.zero = zero;
  r.s.dtype = dtype;
  return r;
}
}  // namespace

// PyTorch autocast keeps fp32 weights and gradients: 4 + 4 + 8 = 16 bytes per
// parameter; Megatron-Core keeps 16-bit weights, fp32 main gradients and
// fp32 master weights and moments: 2 + 4 + 12 = 18.
TEST(Memory, MixedPrecisionAdamHoldsSixteenOrEighteenBytesPerParameter) {
  plan::StaticMemory m = plan::static_memory(1e9, with(8, 0));
  EXPECT_DOUBLE_EQ((m.params + m.grads + m.optimizer).value(), 16e9);
  plan::ResolvedStrategy megatron = with(8, 0);
  megatron.s.framework = plan::Framework::kMegatron;
  plan::StaticMemory mc = plan::static_memory(1e9, megatron);
  EXPECT_DOUBLE_EQ(mc.params.value(), 2e9);
  EXPECT_DOUBLE_EQ(mc.grads.value(), 4e9);
  EXPECT_DOUBLE_EQ((mc.params + mc.grads + mc.optimizer).value(), 18e9);
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(megatron.s).reduce, 4.0);  // main_grad is reduced in fp32
  plan::StaticMemory fp32 = plan::static_memory(1e9, with(8, 0, hw::Dtype::kFp32));
  EXPECT_DOUBLE_EQ((fp32.params + fp32.grads + fp32.optimizer).value(), 16e9);
}

// Megatron-LM turns accumulate_allreduce_grads_in_fp32 on under --bf16, and
// FP8 training runs on --bf16: fp32 main gradients unless the run says
// otherwise (--grad-reduce-in-bf16, Megatron-Bridge's grad_reduce_in_fp32 =
// False), and then the buffer holds bf16 too. fp16 runs keep 16-bit ones.
TEST(Memory, GradientsAreReducedInTheFrameworksDtypeUnlessTheRunSaysOtherwise) {
  plan::Strategy megatron;
  megatron.framework = plan::Framework::kMegatron;
  megatron.dtype = hw::Dtype::kFp8;
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(megatron).reduce, 4.0);
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(megatron).grads, 4.0);
  megatron.grad_reduce = hw::Dtype::kBf16;
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(megatron).reduce, 2.0);
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(megatron).grads, 2.0);
  megatron.grad_reduce.reset();
  megatron.dtype = hw::Dtype::kFp16;
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(megatron).reduce, 2.0);
  // PyTorch: DDP reduces autocast's fp32 gradients, FSDP in its param_dtype;
  // a reduce_dtype of fp32 doubles FSDP's reduce-scatter, not its memory.
  plan::Strategy fsdp;
  fsdp.zero = 3;
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(fsdp).reduce, 2.0);
  fsdp.grad_reduce = hw::Dtype::kFp32;
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(fsdp).reduce, 4.0);
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(fsdp).grads, 4.0);
  plan::Strategy ddp;
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(ddp).reduce, 4.0);
  ddp.grad_reduce = hw::Dtype::kBf16;
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(ddp).reduce, 2.0);
}

TEST(Memory, ZeroStagesShardOverDataParallelRanks) {
  const double psi = 1e9, n = 8;
  auto total = [](const plan::StaticMemory& m) { return (m.params + m.grads + m.optimizer).value(); };
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 1))), 4 * psi + 4 * psi + 8 * psi / n);
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 2))), 4 * psi + (4 + 8) * psi / n);
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 3))), 16 * psi / n);
}

// DeepSpeed casts the model itself to bf16 or fp16: 2-byte weights and
// gradients; the fp32 master partition sits with Adam's moments (12 bytes,
// sharded from ZeRO-1); gradients are reduced in the model's dtype
// (communication_data_type's default). A ZeRO-2 run on 8 ranks holds
// 2 + 14/8 bytes a parameter where PyTorch's autocast holds 4 + 12/8.
TEST(Memory, DeepSpeedHoldsASixteenBitModelAndKeepsItsFp32MasterWeightsInTheOptimizer) {
  const double psi = 1e9;
  plan::ResolvedStrategy ds = with(8, 2);
  ds.s.framework = plan::Framework::kDeepspeed;
  const plan::StaticMemory m = plan::static_memory(psi, ds);
  EXPECT_DOUBLE_EQ(m.params.value(), 2 * psi);
  EXPECT_DOUBLE_EQ(m.grads.value(), 2 * psi / 8);
  EXPECT_DOUBLE_EQ(m.optimizer.value(), 12 * psi / 8);
  const plan::StaticMemory pytorch = plan::static_memory(psi, with(8, 2));
  EXPECT_DOUBLE_EQ((pytorch.params + pytorch.grads + pytorch.optimizer).value(), 4 * psi + 12 * psi / 8);
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(ds.s).reduce, 2.0);
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(ds.s).gather, 2.0);
  ds.s.grad_reduce = hw::Dtype::kFp32;  // communication_data_type "fp32": the reduction widens, the gradients do not
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(ds.s).reduce, 4.0);
  EXPECT_DOUBLE_EQ(plan::bytes_per_param(ds.s).grads, 2.0);
  // ZeRO-1 keeps every gradient; ZeRO-3 shards all 16 bytes.
  ds.s.grad_reduce.reset();
  ds.s.zero = 1;
  EXPECT_DOUBLE_EQ(plan::static_memory(psi, ds).grads.value(), 2 * psi);
  ds.s.zero = 3;
  const plan::StaticMemory z3 = plan::static_memory(psi, ds);
  EXPECT_DOUBLE_EQ((z3.params + z3.grads + z3.optimizer).value(), 16 * psi / 8);
  // Without bf16 or fp16 the model stays fp32 and there is no master copy.
  const plan::StaticMemory fp32 = plan::static_memory(psi, [] {
    plan::ResolvedStrategy r = with(8, 0, hw::Dtype::kFp32);
    r.s.framework = plan::Framework::kDeepspeed;
    return r;
  }());
  EXPECT_DOUBLE_EQ((fp32.params + fp32.grads + fp32.optimizer).value(), 16 * psi);
  // DeepSpeed builds its FusedAdam.
  EXPECT_TRUE(ds.s.fused_optimizer());
}
