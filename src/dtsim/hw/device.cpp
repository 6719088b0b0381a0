#include "dtsim/hw/device.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "dtsim/core/data_dir.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/hw/profile.hpp"

namespace dtsim::hw {
namespace {

using core::Bytes;
using core::BytesPerSecond;
using core::FlopsPerSecond;

constexpr double kTera = 1e12;
constexpr double kGB = 1e9;
constexpr double kGiB = 1073741824.0;

struct Peaks {
  double fp32, tf32, fp16, bf16, fp8;  // TFLOP/s, dense
};

Device make(std::string name, std::string vendor, Peaks p, Bytes hbm, double hbm_gbps, double link_gbps,
            double pcie_gbps, std::string source) {
  Device d;
  d.name = std::move(name);
  d.vendor = std::move(vendor);
  d.peak = {FlopsPerSecond(p.fp32 * kTera), FlopsPerSecond(p.tf32 * kTera), FlopsPerSecond(p.fp16 * kTera),
            FlopsPerSecond(p.bf16 * kTera), FlopsPerSecond(p.fp8 * kTera)};
  d.hbm_capacity = hbm;
  d.hbm_bandwidth = BytesPerSecond(hbm_gbps * kGB);
  d.scale_up_bandwidth = BytesPerSecond(link_gbps * kGB);
  d.pcie_bandwidth = BytesPerSecond(pcie_gbps * kGB);
  d.source = std::move(source);
  return d;
}

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::string_view to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32: return "fp32";
    case Dtype::kTf32: return "tf32";
    case Dtype::kFp16: return "fp16";
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp8: return "fp8";
  }
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view text) {
  for (Dtype d : {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16, Dtype::kBf16, Dtype::kFp8}) {
    if (text == to_string(d)) return d;
  }
  return std::nullopt;
}

double activation_bytes(Dtype dtype) { return dtype == Dtype::kFp32 || dtype == Dtype::kTf32 ? 4.0 : 2.0; }

// Zero peak means the device has no units for that dtype (V100: no bf16;
// TPU v4: bf16 only); such a strategy is rejected, not silently slowed.
// Link rates are per GPU per direction: NVIDIA's "600 GB/s NVLink" for the
// A100 is the bidirectional total, 300 GB/s each way.
DeviceCatalog::DeviceCatalog() : DeviceCatalog(core::data_dir() / "devices") {}

