// The collective algorithms, each as phases of concurrent flows (Simple
// protocol; protocol.cpp rewrites them for LL and LL128).
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "dtsim/net/collective.hpp"

namespace dtsim::net {

using core::Bytes;
using core::Seconds;

namespace {

constexpr Algorithm kAllAlgorithms[] = {Algorithm::kAuto,  Algorithm::kRing,  Algorithm::kTree,
                                        Algorithm::kHalvingDoubling, Algorithm::kDirect, Algorithm::kNvls,
                                        Algorithm::kSharp, Algorithm::kParameterServer, Algorithm::kReduceBroadcast};

bool reduces(CollectiveOp op) { return op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter; }
bool gathers(CollectiveOp op) { return op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllGather; }

std::size_t largest(const std::vector<std::vector<int>>& groups) {
  std::size_t n = 0;
  for (const auto& g : groups) n = std::max(n, g.size());
  return n;
}

}  // namespace

std::string_view to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kNvls: return "nvls";
    case Algorithm::kSharp: return "sharp";
    case Algorithm::kParameterServer: return "ps";
    case Algorithm::kReduceBroadcast: return "reduce_broadcast";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view text) {
  for (Algorithm a : kAllAlgorithms) {
    if (text == to_string(a)) return a;
  }
  return std::nullopt;
}

std::string_view algorithm_names() {
  return "auto, ring, tree, halving_doubling, direct, nvls, sharp, ps, reduce_broadcast";
}

Network::RingVolume Network::ring_volume(CollectiveOp op, std::size_t members) {
  const double n = static_cast<double>(members);
  switch (op) {
    case CollectiveOp::kAllReduce: return {2 * (n - 1) / n, 2 * (n - 1)};
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce: return {1, n - 1};  // pipelined chunks along the ring
    case CollectiveOp::kSendRecv:
    case CollectiveOp::kRingExchange: return {1, 1};
    default: return {(n - 1) / n, n - 1};
  }
}

Network::Network(const topo::Cluster& cluster, NetworkOptions options) : cluster_(&cluster), options_(std::move(options)) {
  capacity_.reserve(cluster.links().size());
  for (const topo::LinkInfo& link : cluster.links()) {
    const double scale = link.kind == topo::LinkKind::kNetwork ? options_.inter_bandwidth_scale
                                                               : options_.intra_bandwidth_scale;
    capacity_.push_back(link.bandwidth.value() * link.efficiency * options_.efficiency_scale * scale);
  }
}

const topo::Route& Network::route(int from, int to) const {
  auto key = std::pair{from, to};
  auto it = routes_.find(key);
  if (it == routes_.end()) {
    it = routes_.emplace(key, cluster_->route(from, to, search_scratch_)).first;
  }
  return it->second;
}

FlowPhase Network::phase(const Flows& flows, Bytes bytes_per_flow, double steps) const {
  FlowPhase out;
  out.bytes_per_flow = bytes_per_flow;
  std::unordered_map<int, int> count;
  for (auto [from, to] : flows) {
    const topo::Route& r = route(from, to);
    for (int link : r.links) ++count[link];
    out.latency = std::max(out.latency, r.latency * options_.latency_scale);
  }
  out.latency = out.latency * steps;
  out.flows_on_link.assign(count.begin(), count.end());
  std::sort(out.flows_on_link.begin(), out.flows_on_link.end());  // deterministic order
  return out;
}

Seconds Network::time(const FlowPhase& phase) const {
  double busiest = 0;  // seconds per byte of one flow on the most loaded link
  for (auto [link, flows] : phase.flows_on_link) {
    busiest = std::max(busiest, flows / capacity_[static_cast<std::size_t>(link)]);
  }
  return phase.latency + Seconds(phase.bytes_per_flow.value() * busiest / phase.rate_fraction);
}

Seconds Network::time(const CollectivePlan& plan) const {
  if (plan.fixed) return *plan.fixed;
  Seconds total;
  for (const FlowPhase& p : plan.phases) total += time(p);
  return total;
}

// Rings that run at the same time (one per node, or one per local GPU index).
CollectivePlan Network::ring(CollectiveOp op, const std::vector<std::vector<int>>& rings, Bytes bytes) const {
  CollectivePlan plan;
  const std::size_t n = largest(rings);
  if (n <= 1) return plan;
  Flows flows;
  for (const auto& r : rings) {
    if (r.size() <= 1) continue;
    if (op == CollectiveOp::kSendRecv) {
      flows.emplace_back(r[0], r[1]);  // one direction: a send is not a ring
      continue;
    }
    for (std::size_t i = 0; i < r.size(); ++i) flows.emplace_back(r[i], r[(i + 1) % r.size()]);
  }
  const RingVolume v = ring_volume(op, n);
  plan.phases.push_back(phase(flows, bytes * v.bytes_per_rank, v.steps));
  return plan;
}

