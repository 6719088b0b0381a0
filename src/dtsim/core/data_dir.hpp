#pragma once
#include <filesystem>

namespace dtsim::core {

/// Where bundled inputs live (workloads/, topologies/, devices/):
/// $DTSIM_DATA_DIR if set, else the source tree the binary was built from.
std::filesystem::path data_dir();

}  // namespace dtsim::core
