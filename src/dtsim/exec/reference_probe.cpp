#include "dtsim/exec/reference_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "dtsim/exec/cpu_kernels.hpp"

namespace dtsim::exec {
namespace {

double median(std::vector<double> times) {
  std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

}  // namespace

ProbeTimes mean(const ProbeTimes& a, const ProbeTimes& b) { return {(a.gemm + b.gemm) * 0.5, (a.copy + b.copy) * 0.5}; }

ProbeTimes time_reference_probe(MPI_Comm world, int repeats) {
  // 256^3 keeps the operands (768 KiB) in a core's L2; 32 MiB copies stream
  // past the last-level cache of a 2-core slice. Both sides of a step's time.
  const model::GemmShape gemm{256, 256, 256, 1};
  const core::Bytes copy(64.0 * 1048576);  // read 32 MiB, write 32 MiB
  CpuKernels kernels;
  kernels.reserve({hw::KernelFamily::kGemm, gemm, 1, {}});
  kernels.reserve({hw::KernelFamily::kCopy, {}, 1, copy});
  auto gemms = [&] {
    for (int i = 0; i < 8; ++i) kernels.gemm(gemm);
  };
  auto stream = [&] { kernels.stream(hw::KernelFamily::kCopy, copy); };
  // The slowest rank's time for one half, every rank starting together.
  auto timed = [&](const auto& half) {
    MPI_Barrier(world);
    const auto t0 = std::chrono::steady_clock::now();
    half();
    double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, world);
    return slowest;
  };
  gemms();  // untimed: warms the caches
  stream();  // untimed: faults the pages in
  std::vector<double> gemm_times, copy_times;
  for (int r = 0; r < repeats; ++r) {
    gemm_times.push_back(timed(gemms));
    copy_times.push_back(timed(stream));
  }
  return {core::Seconds(median(gemm_times)), core::Seconds(median(copy_times))};
}

double probe_drift(core::Seconds then, core::Seconds now) {
  return then.value() > 0 ? now.value() / then.value() - 1.0 : 0.0;
}

double probe_drift(const ProbeTimes& then, const ProbeTimes& now) {
  if (!then.has_halves()) return std::abs(probe_drift(then.total(), now.total()));
  return std::max(std::abs(probe_drift(then.gemm, now.gemm)), std::abs(probe_drift(then.copy, now.copy)));
}

double step_drift(const ProbeTimes& then, const ProbeTimes& now, double gemm_share) {
  if (!then.has_halves()) return probe_drift(then.total(), now.total());
  return gemm_share * probe_drift(then.gemm, now.gemm) + (1 - gemm_share) * probe_drift(then.copy, now.copy);
}

}  // namespace dtsim::exec
