// What communication in flight takes from the kernels beside it on one GPU
// (replay.hpp says the model); the replay re-times its kernels with it.
#include "dtsim/sim/replay.hpp"

#include <algorithm>
#include <span>

#include "dtsim/hw/kernel_model.hpp"

namespace dtsim::sim {
namespace {

/// H(u): the measured points interpolated linearly from (0, 1); past the last
/// point (u_n, H_n), H_n * (S - u_n) / (S - u), the SMs left shrinking.
double held_sms_slowdown(std::span<const hw::HeldSmsSlowdown> points, int sms, int held) {
  double prev_held = 0, prev_slowdown = 1.0;
  for (const hw::HeldSmsSlowdown& p : points) {
    if (held <= p.held_sms) {
      const double t = (held - prev_held) / (p.held_sms - prev_held);
      return prev_slowdown + t * (p.slowdown - prev_slowdown);
    }
    prev_held = p.held_sms;
    prev_slowdown = p.slowdown;
  }
  return prev_slowdown * (sms - prev_held) / std::max(1, sms - held);
}

/// T(h): the measured points interpolated linearly from (0, 1), held at the
/// last past it (nothing measured says how it grows beyond).
double traffic_slowdown(std::span<const hw::TrafficSlowdown> points, double bytes_per_s) {
  double prev_rate = 0, prev_slowdown = 1.0;
  for (const hw::TrafficSlowdown& p : points) {
    if (bytes_per_s <= p.traffic.value()) {
      const double t = (bytes_per_s - prev_rate) / (p.traffic.value() - prev_rate);
      return prev_slowdown + t * (p.slowdown - prev_slowdown);
    }
    prev_rate = p.traffic.value();
    prev_slowdown = p.slowdown;
  }
  return prev_slowdown;
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
