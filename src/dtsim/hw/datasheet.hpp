#pragma once
/// Devices as datasheets describe them, read from data: the bundled catalog
/// (devices/datasheets.json) and a device a cluster file describes itself.
/// One reader, so both get the same checks.
#include <filesystem>
#include <vector>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/hw/device.hpp"

namespace dtsim::hw {

/// One device object: name, vendor, peak_tflops {fp32, tf32, fp16, bf16,
/// fp8, fp4} (dense; 0 or absent: no such unit), hbm, hbm_bandwidth,
/// scale_up_bandwidth and pcie_bandwidth (per direction), optional
/// power_watts, source. A device without datasheet figures
/// (`needs_profile`, the local CPU) gets them from a calibration profile.
Device read_device(core::JsonReader& r);

/// Every device of a dtsim.datasheets/1 file.
std::vector<Device> load_datasheets(const std::filesystem::path& file);

}  // namespace dtsim::hw
