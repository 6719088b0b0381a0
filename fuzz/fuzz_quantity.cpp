// Quantities and sizes as people write them: "400 Gb/s", "80 GiB", "1.5 us",
// "989 TFLOP/s", "5%", "8B:8GiB".
#include "dtsim/core/quantity_parse.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtsim::core;
  const std::string_view text = dtsim::fuzz::as_text(data, size);
  dtsim::fuzz::expect_only_input_errors([&] { (void)parse_bytes(text); });
  dtsim::fuzz::expect_only_input_errors([&] { (void)parse_bandwidth(text); });
  dtsim::fuzz::expect_only_input_errors([&] { (void)to_nanoseconds(parse_duration(text)); });
  dtsim::fuzz::expect_only_input_errors([&] { (void)parse_flops(text); });
  dtsim::fuzz::expect_only_input_errors([&] { (void)parse_flop_rate(text); });
  dtsim::fuzz::expect_only_input_errors([&] { (void)parse_fraction(text); });
  dtsim::fuzz::expect_only_input_errors([&] { (void)parse_size_range(text); });
  return 0;
}
