#pragma once
// The UTC date and time as profiles and reports record it ("2026-11-26T08:57:52Z").
#include <string>

namespace dtsim::core {

std::string utc_now();

}  // namespace dtsim::core
