#pragma once
// The memory-bound kernels an op's bytes stand for, on the GPU: the same
// three families as the CPU backend (copy, elementwise, reduction) over the
// same bytes, so a measured profile costs what an execution runs.
#include <cstddef>

#include <cuda_runtime.h>

#include "dtsim/core/units.hpp"
#include "dtsim/cuda/lt_gemm.hpp"
#include "dtsim/hw/kernel_calls.hpp"

namespace dtsim::cuda {

/// 16-bit elements per array a kernel of `family` touches when it moves
/// `bytes` in all: copy and reduction read one array and write one,
/// elementwise reads two and writes one; at least a reduction row.
std::size_t stream_elements(hw::KernelFamily family, core::Bytes bytes);

/// The most elements a streaming buffer holds: 256 Mi (512 MiB of bf16). A
/// kernel over more (a cross entropy over fp32 logits streams tens of GB)
/// runs as several launches over the buffers: far past the 50 MB L2, the
/// time is the bytes over HBM bandwidth either way, and the scratch stays
/// small beside the plan's own memory.
inline constexpr std::size_t kMaxStreamElements = std::size_t{1} << 28;

class StreamKernels {
 public:
  explicit StreamKernels(cudaStream_t stream) : stream_(stream) {}
  void reserve(hw::KernelFamily family, core::Bytes bytes);
  void run(hw::KernelFamily family, core::Bytes bytes);
  [[nodiscard]] std::size_t device_bytes() const { return a_.bytes() + b_.bytes() + c_.bytes(); }

 private:
  void launch(hw::KernelFamily family, std::size_t elements);
  cudaStream_t stream_;
  DeviceBuffer a_, b_, c_;
};

}  // namespace dtsim::cuda
