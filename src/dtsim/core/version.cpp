#include "dtsim/core/version.hpp"

namespace dtsim::core {

std::string_view version() { return DTSIM_VERSION; }

}  // namespace dtsim::core
