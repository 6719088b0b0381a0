#include "dtsim/topo/cluster_loader.hpp"

#include <optional>

#include "dtsim/hw/datasheet.hpp"

#include <algorithm>
#include <array>
#include <map>

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

// NCCL's Simple protocol delivers about 80% of the NVLink line rate as bus
// bandwidth (an NCCL maintainer, NVIDIA/nccl-tests issue #212). A NIC loses
// less: NCCL's maintainers count 24 GB/s the peak of a 200 Gb/s NIC and 12 of
// a 100 Gb/s one (nccl-tests issue #119), 48-49 GB/s of a 400 Gb/s ConnectX-7
// (nccl-tests issue #267). A file may state its own.
constexpr double kDefaultBusEfficiency = 0.8;
constexpr double kDefaultNicEfficiency = 0.96;

double bus_efficiency(core::JsonReader& r, double fallback = kDefaultBusEfficiency) {
  double e = r.number_or("bus_efficiency", fallback);
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
  if (!intra.has("dims") || !intra.raw().at("dims").is_array()) {
    intra.fail("dims", "missing field: expected the torus's dimensions, a list of positive integers like [4, 4, 4]");
  }
  for (const auto& d : intra.raw().at("dims")) {
    if (!core::integer_in(d, 1, kMaxGpus)) intra.fail("dims", "expected a list of positive integers like [4, 4, 4]");
    dims.push_back(d.get<int>());
  }
  intra.ignore("dims");
  std::int64_t product = 1;
  for (int d : dims) product = std::min<std::int64_t>(product * d, std::int64_t{kMaxGpus} + 1);  // no overflow
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

// GPUs linked point to point by NVLink (DGX-1's hybrid cube mesh): `links`
// lists [gpu a, gpu b, NVLinks between them] by local index; each NVLink
// carries `bandwidth`. GPUs with no link between them relay through one that
// has (as NCCL's rings do), never through the host; the host sits on PCIe.
void build_nvlink_mesh(Cluster& cluster, core::JsonReader& intra, const HostLink& pcie) {
  const BytesPerSecond bandwidth = intra.bandwidth("bandwidth");
  const Seconds latency = intra.duration("latency");
  const double efficiency = bus_efficiency(intra);
  std::vector<std::array<int, 3>> links;
  const auto& list = intra.raw().contains("links") ? intra.raw().at("links") : nlohmann::json();
  for (const auto& l : list) {
    const int n = cluster.gpus_per_node();
    if (!l.is_array() || l.size() != 3 || !core::integer_in(l[0], 0, n - 1) || !core::integer_in(l[1], 0, n - 1) || l[0] == l[1] ||
        !core::integer_in(l[2], 1, 64)) {
      intra.fail("links", fmt::format("expected [gpu, gpu, count] triples of local GPU indices 0..{} and a link "
                                      "count from 1 to 64, got {}", n - 1, l.dump()));
    }
    links.push_back({l[0].get<int>(), l[1].get<int>(), l[2].get<int>()});
  }
  if (links.empty()) intra.fail("links", "expected a list of [gpu, gpu, count] triples like [[0, 1, 2], [0, 2, 1]]");
  intra.ignore("links");
  intra.finish();
  for (int node = 0; node < cluster.nodes(); ++node) {
    std::vector<VertexId> gpus;
    for (int local = 0; local < cluster.gpus_per_node(); ++local) {
      gpus.push_back(cluster.add_vertex({VertexKind::kGpu, node, fmt::format("node{}.gpu{}", node, local)}));
      cluster.set_gpu_vertex(node * cluster.gpus_per_node() + local, gpus.back());
    }
    for (const auto& [a, b, count] : links) {
      cluster.add_link(gpus[static_cast<std::size_t>(a)], gpus[static_cast<std::size_t>(b)], LinkKind::kNvLink,
                       bandwidth * static_cast<double>(count), latency, efficiency);
    }
    VertexId host = cluster.add_vertex({VertexKind::kHost, node, fmt::format("node{}.host", node)});
    for (VertexId v : gpus) cluster.add_link(v, host, LinkKind::kPcie, pcie.bandwidth, pcie.latency, efficiency);
    cluster.set_host_vertex(node, host);
  }
}

void build_nodes(Cluster& cluster, core::JsonReader& intra, const HostLink& pcie) {
  if (intra.has("kind") && intra.raw().at("kind") == "torus") {
    intra.ignore("kind");
    build_torus(cluster, intra, pcie);
    return;
  }
  if (intra.has("kind") && intra.raw().at("kind") == "nvlink_mesh") {
    intra.ignore("kind");
    build_nvlink_mesh(cluster, intra, pcie);
    return;
  }
  std::string kind = intra.choice("kind", {"nvswitch", "pcie", "torus", "nvlink_mesh"});
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

// NICs per node on PCIe, shared by GPUs in order. Leaves: one per
// `nodes_per_leaf` nodes, or with `rail_optimized` one per NIC index (rail)
// in each group of `nodes_per_leaf` nodes (a SuperPOD scalable unit), so
// GPUs of equal local rank meet one switch away. Leaves join `spines`
// spine switches, each uplink carrying the leaf's down bandwidth divided by
// `oversubscription` and by the spine count (ECMP spreads flows over them);
// with `leaves_per_pod`, spines serve pods of that many leaves and `cores`
// core switches join the pods, non-blocking: a three-level fat tree.
void build_fat_tree(Cluster& cluster, core::JsonReader& inter, const HostLink& pcie,
                    const std::vector<std::vector<VertexId>>& gpus_by_node) {
  inter.choice("kind", {"fat_tree"});
  const int nics = static_cast<int>(inter.count("nics_per_node"));
  const BytesPerSecond nic_bandwidth = inter.bandwidth("nic_bandwidth");
  const Seconds latency = inter.duration("latency");
  const double oversubscription = inter.number_or("oversubscription", 1.0);
  if (oversubscription < 1.0) inter.fail("oversubscription", fmt::format("expected a ratio >= 1, got {}", oversubscription));
  const int nodes_per_leaf = static_cast<int>(inter.count_or("nodes_per_leaf", cluster.nodes()));
  const bool rails = inter.boolean_or("rail_optimized", false);
  const int spines = static_cast<int>(inter.count_or("spines", 1));
  const int leaves_per_pod = static_cast<int>(inter.count_or("leaves_per_pod", 0));
  const int cores = static_cast<int>(inter.count_or("cores", 1));
  const double efficiency = bus_efficiency(inter, kDefaultNicEfficiency);
  inter.ignore("sharp");
  inter.finish();
  if (cluster.gpus_per_node() % nics != 0 && nics % cluster.gpus_per_node() != 0) {
    inter.fail("nics_per_node", fmt::format("expected a divisor or multiple of {} GPUs per node, got {}",
                                            cluster.gpus_per_node(), nics));
  }
  const int units = (cluster.nodes() + nodes_per_leaf - 1) / nodes_per_leaf;
  const int leaves = rails ? units * nics : units;
  auto leaf_of = [&](int node, int nic) { return rails ? (node / nodes_per_leaf) * nics + nic : node / nodes_per_leaf; };
  std::vector<VertexId> leaf(static_cast<std::size_t>(leaves));
  for (int l = 0; l < leaves; ++l) leaf[static_cast<std::size_t>(l)] = cluster.add_vertex({VertexKind::kSwitch, -1, fmt::format("leaf{}", l)});
  if (leaves > 1) {
    const int per_pod = leaves_per_pod > 0 ? std::min(leaves_per_pod, leaves) : leaves;
    const int pods = (leaves + per_pod - 1) / per_pod;
    const BytesPerSecond leaf_down = nic_bandwidth * static_cast<double>(nodes_per_leaf * (rails ? 1 : nics));
    const BytesPerSecond uplink = leaf_down / (oversubscription * spines);
    std::vector<VertexId> core_switch;
    for (int c = 0; pods > 1 && c < cores; ++c) {
      core_switch.push_back(cluster.add_vertex({VertexKind::kSwitch, -1, fmt::format("core{}", c)}));
    }
    for (int pod = 0; pod < pods; ++pod) {
      for (int s = 0; s < spines; ++s) {
        std::string name = spines == 1 && pods == 1 ? "spine" : pods == 1 ? fmt::format("spine{}", s) : fmt::format("pod{}.spine{}", pod, s);
        VertexId spine = cluster.add_vertex({VertexKind::kSwitch, -1, std::move(name)});
        const int first = pod * per_pod, last = std::min(leaves, first + per_pod);
        for (int l = first; l < last; ++l) cluster.add_link(leaf[static_cast<std::size_t>(l)], spine, LinkKind::kNetwork, uplink, latency, efficiency);
        const BytesPerSecond spine_up = uplink * static_cast<double>(last - first) / static_cast<double>(cores);
        for (VertexId c : core_switch) cluster.add_link(spine, c, LinkKind::kNetwork, spine_up, latency, efficiency);
      }
    }
  }
  for (int node = 0; node < cluster.nodes(); ++node) {
    std::vector<VertexId> nic(static_cast<std::size_t>(nics));
    for (int i = 0; i < nics; ++i) {
      nic[static_cast<std::size_t>(i)] = cluster.add_vertex({VertexKind::kNic, node, fmt::format("node{}.nic{}", node, i)});
      cluster.add_link(nic[static_cast<std::size_t>(i)], leaf[static_cast<std::size_t>(leaf_of(node, i))],
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

// Any fabric, listed: "vertices" ({name, kind: gpu|nic|switch|host, node})
// and "links" ({from, to, kind: nvlink|pcie|network, bandwidth, latency,
// bus_efficiency}). GPUs take ranks in the order listed, node by node; every
// node needs its host (where parameter servers run).
void build_explicit(Cluster& cluster, core::JsonReader& fabric) {
  std::map<std::string, VertexId> by_name;
  int gpus = 0;
  std::vector<bool> has_host(static_cast<std::size_t>(cluster.nodes()), false);
  for (core::JsonReader& v : fabric.objects("vertices")) {
    const std::string name = v.string("name");
    const std::string kind = v.choice("kind", {"gpu", "nic", "switch", "host"});
    const int node = static_cast<int>(v.integer_or("node", -1));
    v.finish();
    if (by_name.count(name)) v.fail("name", fmt::format("expected a name no other vertex has, got \"{}\" again", name));
    if ((kind == "gpu" || kind == "host") && (node < 0 || node >= cluster.nodes())) {
      v.fail("node", fmt::format("expected the node (0 to {}) this {} is in", cluster.nodes() - 1, kind));
    }
    const VertexKind vk = kind == "gpu" ? VertexKind::kGpu : kind == "nic" ? VertexKind::kNic
                        : kind == "switch" ? VertexKind::kSwitch : VertexKind::kHost;
    const VertexId id = cluster.add_vertex({vk, node, name});
    by_name[name] = id;
    if (vk == VertexKind::kGpu) {
      if (gpus >= cluster.gpu_count() || node != gpus / cluster.gpus_per_node()) {
        v.fail("node", fmt::format("expected GPUs listed node by node, {} per node: GPU {} belongs to node {}",
                                   cluster.gpus_per_node(), gpus, gpus / cluster.gpus_per_node()));
      }
      cluster.set_gpu_vertex(gpus++, id);
    } else if (vk == VertexKind::kHost) {
      if (has_host[static_cast<std::size_t>(node)]) v.fail("node", fmt::format("expected one host per node; node {} has two", node));
      has_host[static_cast<std::size_t>(node)] = true;
      cluster.set_host_vertex(node, id);
    }
  }
  if (gpus != cluster.gpu_count()) {
    fabric.fail("vertices", fmt::format("expected {} GPUs ({} nodes of {}), got {}", cluster.gpu_count(),
                                        cluster.nodes(), cluster.gpus_per_node(), gpus));
  }
  for (std::size_t n = 0; n < has_host.size(); ++n) {
    if (!has_host[n]) fabric.fail("vertices", fmt::format("expected a host vertex for node {}", n));
  }
  for (core::JsonReader& l : fabric.objects("links")) {
    auto end = [&](const char* key) {
      const std::string name = l.string(key);
      auto it = by_name.find(name);
      if (it == by_name.end()) l.fail(key, fmt::format("expected the name of a listed vertex, got \"{}\"", name));
      return it->second;
    };
    const VertexId from = end("from"), to = end("to");
    const std::string kind = l.choice("kind", {"nvlink", "pcie", "network"});
    const BytesPerSecond bandwidth = l.bandwidth("bandwidth");
    const Seconds latency = l.duration("latency");
    const double efficiency = bus_efficiency(l, kind == "network" ? kDefaultNicEfficiency : kDefaultBusEfficiency);
    l.finish();
    cluster.add_link(from, to, kind == "nvlink" ? LinkKind::kNvLink : kind == "pcie" ? LinkKind::kPcie : LinkKind::kNetwork,
                     bandwidth, latency, efficiency);
  }
  fabric.finish();
}

}  // namespace

Cluster build_cluster(const nlohmann::json& document, const std::string& file, const hw::DeviceCatalog& catalog,
                      const ClusterOptions& options) {
  core::JsonReader r(document, file);
  Cluster::Shape shape;
  shape.name = r.string("name");
  shape.source = r.string_or("source", "");
  // A catalog name, or a device the file describes itself (hw::read_device's form).
  std::optional<hw::Device> described;
  const hw::Device* device = nullptr;
  if (r.has("device") && r.raw().at("device").is_object()) {
    core::JsonReader d = r.object("device");
    described = hw::read_device(d);
    device = &*described;
  } else {
    std::string device_name = r.string("device");
    device = catalog.find(device_name);
    if (!device) {
      r.fail("device", fmt::format("expected one of {}, or a device object (name, peak_tflops, hbm, ...), got \"{}\"",
                                   catalog.names(), device_name));
    }
  }
  shape.device = catalog.with_kernel_figures(*device);
  const std::string host = r.string_or("host", device->host);
  const hw::Host* found = catalog.find_host(host);
  if (!found) {
    const std::string message = fmt::format("expected one of {} (devices/hosts.json), got \"{}\"", catalog.host_names(), host);
    if (!r.has("host") && described) throw core::InputError(file, "/device/host", message);
    r.fail("host", message);
  }
  shape.host = *found;
  shape.nodes = static_cast<int>(r.count("nodes", kMaxGpus));
  if (options.nodes) {
    if (*options.nodes < 1 || *options.nodes > kMaxGpus) {
      throw core::InputError("--nodes", "", fmt::format("expected 1 to {} nodes, got {}", kMaxGpus, *options.nodes));
    }
    shape.nodes = *options.nodes;
  }
  shape.gpus_per_node = static_cast<int>(r.count("gpus_per_node", 1024));
  if (std::int64_t{shape.nodes} * shape.gpus_per_node > kMaxGpus) {
    throw core::InputError(options.nodes ? "--nodes" : file, options.nodes ? "" : "/nodes",
                           fmt::format("{} nodes of {} GPUs is more than the {} GPUs dtsim models", shape.nodes,
                                       shape.gpus_per_node, kMaxGpus));
  }
  // NCCL's channel counts (MAXCHANNELS is 64).
  shape.channels = static_cast<int>(r.count_or("channels", shape.channels, 64));
  shape.channels_across_nodes = static_cast<int>(r.count_or("channels_across_nodes", shape.channels, 64));

  HostLink pcie{device->pcie_bandwidth, Seconds(1e-6)};
  if (auto p = r.optional_object("pcie")) {
    pcie.bandwidth = p->bandwidth("bandwidth");
    pcie.latency = p->duration("latency");
    p->finish();
  }
  if (r.has("fabric")) {
    if (options.nodes && *options.nodes != static_cast<int>(r.raw().at("nodes").get<std::int64_t>())) {
      throw core::InputError("--nodes", file, "an explicit fabric lists its nodes; --nodes cannot change their count");
    }
    core::JsonReader fabric = r.object("fabric");
    shape.nvls = fabric.boolean_or("nvls", false);
    shape.sharp = fabric.boolean_or("sharp", false);
    Cluster cluster(shape);
    build_explicit(cluster, fabric);
    r.finish();
    return cluster;
  }
  core::JsonReader intra = r.object("intra_node");
  shape.torus = intra.has("kind") && intra.raw().at("kind") == "torus";
  shape.nvls = intra.boolean_or("nvls", false);
  if (intra.has("nvls_efficiency")) {
    // The share of the NVLink line rate NVLS delivers, as its links' rate
    // already carries bus_efficiency: a fraction of that.
    const double e = intra.number("nvls_efficiency");
    if (!(e > 0 && e <= 1)) intra.fail("nvls_efficiency", fmt::format("expected a fraction in (0, 1], got {}", e));
    if (!shape.nvls) intra.fail("nvls_efficiency", "given without \"nvls\": true");
    shape.nvls_rate_fraction = e / bus_efficiency(intra);
  }
  if (intra.has("nvls_channels")) {
    shape.nvls_channels = static_cast<int>(intra.count("nvls_channels", 64));
    if (!shape.nvls) intra.fail("nvls_channels", "given without \"nvls\": true");
  }
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
