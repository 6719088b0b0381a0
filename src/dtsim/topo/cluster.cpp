#include "dtsim/topo/cluster.hpp"

#include "dtsim/core/input_error.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <cstdint>
#include <random>

namespace dtsim::topo {
namespace {

// A stable mix of a flow's endpoints and a hop (splitmix64's finaliser), so
// that ECMP choices are the same on every machine and every run.
std::uint64_t flow_hash(int from, int to, std::size_t vertex) {
  std::uint64_t x = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(from)) << 32) ^
                    static_cast<std::uint32_t>(to) ^ (static_cast<std::uint64_t>(vertex) * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Cluster::Cluster(Shape shape) : shape_(std::move(shape)), fabric_(std::make_unique<Fabric>()) {
  gpu_vertex_.assign(static_cast<std::size_t>(gpu_count()), Fabric::null_vertex());
  host_vertex_.assign(static_cast<std::size_t>(shape_.nodes), Fabric::null_vertex());
}

std::string Cluster::link_name(int link) const {
  const LinkInfo& l = links_.at(static_cast<std::size_t>(link));
  return (*fabric_)[l.from].name + " -> " + (*fabric_)[l.to].name;
}

void Cluster::set_host_vertex(int node, VertexId vertex) { host_vertex_.at(static_cast<std::size_t>(node)) = vertex; }

VertexId Cluster::endpoint_vertex(int endpoint) const {
  if (endpoint < 0) return static_cast<VertexId>(-1 - endpoint);
  if (endpoint < gpu_count()) return gpu_vertex_.at(static_cast<std::size_t>(endpoint));
  return host_vertex_.at(static_cast<std::size_t>(endpoint - gpu_count()));
}

VertexId Cluster::add_vertex(VertexInfo info) { return boost::add_vertex(std::move(info), *fabric_); }

void Cluster::add_link(VertexId a, VertexId b, LinkKind kind, core::BytesPerSecond bandwidth, core::Seconds latency,
                       double efficiency) {
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    LinkInfo info{kind, bandwidth, latency, efficiency, static_cast<int>(links_.size()), from, to};
    links_.push_back(info);
    boost::add_edge(from, to, info, *fabric_);
  }
}

void Cluster::set_gpu_vertex(int gpu, VertexId vertex) { gpu_vertex_.at(static_cast<std::size_t>(gpu)) = vertex; }

// A NIC joins its node to the network; it never relays between two devices
// of its own node. Without this rule two GPUs sharing a NIC are as near
// through it (GPU, NIC, GPU over PCIe) as through their NVSwitch, and ties
// sent half such routes over PCIe.
bool Cluster::nic_relays_inside_node(VertexId from, VertexId to, VertexId source) const {
  const VertexInfo& nic = (*fabric_)[from];
  if (nic.kind != VertexKind::kNic || from == source) return false;
  return nic.node == (*fabric_)[source].node && (*fabric_)[to].node == nic.node;
}

namespace {

// Breadth-first hop counts from `source` into `distance` (all -1 on entry),
// up to the depth of `stop`; returns the vertices it labelled. Once `stop` is
// dequeued every vertex one hop nearer has been expanded, which is all a walk
// back from it reads. Host CPUs end routes but never relay them: a
// GPU-host-GPU detour over PCIe is fewer hops than a torus path, and no real
// traffic takes it.
template <class RelaysInsideNode>
std::vector<VertexId> breadth_first(const Fabric& fabric, VertexId source, VertexId stop, std::vector<int>& distance,
                                    RelaysInsideNode relays_inside_node) {
  std::vector<VertexId> frontier{source};
  distance[source] = 0;
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    const VertexId v = frontier[i];
    if (v == stop) break;
    if (v != source && fabric[v].kind == VertexKind::kHost) continue;
    for (auto e : boost::make_iterator_range(boost::out_edges(v, fabric))) {
      const VertexId u = boost::target(e, fabric);
      if (distance[u] >= 0 || relays_inside_node(v, u)) continue;
      distance[u] = distance[v] + 1;
      frontier.push_back(u);
    }
  }
  return frontier;
}

}  // namespace

