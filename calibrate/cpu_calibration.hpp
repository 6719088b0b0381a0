#pragma once
/// The CPU backend's calibration: the BLAS GEMM grid, the streaming kernels
/// over sizes, and MPI collectives over sizes and rank counts. Every rank
/// runs the kernels at once (as every rank of a data- or tensor-parallel step
/// does, sharing memory bandwidth and caches), and each point keeps the
/// slowest rank's time.
#include <cstdint>
#include <vector>

#include <mpi.h>

#include "calibrate/harness.hpp"
#include "calibrate/profile_writer.hpp"

namespace dtsim::calibrate {

struct CalibrationOptions {
  /// The GEMM grid is every (m, n, k) with each dimension from this list.
  std::vector<std::int64_t> gemm_sizes{32, 128, 512, 2048};
  core::Bytes min_stream{4096}, max_stream{64.0 * 1048576};     ///< streaming kernels, x4 steps
  core::Bytes min_message{1024}, max_message{16.0 * 1048576};   ///< collectives, x4 steps
  /// Rank counts for the collectives: 2, 4, 8, ... up to and including the world.
  bool collectives = true;
  TimingOptions timing;
};

/// Collective over `world`; the result is complete on every rank.
/// Throws std::runtime_error when a check after a timed loop fails.
Measurements calibrate_cpu(MPI_Comm world, const CalibrationOptions& options);

/// Each call timed whole on every rank at once, as `dtsim run` launches it
/// (`count` GEMMs of its shape on the executor's kernels), in two passes of
/// opposite order keeping the lower median, as the grid's points are.
/// Collective over `world`: every rank passes the same calls.
/// Throws std::runtime_error when a call gives a wrong result.
/// The grid's points are timed so too, as calls of count 1.
std::vector<GemmCallPoint> time_gemm_calls(MPI_Comm world, std::vector<GemmCallPoint> calls, const TimingOptions& timing);

/// The plan's memory-bound calls larger than the largest size of their
/// family's streaming table, each timed whole on every rank at once (one
/// call of its bytes, as the executor streams it; two passes of opposite
/// order keeping the lower median) and added to that table as a point. Past
/// its last point a table scales that point's time linearly, at a bandwidth
/// a cache may still have served: on a machine with a 480 MiB last-level
/// cache the 64 MiB elementwise point ran at 17 GB/s and a 256 MiB one at
/// 14.5, and an Adam step over 4.2 M fp32 parameters took 1.9x the time the
/// table foretold (2026-12-06). Collective over `world`: every rank passes
/// the same calls. Throws std::runtime_error when a call gives a wrong result.
void time_stream_calls_past_the_tables(MPI_Comm world, const std::vector<hw::KernelCall>& calls,
                                       const TimingOptions& timing, Measurements& out);

/// The sizes from `first` to `last` in steps of `factor` (last included).
std::vector<core::Bytes> size_steps(core::Bytes first, core::Bytes last, double factor);

}  // namespace dtsim::calibrate
