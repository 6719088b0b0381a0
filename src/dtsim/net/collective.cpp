#include "dtsim/net/collective.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace dtsim::net {

using core::Bytes;
using core::BytesPerSecond;
using core::Seconds;

std::string_view to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kAllToAll: return "all_to_all";
    case CollectiveOp::kSendRecv: return "send_recv";
    case CollectiveOp::kRingExchange: return "ring_exchange";
  }
  return "?";
}

const topo::Route& Network::route(int from, int to) const {
  auto key = std::pair{from, to};
  auto it = routes_.find(key);
  if (it == routes_.end()) it = routes_.emplace(key, cluster_->route(from, to)).first;
  return it->second;
}

Network::StepCost Network::concurrent(const std::vector<std::pair<int, int>>& flows) const {
  std::unordered_map<int, int> flows_on_link;
  for (auto [from, to] : flows) {
    for (int link : route(from, to).links) ++flows_on_link[link];
  }
  StepCost step{BytesPerSecond(std::numeric_limits<double>::infinity()), Seconds(0)};
  for (auto [from, to] : flows) {
    const topo::Route& r = route(from, to);
    for (int link : r.links) {
      const auto& info = cluster_->links()[static_cast<std::size_t>(link)];
      const double scale = info.kind == topo::LinkKind::kNetwork ? options_.inter_bandwidth_scale
                                                                 : options_.intra_bandwidth_scale;
      const core::BytesPerSecond share = info.bandwidth * (info.efficiency * options_.efficiency_scale * scale) /
                                         static_cast<double>(flows_on_link[link]);
      step.per_flow_bandwidth = std::min(step.per_flow_bandwidth, share);
    }
    step.latency = std::max(step.latency, r.latency * options_.latency_scale);
  }
  return step;
}

// Rings that run at the same time (one per node, or one per local GPU index).
CollectiveCost Network::flat_ring(CollectiveOp op, const std::vector<std::vector<int>>& rings, Bytes bytes) const {
  std::vector<std::pair<int, int>> flows;
  std::size_t n = 0;
  for (const auto& ring : rings) {
    n = std::max(n, ring.size());
    for (std::size_t i = 0; i < ring.size() && ring.size() > 1; ++i) flows.emplace_back(ring[i], ring[(i + 1) % ring.size()]);
  }
  if (n <= 1) return {Seconds(0), BytesPerSecond(0), false, Algorithm::kRing};
  const StepCost step = concurrent(flows);
  const BytesPerSecond bandwidth = step.per_flow_bandwidth;
  const double nd = static_cast<double>(n);
  const double share = (nd - 1) / nd;
  double steps = nd - 1;
  Bytes per_rank = bytes * share;
  switch (op) {
    case CollectiveOp::kAllReduce: per_rank = bytes * (2 * share); steps = 2 * (nd - 1); break;
    case CollectiveOp::kBroadcast: per_rank = bytes; break;  // pipelined chunks along the ring
    case CollectiveOp::kSendRecv:
    case CollectiveOp::kRingExchange: per_rank = bytes; steps = 1; break;
    default: break;
  }
  return {per_rank / bandwidth + step.latency * steps, step.per_flow_bandwidth, false, Algorithm::kRing};
}

CollectiveCost Network::cost(CollectiveOp op, std::span<const int> gpus, Bytes bytes) const {
  return cost(op, gpus, bytes, options_.algorithm);
}

std::vector<std::pair<int, Bytes>> Network::link_traffic(CollectiveOp op, std::span<const int> gpus, Bytes bytes) const {
  std::vector<std::pair<int, Bytes>> out;
  // Each flow of each ring carries the ring's per-rank volume over every link of its route.
  auto rings = [&](CollectiveOp ring_op, const std::vector<std::vector<int>>& groups, Bytes b) {
    for (const auto& g : groups) {
      const std::size_t n = g.size();
      if (n <= 1) continue;
      const double nd = static_cast<double>(n);
      Bytes per_flow = b * ((nd - 1) / nd);
      if (ring_op == CollectiveOp::kAllReduce) per_flow = b * (2 * (nd - 1) / nd);
      if (ring_op == CollectiveOp::kSendRecv || ring_op == CollectiveOp::kRingExchange || ring_op == CollectiveOp::kBroadcast) {
        per_flow = b;
      }
      const std::size_t flows = ring_op == CollectiveOp::kSendRecv ? 1 : n;
      for (std::size_t i = 0; i < flows; ++i) {
        for (int link : route(g[i], g[(i + 1) % n]).links) out.emplace_back(link, per_flow);
      }
    }
  };
  // The same decomposition as cost(): hierarchical when a group spans nodes with several GPUs each.
  std::map<int, std::vector<int>> by_node;
  for (int gpu : gpus) by_node[cluster_->node_of(gpu)].push_back(gpu);
  const std::size_t per_node = by_node.begin()->second.size();
  const bool balanced = std::all_of(by_node.begin(), by_node.end(), [&](const auto& kv) { return kv.second.size() == per_node; });
  const bool collective = op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather;
  if (!collective || by_node.size() == 1 || per_node == 1 || !balanced) {
    rings(op, {std::vector<int>(gpus.begin(), gpus.end())}, bytes);
    return out;
  }
  std::vector<std::vector<int>> intra, inter(per_node);
  for (const auto& [node, members] : by_node) {
    intra.push_back(members);
    for (std::size_t j = 0; j < per_node; ++j) inter[j].push_back(members[j]);
  }
  if (op != CollectiveOp::kAllGather) rings(CollectiveOp::kReduceScatter, intra, bytes);
  rings(op, inter, bytes / static_cast<double>(per_node));
  if (op != CollectiveOp::kReduceScatter) rings(CollectiveOp::kAllGather, intra, bytes);
  return out;
}

