#include "dtsim/exec/gpu_backend.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "dtsim/hw/measured.hpp"

namespace dtsim::exec {
namespace {

std::filesystem::path this_program() {
  std::error_code ignored;
  return std::filesystem::read_symlink("/proc/self/exe", ignored);
}

std::vector<std::filesystem::path> candidates() {
  if (const char* named = std::getenv("DTSIM_CUDA_BACKEND"); named && *named) return {named};
  const std::filesystem::path dir = this_program().parent_path();
  // Build tree: build/src/cli/dtsim and build/calibrate/dtsim-calibrate; installed: <prefix>/bin.
  return {dir / "../dtsim/cuda/libdtsim_cuda.so", dir / "../src/dtsim/cuda/libdtsim_cuda.so",
          dir / "../lib/dtsim/libdtsim_cuda.so", dir / "../lib/x86_64-linux-gnu/dtsim/libdtsim_cuda.so"};
}

}  // namespace

std::vector<GpuCalibrationOptions::Call> gemm_calls_of(const plan::TaskGraph& graph, hw::Dtype plan_dtype) {
  std::set<hw::GemmCallKey> seen;
  std::vector<GpuCalibrationOptions::Call> out;
  for (const plan::Kernel& kernel : graph.kernels) {
    for (const hw::OpWork& w : kernel.ops) {
      const hw::Dtype dtype = hw::gemm_dtype(w, plan_dtype);
      for (const hw::KernelCall& c : hw::kernel_calls(w)) {
        if (c.family != hw::KernelFamily::kGemm) continue;
        if (seen.insert({c.gemm.m, c.gemm.n, c.gemm.k, c.count, dtype}).second) out.push_back({c, dtype});
      }
    }
  }
  return out;
}

std::unique_ptr<GpuBackend> load_cuda_backend() {
  std::string tried;
  for (const std::filesystem::path& path : candidates()) {
    std::error_code ignored;
    if (!std::filesystem::exists(path, ignored)) {
      tried += (tried.empty() ? "" : ", ") + path.lexically_normal().string();
      continue;
    }
    // RTLD_LOCAL: the plugin's copies of dtsim's code stay its own.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw GpuUnavailable(fmt::format("cannot load the CUDA backend {}: {}", path.string(), dlerror()));
    auto create = reinterpret_cast<CreateGpuBackend>(dlsym(handle, kCreateGpuBackendSymbol));
    if (!create) throw GpuUnavailable(fmt::format("{} has no {}", path.string(), kCreateGpuBackendSymbol));
    std::string why;
    GpuBackend* backend = create(&why);
    if (!backend) throw GpuUnavailable(why);
    return std::unique_ptr<GpuBackend>(backend);  // the library stays open for the process's life
  }
  throw GpuUnavailable(fmt::format("dtsim was built without its CUDA backend (meson setup -Dcuda=enabled needs the CUDA "
                                   "toolkit with cuBLASLt and NCCL; looked for {})",
                                   tried));
}

}  // namespace dtsim::exec
