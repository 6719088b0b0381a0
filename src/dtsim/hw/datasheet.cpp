#include "dtsim/hw/datasheet.hpp"

#include <cmath>

#include <fmt/format.h>

#include "dtsim/hw/host.hpp"

namespace dtsim::hw {

Device read_device(core::JsonReader& r) {
  Device d;
  d.name = r.string("name");
  if (d.name.empty()) r.fail("name", "expected a device name");
  d.vendor = r.string_or("vendor", "");
  d.source = r.string("source");
  d.host = r.string_or("host", std::string(kDefaultHost));
  d.needs_profile = r.boolean_or("needs_profile", false);
  d.concurrent_streams = r.boolean_or("concurrent_streams", true);
  if (r.has("runtime_allowance")) d.runtime_allowance = r.bytes("runtime_allowance");
  if (r.has("power_watts")) {
    d.power_watts = r.number("power_watts");
    if (!(d.power_watts > 0) || d.power_watts > 1e5) r.fail("power_watts", fmt::format("expected 1 to 100000 W, got {}", d.power_watts));
  }
  if (d.needs_profile) {
    r.finish();
    return d;
  }
  core::JsonReader peaks = r.object("peak_tflops");
  bool any = false;
  for (Dtype dtype : kAllDtypes) {
    const std::string key(to_string(dtype));
    const double tflops = peaks.number_or(key, 0.0);
    if (!std::isfinite(tflops) || tflops < 0 || tflops > 1e6) {
      peaks.fail(key, fmt::format("expected 0 (no such unit) to 1e6 TFLOP/s, got {}", tflops));
    }
    d.peak[static_cast<std::size_t>(dtype)] = core::FlopsPerSecond(tflops * 1e12);
    any = any || tflops > 0;
  }
  peaks.finish();
  if (!any) r.fail("peak_tflops", "expected a positive peak for at least one of fp32, tf32, fp16, bf16, fp8, fp4");
  d.hbm_capacity = r.bytes("hbm");
  if (!(d.hbm_capacity.value() > 0)) r.fail("hbm", "expected a positive memory size");
  d.hbm_bandwidth = r.bandwidth("hbm_bandwidth");
  d.scale_up_bandwidth = r.has("scale_up_bandwidth") ? r.bandwidth("scale_up_bandwidth") : core::BytesPerSecond(0);
  d.pcie_bandwidth = r.bandwidth("pcie_bandwidth");
  r.finish();
  return d;
}

std::vector<Device> load_datasheets(const std::filesystem::path& file) {
  const nlohmann::json doc = core::load_json_file(file);
  core::JsonReader r(doc, file.string());
  if (r.string("schema") != "dtsim.datasheets/1") r.fail("schema", "expected \"dtsim.datasheets/1\"");
  r.ignore("about");
  std::vector<Device> out;
  for (core::JsonReader& device : r.objects("devices")) out.push_back(read_device(device));
  r.finish();
  return out;
}

}  // namespace dtsim::hw
