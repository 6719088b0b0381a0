#pragma once
// What every fuzz harness shares: bad input must end in the error a parser
// documents (InputError, or std::invalid_argument from the quantity parsers,
// std::range_error for a time beyond the clock); anything else escapes the
// harness and libFuzzer (or the replay driver) reports it as a crash.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "dtsim/core/input_error.hpp"

namespace dtsim::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

template <class Body>
void expect_only_input_errors(Body body) {
  try {
    body();
  } catch (const core::InputError&) {
  } catch (const std::invalid_argument&) {
  } catch (const std::range_error&) {
  }
}

/// The source tree, for the bundled devices and models a harness needs.
std::string source_dir();

}  // namespace dtsim::fuzz
