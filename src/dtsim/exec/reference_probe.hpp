#pragma once
/// A fixed reference workload timed on every rank at once: GEMMs that fit in
/// cache and a copy that streams from memory. Timed when a profile is
/// calibrated and again around a run, it says whether the machine ran at the
/// same speed for both: CPU share catches a rank time-sliced with another
/// process, but not a neighbour that takes memory bandwidth, cache or clock
/// frequency while every rank still holds its core.
#include <mpi.h>

#include "dtsim/core/units.hpp"

namespace dtsim::exec {

/// The probe's two halves, each the median over the repeats of the slowest
/// rank. They are kept apart because a neighbour can halve the memory
/// bandwidth while the GEMMs, which run from cache, keep their speed: in the
/// sum the change of the copy is diluted: on the 2-core development VM two
/// calibrations a minute apart streamed 64 MiB at 43 and 20 GB/s while the
/// summed probe of the first moved 25% and of the second 3%.
struct ProbeTimes {
  core::Seconds gemm;  ///< 8 GEMMs of 256^3, operands in a core's L2
  core::Seconds copy;  ///< a 32 MiB copy, past the last-level cache
  [[nodiscard]] core::Seconds total() const { return gemm + copy; }
  /// False for a profile written before the halves were kept: its total
  /// stands in the gemm half, with no copy.
  [[nodiscard]] bool has_halves() const { return copy.value() > 0; }
};

/// The mean of two probes, half by half: the machine between them.
ProbeTimes mean(const ProbeTimes& a, const ProbeTimes& b);

/// Collective over `world`: the probe's halves on every rank (about 4 ms a
/// repeat on a 2024 server core). 25 repeats, not 5: on a 2-core VM the
/// median of five moved 5-8% between probes seconds apart while the steps
/// between them did not, so the probe's own noise had graded the machine.
ProbeTimes time_reference_probe(MPI_Comm world, int repeats = 25);

/// How far `now` is from `then`, as a fraction of `then`: 0.1 is 10% slower.
double probe_drift(core::Seconds then, core::Seconds now);

/// The larger |probe_drift| of the two halves. A half that `then` lacks (a
/// profile written before the halves were kept has the total only, as its
/// gemm with a zero copy) is compared as the total.
double probe_drift(const ProbeTimes& then, const ProbeTimes& now);

/// The change of a step's time that the probe foretells: each half's signed
/// relative change weighted by the share of the step it stands for,
/// `gemm_share` for the cached GEMMs (the step's matmuls) and the rest for the
/// copy (streaming kernels, the optimizer, MPI through shared memory). A
/// neighbour that halves the memory bandwidth moves a step of matmuls little
/// and a step of streams a lot, and only the step's own change can make its
/// error a measure of the machine instead of the model. Against a `then`
/// without halves both weigh the total's change.
double step_drift(const ProbeTimes& then, const ProbeTimes& now, double gemm_share);

}  // namespace dtsim::exec
