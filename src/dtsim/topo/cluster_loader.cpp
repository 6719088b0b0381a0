#include "dtsim/topo/cluster_loader.hpp"

#include <fmt/format.h>

#include "dtsim/core/json_reader.hpp"

namespace dtsim::topo {
namespace {

using core::BytesPerSecond;
using core::Seconds;

struct HostLink {
  BytesPerSecond bandwidth;
  Seconds latency;
};

// NCCL's Simple protocol delivers about 80% of the line rate as bus bandwidth
// (an NCCL maintainer, NVIDIA/nccl-tests issue #212); a file may state its own.
constexpr double kDefaultBusEfficiency = 0.8;

double bus_efficiency(core::JsonReader& r) {
  double e = r.number_or("bus_efficiency", kDefaultBusEfficiency);
  if (!(e > 0 && e <= 1)) r.fail("bus_efficiency", fmt::format("expected a fraction in (0, 1], got {}", e));
  return e;
}

// One NVSwitch (or PCIe switch) per node, each GPU on its own port.
// Each node's host CPU hangs off PCIe: on the PCIe switch that joins the GPUs
// (pcie kind), or beside the NVSwitch, one PCIe link per GPU. The
// NVSwitch links are added first, so routes between GPUs of a node take them.
// A TPU-style torus: the node's chips on a grid of `dims` (product =
// gpus_per_node), each linked to its neighbour in every dimension, wrapping
// around; the host sits on PCIe beside them.
void build_torus(Cluster& cluster, core::JsonReader& intra, const HostLink& pcie) {
  std::vector<int> dims;
  for (const auto& d : intra.raw().at("dims")) {
    if (!d.is_number_integer() || d.get<int>() < 1) intra.fail("dims", "expected a list of positive integers like [4, 4, 4]");
    dims.push_back(d.get<int>());
  }
  intra.ignore("dims");
  int product = 1;
  for (int d : dims) product *= d;
  if (dims.empty() || product != cluster.gpus_per_node()) {
    intra.fail("dims", fmt::format("expected dimensions whose product is the {} chips per node, got {}",
                                   cluster.gpus_per_node(), product));
  }
  const BytesPerSecond bandwidth = intra.bandwidth("bandwidth");
  const Seconds latency = intra.duration("latency");
  const double efficiency = bus_efficiency(intra);
  intra.finish();
  for (int node = 0; node < cluster.nodes(); ++node) {
    std::vector<VertexId> chips;
    for (int i = 0; i < product; ++i) {
      chips.push_back(cluster.add_vertex({VertexKind::kGpu, node, fmt::format("node{}.chip{}", node, i)}));
      cluster.set_gpu_vertex(node * product + i, chips.back());
    }
    int stride = 1;
    for (int d : dims) {
      for (int i = 0; i < product; ++i) {
        const int coordinate = (i / stride) % d;
        const int neighbour = i + (((coordinate + 1) % d) - coordinate) * stride;
        if (d > 2 || coordinate == 0) {  // a ring of two is one link, not two
          if (d > 1) cluster.add_link(chips[static_cast<std::size_t>(i)], chips[static_cast<std::size_t>(neighbour)],
                                      LinkKind::kNvLink, bandwidth, latency, efficiency);
        }
      }
      stride *= d;
    }
    VertexId host = cluster.add_vertex({VertexKind::kHost, node, fmt::format("node{}.host", node)});
    for (VertexId v : chips) cluster.add_link(v, host, LinkKind::kPcie, pcie.bandwidth, pcie.latency, efficiency);
    cluster.set_host_vertex(node, host);
  }
}

void build_nodes(Cluster& cluster, core::JsonReader& intra, const HostLink& pcie) {
  if (intra.has("kind") && intra.raw().at("kind") == "torus") {
    intra.ignore("kind");
    build_torus(cluster, intra, pcie);
    return;
  }
  std::string kind = intra.choice("kind", {"nvswitch", "pcie", "torus"});
  const bool nvswitch = kind == "nvswitch";
  BytesPerSecond bandwidth = intra.bandwidth("bandwidth");
  Seconds latency = intra.duration("latency");
  const double efficiency = bus_efficiency(intra);
  intra.finish();
  for (int node = 0; node < cluster.nodes(); ++node) {
    VertexId hub = cluster.add_vertex({VertexKind::kSwitch, node,
                                       fmt::format("node{}.{}", node, nvswitch ? "nvswitch" : "pcie-switch")});
    std::vector<VertexId> gpus;
    for (int local = 0; local < cluster.gpus_per_node(); ++local) {
      int gpu = node * cluster.gpus_per_node() + local;
      VertexId v = cluster.add_vertex({VertexKind::kGpu, node, fmt::format("node{}.gpu{}", node, local)});
      cluster.set_gpu_vertex(gpu, v);
      cluster.add_link(v, hub, nvswitch ? LinkKind::kNvLink : LinkKind::kPcie, bandwidth, latency, efficiency);
      gpus.push_back(v);
    }
    VertexId host = cluster.add_vertex({VertexKind::kHost, node, fmt::format("node{}.host", node)});
    if (nvswitch) {
      for (VertexId v : gpus) cluster.add_link(v, host, LinkKind::kPcie, pcie.bandwidth, pcie.latency, efficiency);
    } else {
      cluster.add_link(hub, host, LinkKind::kPcie, pcie.bandwidth, pcie.latency, efficiency);
    }
    cluster.set_host_vertex(node, host);
  }
}

// NICs per node on PCIe, shared by GPUs in order; nodes_per_leaf nodes under
// each leaf switch; leaves joined by one spine whose uplinks carry the leaf's
// NIC bandwidth divided by the oversubscription ratio.
void build_fat_tree(Cluster& cluster, core::JsonReader& inter, const HostLink& pcie,
                    const std::vector<std::vector<VertexId>>& gpus_by_node) {
  inter.choice("kind", {"fat_tree"});
  const int nics = static_cast<int>(inter.count("nics_per_node"));
  const BytesPerSecond nic_bandwidth = inter.bandwidth("nic_bandwidth");
  const Seconds latency = inter.duration("latency");
  const double oversubscription = inter.number_or("oversubscription", 1.0);
  if (oversubscription < 1.0) inter.fail("oversubscription", fmt::format("expected a ratio >= 1, got {}", oversubscription));
  const int nodes_per_leaf = static_cast<int>(inter.count_or("nodes_per_leaf", cluster.nodes()));
  const double efficiency = bus_efficiency(inter);
  inter.finish();
  if (cluster.gpus_per_node() % nics != 0 && nics % cluster.gpus_per_node() != 0) {
    inter.fail("nics_per_node", fmt::format("expected a divisor or multiple of {} GPUs per node, got {}",
                                            cluster.gpus_per_node(), nics));
  }
  const int leaves = (cluster.nodes() + nodes_per_leaf - 1) / nodes_per_leaf;
  std::vector<VertexId> leaf(static_cast<std::size_t>(leaves));
  for (int l = 0; l < leaves; ++l) leaf[static_cast<std::size_t>(l)] = cluster.add_vertex({VertexKind::kSwitch, -1, fmt::format("leaf{}", l)});
  if (leaves > 1) {
    VertexId spine = cluster.add_vertex({VertexKind::kSwitch, -1, "spine"});
    BytesPerSecond uplink = nic_bandwidth * (static_cast<double>(nodes_per_leaf * nics) / oversubscription);
    for (VertexId l : leaf) cluster.add_link(l, spine, LinkKind::kNetwork, uplink, latency, efficiency);
  }
  for (int node = 0; node < cluster.nodes(); ++node) {
    std::vector<VertexId> nic(static_cast<std::size_t>(nics));
    for (int i = 0; i < nics; ++i) {
      nic[static_cast<std::size_t>(i)] = cluster.add_vertex({VertexKind::kNic, node, fmt::format("node{}.nic{}", node, i)});
      cluster.add_link(nic[static_cast<std::size_t>(i)], leaf[static_cast<std::size_t>(node / nodes_per_leaf)],
                       LinkKind::kNetwork, nic_bandwidth, latency, efficiency);
    }
    for (VertexId n : nic) {
      cluster.add_link(cluster.host_vertex(node), n, LinkKind::kPcie, pcie.bandwidth, pcie.latency, efficiency);
    }
    const auto& gpus = gpus_by_node[static_cast<std::size_t>(node)];
    for (std::size_t local = 0; local < gpus.size(); ++local) {
      std::size_t n = local * static_cast<std::size_t>(nics) / gpus.size();
      cluster.add_link(gpus[local], nic[n], LinkKind::kPcie, pcie.bandwidth, pcie.latency, efficiency);
    }
  }
}

}  // namespace

Cluster build_cluster(const nlohmann::json& document, const std::string& file, const hw::DeviceCatalog& catalog,
                      const ClusterOptions& options) {
  core::JsonReader r(document, file);
  Cluster::Shape shape;
  shape.name = r.string("name");
  shape.source = r.string_or("source", "");
  std::string device_name = r.string("device");
  const hw::Device* device = catalog.find(device_name);
  if (!device) r.fail("device", fmt::format("expected one of {}, got \"{}\"", catalog.names(), device_name));
  shape.device = *device;
  shape.nodes = static_cast<int>(r.count("nodes"));
  if (options.nodes) shape.nodes = *options.nodes;
  shape.gpus_per_node = static_cast<int>(r.count("gpus_per_node"));
  shape.channels = static_cast<int>(r.count_or("channels", shape.channels));
  if (shape.channels < 1 || shape.channels > 64) {
    r.fail("channels", fmt::format("expected NCCL's channel count, 1 to 64, got {}", shape.channels));
  }

  HostLink pcie{device->pcie_bandwidth, Seconds(1e-6)};
  if (auto p = r.optional_object("pcie")) {
    pcie.bandwidth = p->bandwidth("bandwidth");
    pcie.latency = p->duration("latency");
    p->finish();
  }
  core::JsonReader intra = r.object("intra_node");
  shape.torus = intra.has("kind") && intra.raw().at("kind") == "torus";
  shape.nvls = intra.boolean_or("nvls", false);
  Cluster cluster(shape);
  build_nodes(cluster, intra, pcie);

  auto inter = r.optional_object("inter_node");
  if (inter) {
    cluster.set_sharp(inter->boolean_or("sharp", false));
    std::vector<std::vector<VertexId>> gpus_by_node(static_cast<std::size_t>(shape.nodes));
    for (VertexId v : boost::make_iterator_range(boost::vertices(cluster.fabric()))) {
      const VertexInfo& info = cluster.fabric()[v];
      if (info.kind == VertexKind::kGpu) gpus_by_node[static_cast<std::size_t>(info.node)].push_back(v);
    }
    build_fat_tree(cluster, *inter, pcie, gpus_by_node);
  } else if (shape.nodes > 1) {
    r.fail("inter_node", fmt::format("missing field: {} nodes need an inter-node network", shape.nodes));
  }
  r.finish();
  return cluster;
}

Cluster load_cluster(const std::filesystem::path& path, const hw::DeviceCatalog& catalog, const ClusterOptions& options) {
  return build_cluster(core::load_json_file(path), path.string(), catalog, options);
}

}  // namespace dtsim::topo
