#pragma once
/// dtsim's version (meson.build's project version), for `--version` and for
/// the "dtsim_version" of every JSON output, so a saved report says which
/// dtsim made it.
#include <string_view>

namespace dtsim::core {

std::string_view version();

}  // namespace dtsim::core
