#pragma once
/// The real executor, CPU backend: runs a TaskGraph on MPI ranks and records
/// what happened as a plan::Timeline, the type the simulator produces.
///
/// Each rank runs its own tasks on one thread: compute tasks launch the
/// kernel_calls() of their ops (BLAS GEMMs of the op's shapes, streaming
/// kernels of its bytes), communication tasks the matching MPI call on the
/// group's communicator. Tasks run in the order the simulated timeline
/// started them, which respects every dependency and gives all members of a
/// collective one order, so ranks cannot deadlock. Activations are really
/// allocated when a task starts and released when one frees them, through a
/// cache like a framework's allocator (so steps after the first do not fault
/// pages); weights, gradients and optimizer state are allocated up front.
#include <string>
#include <vector>

#include <mpi.h>

#include "dtsim/core/units.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"

namespace dtsim::exec {

struct ExecuteOptions {
  int warmup_steps = 1;  ///< run and discarded: page faults, cold caches, MPI connection setup
  int steps = 3;         ///< timed; the median step is reported
};

struct Execution {
  /// The median timed step: spans of every rank's tasks (on rank 0; other
  /// ranks hold only their own), makespan the slowest rank's, and peak_memory
  /// per rank what was allocated at most.
  plan::Timeline timeline;
  std::vector<core::Seconds> step_times;  ///< every timed step, slowest rank
  std::vector<core::Bytes> max_rss;       ///< per rank, the process's resident peak (getrusage)
  /// The least share of a core any rank got during the median step (CPU time
  /// over wall time; MPI waits spin, so an undisturbed rank is near 1). Below
  /// about 0.9 something else ran on the machine and the timing is not the plan's.
  double cpu_share = 1.0;
  /// The largest rank's kernel operand buffers (and on the CPU backend
  /// MPI's send and receive buffers): scratch standing in for tensors the
  /// plan's weights and activations count, so kept out of peak_memory.
  core::Bytes scratch_bytes;
};

/// CPU time this process has used, in seconds.
double process_cpu_seconds();

/// Collective over `world`. The graph must be lowered with every rank
/// (LowerOptions::full), for the world's size, without parameter servers;
/// `order` is its simulated timeline.
Execution execute(const plan::TaskGraph& graph, const plan::Timeline& order, MPI_Comm world,
                  const ExecuteOptions& options);

}  // namespace dtsim::exec
