#pragma once
/// Strong unit types in SI base units. Only dimensionally meaningful operators
/// exist: Bytes / BytesPerSecond is Seconds, Bytes / Bytes is a plain ratio,
/// and Bytes + Seconds does not compile.
#include <cmath>
#include <compare>
#include <cstdint>

namespace dtsim::core {

template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double value) : value_(value) {}
  [[nodiscard]] constexpr double value() const { return value_; }

  constexpr Quantity& operator+=(Quantity other) { value_ += other.value_; return *this; }
  constexpr Quantity& operator-=(Quantity other) { value_ -= other.value_; return *this; }
  constexpr Quantity& operator*=(double factor) { value_ *= factor; return *this; }
  friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.value_ + b.value_); }
  friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.value_ - b.value_); }
  friend constexpr Quantity operator*(Quantity a, double f) { return Quantity(a.value_ * f); }
  friend constexpr Quantity operator*(double f, Quantity a) { return Quantity(a.value_ * f); }
  friend constexpr Quantity operator/(Quantity a, double f) { return Quantity(a.value_ / f); }
  /// The ratio of two quantities of one dimension is a plain number.
  friend constexpr double operator/(Quantity a, Quantity b) { return a.value_ / b.value_; }
  friend constexpr auto operator<=>(Quantity a, Quantity b) = default;

 private:
  double value_ = 0.0;
};

struct SecondsTag;
struct BytesTag;
struct FlopsTag;
struct BytesPerSecondTag;
struct FlopsPerSecondTag;

using Seconds = Quantity<SecondsTag>;
using Bytes = Quantity<BytesTag>;
using Flops = Quantity<FlopsTag>;
using BytesPerSecond = Quantity<BytesPerSecondTag>;
using FlopsPerSecond = Quantity<FlopsPerSecondTag>;

constexpr Seconds operator/(Bytes b, BytesPerSecond r) { return Seconds(b.value() / r.value()); }
constexpr Seconds operator/(Flops f, FlopsPerSecond r) { return Seconds(f.value() / r.value()); }
constexpr BytesPerSecond operator/(Bytes b, Seconds t) { return BytesPerSecond(b.value() / t.value()); }
constexpr FlopsPerSecond operator/(Flops f, Seconds t) { return FlopsPerSecond(f.value() / t.value()); }
constexpr Bytes operator*(BytesPerSecond r, Seconds t) { return Bytes(r.value() * t.value()); }
constexpr Flops operator*(FlopsPerSecond r, Seconds t) { return Flops(r.value() * t.value()); }

/// The simulator's clock: an integer count of nanoseconds, so that event order
/// never depends on floating-point rounding.
struct Nanoseconds {
  std::int64_t count = 0;
  friend constexpr auto operator<=>(Nanoseconds, Nanoseconds) = default;
  friend constexpr Nanoseconds operator+(Nanoseconds a, Nanoseconds b) { return {a.count + b.count}; }
  friend constexpr Nanoseconds operator-(Nanoseconds a, Nanoseconds b) { return {a.count - b.count}; }
};

/// The longest time the clock holds with room for sums: about 29 years.
inline constexpr double kMaxSimulatedSeconds = 1e9;

/// Throws std::range_error for a time the clock cannot hold; out of line, so
/// the check in to_nanoseconds (on the simulator's hot path) stays one compare.
[[noreturn]] void throw_beyond_clock(Seconds s);

/// Rounds to the nearest nanosecond; durations are never negative. A time
/// that is not finite or beyond kMaxSimulatedSeconds (a bandwidth near zero,
/// a latency of centuries) would wrap the integer clock, so it is refused.
inline Nanoseconds to_nanoseconds(Seconds s) {
  if (!(s.value() <= kMaxSimulatedSeconds) || !(s.value() >= -kMaxSimulatedSeconds)) [[unlikely]] throw_beyond_clock(s);
  return {static_cast<std::int64_t>(std::llround(s.value() * 1e9))};
}
constexpr Seconds to_seconds(Nanoseconds ns) { return Seconds(static_cast<double>(ns.count) * 1e-9); }

namespace literals {
constexpr Bytes operator""_GiB(unsigned long long v) { return Bytes(static_cast<double>(v) * 1073741824.0); }
constexpr Bytes operator""_MiB(unsigned long long v) { return Bytes(static_cast<double>(v) * 1048576.0); }
constexpr Bytes operator""_B(unsigned long long v) { return Bytes(static_cast<double>(v)); }
constexpr Seconds operator""_us(long double v) { return Seconds(static_cast<double>(v) * 1e-6); }
constexpr Seconds operator""_us(unsigned long long v) { return Seconds(static_cast<double>(v) * 1e-6); }
constexpr BytesPerSecond operator""_GBps(unsigned long long v) { return BytesPerSecond(static_cast<double>(v) * 1e9); }
}  // namespace literals

}  // namespace dtsim::core
