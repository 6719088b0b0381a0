#include "calibrate/harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace dtsim::calibrate {

core::Seconds median(std::vector<core::Seconds> times) {
  if (times.empty()) return core::Seconds(0);
  std::sort(times.begin(), times.end());
  const std::size_t n = times.size();
  return n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) * 0.5;
}

core::Seconds Series::median() const { return calibrate::median(times); }

Series time_on_all_ranks(MPI_Comm comm, const std::function<void()>& body, const TimingOptions& options) {
  using Clock = std::chrono::steady_clock;
  double warm = 0;
  for (int i = 0; i < options.warmup; ++i) {
    MPI_Barrier(comm);
    const auto t0 = Clock::now();
    body();
    warm = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  int iterations = options.min_iterations;
  if (warm > 0) {
    iterations = static_cast<int>(std::ceil(options.target.value() / warm));
    iterations = std::clamp(iterations, options.min_iterations, options.max_iterations);
  }
  MPI_Bcast(&iterations, 1, MPI_INT, 0, comm);
  std::vector<double> local(static_cast<std::size_t>(iterations)), slowest(local.size());
  for (int i = 0; i < iterations; ++i) {
    MPI_Barrier(comm);
    const auto t0 = Clock::now();
    body();
    local[static_cast<std::size_t>(i)] = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  MPI_Allreduce(local.data(), slowest.data(), iterations, MPI_DOUBLE, MPI_MAX, comm);
  Series s;
  for (double t : slowest) s.times.emplace_back(t);
  return s;
}

}  // namespace dtsim::calibrate
