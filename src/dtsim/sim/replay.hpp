#pragma once
/// Replays a TaskGraph on simulated hardware. A task starts when its
/// dependencies are done and its stream is free; a collective starts when
/// every simulated member of its group has reached it, and lasts what `net`
/// says for the group's real placement; memory is allocated when a task
/// starts and freed when it ends.
#include <array>
#include <span>
#include <vector>

#include "dtsim/hw/cost_model.hpp"
#include "dtsim/hw/kernel_model.hpp"
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
  /// Per kernel, the kernels the host launches for it (hw::host_launches).
  std::vector<std::uint32_t> kernel_launches{};
  /// What the host takes to launch one kernel or collective (the strategy's
  /// host_launch; 0: the host is never behind). Without concurrent streams
  /// (a CPU rank, its own host) the replay ignores it.
  core::Nanoseconds host_launch{0};
  /// Per kernel, the share of its time each model::OpKind takes (sums to 1;
  /// all zero for an empty kernel): the critical path splits compute by it.
  std::vector<std::array<double, model::kOpKindCount>> kernel_op_share{};
  /// Per kernel, where its GEMMs run, as [begin, end) fractions of its time;
  /// filled only where the device's GEMMs are persistent
  /// (Contention::gemm_beside_held_sms): they hold every SM, so a
  /// collective launched while one runs starts when it ends.
  std::vector<std::vector<std::pair<double, double>>> kernel_gemm_spans{};
  /// Flow-level network (empty: each call lasts `call`, the analytic cost):
  /// per call the plan whose phases share links max-min fairly with whatever
  /// else is in flight. A send's plan runs from group member 0 to member 1,
  /// its `reverse_plan` (backward gradients, parameter pulls) the other way.
  std::vector<net::CollectivePlan> call_plan{};
  std::vector<net::CollectivePlan> reverse_plan{};
  std::vector<double> link_capacity{};  ///< bytes per second (net::Network::link_capacity)
  /// What a rank's communication in flight takes from its kernels (`sms` 0:
  /// nothing). See Contention.
  struct Contention {
    int sms = 0;                  ///< the device's SMs (its kernel figures)
    /// how its persistent GEMMs run beside SMs they were not told of
    /// (hw::KernelFigures); empty: their tiles spread over the SMs they find
    std::vector<hw::HeldSmsSlowdown> gemm_beside_held_sms;
    /// how its GEMMs run beside communication's memory traffic
    /// (hw::KernelFigures); empty: not measured, no slowdown
    std::vector<hw::TrafficSlowdown> gemm_beside_traffic;
    double hbm_bytes_per_s = 0;   ///< what a streaming kernel reaches on the device
    std::vector<int> call_sms;    ///< per call: one SM per NCCL channel
    /// per call: the kernels beside it are launched on the SMs it leaves
    /// (Transformer Engine's comm-GEMM overlap); otherwise they know nothing of it
    std::vector<char> call_announced;
    std::vector<double> call_hbm_bytes_per_s;  ///< per call: the local memory traffic it makes while in flight
  } contention{};
};

/// What a kernel's time is made of: its GEMMs' share and its attention's;
/// the rest streams memory.
struct KernelShares {
  double gemm = 0;
  double attention = 0;
};

/// SMs that communication in flight holds on a rank: `announced` ones the
/// kernels beside it were launched for, `unannounced` ones they know nothing of.
struct BusySms {
  int announced = 0;
  int unannounced = 0;
};

/// Kernels and communication on one GPU share it. NCCL runs each collective
/// and send as one thread block per channel, and a block takes an SM of its
/// own (its shared memory and threads leave no room for a GEMM's tile), so a
/// kernel that runs beside c channels has S - c SMs; and the collective's
/// bytes pass through the GPU's memory, so a streaming kernel beside it has
/// the rest of the bandwidth. While communication is in flight on its rank, a
/// kernel whose time is a share `g` GEMM, `a` attention, runs slower by
///
///   g * G + a * S / (S - c) + (1 - g - a) * B / (B - h)
///
/// with h the collective's local memory traffic over its time (NCCL stages
/// what a member receives in a buffer of its own: written, read back and
/// written again, 3x what it receives, sim/task_costs.cpp). A GEMM's tiles
/// spread over the SMs it finds, G = S / (S - c),
/// unless the device's GEMMs are persistent (one CTA per SM they were told
/// of) and u of the c SMs were not announced to them: then, with
/// c_announced = c - u,
///
///   G = S / (S - c_announced) * H(u),
///
/// H the device's measured slowdown of a GEMM launched beside u held SMs
/// (`beside_held_sms`, interpolated; past its last point it grows as the SMs
/// left shrink). Where the device measured it (`beside_traffic`), G is
/// also times T(h): a GEMM beside blocks that copy h bytes a second against
/// the same blocks spinning, interpolated, held at its last point. The
/// kernel's remaining work is re-timed whenever communication on its rank
/// starts or ends.
double contention_slowdown(KernelShares shares, int sms, BusySms busy,
                           std::span<const hw::HeldSmsSlowdown> gemm_beside_held_sms, double hbm_bytes_per_s,
                           double busy_hbm, std::span<const hw::TrafficSlowdown> gemm_beside_traffic = {});

/// How the replay costs communication.
enum class NetworkMode { kAnalytic, kFlow };

TaskCosts cost_tasks(const plan::TaskGraph& graph, const hw::CostModel& cost_model, const net::Network& network,
                     NetworkMode mode = NetworkMode::kAnalytic);

plan::Timeline replay(const plan::TaskGraph& graph, const TaskCosts& costs);

inline plan::Timeline replay(const plan::TaskGraph& graph, const hw::CostModel& cost_model, const net::Network& network) {
  return replay(graph, cost_tasks(graph, cost_model, network));
}

}  // namespace dtsim::sim
