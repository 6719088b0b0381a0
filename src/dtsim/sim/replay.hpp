#pragma once
/// Replays a TaskGraph on simulated hardware. A task starts when its
/// dependencies are done and its stream is free; a collective starts when
/// every simulated member of its group has reached it, and lasts what `net`
/// says for the group's real placement; memory is allocated when a task
/// starts and freed when it ends.
#include <array>

#include "dtsim/hw/cost_model.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"

namespace dtsim::sim {

/// The network model's name for an IR collective.
net::CollectiveOp to_net(plan::CommOp op);

/// Durations of every kernel and collective call of the graph, costed once.
struct TaskCosts {
  std::vector<core::Nanoseconds> kernel;
  std::vector<core::Nanoseconds> call;
  /// Relative compute speed of each rank (1 = as costed; 0.5 takes twice as
  /// long); empty means all 1. Stragglers and heterogeneous GPUs.
  std::vector<double> rank_speed;
  /// hw::Device::concurrent_streams: false runs a rank's kernels and
  /// collectives one at a time in program order (point-to-point transfers
  /// and server queues stay as they are).
  bool concurrent_streams = true;
  /// Per kernel, the share of its time each model::OpKind takes (sums to 1;
  /// all zero for an empty kernel): the critical path splits compute by it.
  std::vector<std::array<double, model::kOpKindCount>> kernel_op_share{};
  /// Flow-level network (empty: each call lasts `call`, the analytic cost):
  /// per call the plan whose phases share links max-min fairly with whatever
  /// else is in flight. A send's plan runs from group member 0 to member 1,
  /// its `reverse_plan` (backward gradients, parameter pulls) the other way.
  std::vector<net::CollectivePlan> call_plan{};
  std::vector<net::CollectivePlan> reverse_plan{};
  std::vector<double> link_capacity{};  ///< bytes per second (net::Network::link_capacity)
};

/// How the replay costs communication.
enum class NetworkMode { kAnalytic, kFlow };

TaskCosts cost_tasks(const plan::TaskGraph& graph, const hw::CostModel& cost_model, const net::Network& network,
                     NetworkMode mode = NetworkMode::kAnalytic);

plan::Timeline replay(const plan::TaskGraph& graph, const TaskCosts& costs);

inline plan::Timeline replay(const plan::TaskGraph& graph, const hw::CostModel& cost_model, const net::Network& network) {
  return replay(graph, cost_tasks(graph, cost_model, network));
}

}  // namespace dtsim::sim
