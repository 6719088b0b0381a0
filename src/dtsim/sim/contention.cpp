// What communication in flight takes from the kernels beside it on one GPU
// (replay.hpp says the model); the replay re-times its kernels with it.
#include "dtsim/sim/replay.hpp"

#include <algorithm>
#include <optional>
#include <span>

#include "dtsim/hw/kernel_model.hpp"

namespace dtsim::sim {
namespace {

/// Measured points (x_i, y_i), ascending in x, interpolated linearly from
/// (0, 1); nullopt past the last, where each curve says what follows.
template <class Point, class X, class Y>
std::optional<double> from_one_through(std::span<const Point> points, double x, X x_of, Y y_of) {
  double prev_x = 0, prev_y = 1.0;
  for (const Point& p : points) {
    if (x <= x_of(p)) return prev_y + (x - prev_x) / (x_of(p) - prev_x) * (y_of(p) - prev_y);
    prev_x = x_of(p);
    prev_y = y_of(p);
  }
  return std::nullopt;
}

/// H(u): the measured points interpolated; past the last point (u_n, H_n),
/// H_n * (S - u_n) / (S - u), the SMs left shrinking.
double held_sms_slowdown(std::span<const hw::HeldSmsSlowdown> points, int sms, int held) {
  const auto y = from_one_through(
      points, held, [](const hw::HeldSmsSlowdown& p) { return static_cast<double>(p.held_sms); },
      [](const hw::HeldSmsSlowdown& p) { return p.slowdown; });
  if (y) return *y;
  return points.back().slowdown * (sms - points.back().held_sms) / std::max(1, sms - held);
}

/// T(h): the measured points interpolated, held at the last past it
/// (nothing measured says how it grows beyond).
double traffic_slowdown(std::span<const hw::TrafficSlowdown> points, double bytes_per_s) {
  return from_one_through(
             points, bytes_per_s, [](const hw::TrafficSlowdown& p) { return p.traffic.value(); },
             [](const hw::TrafficSlowdown& p) { return p.slowdown; })
      .value_or(points.back().slowdown);
}

}  // namespace

double contention_slowdown(KernelShares shares, int sms, BusySms busy,
                           std::span<const hw::HeldSmsSlowdown> gemm_beside_held_sms, double hbm_bytes_per_s,
                           double busy_hbm, std::span<const hw::TrafficSlowdown> gemm_beside_traffic) {
  const int announced = std::max(0, busy.announced), unannounced = std::max(0, busy.unannounced);
  if (sms <= 0 || (announced + unannounced <= 0 && busy_hbm <= 0)) return 1.0;
  const double s = sms;
  const double free_sms = std::max(1, sms - announced - unannounced);
  double gemm = s / free_sms;
  if (!gemm_beside_held_sms.empty() && unannounced > 0) {
    gemm = s / std::max(1, sms - announced) * held_sms_slowdown(gemm_beside_held_sms, sms, unannounced);
  }
  if (!gemm_beside_traffic.empty() && busy_hbm > 0) gemm *= traffic_slowdown(gemm_beside_traffic, busy_hbm);
  // NCCL cannot take all of the memory: it is paced by its links. Keep a tenth for the kernel at worst.
  const double free_hbm = hbm_bytes_per_s > 0 ? std::max(0.1 * hbm_bytes_per_s, hbm_bytes_per_s - busy_hbm) : 1.0;
  const double memory_slowdown = hbm_bytes_per_s > 0 ? hbm_bytes_per_s / free_hbm : 1.0;
  return shares.gemm * gemm + shares.attention * s / free_sms +
         (1.0 - shares.gemm - shares.attention) * memory_slowdown;
}

}  // namespace dtsim::sim
