#pragma once
/// Collectives on the cluster's fabric. A collective becomes a plan: phases of
/// concurrent point-to-point flows between endpoints, each flow routed over
/// the fabric. Every flow of a phase carries the same bytes; a link carrying
/// k of them carries k times that. The analytic cost of a phase is
///   latency + bytes per flow · max over its links (k / capacity),
/// the time its busiest link needs; the engine's flow-level mode runs the same
/// phases through max-min sharing with whatever else is on the links
/// (sim::replay, net::SharedLinks), so on an idle fabric both agree.
/// Ring all-reduce over n GPUs is thus the textbook
///   2(n-1)/n · S / B + 2(n-1) · latency.
/// A ring over a group that spans nodes with k GPUs per node is NCCL's: k flat
/// rings of S/k, each leaving every node through its own NIC. The other
/// algorithms run hierarchically there: intra-node reduce-scatter, the
/// algorithm across nodes on S/k in k parallel groups (one per local GPU
/// index), intra-node all-gather.
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "dtsim/core/linear_fit.hpp"
#include "dtsim/core/size_table.hpp"
#include "dtsim/core/units.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::net {

/// kAllToAllAcrossNodes and kAllToAllInNode: the two levels of DeepEP's
/// dispatch (plan::CommOp's), `bytes` what each member sends in all.
enum class CollectiveOp {
  kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv, kRingExchange, kAllToAllAcrossNodes,
  kAllToAllInNode
};
std::string_view to_string(CollectiveOp op);
std::optional<CollectiveOp> parse_collective_op(std::string_view text);

/// How a collective moves its data. kAuto takes the fastest of the ones NCCL
/// implements (ring, tree, nvls, sharp) that applies, over every protocol.
///  - ring: n-1 (x2 for all-reduce) neighbour steps, bandwidth-optimal;
///  - tree: double binary tree, pipelined: 2·S/B but only 2·log2(n) latencies;
///  - halving_doubling: recursive halving then doubling (Rabenseifner), n a power of two;
///  - direct: every rank exchanges its shards with every other at once;
///  - nvls: NVLink SHARP, the NVSwitch reduces: each GPU sends and receives S once
///    (all-reduce inside one node whose intra_node says "nvls": true);
///  - sharp: InfiniBand SHARP (NCCL's CollNet), the switch reduces the
///    inter-node part: each member sends its shard up once and receives the
///    sum (inter_node says "sharp": true);
///  - ps: parameter-server push/pull: every GPU pushes S/h to each of the h
///    host CPUs of the nodes it spans, which sum and send it back;
///  - reduce_broadcast: reduce onto the group's first GPU, then broadcast from
///    it (TensorFlow's ReductionToOneDevice): the root's links carry (n-1)·S.
enum class Algorithm { kAuto, kRing, kTree, kHalvingDoubling, kDirect, kNvls, kSharp, kParameterServer, kReduceBroadcast };
std::string_view to_string(Algorithm algorithm);
std::optional<Algorithm> parse_algorithm(std::string_view text);
/// "auto, ring, tree, ..." for error messages and help.
std::string_view algorithm_names();
/// What a named algorithm needs to run, for error messages.
std::string_view requirement(Algorithm algorithm);

/// NCCL's protocols. Simple moves data in large chunks behind memory fences;
/// LL (low latency) sends 4 bytes of data with a 4-byte flag and no fence;
/// LL128 sends 120 bytes of data with an 8-byte flag per 128-byte line.
enum class Protocol { kAuto, kSimple, kLl, kLl128 };
std::string_view to_string(Protocol protocol);
std::optional<Protocol> parse_protocol(std::string_view text);

