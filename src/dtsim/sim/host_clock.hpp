#pragma once
/// The host that launches a GPU rank's kernels and collectives. It issues
/// them in program order, one every `host_launch` (a kernel that runs a
/// chain of eager ops counts each), running ahead of the GPU from the step's
/// start, except at a sync: a kernel whose end the host waits for
/// (plan::Kernel::host_sync, as Megatron-Core's all-to-all dispatcher reads
/// the tokens per expert before its all-to-all). After a sync the host
/// issues again from the later of the kernel's end and its own clock, so
/// the GPU waits for every launch the host has not yet made.
#include <cstdint>
#include <optional>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/plan/task_graph.hpp"

namespace dtsim::sim {

class HostClock {
 public:
  /// `kernel_launches`: per kernel, the launches it takes; `sim_of_rank`:
  /// per graph rank, its simulated rank (-1: not simulated);
  /// `sim_of_instance`: per rank the replay runs, whose tasks it runs.
  HostClock(const plan::TaskGraph& graph, core::Nanoseconds host_launch, const std::vector<std::uint32_t>& kernel_launches,
            const std::vector<int>& sim_of_rank, const std::vector<std::uint32_t>& sim_of_instance);

  /// When the host launches template task `id` on rank instance `instance`;
  /// nullopt until the sync before it has ended.
  [[nodiscard]] std::optional<core::Nanoseconds> launched(std::size_t instance, std::uint32_t id,
                                                          std::uint32_t extra_launches = 0) const;
  /// Template task `id` ended at `now` on `instance`: true when it was a sync,
  /// which lets the host issue the tasks after it.
  bool ended(std::size_t instance, std::uint32_t id, core::Nanoseconds now);

 private:
  core::Nanoseconds host_launch_;
  std::vector<std::uint32_t> launches_before_;  ///< per template task: its rank's launches before it
  std::vector<std::uint32_t> segment_;          ///< per template task: syncs of its rank before it
  std::vector<std::uint8_t> is_sync_;           ///< per template task
  std::vector<std::vector<std::uint32_t>> segment_launches_;  ///< per simulated rank, per segment: launches before it
  std::vector<std::uint32_t> sim_of_instance_;
  std::vector<std::vector<core::Nanoseconds>> segment_start_;  ///< per instance: known segments' start
};

}  // namespace dtsim::sim
