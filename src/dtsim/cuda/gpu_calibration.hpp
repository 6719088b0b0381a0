#pragma once
// dtsim-calibrate --backend cuda: cuBLASLt GEMM grids per dtype, whole GEMM
// calls as a plan launches them, the streaming kernels over sizes, launch
// overhead and NCCL collectives, into a dtsim.profile/1 document.
#include <ostream>

#include <nlohmann/json.hpp>

#include "dtsim/exec/gpu_backend.hpp"

namespace dtsim::cuda {

/// Progress goes to `log` (one line per family), the profile is returned.
nlohmann::json calibrate_gpu(const exec::GpuCalibrationOptions& options, std::ostream& log);

}  // namespace dtsim::cuda
