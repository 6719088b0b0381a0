#pragma once
/// What this machine's memory holds, from the kernel, for the checks that
/// refuse a run the machine cannot hold.
#include <string>

#include "dtsim/core/units.hpp"

namespace dtsim::core {

/// A figure of /proc/meminfo ("MemTotal:", "MemAvailable:"); 0 where the
/// kernel does not give it.
Bytes meminfo(const std::string& key);

/// The largest data or unified cache of cpu0 (its last level, as
/// /sys/devices/system/cpu/cpu0/cache reports it); 0 where sysfs does not say.
Bytes last_level_cache();

}  // namespace dtsim::core
