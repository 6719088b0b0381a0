#pragma once
/// The CPU backend's kernels: fp32 GEMMs through the system BLAS and three
/// streaming kernels. dtsim-calibrate times exactly these and `dtsim run`
/// launches exactly these, so a profile measures what an execution runs.
#include <cstddef>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/hw/kernel_calls.hpp"

namespace dtsim::exec {

class CpuKernels {
 public:
  /// Grows the scratch buffers so that `call` runs without allocating; call
  /// it for every kernel before anything is timed.
  void reserve(const hw::KernelCall& call);
  /// Runs the call (all `count` GEMMs, or one pass over its bytes).
  void run(const hw::KernelCall& call);

  /// C = A x B of the shape, once.
  void gemm(const model::GemmShape& shape);
  void stream(hw::KernelFamily family, core::Bytes bytes);

  /// Largest relative error of a few entries of the last GEMM against a
  /// plain dot product; for checks outside timed loops.
  [[nodiscard]] double check_gemm(const model::GemmShape& shape) const;
  /// Whether the last streaming kernel over `bytes` left what it should.
  [[nodiscard]] bool check_stream(hw::KernelFamily family, core::Bytes bytes) const;

  [[nodiscard]] core::Bytes scratch_bytes() const;

 private:
  static void grow(std::vector<float>& buffer, std::size_t elements, float value);
  std::vector<float> a_, b_, c_;  // GEMM operands; also the streaming kernels' inputs and output
};

/// Elements a streaming kernel touches per array for `bytes` moved in all.
std::size_t stream_elements(hw::KernelFamily family, core::Bytes bytes);

/// Uses one BLAS thread: each MPI rank owns one core.
void use_one_blas_thread();
/// The BLAS library's own description ("OpenBLAS 0.3.21 ...").
const char* blas_description();

}  // namespace dtsim::exec