// NCCL's ring over several nodes is one flat ring per channel through every
// member, not a hierarchy of phases: the chunks pipeline along it, so the
// slowest hop sets the rate. Each ring leaves a node through its own NIC and
// stays on its rail: PXN (NCCL 2.12 on) has the node's last member hand the
// data over NVLink to the member on the rail of the next node's entry. So, per
// node, ring j is the node's whole NVLink cycle plus one crossing from member
// j to member j of the next node; the node's p rings take S/p each.
CollectivePlan Network::ring_across_nodes(CollectiveOp op, const std::vector<std::vector<int>>& nodes, Bytes bytes) const {
  const std::size_t per_node = nodes.front().size(), count = nodes.size();
  Flows cycle, across;
  for (std::size_t a = 0; a < count; ++a) {
    for (std::size_t i = 0; i < per_node; ++i) {
      cycle.emplace_back(nodes[a][i], nodes[a][(i + 1) % per_node]);
      across.emplace_back(nodes[a][i], nodes[(a + 1) % count][i]);
    }
  }
  const FlowPhase inside = phase(cycle, Bytes(0), 1), crossing = phase(across, Bytes(0), 1);
  // Each hop of a node's cycle carries all of the node's rings.
  std::map<int, int> load;
  for (auto [link, flows] : inside.flows_on_link) load[link] += flows * static_cast<int>(per_node);
  for (auto [link, flows] : crossing.flows_on_link) load[link] += flows;
  const RingVolume v = ring_volume(op, per_node * count);
  FlowPhase ring;
  ring.bytes_per_flow = bytes / static_cast<double>(per_node) * v.bytes_per_rank;
  ring.flows_on_link.assign(load.begin(), load.end());
  // A chunk crosses the ring's hops in turn: `count` of every n are network hops.
  const double n = static_cast<double>(per_node * count), crossings = static_cast<double>(count);
  ring.latency = (crossing.latency * crossings + inside.latency * (n - crossings)) * (v.steps / n);
  CollectivePlan plan;
  plan.phases.push_back(std::move(ring));
  return plan;
}

std::optional<CollectivePlan> Network::tree(CollectiveOp op, const std::vector<std::vector<int>>& groups, Bytes bytes) const {
  if (op != CollectiveOp::kAllReduce && op != CollectiveOp::kBroadcast && op != CollectiveOp::kReduce) return std::nullopt;
  // Binary tree in heap order; the double tree's two halves keep every link busy both ways.
  Flows flows;
  for (const auto& g : groups) {
    for (std::size_t i = 1; i < g.size(); ++i) {
      flows.emplace_back(g[i], g[(i - 1) / 2]);
      flows.emplace_back(g[(i - 1) / 2], g[i]);
    }
  }
  const double depth = std::ceil(std::log2(static_cast<double>(largest(groups))));
  const double passes = op == CollectiveOp::kAllReduce ? 2 : 1;  // reduce up, broadcast down
  CollectivePlan plan;
  plan.phases.push_back(phase(flows, bytes * passes, passes * depth));
  return plan;
}

std::optional<CollectivePlan> Network::halving_doubling(CollectiveOp op, const std::vector<std::vector<int>>& groups,
                                                        Bytes bytes) const {
  const std::size_t n = largest(groups);
  if (!std::has_single_bit(n) || (!reduces(op) && !gathers(op))) return std::nullopt;
  CollectivePlan plan;
  auto run = [&](bool halving) {
    for (std::size_t k = 0; (std::size_t{1} << k) < n; ++k) {
      // Halving pairs far partners first with half the data; doubling mirrors it.
      const std::size_t level = halving ? k : std::bit_width(n) - 2 - k;
      const std::size_t distance = n >> (level + 1);
      Flows flows;
      for (const auto& g : groups) {
        for (std::size_t i = 0; i < g.size(); ++i) flows.emplace_back(g[i], g[i ^ distance]);
      }
      plan.phases.push_back(phase(flows, bytes / static_cast<double>(std::size_t{2} << level), 1));
    }
  };
  if (reduces(op)) run(true);
  if (gathers(op)) run(false);
  return plan;
}

