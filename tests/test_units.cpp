#include <stdexcept>

#include <gtest/gtest.h>

#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/core/units.hpp"

using namespace dtsim::core;

TEST(Units, BytesOverBandwidthIsSeconds) {
  Seconds t = Bytes(1e9) / BytesPerSecond(100e9);
  EXPECT_DOUBLE_EQ(t.value(), 0.01);
  EXPECT_DOUBLE_EQ(Bytes(6) / Bytes(3), 2.0);
}

TEST(Units, NanosecondsRoundToNearest) {
  EXPECT_EQ(to_nanoseconds(Seconds(1.4e-9)).count, 1);
  EXPECT_EQ(to_nanoseconds(Seconds(2.6e-9)).count, 3);
  EXPECT_DOUBLE_EQ(to_seconds(Nanoseconds{1500}).value(), 1.5e-6);
}

TEST(QuantityParse, BitsAndBytesAreDistinct) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 Gb/s").value(), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("900 GB/s").value(), 900e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1.5 TB/s").value(), 1.5e12);
}

TEST(QuantityParse, BinaryAndDecimalPrefixesAreDistinct) {
  EXPECT_DOUBLE_EQ(parse_bytes("80 GiB").value(), 80.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bytes("80 GB").value(), 80e9);
  EXPECT_DOUBLE_EQ(parse_bytes("25 MiB").value(), 25.0 * 1048576.0);
}

TEST(QuantityParse, DurationsAndFlopRates) {
  EXPECT_DOUBLE_EQ(parse_duration("1.5 us").value(), 1.5e-6);
  EXPECT_DOUBLE_EQ(parse_duration("2ms").value(), 2e-3);
  EXPECT_DOUBLE_EQ(parse_flop_rate("989 TFLOP/s").value(), 989e12);
  EXPECT_DOUBLE_EQ(parse_flops("4.1 GFLOP").value(), 4.1e9);
}

TEST(QuantityParse, BareNumberIsRejectedWithAnExample) {
  try {
    parse_bandwidth("400");
    FAIL() << "a bare number must not parse";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "expected a bandwidth like \"400 Gb/s\", got \"400\"");
  }
  EXPECT_THROW(parse_bytes("80 Gb"), std::invalid_argument);  // bits are no size
  EXPECT_THROW(parse_duration("3 fortnights"), std::invalid_argument);
  EXPECT_THROW(parse_bytes("-1 GiB"), std::invalid_argument);
}
