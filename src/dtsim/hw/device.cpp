#include "dtsim/hw/device.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "dtsim/core/data_dir.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/hw/datasheet.hpp"
#include "dtsim/hw/profile.hpp"

namespace dtsim::hw {

bool same_device_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32: return "fp32";
    case Dtype::kTf32: return "tf32";
    case Dtype::kFp16: return "fp16";
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp8: return "fp8";
    case Dtype::kFp4: return "fp4";
  }
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view text) {
  for (Dtype d : kAllDtypes) {
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

DeviceCatalog::DeviceCatalog(const std::filesystem::path& devices)
    : devices_(load_datasheets(devices / "datasheets.json")), hosts_(load_hosts(devices / "hosts.json")), profiles_(devices) {
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (!find_host(devices_[i].host)) {
      throw core::InputError((devices / "datasheets.json").string(), fmt::format("/devices/{}/host", i),
                             fmt::format("expected one of {} (hosts.json), got \"{}\"", host_names(), devices_[i].host));
    }
  }
}

Device DeviceCatalog::with_kernel_figures(const Device& datasheet) const {
  Device d = datasheet;
  const std::filesystem::path file = profiles_ / (d.name + ".json");
  if (!std::filesystem::is_regular_file(file)) return d;
  Profile profile = load_profile(file);
  if (!same_device_name(profile.device, d.name)) {
    throw core::InputError(file.string(), "/device", fmt::format("expected \"{}\" (the file's name), got \"{}\"",
                                                                d.name, profile.device));
  }
  d.kernel_figures = profile.kernel_model;
  return d;
}

const Device* DeviceCatalog::find(std::string_view name) const {
  for (const Device& d : devices_) {
    if (same_device_name(d.name, name)) return &d;
  }
  return nullptr;
}

const Host* DeviceCatalog::find_host(std::string_view name) const {
  for (const Host& h : hosts_) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

std::string DeviceCatalog::host_names() const {
  std::string out;
  for (const Host& h : hosts_) out += (out.empty() ? "" : ", ") + h.name;
  return out;
}

std::string DeviceCatalog::names() const {
  std::string out;
  for (const Device& d : devices_) out += (out.empty() ? "" : ", ") + d.name;
  return out;
}

}  // namespace dtsim::hw
