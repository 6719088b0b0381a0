#include "dtsim/hw/host.hpp"

#include <fmt/format.h>

#include "dtsim/core/json_reader.hpp"

namespace dtsim::hw {

std::vector<Host> load_hosts(const std::filesystem::path& file) {
  const nlohmann::json doc = core::load_json_file(file);
  core::JsonReader r(doc, file.string());
  if (r.string("schema") != "dtsim.hosts/1") r.fail("schema", "expected \"dtsim.hosts/1\"");
  r.ignore("about");
  std::vector<Host> out;
  for (core::JsonReader& h : r.objects("hosts")) {
    Host host;
    host.name = h.string("name");
    if (host.name.empty()) h.fail("name", "expected a host name");
    host.kernel_launch = h.duration("kernel_launch");
    if (!(host.kernel_launch.value() > 0) || host.kernel_launch.value() > 1e-3) {
      h.fail("kernel_launch", fmt::format("expected more than 0 and at most 1 ms a kernel, got {} s", host.kernel_launch.value()));
    }
    host.source = h.string("source");
    h.finish();
    out.push_back(std::move(host));
  }
  r.finish();
  return out;
}

}  // namespace dtsim::hw
