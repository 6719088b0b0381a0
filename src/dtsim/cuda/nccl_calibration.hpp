#pragma once
// NCCL collectives over this machine's GPUs, one process driving them all
// (nccl-tests' single-process mode: ncclCommInitAll, grouped calls), timed
// by the host clock over back-to-back calls with every stream synchronized
// at the end. Sizes follow dtsim's convention (and nccl-tests'): `bytes` is
// a rank's whole tensor, which reduce-scatter, all-gather and all-to-all
// split into one chunk per rank.
#include <string>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/cuda/gpu_timer.hpp"

namespace dtsim::cuda {

struct CollectiveSeries {
  std::string op;  ///< net::to_string name ("all_reduce")
  int ranks = 0;
  std::vector<std::pair<core::Bytes, GpuSeries>> points;
};

/// Every collective on the first `gpus` GPUs over the sizes. One GPU runs
/// the reductions and gathers (what a group of one costs: NCCL's local copy
/// and launch); all-to-all and send/recv need two.
std::vector<CollectiveSeries> measure_nccl(int gpus, const std::vector<core::Bytes>& sizes, int warmup, int repeats);

/// nccl-tests' bus bandwidth factor: what turns algorithm bandwidth into
/// the per-link figure comparable across rank counts.
double bus_bandwidth_factor(const std::string& op, int ranks);

}  // namespace dtsim::cuda
