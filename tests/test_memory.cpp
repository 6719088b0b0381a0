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

TEST(Memory, ZeroStagesShardOverDataParallelRanks) {
  const double psi = 1e9, n = 8;
  auto total = [](const plan::StaticMemory& m) { return (m.params + m.grads + m.optimizer).value(); };
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 1))), 4 * psi + 4 * psi + 8 * psi / n);
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 2))), 4 * psi + (4 + 8) * psi / n);
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 3))), 16 * psi / n);
}