/// A collective a calibration timed on one machine: the median at each size
/// it ran, interpolated between them on log axes, and their latency-bandwidth
/// fit, by which a what-if scales it. The medians, not the fit, give the time:
/// an MPI all-reduce of 2 ranks on one CPU host moved 2.6 GB/s at 1 MiB and
/// 1.1 GB/s at 16 MiB, once its buffers left the caches, and one latency and
/// bandwidth fitted to every size costed the 16 MiB one at half its time.
struct CalibratedCollective {
  core::LinearFit fit;
  core::SizeTable medians;  ///< empty where fewer than two sizes were kept: the fit alone
  /// The time of `bytes`, its latency and bandwidth scaled as a what-if asks.
  [[nodiscard]] core::Seconds time(core::Bytes bytes, double latency_scale = 1.0, double bandwidth_scale = 1.0) const;
};

struct NetworkOptions {
  /// Multiplies every link's bus efficiency (the cluster file's
  /// `bus_efficiency`, 0.8 by default); 1 leaves them as stated.
  double efficiency_scale = 1.0;
  Algorithm algorithm = Algorithm::kAuto;
  Protocol protocol = Protocol::kAuto;
  /// What-if multipliers: bandwidth of links inside nodes (NVLink, PCIe) and
  /// between them (network), and every link's latency.
  double intra_bandwidth_scale = 1.0;
  double inter_bandwidth_scale = 1.0;
  double latency_scale = 1.0;
  /// Measured collectives (a dtsim-calibrate profile): a collective of that
  /// op over that many ranks inside one node costs what it was measured to
  /// take (CalibratedCollective::time), whatever the fabric says (the
  /// calibration measured it on one machine); across nodes the fabric's
  /// model. The what-if scales still apply.
  std::map<std::pair<CollectiveOp, int>, CalibratedCollective> measured;
};

/// Concurrent flows that start together and end together (one step of a ring
/// runs in lock-step, so the slowest flow paces all of them).
struct FlowPhase {
  core::Seconds latency;        ///< paid before the bytes move
  core::Bytes bytes_per_flow;   ///< on the wire: the protocol's flags included
  /// (link id, flows of this phase on it)
  std::vector<std::pair<int, int>> flows_on_link;
  /// Share of the uncontended rate the phase can use: NCCL runs fewer channels
  /// (thread blocks) for small buffers, each with its own throughput.
  double rate_fraction = 1.0;
};

struct CollectivePlan {
  std::vector<FlowPhase> phases;  ///< in order; empty with `fixed`
  std::optional<core::Seconds> fixed;  ///< a measured fit: no links modelled
  Algorithm algorithm = Algorithm::kRing;  ///< the one used (never kAuto)
  Protocol protocol = Protocol::kSimple;   ///< the one used (never kAuto)
  int channels = 1;
  bool hierarchical = false;
  bool measured = false;  ///< `fixed` comes from NetworkOptions::measured
};

struct CollectiveCost {
  core::Seconds time;
  bool hierarchical = false;
  Algorithm algorithm = Algorithm::kRing;  ///< the one used (never kAuto)
  Protocol protocol = Protocol::kSimple;
  int channels = 1;
  bool measured = false;  ///< costed from NetworkOptions::measured
};

/// Not thread-safe: it caches routes. Give each thread its own.
class Network {
 public:
  Network(const topo::Cluster& cluster, NetworkOptions options);

  /// `gpus` in ring order; `bytes` is the full buffer (all-reduce and
  /// reduce-scatter input, all-gather output, the message of a send). Uses
  /// the options' algorithm and protocol.
  [[nodiscard]] CollectivePlan plan(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes) const;
  [[nodiscard]] CollectivePlan plan(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes, Algorithm algorithm,
                                    Protocol protocol) const;
  [[nodiscard]] CollectiveCost cost(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes) const;
  /// Whether a named algorithm can run this collective on these GPUs (a
  /// strategy falls back to a ring per collective, as NCCL does; a request
  /// for one collective by name must not).
  [[nodiscard]] bool applies(CollectiveOp op, std::span<const int> gpus, Algorithm algorithm) const;
  [[nodiscard]] CollectiveCost cost(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes,
                                    Algorithm algorithm) const;
  /// The analytic time of a plan on an idle fabric.
  [[nodiscard]] core::Seconds time(const CollectivePlan& plan) const;
  [[nodiscard]] core::Seconds time(const FlowPhase& phase) const;
  /// Bytes each link carries for one collective, as planned.
  [[nodiscard]] std::vector<std::pair<int, core::Bytes>> link_traffic(CollectiveOp op, std::span<const int> gpus,
                                                                      core::Bytes bytes) const;
  /// Each link's capacity in bytes per second: its rate times its bus
  /// efficiency and the what-if scales (the same for both costing modes).
  [[nodiscard]] const std::vector<double>& link_capacity() const { return capacity_; }
  [[nodiscard]] const topo::Cluster& cluster() const { return *cluster_; }
  [[nodiscard]] const NetworkOptions& options() const { return options_; }

