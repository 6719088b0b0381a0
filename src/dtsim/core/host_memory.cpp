#include "dtsim/core/host_memory.hpp"

#include <fstream>

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

}  // namespace dtsim::core
