#include "dtsim/cuda/device_info.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <memory>
#include <sstream>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "dtsim/core/version.hpp"
#include "dtsim/core/utc_date.hpp"
#include "dtsim/cuda/check.hpp"

namespace dtsim::cuda {
namespace {

// One nvidia-smi query as trimmed comma-separated fields, or none when it is missing.
std::vector<std::string> smi(const std::string& fields) {
  const std::string command = "nvidia-smi --id=0 --query-gpu=" + fields + " --format=csv,noheader,nounits 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string text;
  std::array<char, 512> chunk{};
  while (std::fgets(chunk.data(), chunk.size(), pipe.get())) text += chunk.data();
  std::vector<std::string> out;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    const auto first = item.find_first_not_of(" \n"), last = item.find_last_not_of(" \n");
    out.push_back(first == std::string::npos ? "" : item.substr(first, last - first + 1));
  }
  return out;
}

nlohmann::json number_or_text(const std::string& s) {
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return s;
}

std::string version_text(int v, int major_scale, int minor_scale) {
  return fmt::format("{}.{}.{}", v / major_scale, v % major_scale / minor_scale, v % minor_scale);
}

// cuDNN is not linked (the backend runs no cuDNN kernel yet); its version is
// read from the library when the loader finds one.
std::string cudnn_version() {
  void* library = dlopen("libcudnn.so.9", RTLD_LAZY | RTLD_LOCAL);
  if (!library) return "not found";
  using GetVersion = std::size_t (*)();
  auto get = reinterpret_cast<GetVersion>(dlsym(library, "cudnnGetVersion"));
  const std::string out = get ? std::to_string(get()) : "unknown";
  dlclose(library);
  return out;
}

}  // namespace

std::string catalog_device(const std::string& name, double memory_gib) {
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("H100") && (has("HBM3") || has("SXM"))) return "H100-SXM";
  if (has("H800")) return "H800-SXM";
  if (has("H200")) return "H200-SXM";
  if (has("GH200")) return "GH200";
  if (has("A100")) return memory_gib > 48 ? "A100-SXM-80GB" : "A100-SXM-40GB";
  if (has("B200")) return "B200";
  if (has("B300")) return "B300";
  if (has("V100")) return "V100-SXM2-32GB";
  return "";
}

nlohmann::json read_clocks() {
  const std::vector<std::string> f = smi("clocks.sm,clocks.mem,power.draw,temperature.gpu");
  if (f.size() != 4) return nullptr;
  return {{"sm_mhz", number_or_text(f[0])}, {"memory_mhz", number_or_text(f[1])}, {"power_w", number_or_text(f[2])},
          {"temperature_c", number_or_text(f[3])}};
}

nlohmann::json describe_gpu() {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, 0));
  int clock_khz = 0, memory_clock_khz = 0, runtime = 0, driver = 0, nccl = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, 0);
  check(cudaRuntimeGetVersion(&runtime));
  check(cudaDriverGetVersion(&driver));
  check(ncclGetVersion(&nccl));
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  const double memory_gib = static_cast<double>(p.totalGlobalMem) / 1073741824.0;
  nlohmann::json out{{"gpu", p.name},
                     {"catalog_device", catalog_device(p.name, memory_gib)},
                     {"gpus", 0},
                     {"sms", p.multiProcessorCount},
                     {"compute_capability", fmt::format("{}.{}", p.major, p.minor)},
                     {"memory_gib", std::round(memory_gib * 100) / 100},
                     {"l2_mib", p.l2CacheSize / 1048576.0},
                     {"max_sm_clock_mhz", clock_khz / 1000},
                     {"memory_clock_mhz", memory_clock_khz / 1000},
                     {"cuda_driver_api", version_text(driver, 1000, 10)},
                     {"cuda_runtime", version_text(runtime, 1000, 10)},
                     {"cublaslt", std::to_string(cublasLtGetVersion())},
                     {"cudnn", cudnn_version()},
                     {"nccl", version_text(nccl, 10000, 100)},
                     {"machine", host},
                     {"compiler", __VERSION__},
                     {"dtsim_version", core::version()},
                     {"date", core::utc_now()}};
  int gpus = 0;
  check(cudaGetDeviceCount(&gpus));
  out["gpus"] = gpus;
  const std::vector<std::string> smi_fields = smi("driver_version,power.limit,clocks.max.sm,clocks.applications.graphics");
  if (smi_fields.size() == 4) {
    out["driver"] = smi_fields[0];
    out["power_limit_w"] = number_or_text(smi_fields[1]);
    out["max_sm_clock_mhz_smi"] = number_or_text(smi_fields[2]);
    out["application_clock_mhz"] = number_or_text(smi_fields[3]);
  } else {
    out["driver"] = "unknown (nvidia-smi did not answer)";
  }
  return out;
}

}  // namespace dtsim::cuda
