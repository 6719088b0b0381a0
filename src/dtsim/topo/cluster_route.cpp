// Cluster::route: the fewest-hop route between two endpoints, found by a
// breadth-first search from both ends that stops where they meet. A search
// from one end alone labels every vertex nearer than the target: in a fat
// tree of N nodes the target sits beyond the spine, so each route cost O(N)
// and a collective over N ranks O(N^2). From both ends the two searches meet
// at the spine after a few dozen vertices, whatever N.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "dtsim/core/input_error.hpp"
#include "dtsim/topo/cluster.hpp"

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

// A NIC joins its node to the network; it never relays between two devices
// of its own node. Without this rule two GPUs sharing a NIC are as near
// through it (GPU, NIC, GPU over PCIe) as through their NVSwitch, and ties
// sent half such routes over PCIe.
bool Cluster::nic_relays_inside_node(VertexId from, VertexId to, VertexId source) const {
  const VertexInfo& nic = (*fabric_)[from];
  if (nic.kind != VertexKind::kNic || from == source) return false;
  return nic.node == (*fabric_)[source].node && (*fabric_)[to].node == nic.node;
}

// May a route from `source` take the link a -> b? Host CPUs end routes but
// never relay them: a GPU-host-GPU detour over PCIe is fewer hops than a
// torus path, and no real traffic takes it.
bool Cluster::may_cross(VertexId a, VertexId b, VertexId source) const {
  if (a != source && (*fabric_)[a].kind == VertexKind::kHost) return false;
  return !nic_relays_inside_node(a, b, source);
}

Route Cluster::route(int from, int to) const {
  std::vector<int> scratch;
  return route(from, to, scratch);
}

Route Cluster::route(int from, int to, std::vector<int>& scratch) const {
  const Fabric& fabric = *fabric_;
  const VertexId source = endpoint_vertex(from);
  const VertexId target = endpoint_vertex(to);
  Route route;
  route.bottleneck = core::BytesPerSecond(std::numeric_limits<double>::infinity());
  if (source == target) return route;

  // Hop counts from the source (first half of scratch) and to the target
  // (second half), -1 where not reached; each side grows a whole level at a
  // time, the smaller frontier first.
  const std::size_t n = boost::num_vertices(fabric);
  scratch.resize(2 * n, -1);
  int* const from_source = scratch.data();
  int* const to_target = scratch.data() + n;
  std::vector<VertexId> seen_s{source}, seen_t{target};
  struct Reset {  // leaves scratch all -1 however this returns
    int* from_source;
    int* to_target;
    const std::vector<VertexId>& seen_s;
    const std::vector<VertexId>& seen_t;
    ~Reset() {
      for (VertexId v : seen_s) from_source[v] = -1;
      for (VertexId v : seen_t) to_target[v] = -1;
    }
  } reset{from_source, to_target, seen_s, seen_t};
  from_source[source] = 0;
  to_target[target] = 0;
  std::size_t level_s_begin = 0, level_t_begin = 0;  // where each side's last level starts in seen_*
  int depth_s = 0, depth_t = 0;                        // levels complete on each side
  int hops = std::numeric_limits<int>::max();
  while (hops == std::numeric_limits<int>::max()) {
    const std::size_t frontier_s = seen_s.size() - level_s_begin, frontier_t = seen_t.size() - level_t_begin;
    if (frontier_s == 0 || frontier_t == 0) {
      throw core::InputError(shape_.name, "", "the fabric is disconnected: GPU " + std::to_string(from) +
                                                  " cannot reach GPU " + std::to_string(to));
    }
    const bool forward = frontier_s <= frontier_t;
    std::vector<VertexId>& seen = forward ? seen_s : seen_t;
    std::size_t& begin = forward ? level_s_begin : level_t_begin;
    int* const mine = forward ? from_source : to_target;
    const int* const theirs = forward ? to_target : from_source;
    const std::size_t end = seen.size();
    for (std::size_t i = begin; i < end; ++i) {
      const VertexId v = seen[i];
      for (auto e : boost::make_iterator_range(boost::out_edges(v, fabric))) {
        const VertexId u = boost::target(e, fabric);
        // Links come in pairs, so the search towards the target walks an
        // out-edge v -> u as the route's u -> v.
        if (mine[u] >= 0 || !(forward ? may_cross(v, u, source) : may_cross(u, v, source))) continue;
        mine[u] = mine[v] + 1;
        seen.push_back(u);
        if (theirs[u] >= 0) hops = std::min(hops, mine[u] + theirs[u]);
      }
    }
    begin = end;
    (forward ? depth_s : depth_t) += 1;
  }

  // Walk back from the target, each hop to a neighbour one step nearer the
  // source. Within depth_s of the source its hop count says which those are;
  // farther out, a neighbour one step farther from the target lies on a
  // shortest route when it is itself one step from such a vertex, down to
  // the source's levels (depth_s + depth_t >= hops, so the target's levels
  // reach there).
  std::unordered_map<VertexId, bool> on_route;
  auto lies_on_route = [&](auto&& self, VertexId u) -> bool {
    const int s_hops = hops - to_target[u];
    if (s_hops <= depth_s) return from_source[u] == s_hops;
    if (auto it = on_route.find(u); it != on_route.end()) return it->second;
    bool found = false;
    for (auto e : boost::make_iterator_range(boost::out_edges(u, fabric))) {
      const VertexId w = boost::target(e, fabric);
      if (to_target[w] == to_target[u] + 1 && may_cross(w, u, source) && self(self, w)) {
        found = true;
        break;
      }
    }
    return on_route[u] = found;
  };
  std::vector<int> nearer;
  int s_hops = hops;  // of v from the source
  for (VertexId v = target; v != source; --s_hops) {
    nearer.clear();
    for (auto e : boost::make_iterator_range(boost::out_edges(v, fabric))) {
      const VertexId u = boost::target(e, fabric);
      // The hop count first: a spine has thousands of neighbours, one or two nearer.
      const bool one_nearer = s_hops - 1 <= depth_s ? from_source[u] == s_hops - 1 : to_target[u] == hops - s_hops + 1;
      if (one_nearer && may_cross(u, v, source) && (s_hops - 1 <= depth_s || lies_on_route(lies_on_route, u))) {
        nearer.push_back(fabric[e].id ^ 1);
      }
    }
    // Between equally short routes, NCCL's PXN (on by default since 2.12):
    // a send moves over NVLink inside the source's node to the GPU on the
    // destination's rail and leaves through that GPU's NIC, so on a
    // rail-optimized fabric a flow to another rail neither climbs to the
    // spine nor relays over NVLink in the destination's node. Hashing among
    // those routes put two flows of one all-to-all step on one NIC, where
    // NCCL's maintainers see an all-to-all run at one NIC's rate
    // (NVIDIA/nccl-tests issue #267). So: a link from the source's node
    // first, then any but an NVLink hop in another node (a torus keeps its
    // dimension order below).
    const int source_node = fabric[source].node;
    auto rank = [&](int id) {
      const LinkInfo& l = links_[static_cast<std::size_t>(id)];
      const int node = fabric[l.from].node;
      return node == source_node ? 0 : l.kind == LinkKind::kNvLink && node >= 0 ? 2 : 1;
    };
    if (source_node >= 0 && !shape_.torus && !nearer.empty()) {
      const int best = rank(*std::min_element(nearer.begin(), nearer.end(), [&](int a, int b) { return rank(a) < rank(b); }));
      std::erase_if(nearer, [&](int id) { return rank(id) != best; });
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
