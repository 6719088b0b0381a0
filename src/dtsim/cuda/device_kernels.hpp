#pragma once
// The backend's own kernels (device_kernels.cu): the streaming kernels that
// stand for an op's memory-bound work, as the CPU backend's cpu_kernels do,
// on 16-bit elements (activations are bf16 or fp16 in every plan a GPU runs),
// plus filling GEMM operands and an empty kernel for launch overhead.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace dtsim::cuda {

/// The element type a buffer is filled with.
enum class Element : int { kFp32, kBf16, kFp16, kFp8E4M3 };
std::size_t element_size(Element e);

/// Values spread over [-1, 1) from a hash of the index (random data draws
/// the power a training step draws; zeros run faster than real tensors).
void fill_random(void* data, std::size_t elements, Element type, std::uint32_t seed, cudaStream_t stream);

/// The row length of the reduction kernel: a norm over a 4096-wide hidden state.
inline constexpr std::size_t kReductionRow = 4096;

/// c = a (16-bit elements).
void copy(const void* a, void* c, std::size_t elements, cudaStream_t stream);
/// c = a + b.
void add(const void* a, const void* b, void* c, std::size_t elements, cudaStream_t stream);
/// Each row of kReductionRow: c = a * rsqrt(mean(a^2)) (RMSNorm), one read, one write.
void rms_norm(const void* a, void* c, std::size_t rows, cudaStream_t stream);
/// A kernel that does nothing: what a launch costs.
void empty(cudaStream_t stream);

}  // namespace dtsim::cuda
