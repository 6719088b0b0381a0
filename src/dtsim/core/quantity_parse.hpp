#pragma once
/// Parsing of quantities written by people: "400 Gb/s", "900 GB/s", "80 GiB",
/// "1.5 us", "989 TFLOP/s". Bits (b) and bytes (B) are distinct, as are decimal
/// (GB = 1e9) and binary (GiB = 2^30) prefixes. A bare number is rejected: the
/// unit is never guessed. Each parser throws std::invalid_argument with a
/// message of the form 'expected a bandwidth like "400 Gb/s", got "400"'.
#include <string_view>
#include <utility>

#include "dtsim/core/units.hpp"

namespace dtsim::core {

/// The longest duration an input may give (latencies, kernel times).
inline constexpr double kMaxInputSeconds = 3600;

/// Every quantity is finite and non-negative; rates (bandwidths, FLOP rates)
/// are positive, since they divide.
Bytes parse_bytes(std::string_view text);
BytesPerSecond parse_bandwidth(std::string_view text);
Seconds parse_duration(std::string_view text);
Flops parse_flops(std::string_view text);
FlopsPerSecond parse_flop_rate(std::string_view text);

/// "5%" or "0.05" as a non-negative fraction (0.05).
double parse_fraction(std::string_view text);
/// A range of sizes, "8B:8GiB"; one size, "1MiB", is a range of one.
std::pair<Bytes, Bytes> parse_size_range(std::string_view text);

}  // namespace dtsim::core
