// Calibration profiles: device figures, kernel tables, measured collectives.
#include "dtsim/core/json_reader.hpp"
#include "dtsim/hw/profile.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dtsim::fuzz::expect_only_input_errors([&] {
    const nlohmann::json doc = dtsim::core::parse_json_text(dtsim::fuzz::as_text(data, size), "profile.json");
    (void)dtsim::hw::parse_profile(doc, "profile.json");
  });
  return 0;
}
