#pragma once
/// Calibration profiles (`schema: dtsim.profile/1`): what was measured on
/// which machine, and what was fitted from it. A profile may hold
///  - `efficiency`: roofline fractions that replace the defaults (GPUs);
///  - `device_figures`: the device's peak, memory bandwidth and memory as
///    measured, for a device with no datasheet (the CPU);
///  - `kernels`: measured GEMM grid and streaming-kernel size tables, which
///    replace the roofline altogether (hw::MeasuredKernels);
///  - `collectives`: per collective and rank count, the median time at each
///    size measured (which replace the fabric model, interpolated between
///    sizes) and their latency-bandwidth fit (how a what-if scales them).
/// dtsim-calibrate (calibrate/) writes them; everything here reads them.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtsim/core/linear_fit.hpp"
#include "dtsim/core/size_table.hpp"
#include "dtsim/hw/cost_model.hpp"
#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/hw/measured.hpp"

namespace dtsim::hw {

struct DeviceFigures {
  Dtype dtype = Dtype::kFp32;
  core::FlopsPerSecond peak;  ///< the best GEMM rate measured: MFU is against it
  core::BytesPerSecond memory_bandwidth;
  core::Bytes memory;
};

struct MeasuredCollective {
  std::string op;  ///< net::to_string of the collective ("all_reduce")
  int ranks = 0;
  core::LinearFit fit;
  core::SizeTable medians;  ///< the samples' medians by size; empty where the profile kept none
};

struct Profile {
  std::string device;  ///< catalog name of the device it was measured on
  nlohmann::json provenance;
  Efficiency efficiency;
  bool has_efficiency = false;  ///< the roofline with these fractions, not the device's kernel model
  std::optional<DeviceFigures> figures;
  std::shared_ptr<const MeasuredKernels> kernels;  ///< null when the profile has no kernel tables
  std::vector<MeasuredCollective> collectives;
  /// Published kernel figures (a bundled device profile): the kernel model.
  std::shared_ptr<const KernelFigures> kernel_model;
};

Profile load_profile(const std::filesystem::path& path);
Profile parse_profile(const nlohmann::json& document, const std::string& file);

/// The device as the profile measured it: its figures replace the datasheet's.
Device apply_figures(Device device, const Profile& profile);

}  // namespace dtsim::hw
