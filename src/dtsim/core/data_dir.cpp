#include "dtsim/core/data_dir.hpp"

#include <cstdlib>

namespace dtsim::core {

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("DTSIM_DATA_DIR"); env && *env) return env;
  return DTSIM_SOURCE_DIR;
}

}  // namespace dtsim::core
