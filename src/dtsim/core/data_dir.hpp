#pragma once
#include <filesystem>

namespace dtsim::core {

/// Where bundled inputs live (workloads/, topologies/, devices/):
/// $DTSIM_DATA_DIR if set; else <prefix>/share/dtsim for an installed binary
/// (found from the binary's own path, so a moved prefix works); else the
/// source tree the binary was built from.
std::filesystem::path data_dir();

}  // namespace dtsim::core
