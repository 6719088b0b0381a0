#pragma once
/// The CPUs that host GPUs (devices/hosts.json): what a training step's host
/// spends per kernel it launches. A GPU runs a kernel only once its host has
/// launched it, so where kernels are short the host's speed sets the step.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dtsim/core/units.hpp"

namespace dtsim::hw {

/// The host a device's datasheet names when it names none: an x86-64 server.
inline constexpr std::string_view kDefaultHost = "x86-64";

struct Host {
  std::string name;
  /// Host time per kernel or collective an eager PyTorch step launches
  /// (Python, autograd and the launch itself).
  core::Seconds kernel_launch;
  std::string source;
};

/// devices/hosts.json ("dtsim.hosts/1"); one clear line and exit code 2 on
/// bad input, as every data file.
std::vector<Host> load_hosts(const std::filesystem::path& file);

}  // namespace dtsim::hw
