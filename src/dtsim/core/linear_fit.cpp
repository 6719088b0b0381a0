#include "dtsim/core/linear_fit.hpp"

#include <stdexcept>

namespace dtsim::core {

LinearFit fit_latency_bandwidth(std::span<const SizeSample> samples) {
  // Weighted least squares for t = a + b*x with weights 1/t^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const SizeSample& s : samples) {
    if (!(s.time.value() > 0)) throw std::invalid_argument("fit_latency_bandwidth: a time is not positive");
    const double w = 1.0 / (s.time.value() * s.time.value());
    const double x = s.bytes.value(), y = s.time.value();
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double det = sw * sxx - sx * sx;
  if (samples.size() < 2 || !(det > 1e-12 * sw * sxx)) {
    throw std::invalid_argument("fit_latency_bandwidth: needs at least two distinct sizes");
  }
  double a = (sxx * sy - sx * sxy) / det;
  double b = (sw * sxy - sx * sy) / det;
  if (a < 0) {
    a = 0;
    b = sxy / sxx;
  }
  if (!(b > 0)) throw std::invalid_argument("fit_latency_bandwidth: time does not grow with size");
  return {Seconds(a), BytesPerSecond(1.0 / b)};
}

}  // namespace dtsim::core
