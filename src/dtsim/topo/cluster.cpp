#include "dtsim/topo/cluster.hpp"

#include "dtsim/core/input_error.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <cstdint>
#include <random>

namespace dtsim::topo {

Cluster::Cluster(Shape shape) : shape_(std::move(shape)), fabric_(std::make_unique<Fabric>()) {
  gpu_vertex_.assign(static_cast<std::size_t>(gpu_count()), Fabric::null_vertex());
  host_vertex_.assign(static_cast<std::size_t>(shape_.nodes), Fabric::null_vertex());
  // Every builder adds well under 16 directed links per GPU (its NVLink or
  // NVSwitch ports, PCIe to host and NIC, a NIC's uplink). Reserving them
  // avoids copying a 100k-GPU fabric's links at each doubling; pages not
  // written are never touched.
  links_.reserve(static_cast<std::size_t>(gpu_count()) * 16);
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
    boost::add_edge(from, to, LinkRef{info.id}, *fabric_);
  }
}

void Cluster::set_gpu_vertex(int gpu, VertexId vertex) { gpu_vertex_.at(static_cast<std::size_t>(gpu)) = vertex; }

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

}  // namespace dtsim::topo
