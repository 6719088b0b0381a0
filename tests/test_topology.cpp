// Topology builders: rail-optimized and multi-level fat trees with ECMP,
// NVLink meshes (DGX-1), explicit vertex/edge lists.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "dtsim/core/input_error.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/topo/cluster_loader.hpp"

using namespace dtsim;

namespace {

topo::Cluster bundled(const char* name, std::optional<int> nodes = std::nullopt) {
  hw::DeviceCatalog catalog;
  return topo::load_cluster(std::string(DTSIM_SOURCE_DIR) + "/topologies/" + name + ".json", catalog, {nodes});
}

topo::Cluster build(const nlohmann::json& doc) {
  hw::DeviceCatalog catalog;
  return topo::build_cluster(doc, "test.json", catalog);
}

nlohmann::json fat_tree(int nodes, nlohmann::json inter) {
  inter["kind"] = "fat_tree";
  inter["nic_bandwidth"] = "400 Gb/s";
  inter["latency"] = "1 us";
  return {{"name", "t"}, {"device", "H100-SXM"}, {"nodes", nodes}, {"gpus_per_node", 8},
          {"intra_node", {{"kind", "nvswitch"}, {"bandwidth", "450 GB/s"}, {"latency", "0.7 us"}}},
          {"inter_node", inter}};
}

std::set<std::string> switches_on(const topo::Cluster& c, const topo::Route& r) {
  std::set<std::string> names;
  for (int link : r.links) {
    const auto& info = c.links()[static_cast<std::size_t>(link)];
    if (c.fabric()[info.to].kind == topo::VertexKind::kSwitch) names.insert(c.fabric()[info.to].name);
  }
  return names;
}

}  // namespace

// SuperPOD: GPUs of equal local rank share a leaf (4 links). To another
// rail a route is 6 links either over the spine or, as NCCL's PXN sends it,
// over NVLink to the source node's GPU on the destination's rail and out of
// its NIC: dtsim takes PXN's, never the spine's and never an NVLink relay in
// the destination's node.
TEST(Topology, RailOptimizedKeepsEqualLocalRanksOnOneLeaf) {
  topo::Cluster c = bundled("superpod-h100", 4);
  EXPECT_EQ(c.route(0, 8 + 0).links.size(), 4u);
  EXPECT_EQ(c.route(3, 24 + 3).links.size(), 4u);
  for (auto [from, to] : std::vector<std::pair<int, int>>{{0, 9}, {7, 8}, {3, 12}, {5, 26}}) {
    const topo::Route r = c.route(from, to);
    EXPECT_EQ(r.links.size(), 6u);
    EXPECT_EQ(switches_on(c, r), (std::set<std::string>{"node" + std::to_string(from / 8) + ".nvswitch",
                                                        "leaf" + std::to_string(to % 8)}))
        << from << " -> " << to;
  }
}

// Three levels: 4 leaves of 2 nodes, pods of 2 leaves with 2 spines each, 2
// cores. A route between pods climbs to a core: 8 links. ECMP spreads the
// flows of a collective over both spines of the pod.
TEST(Topology, MultiLevelFatTreeRoutesThroughCoresAndSpreadsOverSpines) {
  topo::Cluster c = build(fat_tree(8, {{"nics_per_node", 8}, {"nodes_per_leaf", 2}, {"spines", 2},
                                       {"leaves_per_pod", 2}, {"cores", 2}}));
  EXPECT_EQ(c.route(0, 7 * 8).links.size(), 8u);
  EXPECT_EQ(c.route(0, 2 * 8).links.size(), 6u);  // same pod: leaf, spine, leaf
  std::set<std::string> spines;
  for (int g = 0; g < 8; ++g) {
    for (const std::string& s : switches_on(c, c.route(g, 2 * 8 + g))) spines.insert(s);
  }
  EXPECT_TRUE(spines.count("pod0.spine0"));
  EXPECT_TRUE(spines.count("pod0.spine1"));
}

// One node per leaf, 8 NICs of 50 GB/s: 400 GB/s down. Two spines at 4:1
// take 50 GB/s each; 8 flows across leaves hashed over them get at most
// 12.5 GB/s (4 per spine, more where the hash is uneven) against the 50 of
// a non-blocking tree: at least 4x the time.
TEST(Topology, OversubscribedSpinesShareTheirUplinks) {
  auto exchange_time = [](double oversubscription) {
    topo::Cluster c = build(fat_tree(2, {{"nics_per_node", 8}, {"nodes_per_leaf", 1}, {"spines", 2},
                                         {"oversubscription", oversubscription}}));
    net::Network network(c, {});
    std::vector<int> pairs;
    for (int g = 0; g < 8; ++g) {
      pairs.push_back(g);
      pairs.push_back(8 + g);
    }
    return network.cost(net::CollectiveOp::kRingExchange, pairs, core::Bytes(1e9)).time.value();
  };
  EXPECT_GT(exchange_time(4), 3.99 * exchange_time(1));
}

