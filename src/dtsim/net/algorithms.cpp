// The collective algorithms beside the ring, as steps of concurrent flows
// costed by Network::concurrent (flows sharing a link split it).
#include <algorithm>
#include <bit>
#include <cmath>

#include "dtsim/net/collective.hpp"

namespace dtsim::net {

using core::Bytes;
using core::BytesPerSecond;
using core::Seconds;

std::string_view to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kNvls: return "nvls";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view text) {
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kTree, Algorithm::kHalvingDoubling,
                      Algorithm::kDirect, Algorithm::kNvls}) {
    if (text == to_string(a)) return a;
  }
  return std::nullopt;
}

std::optional<CollectiveOp> parse_collective_op(std::string_view text) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather,
                          CollectiveOp::kBroadcast, CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    if (text == to_string(op)) return op;
  }
  return std::nullopt;
}

// Sums, step by step, the slowest flow's time plus the longest route's latency.
std::optional<CollectiveCost> Network::steps_cost(const std::vector<std::vector<std::pair<int, int>>>& steps,
                                                  const std::vector<Bytes>& bytes_per_step) const {
  CollectiveCost total{Seconds(0), BytesPerSecond(std::numeric_limits<double>::infinity()), false, Algorithm::kRing};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].empty()) continue;
    StepCost step = concurrent(steps[i]);
    total.time += bytes_per_step[i] / step.per_flow_bandwidth + step.latency;
    total.bus_bandwidth = std::min(total.bus_bandwidth, step.per_flow_bandwidth);
  }
  return total;
}

std::optional<CollectiveCost> Network::flat(CollectiveOp op, const std::vector<std::vector<int>>& groups, Bytes bytes,
                                            Algorithm algorithm) const {
  std::size_t n = 0;
  for (const auto& g : groups) n = std::max(n, g.size());
  const bool reduce = op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter;
  const bool gather = op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllGather;
  std::optional<CollectiveCost> out;
  switch (algorithm) {
    case Algorithm::kRing:
      out = flat_ring(op, groups, bytes);
      break;
    case Algorithm::kTree: {
      if (op != CollectiveOp::kAllReduce && op != CollectiveOp::kBroadcast) return std::nullopt;
      // Binary tree in heap order; the double tree's two halves keep every link busy both ways.
      std::vector<std::pair<int, int>> flows;
      for (const auto& g : groups) {
        for (std::size_t i = 1; i < g.size(); ++i) {
          flows.emplace_back(g[i], g[(i - 1) / 2]);
          flows.emplace_back(g[(i - 1) / 2], g[i]);
        }
      }
      StepCost step = concurrent(flows);
      const double depth = std::ceil(std::log2(static_cast<double>(n)));
      const double passes = op == CollectiveOp::kAllReduce ? 2 : 1;  // reduce up, broadcast down
      out = CollectiveCost{bytes * passes / step.per_flow_bandwidth + step.latency * (passes * depth),
                           step.per_flow_bandwidth, false, algorithm};
      break;
    }
    case Algorithm::kHalvingDoubling: {
      if (!std::has_single_bit(n) || (!reduce && !gather)) return std::nullopt;
      std::vector<std::vector<std::pair<int, int>>> steps;
      std::vector<Bytes> sizes;
      auto phase = [&](bool halving) {
        for (std::size_t k = 0; (std::size_t{1} << k) < n; ++k) {
          // Halving pairs far partners first with half the data; doubling mirrors it.
          std::size_t level = halving ? k : std::bit_width(n) - 2 - k;
          std::size_t distance = n >> (level + 1);
          std::vector<std::pair<int, int>> flows;
          for (const auto& g : groups) {
            for (std::size_t i = 0; i < g.size(); ++i) flows.emplace_back(g[i], g[i ^ distance]);
          }
          steps.push_back(flows);
          sizes.push_back(bytes / static_cast<double>(std::size_t{2} << level));
        }
      };
      if (reduce) phase(true);
      if (gather) phase(false);
      out = steps_cost(steps, sizes);
      break;
    }
    case Algorithm::kDirect: {
      if (!reduce && !gather && op != CollectiveOp::kAllToAll) return std::nullopt;
      std::vector<std::pair<int, int>> flows;
      for (const auto& g : groups) {
        for (int a : g) {
          for (int b : g) {
            if (a != b) flows.emplace_back(a, b);
          }
        }
      }
      const Bytes shard = bytes / static_cast<double>(n);
      std::vector<std::vector<std::pair<int, int>>> steps;
      if (reduce || op == CollectiveOp::kAllToAll) steps.push_back(flows);
      if (gather) steps.push_back(flows);
      out = steps_cost(steps, std::vector<Bytes>(steps.size(), shard));
      break;
    }
    case Algorithm::kNvls: {
      if (op != CollectiveOp::kAllReduce) return std::nullopt;
      for (const auto& g : groups) {
        for (int gpu : g) {
          if (!cluster_->nvls() || cluster_->node_of(gpu) != cluster_->node_of(g.front())) return std::nullopt;
        }
      }
      // Each GPU writes its buffer into the switch, which reduces, and reads the result back.
      std::vector<std::pair<int, int>> flows;
      for (const auto& g : groups) {
        for (std::size_t i = 0; i < g.size(); ++i) flows.emplace_back(g[i], g[(i + 1) % g.size()]);
      }
      StepCost step = concurrent(flows);
      out = CollectiveCost{bytes / step.per_flow_bandwidth + step.latency * 2.0, step.per_flow_bandwidth, false, algorithm};
      break;
    }
    case Algorithm::kAuto:
      return best_flat(op, groups, bytes, algorithm);
  }
  if (out) out->algorithm = algorithm;
  return out;
}

CollectiveCost Network::best_flat(CollectiveOp op, const std::vector<std::vector<int>>& groups, Bytes bytes,
                                  Algorithm algorithm) const {
  if (algorithm != Algorithm::kAuto) {
    if (auto c = flat(op, groups, bytes, algorithm)) return *c;
    return *flat(op, groups, bytes, Algorithm::kRing);  // ring applies to every collective
  }
  // Auto chooses among the algorithms NCCL implements; halving-doubling and
  // direct (MPI libraries' choices) are taken only when asked for by name.
  CollectiveCost best = *flat(op, groups, bytes, Algorithm::kRing);
  for (Algorithm a : {Algorithm::kTree, Algorithm::kNvls}) {
    auto c = flat(op, groups, bytes, a);
    if (c && c->time < best.time) best = *c;
  }
  return best;
}

}  // namespace dtsim::net