std::optional<CollectivePlan> Network::direct(CollectiveOp op, const std::vector<std::vector<int>>& groups, Bytes bytes) const {
  if (!reduces(op) && !gathers(op) && op != CollectiveOp::kAllToAll) return std::nullopt;
  const std::size_t n = largest(groups);
  const Bytes shard = bytes / static_cast<double>(n);
  CollectivePlan plan;
  if (op == CollectiveOp::kAllToAll) {
    // Pairwise exchange: in step i every rank sends its 1/n share to rank (r + i) mod n.
    for (std::size_t i = 1; i < n; ++i) {
      Flows flows;
      for (const auto& g : groups) {
        for (std::size_t r = 0; r < g.size(); ++r) flows.emplace_back(g[r], g[(r + i) % g.size()]);
      }
      plan.phases.push_back(phase(flows, shard, 1));
    }
    return plan;
  }
  Flows flows;
  for (const auto& g : groups) {
    for (int a : g) {
      for (int b : g) {
        if (a != b) flows.emplace_back(a, b);
      }
    }
  }
  if (reduces(op)) plan.phases.push_back(phase(flows, shard, 1));
  if (gathers(op)) plan.phases.push_back(phase(flows, shard, 1));
  return plan;
}

std::optional<CollectivePlan> Network::nvls(CollectiveOp op, const std::vector<std::vector<int>>& groups, Bytes bytes) const {
  if (op != CollectiveOp::kAllReduce || !cluster_->nvls()) return std::nullopt;
  Flows flows;
  for (const auto& g : groups) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (cluster_->node_of(g[i]) != cluster_->node_of(g.front())) return std::nullopt;
      // Each GPU writes its buffer into the switch, which reduces, and reads the result back.
      flows.emplace_back(g[i], g[(i + 1) % g.size()]);
    }
  }
  CollectivePlan plan;
  plan.phases.push_back(phase(flows, bytes, 2));
  plan.phases.back().rate_fraction = cluster_->nvls_rate_fraction();
  return plan;
}

std::optional<CollectivePlan> Network::sharp(CollectiveOp op, const std::vector<std::vector<int>>& groups, Bytes bytes) const {
  if (op != CollectiveOp::kAllReduce || !cluster_->sharp()) return std::nullopt;
  Flows flows;
  for (const auto& g : groups) {
    std::set<int> nodes;
    for (int gpu : g) nodes.insert(cluster_->node_of(gpu));
    if (nodes.size() != g.size() || g.size() < 2) return std::nullopt;  // one member per node
    // The switch that joins the group is the top of a route between its
    // farthest members (the middle of a symmetric fat-tree path).
    const topo::Route& across = route(g.front(), g.back());
    if (across.links.size() < 2) return std::nullopt;
    const int top = topo::Cluster::switch_endpoint(
        cluster_->links()[static_cast<std::size_t>(across.links[across.links.size() / 2 - 1])].to);
    for (int gpu : g) {
      flows.emplace_back(gpu, top);
      flows.emplace_back(top, gpu);
    }
  }
  CollectivePlan plan;
  plan.phases.push_back(phase(flows, bytes, 2));  // up and down, pipelined
  return plan;
}

std::optional<CollectivePlan> Network::parameter_server(CollectiveOp op, const std::vector<int>& group, Bytes bytes) const {
  if (op != CollectiveOp::kAllReduce) return std::nullopt;
  std::set<int> nodes;
  for (int gpu : group) nodes.insert(cluster_->node_of(gpu));
  const Bytes shard = bytes / static_cast<double>(nodes.size());
  Flows push, pull;
  for (int gpu : group) {
    for (int node : nodes) {
      push.emplace_back(gpu, cluster_->host_endpoint(node));
      pull.emplace_back(cluster_->host_endpoint(node), gpu);
    }
  }
  CollectivePlan plan;
  plan.phases.push_back(phase(push, shard, 1));
  plan.phases.push_back(phase(pull, shard, 1));
  return plan;
}

std::optional<CollectivePlan> Network::reduce_broadcast(CollectiveOp op, const std::vector<int>& group, Bytes bytes) const {
  if (op != CollectiveOp::kAllReduce && op != CollectiveOp::kBroadcast && op != CollectiveOp::kReduce) return std::nullopt;
  const int root = group.front();
  Flows to_root, from_root;
  for (std::size_t i = 1; i < group.size(); ++i) {
    to_root.emplace_back(group[i], root);
    from_root.emplace_back(root, group[i]);
  }
  CollectivePlan plan;
  if (op != CollectiveOp::kBroadcast) plan.phases.push_back(phase(to_root, bytes, 1));
  if (op != CollectiveOp::kReduce) plan.phases.push_back(phase(from_root, bytes, 1));
  return plan;
}

