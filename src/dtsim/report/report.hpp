#pragma once
/// What a step looked like: the figures of the output contract
/// (`schema: dtsim.report/1`), computed from a TaskGraph and its Timeline.
#include <optional>
#include <string>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"

namespace dtsim::report {

/// Facts about the run that the TaskGraph does not carry.
struct RunInfo {
  std::string model;
  std::string cluster;
  std::string device;
  std::string host;           ///< the CPU that launches the kernels (devices/hosts.json)
  core::Seconds host_launch;  ///< its time per launch, or the strategy's host_launch
  std::string strategy;
  int nodes = 1;
  int global_batch = 1;            ///< samples per step
  std::int64_t seq_len = 0;        ///< tokens per sample; 0 for non-sequence models
  std::string seq_len_source;      ///< where a loader took seq_len from (Graph::seq_len_source)
  double parameters = 0;
  core::FlopsPerSecond peak_per_gpu;  ///< dense peak for the strategy's dtype
  core::Bytes memory_capacity;
  /// Asynchronous workers: throughput is the sum of each worker's own rate,
  /// not the global batch over the slowest worker's time.
  bool asynchronous = false;
};

struct StageMemory {
  int stage = 0;
  core::Bytes params, grads, optimizer, activations, other, peak;
};

struct ExposedComm {
  core::Seconds tp, cp, ep, dp, pp;
  [[nodiscard]] core::Seconds total() const { return tp + cp + ep + dp + pp; }
};

struct Breakdown {
  int rank = 0;             ///< the busiest simulated rank, whose times these are
  core::Seconds compute;
  /// Of `compute`: what communication beside the kernels added by taking SMs
  /// and memory bandwidth (strategy key `contention`).
  core::Seconds compute_slowed;
  ExposedComm exposed_comm;
  core::Seconds bubble;     ///< idle: neither computing nor waiting on exposed communication
  /// Of `bubble`: the GPU free to run its next kernel while the host had not
  /// launched it yet (strategy key `host_launch`).
  core::Seconds host_wait;
};

struct Bottleneck {
  std::string kind;
  core::Seconds time;
  double fraction = 0;      ///< of the step
  std::string message;
};

/// Parameter-server training: how stale the gradients were when they
/// reached shard 0 (updates other workers applied since this worker pulled).
struct ParameterServerStats {
  int shards = 0;
  bool synchronous = false;
  int iterations = 0;
  std::vector<int> staleness_histogram;  ///< [s] = pushes that were s updates stale
  double mean_staleness = 0;
  int max_staleness = 0;
};

struct Report {
  RunInfo info;
  int gpus = 1;
  int micro_batches = 1;
  core::Seconds step_time;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  core::Flops model_flops_per_step;
  core::Flops hardware_flops_per_step;
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  core::Bytes peak_bytes;
  std::vector<StageMemory> per_stage;
  bool fits_in_memory = true;
  Breakdown breakdown;
  std::vector<Bottleneck> bottlenecks;
  std::optional<ParameterServerStats> parameter_server;
  std::uint64_t events = 0;
};

Report analyze(const plan::TaskGraph& graph, const plan::Timeline& timeline, const RunInfo& info, int micro_batches);

/// Staleness of every push at shard 0, from the order pushes and pulls ended there.
ParameterServerStats parameter_server_stats(const plan::TaskGraph& graph, const plan::Timeline& timeline, bool synchronous);

}  // namespace dtsim::report
