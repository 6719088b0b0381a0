#pragma once
/// Analytic cost of collectives on the cluster's fabric. A collective is
/// expressed as steps of concurrent point-to-point flows between GPUs; each
/// flow is routed over the fabric, flows that share a link split it evenly,
/// and a step takes (bytes per flow / slowest flow's bandwidth) + the longest
/// route's latency. Ring all-reduce over n GPUs is thus the textbook
///   2(n-1)/n * S / B + 2(n-1) * latency.
/// A group that spans nodes with several GPUs per node runs hierarchically:
/// intra-node reduce-scatter, inter-node ring all-reduce of S/k in k parallel
/// rings (one per local GPU index), intra-node all-gather.
#include <map>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::net {

enum class CollectiveOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kAllToAll, kSendRecv, kRingExchange };
std::string_view to_string(CollectiveOp op);

struct NetworkOptions {
  /// Multiplies every link's bus efficiency (the cluster file's
  /// `bus_efficiency`, 0.8 by default); 1 leaves them as stated.
  double efficiency_scale = 1.0;
};

struct CollectiveCost {
  core::Seconds time;
  core::BytesPerSecond bus_bandwidth;  ///< slowest flow's share of its links, efficiency applied
  bool hierarchical = false;
};

/// Not thread-safe: it caches routes. Give each thread its own.
class Network {
 public:
  Network(const topo::Cluster& cluster, NetworkOptions options) : cluster_(&cluster), options_(options) {}

  /// `gpus` in ring order; `bytes` is the full buffer (all-reduce and
  /// reduce-scatter input, all-gather output, the message of a send).
  [[nodiscard]] CollectiveCost cost(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes) const;
  [[nodiscard]] const topo::Cluster& cluster() const { return *cluster_; }
  [[nodiscard]] const NetworkOptions& options() const { return options_; }

 private:
  struct StepCost {
    core::BytesPerSecond per_flow_bandwidth;
    core::Seconds latency;
  };
  StepCost concurrent(const std::vector<std::pair<int, int>>& flows) const;
  const topo::Route& route(int from, int to) const;
  CollectiveCost flat_ring(CollectiveOp op, const std::vector<std::vector<int>>& rings, core::Bytes bytes) const;

  const topo::Cluster* cluster_;
  NetworkOptions options_;
  mutable std::map<std::pair<int, int>, topo::Route> routes_;
};

}  // namespace dtsim::net