std::optional<CollectivePlan> Network::flat(CollectiveOp op, const std::vector<std::vector<int>>& groups, Bytes bytes,
                                            Algorithm algorithm) const {
  std::optional<CollectivePlan> out;
  switch (algorithm) {
    case Algorithm::kRing: out = ring(op, groups, bytes); break;
    case Algorithm::kTree: out = tree(op, groups, bytes); break;
    case Algorithm::kHalvingDoubling: out = halving_doubling(op, groups, bytes); break;
    case Algorithm::kDirect: out = direct(op, groups, bytes); break;
    case Algorithm::kNvls: out = nvls(op, groups, bytes); break;
    case Algorithm::kSharp: out = sharp(op, groups, bytes); break;
    case Algorithm::kParameterServer:
    case Algorithm::kReduceBroadcast:
    case Algorithm::kAuto: return std::nullopt;  // whole-group algorithms: simple_plan
  }
  if (out) out->algorithm = algorithm;
  return out;
}

Network::NodeSplit Network::split_by_node(std::span<const int> gpus) const {
  std::map<int, std::vector<int>> by_node;
  for (int gpu : gpus) by_node[cluster_->node_of(gpu)].push_back(gpu);
  NodeSplit split;
  const std::size_t first = by_node.begin()->second.size();
  for (auto& [node, members] : by_node) {
    split.balanced = split.balanced && members.size() == first;
    if (split.rails.size() < members.size()) split.rails.resize(members.size());
    for (std::size_t j = 0; j < members.size(); ++j) split.rails[j].push_back(members[j]);
    split.nodes.push_back(std::move(members));
  }
  return split;
}

std::optional<CollectivePlan> Network::simple_plan(CollectiveOp op, std::span<const int> gpus, Bytes bytes,
                                                   Algorithm algorithm) const {
  const std::vector<int> group(gpus.begin(), gpus.end());
  if (op == CollectiveOp::kSendRecv) return ring(op, {{group[0], group[1]}}, bytes);
  if (op == CollectiveOp::kRingExchange) return ring(op, {group}, bytes);
  if (op == CollectiveOp::kAllToAll) return direct(op, {group}, bytes);
  std::optional<CollectivePlan> out;
  if (algorithm == Algorithm::kParameterServer) out = parameter_server(op, group, bytes);
  if (algorithm == Algorithm::kReduceBroadcast) out = reduce_broadcast(op, group, bytes);
  if (algorithm == Algorithm::kParameterServer || algorithm == Algorithm::kReduceBroadcast) {
    if (out) out->algorithm = algorithm;
    return out;
  }

  const NodeSplit split = split_by_node(gpus);
  const std::vector<std::vector<int>>& intra = split.nodes;
  const std::vector<std::vector<int>>& inter = split.rails;
  const std::size_t per_node = intra.front().size();
  if (intra.size() == 1 || per_node == 1 || !split.balanced || op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce) {
    return flat(op, {group}, bytes, algorithm);
  }
  if (algorithm == Algorithm::kRing) {
    CollectivePlan plan = ring_across_nodes(op, intra, bytes);
    plan.algorithm = algorithm;
    return plan;
  }
  // Other algorithms run hierarchically: across nodes the k parallel groups
  // run the algorithm; inside nodes it runs where it applies (NVLS and SHARP
  // reduce whole buffers: rings there).
  auto across = flat(op, inter, bytes / static_cast<double>(per_node), algorithm);
  if (!across) return std::nullopt;
  auto inside = [&](CollectiveOp step) {
    auto p = flat(step, intra, bytes, algorithm);
    return p ? *p : ring(step, intra, bytes);
  };
  CollectivePlan plan;
  plan.algorithm = algorithm;
  plan.hierarchical = true;
  auto append = [&](const CollectivePlan& part) { plan.phases.insert(plan.phases.end(), part.phases.begin(), part.phases.end()); };
  if (op != CollectiveOp::kAllGather) append(inside(CollectiveOp::kReduceScatter));
  append(*across);
  if (op != CollectiveOp::kReduceScatter) append(inside(CollectiveOp::kAllGather));
  return plan;
}

}  // namespace dtsim::net