 private:
  using Flows = std::vector<std::pair<int, int>>;  ///< (from, to) route endpoints
  const topo::Route& route(int from, int to) const;
  /// One phase of equal flows; `steps` latencies of the slowest route.
  FlowPhase phase(const Flows& flows, core::Bytes bytes_per_flow, double steps) const;
  /// What each member of a ring of `members` sends, as a share of the buffer, and in how many steps.
  struct RingVolume {
    double bytes_per_rank;
    double steps;
  };
  static RingVolume ring_volume(CollectiveOp op, std::size_t members);
  CollectivePlan ring(CollectiveOp op, const std::vector<std::vector<int>>& rings, core::Bytes bytes) const;
  /// NCCL's flat rings through balanced groups on several nodes, one per member of a node.
  CollectivePlan ring_across_nodes(CollectiveOp op, const std::vector<std::vector<int>>& nodes, core::Bytes bytes) const;
  /// One level (no node hierarchy) with the given algorithm, for several
  /// groups at once, Simple protocol; nullopt when the algorithm does not apply.
  std::optional<CollectivePlan> flat(CollectiveOp op, const std::vector<std::vector<int>>& groups, core::Bytes bytes,
                                     Algorithm algorithm) const;
  std::optional<CollectivePlan> tree(CollectiveOp op, const std::vector<std::vector<int>>& groups, core::Bytes bytes) const;
  std::optional<CollectivePlan> halving_doubling(CollectiveOp op, const std::vector<std::vector<int>>& groups,
                                                 core::Bytes bytes) const;
  std::optional<CollectivePlan> direct(CollectiveOp op, const std::vector<std::vector<int>>& groups, core::Bytes bytes) const;
  CollectivePlan two_level_plan(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes, Protocol protocol) const;
  /// A group's members by node (in node order), and by their place in their
  /// node (rails: the i-th member of every node that has one).
  struct NodeSplit {
    std::vector<std::vector<int>> nodes, rails;
    bool balanced = true;  ///< every node holds as many members
  };
  [[nodiscard]] NodeSplit split_by_node(std::span<const int> gpus) const;
  std::optional<CollectivePlan> nvls(CollectiveOp op, const std::vector<std::vector<int>>& groups, core::Bytes bytes) const;
  std::optional<CollectivePlan> sharp(CollectiveOp op, const std::vector<std::vector<int>>& groups, core::Bytes bytes) const;
  std::optional<CollectivePlan> parameter_server(CollectiveOp op, const std::vector<int>& group, core::Bytes bytes) const;
  std::optional<CollectivePlan> reduce_broadcast(CollectiveOp op, const std::vector<int>& group, core::Bytes bytes) const;
  /// Whole plan (hierarchy included) for one algorithm with the Simple protocol.
  std::optional<CollectivePlan> simple_plan(CollectiveOp op, std::span<const int> gpus, core::Bytes bytes,
                                            Algorithm algorithm) const;
  /// Rewrites a Simple plan for another protocol and channel count.
  CollectivePlan with_protocol(CollectivePlan plan, CollectiveOp op, std::span<const int> gpus, core::Bytes bytes,
                               Protocol protocol) const;

  const topo::Cluster* cluster_;
  NetworkOptions options_;
  std::vector<double> capacity_;
  mutable std::map<std::pair<int, int>, topo::Route> routes_;
  mutable std::vector<int> search_scratch_;  ///< Cluster::route's hop counts, all -1 between calls
};

}  // namespace dtsim::net
