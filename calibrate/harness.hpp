#pragma once
/// Timing in the style of nccl-tests: every rank of a communicator warms up,
/// then runs timed iterations with a barrier before each; an iteration's time
/// is the slowest rank's, and every iteration's time is kept. Correctness is
/// checked by the caller after the loop, never inside it.
#include <functional>
#include <vector>

#include <mpi.h>

#include "dtsim/core/units.hpp"

namespace dtsim::calibrate {

struct TimingOptions {
  int warmup = 2;
  int min_iterations = 3;
  int max_iterations = 30;
  /// Iterations are added until they take about this long (at least min_iterations).
  core::Seconds target{0.05};
};

struct Series {
  std::vector<core::Seconds> times;  ///< per iteration, slowest rank
  [[nodiscard]] core::Seconds median() const;
};

/// Times `body` on every rank of `comm` (each rank runs it; for a collective,
/// body is this rank's part). The iteration count comes from rank 0's warm-up
/// time and is shared, so collective bodies stay matched.
Series time_on_all_ranks(MPI_Comm comm, const std::function<void()>& body, const TimingOptions& options);

core::Seconds median(std::vector<core::Seconds> times);

}  // namespace dtsim::calibrate
