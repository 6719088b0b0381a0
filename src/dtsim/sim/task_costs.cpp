#include "dtsim/sim/replay.hpp"

#include <algorithm>
#include <map>

#include "dtsim/hw/kernel_calls.hpp"
#include "dtsim/hw/kernel_model.hpp"

// What each kernel and collective of a TaskGraph costs, once per prediction:
// the replay reads these durations (and, flow-level, the plans).
namespace dtsim::sim {

net::CollectiveOp to_net(plan::CommOp op) {
  switch (op) {
    case plan::CommOp::kAllReduce: return net::CollectiveOp::kAllReduce;
    case plan::CommOp::kReduceScatter: return net::CollectiveOp::kReduceScatter;
    case plan::CommOp::kAllGather: return net::CollectiveOp::kAllGather;
    case plan::CommOp::kSendRecv: return net::CollectiveOp::kSendRecv;
    case plan::CommOp::kRingExchange: return net::CollectiveOp::kRingExchange;
    case plan::CommOp::kAllToAll: return net::CollectiveOp::kAllToAll;
    case plan::CommOp::kAllToAllAcrossNodes: return net::CollectiveOp::kAllToAllAcrossNodes;
    case plan::CommOp::kAllToAllInNode: return net::CollectiveOp::kAllToAllInNode;
  }
  return net::CollectiveOp::kAllReduce;
}

namespace {

// Local memory traffic per byte of the buffer while a collective runs on one
// of its n members. NCCL's kernels pass what a member receives through a
// staging buffer of its own, unless the user's buffers are registered: the
// bytes are written there, read back, and written to the output or on to
// the next member, "at least 2x ... if you add reading from or writing to
// user data, it can be 3x" the link's rate (NCCL's maintainer, NVIDIA/nccl
// issue 1428). So a member's share (n - 1) / n of the buffer costs 3 bytes a
// byte in an all-gather (staged, read back, written out) and in a
// reduce-scatter (staged, read back beside its own operand, the sum staged
// on), 6 in an all-reduce (both), 4 in an all-to-all (its own bytes read and
// staged for the peer to read, the peer's staged, read back, written out);
// a send or a receive 2 on its side. Transformer Engine's ring exchange and
// DeepEP write straight into registered buffers: what a member sends is
// read, what it receives written.
double local_traffic_per_byte(plan::CommOp op, std::size_t members) {
  const double n = static_cast<double>(std::max<std::size_t>(members, 1));
  const double share = (n - 1) / n;  // of the buffer each member sends (and receives)
  switch (op) {
    case plan::CommOp::kAllGather:
    case plan::CommOp::kReduceScatter: return 3.0 * share;
    case plan::CommOp::kAllReduce: return 6.0 * share;  // a reduce-scatter, then an all-gather
    case plan::CommOp::kAllToAll: return 4.0 * share;
    case plan::CommOp::kSendRecv: return 2.0;
    case plan::CommOp::kRingExchange: return 2.0;
    // `bytes` is what a member sends at this level; it receives as much.
    case plan::CommOp::kAllToAllAcrossNodes:
    case plan::CommOp::kAllToAllInNode: return 2.0;
  }
  return 2.0;
}

// A copy of a group runs the same phases on other links; its flows join the
// plan's (a copy planned differently, e.g. by another algorithm, is left out:
// it cannot move in lock-step with the group).
void add_flows(net::CollectivePlan& plan, const net::CollectivePlan& copy) {
  if (plan.fixed || copy.fixed || copy.phases.size() != plan.phases.size()) return;
  for (std::size_t i = 0; i < plan.phases.size(); ++i) {
    net::FlowPhase& p = plan.phases[i];
    const net::FlowPhase& q = copy.phases[i];
    if (q.bytes_per_flow.value() != p.bytes_per_flow.value()) return;
  }
  for (std::size_t i = 0; i < plan.phases.size(); ++i) {
    net::FlowPhase& p = plan.phases[i];
    std::map<int, int> flows(p.flows_on_link.begin(), p.flows_on_link.end());
    for (auto [link, k] : copy.phases[i].flows_on_link) flows[link] += k;
    p.flows_on_link.assign(flows.begin(), flows.end());
    p.latency = std::max(p.latency, copy.phases[i].latency);
  }
}

}  // namespace

TaskCosts cost_tasks(const plan::TaskGraph& graph, const hw::CostModel& cost_model, const net::Network& network,
                     NetworkMode mode) {
  TaskCosts costs;
  costs.concurrent_streams = cost_model.device().concurrent_streams;
  costs.kernel.reserve(graph.kernels.size());
  // Only GPUs with kernel figures know their SMs; a CPU rank runs one thing at a time anyway.
  const hw::Device& device = cost_model.device();
  const bool contention = device.concurrent_streams && device.kernel_figures && device.kernel_figures->sms > 0;
  const bool persistent_gemms = contention && !device.kernel_figures->gemm_beside_held_sms.empty();
  for (const plan::Kernel& k : graph.kernels) {
    core::Seconds total;
    std::array<double, model::kOpKindCount> by_kind{};
    std::uint32_t launches = 0;
    std::vector<std::pair<double, double>> gemm_spans;
    for (const hw::OpWork& w : k.ops) {
      launches += static_cast<std::uint32_t>(hw::host_launches(w));
      const core::Seconds t = cost_model.time(w, graph.dtype);
      if (persistent_gemms && w.kind == model::OpKind::kGemm && t.value() > 0) {
        gemm_spans.emplace_back(total.value(), (total + t).value());
      }
      total += t;
      by_kind[static_cast<std::size_t>(w.kind)] += t.value();
    }
    if (total.value() > 0) {
      for (double& share : by_kind) share /= total.value();
      for (auto& [begin, end] : gemm_spans) {
        begin /= total.value();
        end /= total.value();
      }
    }
    costs.kernel.push_back(core::to_nanoseconds(total));
    costs.kernel_launches.push_back(launches);
    costs.kernel_op_share.push_back(by_kind);
    if (persistent_gemms) costs.kernel_gemm_spans.push_back(std::move(gemm_spans));
  }
  costs.call.reserve(graph.calls.size());
  if (contention) {
    costs.contention.sms = device.kernel_figures->sms;
    costs.contention.gemm_beside_held_sms = device.kernel_figures->gemm_beside_held_sms;
    costs.contention.gemm_beside_traffic = device.kernel_figures->gemm_beside_traffic;
    costs.contention.hbm_bytes_per_s = device.hbm_bandwidth.value() * device.kernel_figures->memory_fraction;
  }
  auto gpus_of = [&](const std::vector<int>& ranks, bool reverse) {
    std::vector<int> gpus;
    for (int r : ranks) gpus.push_back(graph.gpu_of_rank[static_cast<std::size_t>(r)]);
    if (reverse) std::reverse(gpus.begin(), gpus.end());
    return gpus;
  };
  // Flow-level: the group's plan with its copies' flows on the links as well.
  auto with_copies = [&](net::CollectivePlan plan, const plan::CommCall& c, bool reverse) {
    for (const std::vector<int>& copy : graph.groups[static_cast<std::size_t>(c.group)].copies) {
      add_flows(plan, network.plan(to_net(c.op), gpus_of(copy, reverse), c.bytes));
    }
    return plan;
  };
  // DeepEP's NVLink level runs in the kernel of its network level, whose
  // SMs the network level's call already holds; one level alone (a group in
  // one node) is a kernel of its own.
  auto in_second_level_kernel = [&](const plan::CommCall& c, const plan::CommGroup& group) {
    if (c.op != plan::CommOp::kAllToAllInNode || group.ranks.empty()) return false;
    const topo::Cluster& cluster = network.cluster();
    const int first = cluster.node_of_endpoint(graph.gpu_of_rank[static_cast<std::size_t>(group.ranks.front())]);
    return std::any_of(group.ranks.begin(), group.ranks.end(), [&](int r) {
      return cluster.node_of_endpoint(graph.gpu_of_rank[static_cast<std::size_t>(r)]) != first;
    });
  };
  for (const plan::CommCall& c : graph.calls) {
    const plan::CommGroup& group = graph.groups[static_cast<std::size_t>(c.group)];
    net::CollectivePlan plan = network.plan(to_net(c.op), gpus_of(group.ranks, false), c.bytes);
    costs.call.push_back(core::to_nanoseconds(network.time(plan)));
    if (contention) {
      const double seconds = static_cast<double>(costs.call.back().count) * 1e-9;
      costs.contention.call_sms.push_back(in_second_level_kernel(c, group) ? 0 : plan.channels);
      costs.contention.call_announced.push_back(group.kind == plan::GroupKind::kTp && graph.tp_comm_overlap);
      costs.contention.call_hbm_bytes_per_s.push_back(
          seconds > 0 ? c.bytes.value() * local_traffic_per_byte(c.op, group.ranks.size()) / seconds : 0.0);
    }
    if (mode == NetworkMode::kFlow) {
      const bool send = c.op == plan::CommOp::kSendRecv;
      costs.reverse_plan.push_back(
          send ? with_copies(network.plan(to_net(c.op), gpus_of(group.ranks, true), c.bytes), c, true) : net::CollectivePlan{});
      costs.call_plan.push_back(with_copies(std::move(plan), c, false));
    }
  }
  if (mode == NetworkMode::kFlow) costs.link_capacity = network.link_capacity();
  return costs;
}

}  // namespace dtsim::sim
