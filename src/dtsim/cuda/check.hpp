#pragma once
// Errors from the CUDA runtime, cuBLASLt and NCCL as exceptions that name the
// call's site: a calibration or a run stops with one line, not a crash.
#include <source_location>
#include <stdexcept>
#include <string>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace dtsim::cuda {

[[noreturn]] void fail(const std::string& library, const std::string& message, const std::source_location& where);

inline void check(cudaError_t status, const std::source_location where = std::source_location::current()) {
  if (status != cudaSuccess) fail("CUDA", cudaGetErrorString(status), where);
}
inline void check(cublasStatus_t status, const std::source_location where = std::source_location::current()) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt", cublasLtGetStatusString(status), where);
}
inline void check(ncclResult_t status, const std::source_location where = std::source_location::current()) {
  if (status != ncclSuccess) fail("NCCL", ncclGetErrorString(status), where);
}

}  // namespace dtsim::cuda
