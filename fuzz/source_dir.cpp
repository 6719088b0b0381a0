#include <cstdlib>

#include "fuzz_input.hpp"

namespace dtsim::fuzz {

std::string source_dir() {
  const char* dir = std::getenv("DTSIM_DATA_DIR");
  return dir ? dir : DTSIM_SOURCE_DIR;
}

}  // namespace dtsim::fuzz