// DGX-1: GPU 0 has two NVLinks to GPU 3, one to GPU 1, none to GPU 5.
TEST(Topology, NvlinkMeshFollowsTheHybridCubeMesh) {
  topo::Cluster c = bundled("dgx1-v100");
  EXPECT_EQ(c.route(0, 3).links.size(), 1u);
  EXPECT_DOUBLE_EQ(c.route(0, 3).bottleneck.value(), 50e9);
  EXPECT_DOUBLE_EQ(c.route(0, 1).bottleneck.value(), 25e9);
  EXPECT_EQ(c.route(0, 5).links.size(), 2u);  // relayed by GPU 1 or 4, never the host
  net::Network network(c, {});
  const std::vector<int> pair{0, 3};
  const double send = network.cost(net::CollectiveOp::kSendRecv, pair, core::Bytes(1e9)).time.value();
  EXPECT_NEAR(send, 1e9 / (50e9 * 0.8), 1e-4);
}

TEST(Topology, ExplicitFabricIsTakenAsListed) {
  nlohmann::json doc = {{"name", "two"}, {"device", "H100-SXM"}, {"nodes", 1}, {"gpus_per_node", 2},
                        {"fabric", {{"vertices", {{{"name", "a"}, {"kind", "gpu"}, {"node", 0}},
                                                  {{"name", "b"}, {"kind", "gpu"}, {"node", 0}},
                                                  {{"name", "cpu"}, {"kind", "host"}, {"node", 0}}}},
                                    {"links", {{{"from", "a"}, {"to", "b"}, {"kind", "nvlink"},
                                                {"bandwidth", "100 GB/s"}, {"latency", "1 us"}},
                                               {{"from", "a"}, {"to", "cpu"}, {"kind", "pcie"},
                                                {"bandwidth", "32 GB/s"}, {"latency", "1 us"}},
                                               {{"from", "b"}, {"to", "cpu"}, {"kind", "pcie"},
                                                {"bandwidth", "32 GB/s"}, {"latency", "1 us"}}}}}}};
  topo::Cluster c = build(doc);
  EXPECT_EQ(c.route(0, 1).links.size(), 1u);
  EXPECT_DOUBLE_EQ(c.route(0, 1).bottleneck.value(), 100e9);
  EXPECT_EQ(c.route(0, c.host_endpoint(0)).links.size(), 1u);

  doc["fabric"]["links"][0]["to"] = "c";
  try {
    build(doc);
    FAIL() << "a link to an unlisted vertex was accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.pointer(), "/fabric/links/0/to");
    EXPECT_NE(e.message().find("expected the name of a listed vertex, got \"c\""), std::string::npos);
  }
}

namespace {

// Two GPUs of a DGX-2 share each NIC: their route stays on the NVSwitch and
// never detours through the NIC over PCIe (it did: a tie in hop counts).
TEST(Topology, GpusSharingANicTalkOverTheirNvSwitch) {
  const topo::Cluster dgx2 = bundled("dgx2-v100", 2);
  for (int a = 0; a < 16; ++a) {
    for (int b = 0; b < 16; ++b) {
      if (a == b) continue;
      const topo::Route r = dgx2.route(a, b);
      for (int link : r.links) {
        EXPECT_NE(dgx2.links()[static_cast<std::size_t>(link)].kind, topo::LinkKind::kPcie) << a << " -> " << b;
      }
      EXPECT_EQ(r.links.size(), 2u) << a << " -> " << b;  // GPU, NVSwitch, GPU
    }
  }
  // Across nodes the NICs still carry the traffic, out of one node and into the other.
  const topo::Route across = dgx2.route(0, 17);
  int pcie = 0;
  for (int link : across.links) pcie += dgx2.links()[static_cast<std::size_t>(link)].kind == topo::LinkKind::kPcie;
  EXPECT_EQ(pcie, 2);
}

}  // namespace

namespace {

// Fewest hops from a to b by a plain breadth-first search over the whole
// fabric, under routing's rules: a host relays nothing it did not send, and a
// NIC of the sender's node relays nothing into that node.
int reference_hops(const topo::Cluster& c, topo::VertexId a, topo::VertexId b) {
  const topo::Fabric& f = c.fabric();
  std::vector<int> hops(boost::num_vertices(f), -1);
  std::vector<topo::VertexId> queue{a};
  hops[a] = 0;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const topo::VertexId v = queue[i];
    if (v == b) return hops[v];
    if (v != a && f[v].kind == topo::VertexKind::kHost) continue;
    for (auto e : boost::make_iterator_range(boost::out_edges(v, f))) {
      const topo::VertexId u = boost::target(e, f);
      const bool nic_into_own_node = f[v].kind == topo::VertexKind::kNic && v != a && f[v].node == f[a].node &&
                                     f[u].node == f[v].node;
      if (hops[u] >= 0 || nic_into_own_node) continue;
      hops[u] = hops[v] + 1;
      queue.push_back(u);
    }
  }
  return -1;
}

