#pragma once
/// The GPU backend, as a plugin: dtsim-calibrate --backend cuda and
/// `dtsim run|validate --backend cuda` open libdtsim_cuda.so when they are
/// asked to, so every other command starts without mapping cuBLASLt, cuDNN
/// and NCCL (hundreds of MB), and dtsim builds and runs where CUDA is absent.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtsim/core/units.hpp"
#include "dtsim/exec/executor.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/hw/kernel_calls.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"

namespace dtsim::exec {

struct GpuCalibrationOptions {
  /// The GEMM grid: every (m, n, k) from this list, in each dtype below the GPU runs.
  std::vector<std::int64_t> gemm_sizes{256, 1024, 2048, 4096, 8192, 16384};
  std::vector<hw::Dtype> dtypes{hw::Dtype::kBf16, hw::Dtype::kFp16, hw::Dtype::kTf32, hw::Dtype::kFp8};
  /// Whole GEMM calls measured as a plan launches them (strided-batched, in their dtype).
  struct Call {
    hw::KernelCall call;
    hw::Dtype dtype = hw::Dtype::kBf16;
  };
  std::vector<Call> calls;
  core::Bytes min_stream{4096}, max_stream{4.0 * 1073741824};  ///< streaming kernels, x4 steps
  core::Bytes min_message{1024}, max_message{1.0 * 1073741824};  ///< NCCL collectives, x4 steps
  bool collectives = true;  ///< NCCL over the machine's GPUs
  int warmup = 3;
  int repeats = 7;  ///< timed repeats; the median is kept
  std::string arguments;  ///< the command line, for the provenance
};

/// Runs a graph lowered for one GPU on this machine's first GPU (as
/// executor.hpp's execute does on MPI ranks), GEMMs in `dtype`.
struct GpuExecuteOptions {
  ExecuteOptions steps;
  hw::Dtype dtype = hw::Dtype::kBf16;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  /// Measures the GPU and returns a dtsim.profile/1 document.
  virtual nlohmann::json calibrate(const GpuCalibrationOptions& options) = 0;
  virtual Execution execute(const plan::TaskGraph& graph, const plan::Timeline& order, const GpuExecuteOptions& options) = 0;
  /// Name, memory and versions of the GPU the backend uses.
  virtual nlohmann::json describe() = 0;
};

/// Why the GPU backend cannot be used here (not built, no GPU, no driver).
class GpuUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The distinct GEMM calls of a graph's kernels, each in the dtype it runs
/// in under the plan's (hw::gemm_dtype), for a calibration that measures a
/// plan's own calls whole.
std::vector<GpuCalibrationOptions::Call> gemm_calls_of(const plan::TaskGraph& graph, hw::Dtype plan_dtype);

/// Opens libdtsim_cuda.so: $DTSIM_CUDA_BACKEND, else beside the program's
/// build tree (src/dtsim/cuda/) or its installed lib/dtsim/. Throws GpuUnavailable.
std::unique_ptr<GpuBackend> load_cuda_backend();

/// What the plugin exports (extern "C"), returning a new backend or nullptr
/// with the reason in `why` (no device, driver too old).
using CreateGpuBackend = GpuBackend* (*)(std::string* why);
inline constexpr const char* kCreateGpuBackendSymbol = "dtsim_create_cuda_backend";

}  // namespace dtsim::exec
