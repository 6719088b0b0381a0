// libdtsim_cuda.so's entry point: exec::load_cuda_backend() opens this
// library and calls dtsim_create_cuda_backend.
#include <iostream>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "dtsim/cuda/device_info.hpp"
#include "dtsim/cuda/gpu_calibration.hpp"
#include "dtsim/cuda/gpu_executor.hpp"
#include "dtsim/exec/gpu_backend.hpp"

namespace dtsim::cuda {
namespace {

class CudaBackend final : public exec::GpuBackend {
 public:
  nlohmann::json calibrate(const exec::GpuCalibrationOptions& options) override { return calibrate_gpu(options, std::cerr); }
  exec::Execution execute(const plan::TaskGraph& graph, const plan::Timeline& order,
                          const exec::GpuExecuteOptions& options) override {
    return execute_on_gpu(graph, order, options);
  }
  nlohmann::json describe() override { return describe_gpu(); }
};

}  // namespace
}  // namespace dtsim::cuda

extern "C" dtsim::exec::GpuBackend* dtsim_create_cuda_backend(std::string* why) {
  int gpus = 0;
  const cudaError_t status = cudaGetDeviceCount(&gpus);
  if (status != cudaSuccess || gpus < 1) {
    *why = status != cudaSuccess ? fmt::format("no usable GPU: {}", cudaGetErrorString(status)) : "no GPU on this machine";
    return nullptr;
  }
  return new dtsim::cuda::CudaBackend();
}
