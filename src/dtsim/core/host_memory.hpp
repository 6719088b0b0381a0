#pragma once
/// What this machine's memory holds, from the kernel, for the checks that
/// refuse a run the machine cannot hold.
#include <string>

#include "dtsim/core/units.hpp"

namespace dtsim::core {

/// A figure of /proc/meminfo ("MemTotal:", "MemAvailable:"); 0 where the
/// kernel does not give it.
Bytes meminfo(const std::string& key);

}  // namespace dtsim::core
