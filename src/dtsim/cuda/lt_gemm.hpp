#pragma once
// GEMMs through cuBLASLt as frameworks run them: the heuristic's best
// algorithm for the shape (cached per shape, as PyTorch and Transformer
// Engine cache theirs), fp32 accumulation, a 32 MiB workspace, strided
// batches for a call's `count` GEMMs. Every dtype runs "TN" (A transposed),
// the layout cuBLASLt requires for FP8 on Hopper and Blackwell.
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "dtsim/cuda/device_kernels.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/graph.hpp"

namespace dtsim::cuda {

/// A device buffer that grows and is filled with random values of one type when it does.
class DeviceBuffer {
 public:
  void release();
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void reserve(std::size_t bytes, Element fill, std::uint32_t seed, cudaStream_t stream);
  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// The element types of a GEMM in a plan's dtype.
struct GemmTypes {
  Element inputs, output;
};
/// Throws std::invalid_argument for a dtype cuBLASLt has no GEMM for here (fp4).
GemmTypes gemm_types(hw::Dtype dtype);

class LtGemm {
 public:
  explicit LtGemm(cudaStream_t stream);
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm();

  /// Whether cuBLASLt has an algorithm for the call on this GPU (fp8 needs sm_89+).
  bool supported(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype);
  /// The dtype the call runs in: `dtype`, or bf16 for an FP8 call cuBLASLt
  /// has no algorithm for (FP8 needs dimensions divisible by 16: a 50257-word
  /// vocabulary's output layer), as frameworks keep such a layer in bf16.
  hw::Dtype runnable(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype);
  /// Grows the operand buffers for the call; call before anything is timed.
  void reserve(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype);
  /// D = A^T B for `count` GEMMs of the shape, enqueued on the stream.
  void run(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype);
  /// Device memory the call's operands need (inputs and output).
  std::size_t operand_bytes(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype);
  /// Frees the operand buffers (they grow again on the next reserve).
  void release_operands();
  /// Operands and workspace held on the device.
  [[nodiscard]] std::size_t device_bytes() const;
  [[nodiscard]] std::size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  struct Plan;
  const Plan* plan(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<Element, DeviceBuffer> a_, b_;  // inputs by element type
  DeviceBuffer d_;                          // the output, any type
  std::map<std::string, std::unique_ptr<Plan>> plans_;  // by shape, count and dtype; null: unsupported
};

}  // namespace dtsim::cuda
