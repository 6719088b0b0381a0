#include "dtsim/core/host_memory.hpp"

#include <algorithm>
#include <fstream>
#include <string>

namespace dtsim::core {

Bytes meminfo(const std::string& wanted) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key >> kib) {
    if (key == wanted) return Bytes(kib * 1024);
    in.ignore(256, '\n');
  }
  return Bytes(0);
}

Bytes last_level_cache() {
  double largest = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream type_file(dir + "type"), size_file(dir + "size");
    std::string type, size;
    if (!(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction" || size.empty()) continue;
    // sysfs writes "48K", "2048K", "32M".
    const char unit = size.back();
    const double scale = unit == 'K' ? 1024.0 : unit == 'M' ? 1048576.0 : unit == 'G' ? 1073741824.0 : 1.0;
    try {
      largest = std::max(largest, std::stod(scale == 1.0 ? size : size.substr(0, size.size() - 1)) * scale);
    } catch (const std::exception&) {
      continue;
    }
  }
  return Bytes(largest);
}

}  // namespace dtsim::core
