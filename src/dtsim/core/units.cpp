#include "dtsim/core/units.hpp"

#include <stdexcept>
#include <string>

namespace dtsim::core {

void throw_beyond_clock(Seconds s) {
  throw std::range_error("a simulated time of " + std::to_string(s.value()) +
                         " s is beyond what the clock holds (1e9 s): a bandwidth, rate or latency in the input is zero or "
                         "absurd");
}

}  // namespace dtsim::core
