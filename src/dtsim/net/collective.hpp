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
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "dtsim/core/linear_fit.hpp"
#include "dtsim/core/units.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::net {

enum class CollectiveOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kAllToAll, kSendRecv, kRingExchange };
std::string_view to_string(CollectiveOp op);
std::optional<CollectiveOp> parse_collective_op(std::string_view text);

/// How a collective moves its data. kAuto takes the fastest of the ones NCCL
/// implements (ring, tree, nvls) that applies, as NCCL's own cost model does.
///  - ring: n-1 (x2 for all-reduce) neighbour steps, bandwidth-optimal;
///  - tree: double binary tree, pipelined: 2·S/B but only 2·log2(n) latencies;
///  - halving_doubling: recursive halving then doubling (Rabenseifner), n a power of two;
///  - direct: every rank exchanges its shards with every other at once;
///  - nvls: NVLink SHARP, the NVSwitch reduces: each GPU sends and receives S once
///    (all-reduce inside one node whose intra_node says "nvls": true).
enum class Algorithm { kAuto, kRing, kTree, kHalvingDoubling, kDirect, kNvls };
std::string_view to_string(Algorithm algorithm);
std::optional<Algorithm> parse_algorithm(std::string_view text);

struct NetworkOptions {
  /// Multiplies every link's bus efficiency (the cluster file's
  /// `bus_efficiency`, 0.8 by default); 1 leaves them as stated.
  double efficiency_scale = 1.0;
  Algorithm algorithm = Algorithm::kAuto;
  /// What-if multipliers: bandwidth of links inside nodes (NVLink, PCIe) and
  /// between them (network), and every link's latency.
  double intra_bandwidth_scale = 1.0;
  double inter_bandwidth_scale = 1.0;
  double latency_scale = 1.0;
  /// Measured collectives (a dtsim-calibrate profile): a collective of that
  /// op over that many ranks costs latency + bytes / bandwidth as fitted,
  /// whatever the fabric says; the what-if scales still apply.
  std::map<std::pair<CollectiveOp, int>, core::LinearFit> measured;
};

struct CollectiveCost {
  core::Seconds time;
  core::BytesPerSecond bus_bandwidth;  ///< slowest flow's share of its links, efficiency applied
  bool hierarchical = false;
  Algorithm algorithm = Algorithm::kRing;  ///< the one used (never kAuto)
  bool measured = false;                   ///< costed from NetworkOptions::measured
};

/// Not thread-safe: it caches routes. Give each thread its own.
class Network {
 public:
  Network(const topo::Cluster& cluster, NetworkOptions options) : cluster_(&cluster), options_(options) {}

  /// `gpus` in ring order; `bytes` is the full buffer (all-reduce and
  /// reduce-scatter input, all-gather output, the message of a send). Uses
  /// the options' algorithm.
  [[nodiscard]] CollectiveCost cost(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes) const;
  [[nodiscard]] CollectiveCost cost(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes,
                                    Algorithm algorithm) const;
  /// Bytes each link carries for one collective, counted as if it ran as a
  /// ring over the group (every algorithm here moves about that much).
  [[nodiscard]] std::vector<std::pair<int, core::Bytes>> link_traffic(CollectiveOp op, std::span<const int> gpus,
                                                                      core::Bytes bytes) const;
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
  /// One level (no node hierarchy) with the given algorithm, for several groups at once;
  /// nullopt when the algorithm does not apply.
  std::optional<CollectiveCost> flat(CollectiveOp op, const std::vector<std::vector<int>>& groups, core::Bytes bytes,
                                     Algorithm algorithm) const;
  std::optional<CollectiveCost> steps_cost(const std::vector<std::vector<std::pair<int, int>>>& steps,
                                           const std::vector<core::Bytes>& bytes_per_step) const;
  CollectiveCost best_flat(CollectiveOp op, const std::vector<std::vector<int>>& groups, core::Bytes bytes,
                           Algorithm algorithm) const;

  const topo::Cluster* cluster_;
  NetworkOptions options_;
  mutable std::map<std::pair<int, int>, topo::Route> routes_;
};

}  // namespace dtsim::net
