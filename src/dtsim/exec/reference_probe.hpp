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

/// Collective over `world`: the median over `repeats` of the slowest rank's
/// time for one pass of the reference workload (about 6 ms on a 2024 server core).
core::Seconds time_reference_probe(MPI_Comm world, int repeats = 5);

/// How far `now` is from `then`, as a fraction of `then`: 0.1 is 10% slower.
double probe_drift(core::Seconds then, core::Seconds now);

}  // namespace dtsim::exec
