#include "dtsim/topo/cluster.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>

namespace dtsim::topo {
namespace {

// BFS visitor: remembers the edge by which each vertex was first reached.
struct RecordTreeEdge {
  using event_filter = boost::on_tree_edge;
  std::vector<Fabric::edge_descriptor>* reached_by;
  std::vector<bool>* seen;
  template <class Graph>
  void operator()(Fabric::edge_descriptor e, const Graph& g) const {
    (*reached_by)[boost::target(e, g)] = e;
    (*seen)[boost::target(e, g)] = true;
  }
};

// Host CPUs end routes but never relay them: a GPU-host-GPU detour over PCIe
// is fewer hops than a torus path, and no real traffic takes it.
struct NoRelayThroughHosts {
  const Fabric* fabric = nullptr;
  VertexId source = 0, target = 0;
  bool operator()(VertexId v) const {
    return v == source || v == target || (*fabric)[v].kind != VertexKind::kHost;
  }
};

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

Route Cluster::route(int from, int to) const {
  const VertexId source = endpoint_vertex(from);
  const VertexId target = endpoint_vertex(to);
  Route route;
  route.bottleneck = core::BytesPerSecond(std::numeric_limits<double>::infinity());
  if (source == target) return route;

  // Record the edge by which BFS first reached each vertex, then walk back.
  std::vector<Fabric::edge_descriptor> reached_by(boost::num_vertices(*fabric_));
  std::vector<bool> seen(boost::num_vertices(*fabric_), false);
  seen[source] = true;
  auto recorder = boost::make_bfs_visitor(RecordTreeEdge{&reached_by, &seen});
  boost::filtered_graph<Fabric, boost::keep_all, NoRelayThroughHosts> usable(
      *fabric_, boost::keep_all(), NoRelayThroughHosts{fabric_.get(), source, target});
  boost::breadth_first_search(usable, source, boost::visitor(recorder).vertex_index_map(boost::get(boost::vertex_index, *fabric_)));
  if (!seen[target]) throw std::logic_error("cluster fabric is disconnected between two endpoints");

  for (VertexId v = target; v != source; v = boost::source(reached_by[v], *fabric_)) {
    const LinkInfo& link = (*fabric_)[reached_by[v]];
    route.links.push_back(link.id);
    route.bottleneck = std::min(route.bottleneck, link.bandwidth);
    route.latency += link.latency;
  }
  std::reverse(route.links.begin(), route.links.end());
  return route;
}

}  // namespace dtsim::topo
