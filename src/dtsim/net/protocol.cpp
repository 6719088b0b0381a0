// NCCL's protocols and channels applied to a plan, and the automatic choice of
// algorithm and protocol (the cheapest, as NCCL's own tuner picks it).
#include <algorithm>
#include <cmath>

#include "dtsim/net/collective.hpp"

namespace dtsim::net {

using core::Bytes;

namespace {

enum class Medium { kNvLink, kPcie, kNetwork };

// The slowest kind of link a phase crosses.
Medium medium_of(const FlowPhase& phase, const topo::Cluster& cluster) {
  Medium m = Medium::kNvLink;
  for (auto [link, flows] : phase.flows_on_link) {
    switch (cluster.links()[static_cast<std::size_t>(link)].kind) {
      case topo::LinkKind::kNetwork: return Medium::kNetwork;
      case topo::LinkKind::kPcie: m = Medium::kPcie; break;
      case topo::LinkKind::kNvLink: break;
    }
  }
  return m;
}

// Per-step latency relative to Simple's, from NCCL's ring hardware latencies
// (src/graph/tuning.cc, hwLat: NVLink .47/1.9/3.4 us, PCIe 1.0/2.5/5.7 us,
// network 2.7/4.0/9.6 us for LL/LL128/Simple). dtsim's Simple latency is the
// route's, from the cluster file; the other protocols scale it.
double latency_factor(Protocol protocol, Medium medium) {
  constexpr double kLl[] = {0.47 / 3.4, 1.0 / 5.7, 2.7 / 9.6};
  constexpr double kLl128[] = {1.9 / 3.4, 2.5 / 5.7, 4.0 / 9.6};
  const auto i = static_cast<std::size_t>(medium);
  switch (protocol) {
    case Protocol::kLl: return kLl[i];
    case Protocol::kLl128: return kLl128[i];
    default: return 1.0;
  }
}

// What a collective pays once whatever its size: kernel launch and the
// protocol's setup. NCCL's ring base latencies (tuning.cc, baseLat: LL 3.6,
// LL128 10.0, Simple 8.4 us), for every algorithm.
core::Seconds base_latency(Protocol protocol) {
  switch (protocol) {
    case Protocol::kLl: return core::Seconds(3.6e-6);
    case Protocol::kLl128: return core::Seconds(10.0e-6);
    default: return core::Seconds(8.4e-6);
  }
}

// Share of Simple's bandwidth each protocol delivers, as NCCL's tuning model
// states it: LL a quarter for (all-)reduce or across nodes (half of every
// 8-byte store is a flag, and polling costs the rest), a third otherwise;
// LL128 0.92 (120 of 128 bytes are data).
double bandwidth_factor(Protocol protocol, CollectiveOp op, bool across_nodes) {
  switch (protocol) {
    case Protocol::kLl:
      return across_nodes || op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduce ? 0.25 : 1.0 / 3.0;
    case Protocol::kLl128: return 0.92;
    default: return 1.0;
  }
}

// NCCL adds a channel only when each gets nthreads · threshold bytes
// (NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD = 8, 8, 64 bytes per thread,
// 512 threads; ring LL's threshold grows with the rank count). NVLS takes
// all of its own channels whatever the size (its tuning: nc = nvlsChannels).
int channels_for(Bytes bytes, Protocol protocol, Algorithm algorithm, std::size_t ranks, int max_channels) {
  if (algorithm == Algorithm::kNvls) return max_channels;
  constexpr double kThreads = 512;
  double per_thread = protocol == Protocol::kSimple ? 64 : 8;
  if (protocol == Protocol::kLl && algorithm == Algorithm::kRing) per_thread *= static_cast<double>(ranks);
  const double fit = std::floor(bytes.value() / (kThreads * per_thread));
  return static_cast<int>(std::clamp(fit, 1.0, static_cast<double>(max_channels)));
}

}  // namespace

std::string_view to_string(Protocol protocol) {
  switch (protocol) {
    case Protocol::kAuto: return "auto";
    case Protocol::kSimple: return "simple";
    case Protocol::kLl: return "ll";
    case Protocol::kLl128: return "ll128";
  }
  return "?";
}

std::optional<Protocol> parse_protocol(std::string_view text) {
  for (Protocol p : {Protocol::kAuto, Protocol::kSimple, Protocol::kLl, Protocol::kLl128}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

CollectivePlan Network::with_protocol(CollectivePlan plan, CollectiveOp op, std::span<const int> gpus, Bytes bytes,
                                      Protocol protocol) const {
  const int node = cluster_->node_of_endpoint(gpus.front());
  const bool across_nodes = std::any_of(gpus.begin(), gpus.end(), [&](int g) { return cluster_->node_of_endpoint(g) != node; });
  const double bandwidth = bandwidth_factor(protocol, op, across_nodes);
  plan.protocol = protocol;
  const int max_channels = plan.algorithm == Algorithm::kNvls ? cluster_->nvls_channels() : cluster_->channels(across_nodes);
  plan.channels = channels_for(bytes, protocol, plan.algorithm, gpus.size(), max_channels);
  const double rate_fraction = static_cast<double>(plan.channels) / max_channels;
  for (FlowPhase& phase : plan.phases) {
    phase.latency = phase.latency * latency_factor(protocol, medium_of(phase, *cluster_));
    phase.bytes_per_flow = phase.bytes_per_flow / bandwidth;
    phase.rate_fraction *= rate_fraction;  // an algorithm's own share (NVLS) times the channels
  }
  if (!plan.phases.empty()) plan.phases.front().latency += base_latency(protocol) * options_.latency_scale;
  return plan;
}

CollectivePlan Network::plan(CollectiveOp op, std::span<const int> gpus, Bytes bytes) const {
  return plan(op, gpus, bytes, options_.algorithm, options_.protocol);
}

CollectivePlan Network::plan(CollectiveOp op, std::span<const int> gpus, Bytes bytes, Algorithm algorithm,
                             Protocol protocol) const {
  CollectivePlan none;
  if (gpus.size() <= 1 || bytes.value() <= 0) {
    none.fixed = core::Seconds(0);
    return none;
  }
  // A calibration measures its collectives on one machine (dtsim-calibrate:
  // the GPUs of one process, or MPI ranks of one host), so its fit stands for
  // groups inside one node; a group of as many ranks across nodes crosses the
  // network the fit never saw, and takes the fabric's model.
  const auto fit = options_.measured.find({op, static_cast<int>(gpus.size())});
  const auto in_one_node = [&] {
    const int node = cluster_->node_of_endpoint(gpus.front());
    return std::all_of(gpus.begin(), gpus.end(), [&](int g) { return cluster_->node_of_endpoint(g) == node; });
  };
  if (fit != options_.measured.end() && in_one_node()) {
    // The measurement stands for whatever the library did; scaled as a what-if asks.
    none.fixed = fit->second.time(bytes, options_.latency_scale, options_.intra_bandwidth_scale);
    none.algorithm = algorithm == Algorithm::kAuto ? Algorithm::kRing : algorithm;
    none.measured = true;
    return none;
  }
  if (op == CollectiveOp::kAllToAllAcrossNodes || op == CollectiveOp::kAllToAllInNode) {
    return two_level_plan(op, gpus, bytes, protocol);
  }
  // Auto chooses among what NCCL implements; halving-doubling, direct, ps and
  // reduce_broadcast (MPI's and TensorFlow's choices) only when named.
  std::vector<Algorithm> algorithms{algorithm};
  if (algorithm == Algorithm::kAuto) algorithms = {Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls, Algorithm::kSharp};
  const bool one_pattern = op == CollectiveOp::kSendRecv || op == CollectiveOp::kRingExchange || op == CollectiveOp::kAllToAll;
  std::optional<CollectivePlan> best;
  core::Seconds best_time;
  for (Algorithm a : algorithms) {
    auto simple = simple_plan(op, gpus, bytes, a);
    if (!simple) continue;
    // LL128 is enabled by default only where every link is NVLink (NCCL
    // avoids it elsewhere for data-corruption reasons); named, it runs anywhere.
    const bool nvlink_only = std::all_of(simple->phases.begin(), simple->phases.end(), [&](const FlowPhase& p) {
      return medium_of(p, *cluster_) == Medium::kNvLink;
    });
    std::vector<Protocol> protocols{protocol};
    // NVLS and SHARP (CollNet) run the Simple protocol only: NCCL's
    // tuning.cc gives them no LL or LL128 bandwidth.
    const bool simple_only = a == Algorithm::kNvls || a == Algorithm::kSharp;
    if (protocol == Protocol::kAuto) {
      protocols = {Protocol::kSimple};
      if (!simple_only) protocols.push_back(Protocol::kLl);
      if (nvlink_only && !simple_only) protocols.push_back(Protocol::kLl128);
    } else if (simple_only && protocol != Protocol::kSimple) {
      continue;
    }
    for (Protocol p : protocols) {
      CollectivePlan candidate = with_protocol(*simple, op, gpus, bytes, p);
      const core::Seconds t = time(candidate);
      if (!best || t < best_time) {
        best = std::move(candidate);
        best_time = t;
      }
    }
    if (one_pattern) break;
  }
  if (!best) return plan(op, gpus, bytes, Algorithm::kRing, protocol);  // ring applies to every collective
  return *best;
}

// One level of DeepEP's dispatch: the members split by node; across nodes
// each member exchanges with the members at its own place in the other
// nodes (its rail: DeepEP's RDMA peers), in a node with the others there
// (its NVLink forwarding). Either runs as a pairwise all-to-all over those
// groups, each member sending `bytes` in all, evenly.
CollectivePlan Network::two_level_plan(CollectiveOp op, std::span<const int> gpus, Bytes bytes, Protocol protocol) const {
  const NodeSplit split = split_by_node(gpus);
  const std::vector<std::vector<int>>& groups = op == CollectiveOp::kAllToAllInNode ? split.nodes : split.rails;
  std::size_t n = 0;
  for (const auto& g : groups) n = std::max(n, g.size());
  CollectivePlan none;
  if (n <= 1 || bytes.value() <= 0) {
    none.fixed = core::Seconds(0);
    return none;
  }
  const Bytes buffer = bytes * (static_cast<double>(n) / static_cast<double>(n - 1));
  CollectivePlan plan = *direct(CollectiveOp::kAllToAll, groups, buffer);
  plan.algorithm = Algorithm::kDirect;
  return with_protocol(std::move(plan), CollectiveOp::kAllToAll, groups.front(), buffer,
                       protocol == Protocol::kAuto ? Protocol::kSimple : protocol);
}

bool Network::applies(CollectiveOp op, std::span<const int> gpus, Algorithm algorithm) const {
  return algorithm == Algorithm::kAuto || simple_plan(op, gpus, Bytes(1048576), algorithm).has_value();
}

std::string_view requirement(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kNvls: return "an all_reduce within one node whose intra_node has \"nvls\": true";
    case Algorithm::kSharp: return "an all_reduce over a fabric whose inter_node has \"sharp\": true";
    case Algorithm::kHalvingDoubling: return "a power-of-two group and a reducing or gathering collective";
    case Algorithm::kTree: return "a reducing or broadcasting collective";
    default: return "a collective it implements";
  }
}

CollectiveCost Network::cost(CollectiveOp op, std::span<const int> gpus, Bytes bytes) const {
  return cost(op, gpus, bytes, options_.algorithm);
}

CollectiveCost Network::cost(CollectiveOp op, std::span<const int> gpus, Bytes bytes, Algorithm algorithm) const {
  const CollectivePlan p = plan(op, gpus, bytes, algorithm, options_.protocol);
  return {time(p), p.hierarchical, p.algorithm, p.protocol, p.channels, p.measured};
}

std::vector<std::pair<int, Bytes>> Network::link_traffic(CollectiveOp op, std::span<const int> gpus, Bytes bytes) const {
  std::vector<std::pair<int, Bytes>> out;
  for (const FlowPhase& phase : plan(op, gpus, bytes).phases) {
    for (auto [link, flows] : phase.flows_on_link) out.emplace_back(link, phase.bytes_per_flow * static_cast<double>(flows));
  }
  return out;
}

}  // namespace dtsim::net
