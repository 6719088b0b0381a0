// The executor's caching allocator: after the first step, a step that frees
// bytes in other pieces than it allocated them must reuse every block; a
// fresh block is page faults the run would time as compute.
#include <gtest/gtest.h>

#include "dtsim/exec/activation_memory.hpp"

namespace {

using dtsim::core::Bytes;
using dtsim::exec::ActivationMemory;

// Two micro-batches of three layers, freed the way lower.cpp frees them: the
// backward of a layer frees saved and kept bytes that straddle blocks.
void one_step(ActivationMemory& memory) {
  for (int microbatch = 0; microbatch < 2; ++microbatch) {
    memory.allocate(Bytes(3000));
    memory.allocate(Bytes(5000));
    memory.allocate(Bytes(7000));
    memory.release(Bytes(4000));  // all of the first block, part of the second
    memory.release(Bytes(11000));
  }
}

TEST(ActivationMemory, ASteadyStepAllocatesNoFreshBlocks) {
  ActivationMemory memory;
  one_step(memory);
  const std::size_t after_first = memory.fresh_allocations();
  EXPECT_GT(after_first, 0u);
  for (int step = 0; step < 10; ++step) one_step(memory);
  EXPECT_EQ(memory.fresh_allocations(), after_first);
}

TEST(ActivationMemory, PeakCountsLiveBytesNotCapacity) {
  ActivationMemory memory;
  memory.allocate(Bytes(8000));
  memory.release(Bytes(8000));
  memory.reset_peak();
  memory.allocate(Bytes(1000));  // reuses the 8000-byte block
  EXPECT_EQ(memory.peak(), 1000u);
  EXPECT_EQ(memory.fresh_allocations(), 1u);
}

TEST(ActivationMemory, ReleasingMoreThanIsLiveStopsAtZero) {
  ActivationMemory memory;
  memory.allocate(Bytes(100));
  memory.release(Bytes(1000));
  memory.allocate(Bytes(100));
  EXPECT_EQ(memory.fresh_allocations(), 1u);
  memory.reset_peak();
  EXPECT_EQ(memory.peak(), 100u);
}

}  // namespace
