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

// Rajbhandari et al. (ZeRO): mixed-precision Adam holds 2 + 2 + 12 = 16 bytes per parameter.
TEST(Memory, MixedPrecisionAdamHoldsSixteenBytesPerParameter) {
  plan::StaticMemory m = plan::static_memory(1e9, with(8, 0));
  EXPECT_DOUBLE_EQ((m.params + m.grads + m.optimizer).value(), 16e9);
  plan::StaticMemory fp32 = plan::static_memory(1e9, with(8, 0, hw::Dtype::kFp32));
  EXPECT_DOUBLE_EQ((fp32.params + fp32.grads + fp32.optimizer).value(), 16e9);
}

TEST(Memory, ZeroStagesShardOverDataParallelRanks) {
  const double psi = 1e9, n = 8;
  auto total = [](const plan::StaticMemory& m) { return (m.params + m.grads + m.optimizer).value(); };
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 1))), 2 * psi + 2 * psi + 12 * psi / n);
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 2))), 2 * psi + (2 + 12) * psi / n);
  EXPECT_DOUBLE_EQ(total(plan::static_memory(psi, with(8, 3))), 16 * psi / n);
}
