#pragma once
/// The latency-bandwidth (alpha-beta) model of a transfer or a streaming
/// kernel, t = latency + bytes / bandwidth, and its fit to measurements.
#include <span>

#include "dtsim/core/units.hpp"

namespace dtsim::core {

struct LinearFit {
  Seconds latency;
  BytesPerSecond bandwidth;
  [[nodiscard]] Seconds time(Bytes bytes) const { return latency + bytes / bandwidth; }
};

struct SizeSample {
  Bytes bytes;
  Seconds time;
};

/// Least squares on relative error, sum(((latency + bytes/bandwidth) - t) / t)^2:
/// plain least squares would let the largest sizes decide alone, and the
/// latency of small messages is half of what the fit is for. Needs two
/// distinct sizes; a negative latency (noise on a bandwidth-bound series) is
/// clamped to zero and the bandwidth refitted through the origin.
LinearFit fit_latency_bandwidth(std::span<const SizeSample> samples);

}  // namespace dtsim::core
