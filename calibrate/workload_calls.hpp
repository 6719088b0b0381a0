#pragma once
// The GEMM calls the bundled transformer workloads lower to under tensor
// parallelism (one micro-batch, the model's own sequence length), for a GPU
// calibration that measures them whole: the shapes people train, not only a
// grid's.
#include <vector>

#include "dtsim/exec/gpu_backend.hpp"

namespace dtsim::calibrate {

/// Distinct calls over every bundled transformer and each tp in `tps`
/// (skipping a tp that does not divide its heads), in each dtype of
/// `dtypes` that is bf16 or fp8 (attention's stay bf16 under fp8).
std::vector<exec::GpuCalibrationOptions::Call> workload_calls(const std::vector<int>& tps,
                                                              const std::vector<hw::Dtype>& dtypes);

}  // namespace dtsim::calibrate