Route Cluster::route(int from, int to) const {
  std::vector<int> scratch;
  return route(from, to, scratch);
}

Route Cluster::route(int from, int to, std::vector<int>& scratch) const {
  const VertexId source = endpoint_vertex(from);
  scratch.resize(boost::num_vertices(*fabric_), -1);
  const std::vector<VertexId> labelled = breadth_first(*fabric_, source, endpoint_vertex(to), scratch,
                                                       [&](VertexId v, VertexId u) { return nic_relays_inside_node(v, u, source); });
  struct Reset {  // leaves scratch all -1 however walk_back returns
    std::vector<int>& distance;
    const std::vector<VertexId>& labelled;
    ~Reset() {
      for (VertexId v : labelled) distance[v] = -1;
    }
  } reset{scratch, labelled};
  return walk_back(from, to, scratch);
}

Placement Placement::packed(int ranks) {
  Placement p;
  for (int r = 0; r < ranks; ++r) p.gpu_of_rank.push_back(r);
  return p;
}

Placement Placement::spread(int ranks, int gpus_per_node) {
  const int nodes = (ranks + gpus_per_node - 1) / gpus_per_node;
  Placement p;
  for (int r = 0; r < ranks; ++r) p.gpu_of_rank.push_back((r % nodes) * gpus_per_node + r / nodes);
  return p;
}

Placement Placement::random(int ranks, std::uint32_t seed) {
  Placement p = packed(ranks);
  // Fisher-Yates on mt19937's raw output: std::shuffle's algorithm is not
  // specified, and a prediction must be the same on every standard library.
  std::mt19937 engine(seed);
  for (int i = ranks - 1; i > 0; --i) {
    const int j = static_cast<int>(engine() % static_cast<std::uint32_t>(i + 1));
    std::swap(p.gpu_of_rank[static_cast<std::size_t>(i)], p.gpu_of_rank[static_cast<std::size_t>(j)]);
  }
  return p;
}

Route Cluster::walk_back(int from, int to, const std::vector<int>& distance) const {
  const VertexId source = endpoint_vertex(from);
  const VertexId target = endpoint_vertex(to);
  Route route;
  route.bottleneck = core::BytesPerSecond(std::numeric_limits<double>::infinity());
  if (source == target) return route;
  if (distance[target] < 0) {
    throw core::InputError(shape_.name, "", "the fabric is disconnected: GPU " + std::to_string(from) + " cannot reach GPU " +
                                                std::to_string(to));
  }
  // Walk back from the target, each hop to a neighbour one step nearer the
  // source; links come in pairs (id, id ^ 1), one per direction.
  std::vector<int> nearer;
  for (VertexId v = target; v != source;) {
    nearer.clear();
    for (auto e : boost::make_iterator_range(boost::out_edges(v, *fabric_))) {
      const VertexId u = boost::target(e, *fabric_);
      if (distance[u] != distance[v] - 1) continue;
      if (u != source && (*fabric_)[u].kind == VertexKind::kHost) continue;
      if (nic_relays_inside_node(u, v, source)) continue;
      nearer.push_back((*fabric_)[e].id ^ 1);
    }
    // A torus routes in dimension order (TPU ICI does): the lowest link id,
    // since builders add a dimension's links before the next one's.
    const int link_id = shape_.torus ? *std::min_element(nearer.begin(), nearer.end())
                                     : nearer[flow_hash(from, to, v) % nearer.size()];
    const LinkInfo& link = links_[static_cast<std::size_t>(link_id)];
    route.links.push_back(link.id);
    route.bottleneck = std::min(route.bottleneck, link.bandwidth);
    route.latency += link.latency;
    v = link.from;
  }
  std::reverse(route.links.begin(), route.links.end());
  return route;
}

}  // namespace dtsim::topo
