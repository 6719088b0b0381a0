#pragma once
// The real executor, CUDA backend: runs a one-GPU plan's tasks in the order
// the simulated timeline started them on one CUDA stream: compute tasks
// launch the kernel_calls() of their ops (cuBLASLt GEMMs of the op's shapes
// in the plan's dtype, the streaming kernels over its bytes), with a CUDA
// event between tasks for their spans. Weights, gradients and optimizer state
// are allocated up front; activations through CUDA's stream-ordered pool
// (cudaMallocAsync, kept cached as a framework's allocator keeps its
// blocks), whose high-water mark is the measured activation peak.
#include "dtsim/exec/gpu_backend.hpp"

namespace dtsim::cuda {

/// Throws std::invalid_argument for a graph of more than one rank or with
/// communication tasks (one GPU per process; several through MPI are not built).
exec::Execution execute_on_gpu(const plan::TaskGraph& graph, const plan::Timeline& order,
                               const exec::GpuExecuteOptions& options);

}  // namespace dtsim::cuda