// Every route is a chain of links from its GPU to the other, as short as a
// search of the whole fabric finds, through no host.
void expect_shortest_routes(const topo::Cluster& c, int stride) {
  const topo::Fabric& f = c.fabric();
  for (int a = 0; a < c.gpu_count(); a += stride) {
    for (int b = 0; b < c.gpu_count(); ++b) {
      if (a == b) continue;
      const topo::Route r = c.route(a, b);
      ASSERT_FALSE(r.links.empty());
      const auto& first = c.links()[static_cast<std::size_t>(r.links.front())];
      const auto& last = c.links()[static_cast<std::size_t>(r.links.back())];
      ASSERT_EQ(f[first.from].kind, topo::VertexKind::kGpu);
      ASSERT_EQ(f[last.to].kind, topo::VertexKind::kGpu);
      EXPECT_EQ(f[first.from].node, c.node_of(a));
      EXPECT_EQ(f[last.to].node, c.node_of(b));
      for (std::size_t i = 1; i < r.links.size(); ++i) {
        const auto& prev = c.links()[static_cast<std::size_t>(r.links[i - 1])];
        const auto& next = c.links()[static_cast<std::size_t>(r.links[i])];
        ASSERT_EQ(prev.to, next.from) << a << " -> " << b;
        EXPECT_NE(f[prev.to].kind, topo::VertexKind::kHost) << a << " -> " << b;
      }
      EXPECT_EQ(static_cast<int>(r.links.size()), reference_hops(c, first.from, last.to)) << a << " -> " << b;
    }
  }
}

}  // namespace

// The search from both ends finds routes as short as a search of the whole
// fabric, on every kind of fabric the builders make.
TEST(Topology, RoutesFromBothEndsAreShortestPaths) {
  expect_shortest_routes(build(fat_tree(8, {{"nics_per_node", 8}, {"nodes_per_leaf", 2}, {"spines", 2},
                                            {"leaves_per_pod", 2}, {"cores", 2}})),
                         5);
  expect_shortest_routes(bundled("superpod-h100", 8), 7);
  expect_shortest_routes(bundled("dgx-a100", 4), 3);    // one NIC per two GPUs: GPUs share them
  expect_shortest_routes(bundled("dgx1-v100", 2), 1);   // NVLink hybrid cube mesh
  expect_shortest_routes(bundled("tpu-v4-64"), 9);      // torus
}

// The CPU that launches a cluster's kernels: the device's own on a superchip
// (GB200: Grace), an x86-64 server's otherwise, a cluster file's "host" over
// both; a name devices/hosts.json does not hold is refused at its key.
TEST(Topology, TheHostIsTheDevicesOrTheClusterFilesAndHasItsLaunchCost) {
  const topo::Cluster h100 = bundled("dgx-h100");
  EXPECT_EQ(h100.host().name, "x86-64");
  EXPECT_DOUBLE_EQ(h100.host().kernel_launch.value(), 50e-6);
  const topo::Cluster gb200 = bundled("gb200-nvl72");
  EXPECT_EQ(gb200.host().name, "grace");
  // TransformerEngine issue #2053: 37.08 us a torch Linear forward on a GB200's Grace, 13.48 on a DGX H100's Xeon.
  EXPECT_NEAR(gb200.host().kernel_launch.value(), 50e-6 * 37.08 / 13.48, 0.05e-6);
  EXPECT_FALSE(gb200.host().source.empty());

  nlohmann::json doc = fat_tree(2, {{"nics_per_node", 8}});
  doc["host"] = "grace";
  EXPECT_EQ(build(doc).host().name, "grace");
  doc["host"] = "epyc";
  try {
    build(doc);
    FAIL() << "an unknown host was accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.pointer(), "/host");
    EXPECT_NE(e.message().find("expected one of x86-64, grace (devices/hosts.json), got \"epyc\""), std::string::npos);
  }
  // A device the file describes itself names its host there.
  doc.erase("host");
  doc["device"] = {{"name", "X"}, {"source", "test"}, {"host", "epyc"}, {"peak_tflops", {{"bf16", 100}}},
                   {"hbm", "16 GiB"}, {"hbm_bandwidth", "1000 GB/s"}, {"pcie_bandwidth", "32 GB/s"}};
  try {
    build(doc);
    FAIL() << "an unknown host of an inline device was accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.pointer(), "/device/host");
  }
  doc["device"]["host"] = "grace";
  EXPECT_EQ(build(doc).host().name, "grace");
}
