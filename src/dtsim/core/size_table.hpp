#pragma once
/// A time measured at a few sizes, and the time at any size between them: a
/// streaming kernel's (hw::MeasuredKernels) or a collective's on one machine
/// (net::NetworkOptions::measured).
#include <vector>

#include "dtsim/core/linear_fit.hpp"
#include "dtsim/core/units.hpp"

namespace dtsim::core {

/// Time against bytes: piecewise linear between samples on log-log axes
/// (caches make it anything but one straight line); below the smallest
/// size, that size's time (latency bound); above the largest, its time
/// scaled by bytes (bandwidth bound).
class SizeTable {
 public:
  SizeTable() = default;
  /// Sorted by size; throws std::invalid_argument for fewer than two sizes or a non-positive time.
  explicit SizeTable(std::vector<SizeSample> samples);

  [[nodiscard]] bool empty() const { return samples_.empty(); }
  [[nodiscard]] Seconds time(Bytes bytes) const;
  [[nodiscard]] const std::vector<SizeSample>& samples() const { return samples_; }

 private:
  std::vector<SizeSample> samples_;
};

}  // namespace dtsim::core