DeviceCatalog::DeviceCatalog(const std::filesystem::path& devices) : profiles_(devices) {
  devices_ = {
      make("V100-SXM2-32GB", "NVIDIA", {15.7, 0, 125, 0, 0}, Bytes(32 * kGiB), 900, 150, 16,
           "NVIDIA Tesla V100 datasheet (2020), SXM2: 125 TFLOP/s tensor, 900 GB/s HBM2, 300 GB/s NVLink 2"),
      make("A100-SXM-40GB", "NVIDIA", {19.5, 156, 312, 312, 0}, Bytes(40 * kGiB), 1555, 300, 32,
           "NVIDIA A100 datasheet (2021), SXM 40GB: 312 TFLOP/s fp16/bf16 dense, 1,555 GB/s, 600 GB/s NVLink 3"),
      make("A100-SXM-80GB", "NVIDIA", {19.5, 156, 312, 312, 0}, Bytes(80 * kGiB), 2039, 300, 32,
           "NVIDIA A100 datasheet (2021), SXM 80GB: 312 TFLOP/s fp16/bf16 dense, 2,039 GB/s, 600 GB/s NVLink 3"),
      make("H100-SXM", "NVIDIA", {67, 494.7, 989.4, 989.4, 1978.9}, Bytes(80 * kGiB), 3350, 450, 64,
           "NVIDIA H100 datasheet (2023), SXM: 989 TFLOP/s bf16 dense, 3.35 TB/s HBM3, 900 GB/s NVLink 4"),
      make("H100-PCIe", "NVIDIA", {51, 378, 756, 756, 1513}, Bytes(80 * kGiB), 2000, 300, 64,
           "NVIDIA H100 datasheet (2023), PCIe: 756 TFLOP/s bf16 dense, 2 TB/s HBM2e, 600 GB/s NVLink bridge"),
      make("H200-SXM", "NVIDIA", {67, 494.7, 989.4, 989.4, 1978.9}, Bytes(141 * kGB), 4800, 450, 64,
           "NVIDIA H200 datasheet (2024), SXM: 989 TFLOP/s bf16 dense, 141 GB HBM3e at 4.8 TB/s, 900 GB/s NVLink"),
      make("B200", "NVIDIA", {75, 1100, 2250, 2250, 4500}, Bytes(180 * kGB), 8000, 900, 64,
           "NVIDIA HGX B200 datasheet (2024): 2.25 PFLOP/s bf16 dense per GPU, 180 GB HBM3e at 8 TB/s, 1.8 TB/s NVLink 5"),
      make("GB200", "NVIDIA", {80, 1250, 2500, 2500, 5000}, Bytes(186 * kGB), 8000, 900, 64,
           "NVIDIA GB200 NVL72 datasheet (2024), per Blackwell GPU: 2.5 PFLOP/s bf16 dense, 186 GB HBM3e at "
           "8 TB/s, 1.8 TB/s NVLink 5 (1,200 W configuration)"),
      make("MI300X", "AMD", {163.4, 653.7, 1307.4, 1307.4, 2614.9}, Bytes(192 * kGB), 5300, 448, 64,
           "AMD Instinct MI300X datasheet (2023): 1,307 TFLOP/s bf16 dense, 192 GB HBM3 at 5.3 TB/s, "
           "896 GB/s Infinity Fabric aggregate"),
      make("TPU-v4", "Google", {0, 0, 0, 275, 0}, Bytes(32 * kGiB), 1200, 300, 16,
           "Google Cloud TPU v4 documentation and Jouppi et al., ISCA 2023: 275 TFLOP/s bf16, 32 GiB HBM2 at "
           "1,200 GB/s, 6 ICI links of 50 GB/s each way (3D torus)"),
      make("L40S", "NVIDIA", {91.6, 183, 362, 362, 733}, Bytes(48 * kGB), 864, 0, 32,
           "NVIDIA L40S datasheet (2023): 362 TFLOP/s bf16 dense, 48 GB GDDR6 at 864 GB/s, PCIe Gen4 x16, no NVLink"),
      make("CPU", "any", {0, 0, 0, 0, 0}, Bytes(0), 0, 0, 0,
           "the local CPU, one MPI rank per core: no datasheet; dtsim-calibrate measures its fp32 GEMM rate, "
           "memory bandwidth and RAM into a profile, which --profile supplies"),
  };
  Device& cpu = devices_.back();
  cpu.runtime_allowance = Bytes(0);
  cpu.concurrent_streams = false;
  cpu.needs_profile = true;
}

Device DeviceCatalog::with_kernel_figures(const Device& datasheet) const {
  Device d = datasheet;
  const std::filesystem::path file = profiles_ / (d.name + ".json");
  if (!std::filesystem::is_regular_file(file)) return d;
  Profile profile = load_profile(file);
  if (!iequal(profile.device, d.name)) {
    throw core::InputError(file.string(), "/device", fmt::format("expected \"{}\" (the file's name), got \"{}\"",
                                                                d.name, profile.device));
  }
  d.kernel_figures = profile.kernel_model;
  return d;
}

const Device* DeviceCatalog::find(std::string_view name) const {
  for (const Device& d : devices_) {
    if (iequal(d.name, name)) return &d;
  }
  return nullptr;
}

std::string DeviceCatalog::names() const {
  std::string out;
  for (const Device& d : devices_) out += (out.empty() ? "" : ", ") + d.name;
  return out;
}

}  // namespace dtsim::hw
