#pragma once
/// What a step looked like: the figures of the output contract
/// (`schema: dtsim.report/1`), computed from a TaskGraph and its Timeline.
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
  std::string strategy;
  int nodes = 1;
  int global_batch = 1;            ///< samples per step
  std::int64_t seq_len = 0;        ///< tokens per sample; 0 for non-sequence models
  double parameters = 0;
  core::FlopsPerSecond peak_per_gpu;  ///< dense peak for the strategy's dtype
  core::Bytes memory_capacity;
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
  ExposedComm exposed_comm;
  core::Seconds bubble;     ///< idle: neither computing nor waiting on exposed communication
};

struct Bottleneck {
  std::string kind;
  core::Seconds time;
  double fraction = 0;      ///< of the step
  std::string message;
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
  std::uint64_t events = 0;
};

Report analyze(const plan::TaskGraph& graph, const plan::Timeline& timeline, const RunInfo& info, int micro_batches);

}  // namespace dtsim::report
