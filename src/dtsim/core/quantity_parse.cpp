#include "dtsim/core/quantity_parse.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

namespace dtsim::core {
namespace {

struct NumberAndUnit {
  double number = 0;
  std::string_view unit;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Returns false when the text is not "<number> <unit>" (the space is optional).
bool split(std::string_view text, NumberAndUnit& out) {
  text = trim(text);
  const char* begin = text.data();
  const char* end = begin + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, out.number);
  // from_chars reads "inf" and "nan" too: neither is a quantity.
  if (ec != std::errc() || ptr == begin || !std::isfinite(out.number) || out.number < 0) return false;
  out.unit = trim(std::string_view(ptr, static_cast<std::size_t>(end - ptr)));
  return !out.unit.empty();
}

struct Prefix {
  std::string_view symbol;
  double factor;
};

// Decimal SI prefixes, and the binary ones (Ki = 2^10) for byte counts.
constexpr std::array<Prefix, 10> kPrefixes{{{"", 1.0},
                                            {"K", 1e3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15},
                                            {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}}};
constexpr Prefix kTebi{"Ti", 1099511627776.0};

// Finds `prefix + base` among the prefixes; returns 0 when the unit does not match.
double prefixed_factor(std::string_view unit, std::string_view base, bool allow_binary) {
  if (unit.size() < base.size() || unit.substr(unit.size() - base.size()) != base) return 0;
  std::string_view prefix = unit.substr(0, unit.size() - base.size());
  for (const Prefix& p : kPrefixes) {
    if (p.symbol == prefix && (allow_binary || p.symbol.find('i') == std::string_view::npos)) return p.factor;
  }
  if (allow_binary && prefix == kTebi.symbol) return kTebi.factor;
  return 0;
}

[[noreturn]] void fail(std::string_view what, std::string_view example, std::string_view text) {
  throw std::invalid_argument("expected " + std::string(what) + " like \"" + std::string(example) + "\", got \"" +
                              std::string(text) + "\"");
}

// A rate divides: zero or one beyond double (1e308 TB/s) is no rate.
double positive_rate(double value, std::string_view what, std::string_view example, std::string_view text) {
  if (!(value > 0) || !std::isfinite(value)) fail(std::string("a positive, finite ") + std::string(what), example, text);
  return value;
}

}  // namespace

Bytes parse_bytes(std::string_view text) {
  NumberAndUnit nu;
  if (split(text, nu)) {
    if (double f = prefixed_factor(nu.unit, "B", true); f > 0 && std::isfinite(nu.number * f)) return Bytes(nu.number * f);
  }
  fail("a size", "80 GiB", text);
}

BytesPerSecond parse_bandwidth(std::string_view text) {
  NumberAndUnit nu;
  if (split(text, nu)) {
    if (double f = prefixed_factor(nu.unit, "B/s", true); f > 0) {
      return BytesPerSecond(positive_rate(nu.number * f, "bandwidth", "400 Gb/s", text));
    }
    if (double f = prefixed_factor(nu.unit, "b/s", false); f > 0) {
      return BytesPerSecond(positive_rate(nu.number * f / 8.0, "bandwidth", "400 Gb/s", text));
    }
  }
  fail("a bandwidth", "400 Gb/s", text);
}

Seconds parse_duration(std::string_view text) {
  NumberAndUnit nu;
  if (split(text, nu)) {
    double seconds = -1;
    if (nu.unit == "s") seconds = nu.number;
    if (nu.unit == "ms") seconds = nu.number * 1e-3;
    if (nu.unit == "us" || nu.unit == "\xC2\xB5s") seconds = nu.number * 1e-6;
    if (nu.unit == "ns") seconds = nu.number * 1e-9;
    // Latencies and kernel times: an hour is already absurd, and sums of them must fit the clock.
    if (seconds > kMaxInputSeconds) fail("a duration of at most an hour", "1.5 us", text);
    if (seconds >= 0) return Seconds(seconds);
  }
  fail("a duration", "1.5 us", text);
}

Flops parse_flops(std::string_view text) {
  NumberAndUnit nu;
  if (split(text, nu)) {
    if (double f = prefixed_factor(nu.unit, "FLOP", false); f > 0 && std::isfinite(nu.number * f)) return Flops(nu.number * f);
  }
  fail("a FLOP count", "4.1 GFLOP", text);
}

FlopsPerSecond parse_flop_rate(std::string_view text) {
  NumberAndUnit nu;
  if (split(text, nu)) {
    if (double f = prefixed_factor(nu.unit, "FLOP/s", false); f > 0) {
      return FlopsPerSecond(positive_rate(nu.number * f, "FLOP rate", "989 TFLOP/s", text));
    }
  }
  fail("a FLOP rate", "989 TFLOP/s", text);
}

double parse_fraction(std::string_view text) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string_view number = percent ? text.substr(0, text.size() - 1) : text;
  double v = -1;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || ptr != number.data() + number.size() || !std::isfinite(v) || v < 0) {
    throw std::invalid_argument("expected a fraction like 5% or 0.05, got \"" + std::string(text) + "\"");
  }
  return percent ? v / 100 : v;
}

std::pair<Bytes, Bytes> parse_size_range(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return {parse_bytes(text), parse_bytes(text)};
  return {parse_bytes(text.substr(0, colon)), parse_bytes(text.substr(colon + 1))};
}

}  // namespace dtsim::core