CollectiveCost Network::cost(CollectiveOp op, std::span<const int> gpus, Bytes bytes, Algorithm algorithm) const {
  if (gpus.size() <= 1 || bytes.value() <= 0) return {Seconds(0), BytesPerSecond(0), false, Algorithm::kRing};
  if (auto fit = options_.measured.find({op, static_cast<int>(gpus.size())}); fit != options_.measured.end()) {
    // The fit stands for whatever the library did; scale it as a what-if asks.
    const int node = cluster_->node_of_endpoint(gpus.front());
    const bool one_node = std::all_of(gpus.begin(), gpus.end(),
                                      [&](int g) { return cluster_->node_of_endpoint(g) == node; });
    const double scale = one_node ? options_.intra_bandwidth_scale : options_.inter_bandwidth_scale;
    const BytesPerSecond bandwidth = fit->second.bandwidth * scale;
    return {fit->second.latency * options_.latency_scale + bytes / bandwidth, bandwidth, false, algorithm, true};
  }
  if (op == CollectiveOp::kSendRecv) {
    return flat_ring(op, {{gpus[0], gpus[1]}}, bytes);
  }
  if (op == CollectiveOp::kRingExchange) {
    return flat_ring(op, {std::vector<int>(gpus.begin(), gpus.end())}, bytes);
  }
  if (op == CollectiveOp::kAllToAll) {
    // Pairwise exchange: in step i every rank sends its 1/n share to rank (r + i) mod n.
    const std::size_t n = gpus.size();
    CollectiveCost total{Seconds(0), BytesPerSecond(std::numeric_limits<double>::infinity()), false, Algorithm::kDirect};
    for (std::size_t i = 1; i < n; ++i) {
      std::vector<std::pair<int, int>> flows;
      for (std::size_t r = 0; r < n; ++r) flows.emplace_back(gpus[r], gpus[(r + i) % n]);
      StepCost step = concurrent(flows);
      total.time += bytes / static_cast<double>(n) / step.per_flow_bandwidth + step.latency;
      total.bus_bandwidth = std::min(total.bus_bandwidth, step.per_flow_bandwidth);
    }
    return total;
  }

  std::map<int, std::vector<int>> by_node;
  for (int gpu : gpus) by_node[cluster_->node_of(gpu)].push_back(gpu);
  const std::size_t per_node = by_node.begin()->second.size();
  const bool balanced = std::all_of(by_node.begin(), by_node.end(), [&](const auto& kv) { return kv.second.size() == per_node; });
  if (by_node.size() == 1 || per_node == 1 || !balanced || op == CollectiveOp::kBroadcast) {
    return best_flat(op, {std::vector<int>(gpus.begin(), gpus.end())}, bytes, algorithm);
  }

  std::vector<std::vector<int>> intra, inter(per_node);
  for (const auto& [node, members] : by_node) {
    intra.push_back(members);
    for (std::size_t j = 0; j < per_node; ++j) inter[j].push_back(members[j]);
  }
  const Bytes shard = bytes / static_cast<double>(per_node);
  // Inside nodes the algorithm as asked (NVLS reduces only whole buffers, so
  // its hierarchical phases run as rings); across nodes, the k parallel groups.
  CollectiveCost total{Seconds(0), BytesPerSecond(0), true, algorithm};
  const Algorithm inner = algorithm == Algorithm::kNvls ? Algorithm::kRing : algorithm;
  auto add = [&](CollectiveOp step_op, const std::vector<std::vector<int>>& rings, Bytes b) {
    CollectiveCost c = best_flat(step_op, rings, b, inner);
    if (algorithm == Algorithm::kAuto && &rings == &inter) total.algorithm = c.algorithm;
    total.time += c.time;
    total.bus_bandwidth = total.bus_bandwidth.value() == 0 ? c.bus_bandwidth : std::min(total.bus_bandwidth, c.bus_bandwidth);
  };
  if (op != CollectiveOp::kAllGather) add(CollectiveOp::kReduceScatter, intra, bytes);
  add(op, inter, shard);
  if (op != CollectiveOp::kReduceScatter) add(CollectiveOp::kAllGather, intra, bytes);
  if (total.algorithm == Algorithm::kAuto) total.algorithm = Algorithm::kRing;
  return total;
}

}  // namespace dtsim::net
