#pragma once
/// A GPU as its datasheet describes it. Peak rates are dense (no sparsity).
#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/hw/host.hpp"

namespace dtsim::hw {

/// kFp4: NVFP4 / MXFP4 GEMMs (Blackwell, MI355X), over 16-bit activations as FP8 runs.
enum class Dtype { kFp32, kTf32, kFp16, kBf16, kFp8, kFp4 };
inline constexpr std::size_t kDtypeCount = 6;
inline constexpr std::array<Dtype, kDtypeCount> kAllDtypes = {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16,
                                                               Dtype::kBf16, Dtype::kFp8,  Dtype::kFp4};

std::string_view to_string(Dtype dtype);
std::optional<Dtype> parse_dtype(std::string_view text);
/// Device names compare without case ("h100-sxm" is the H100-SXM).
bool same_device_name(std::string_view a, std::string_view b);
/// Bytes per activation and gradient element: fp8 training keeps activations in 16 bits.
double activation_bytes(Dtype dtype);

struct KernelFigures;

struct Device {
  std::string name;
  std::string vendor;
  /// Peak dense FLOP/s per dtype; zero where the device has no such unit.
  std::array<core::FlopsPerSecond, kDtypeCount> peak{};
  core::Bytes hbm_capacity;
  core::BytesPerSecond hbm_bandwidth;
  /// GPU-to-GPU fabric (NVLink, Infinity Fabric) per GPU per direction; zero if none.
  core::BytesPerSecond scale_up_bandwidth;
  core::BytesPerSecond pcie_bandwidth;  ///< host link per direction
  std::string source;
  /// The CPU that launches its kernels (a hosts.json name): a superchip's own
  /// (Grace beside GH200, GB200, GB300), else an x86-64 server's.
  std::string host;
  double power_watts = 0;  ///< board power (TDP); 0 when not given
  /// Memory every rank holds whatever the model: the CUDA context, cuBLAS and
  /// NCCL workspaces and allocator slack (about 0.5 GiB of context on Hopper
  /// plus workspaces, rounded up to 1 GiB); none for a CPU process.
  core::Bytes runtime_allowance{1073741824.0};
  /// Kernels and collectives run on separate streams at once (GPUs). A CPU
  /// rank runs its kernels and its MPI collectives on one thread, one after
  /// the other; only point-to-point sends stay asynchronous.
  bool concurrent_streams = true;
  /// No datasheet figures: peak, bandwidth and memory come from a
  /// dtsim-calibrate profile of the machine (the local CPU).
  bool needs_profile = false;
  /// Figures of its kernels from a bundled profile (devices/<name>.json);
  /// null where none is bundled, and the roofline of CostModel applies.
  std::shared_ptr<const KernelFigures> kernel_figures;

  [[nodiscard]] core::FlopsPerSecond peak_for(Dtype dtype) const { return peak[static_cast<std::size_t>(dtype)]; }
};

/// The bundled datasheet catalog (devices/datasheets.json: V100 to GB200 and
/// B300, H800, H20, GH200, MI300X to MI355X, Gaudi 3, L40S, TPU v4, each with
/// its source), and "CPU": one core of the local machine, whose figures a
/// calibration profile supplies.
class DeviceCatalog {
 public:
  /// The datasheets and bundled profiles (kernel figures) in core::data_dir()/devices.
  DeviceCatalog();
  /// The same from `devices`: its datasheets.json and profiles.
  explicit DeviceCatalog(const std::filesystem::path& devices);
  [[nodiscard]] const std::vector<Device>& devices() const { return devices_; }
  /// Case-insensitive lookup by name; nullptr when unknown.
  [[nodiscard]] const Device* find(std::string_view name) const;
  [[nodiscard]] std::string names() const;
  [[nodiscard]] const std::vector<Host>& hosts() const { return hosts_; }
  /// A host of devices/hosts.json by name; nullptr when unknown.
  [[nodiscard]] const Host* find_host(std::string_view name) const;
  [[nodiscard]] std::string host_names() const;
  /// The device with the kernel figures of its bundled profile
  /// (devices/<name>.json), read now: a prediction reads the one profile of
  /// the device it runs on, not every device's. Without a profile, the
  /// datasheet alone (CostModel's roofline).
  [[nodiscard]] Device with_kernel_figures(const Device& datasheet) const;

 private:
  std::vector<Device> devices_;
  std::vector<Host> hosts_;
  std::filesystem::path profiles_;
};

}  // namespace dtsim::hw
