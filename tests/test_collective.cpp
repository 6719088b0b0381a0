#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/core/linear_fit.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/topo/cluster_loader.hpp"

using namespace dtsim;

namespace {

topo::Cluster cluster(const char* name, std::optional<int> nodes = std::nullopt) {
  hw::DeviceCatalog catalog;
  return topo::load_cluster(std::string(DTSIM_SOURCE_DIR) + "/topologies/" + name + ".json", catalog, {nodes});
}

std::vector<int> first(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

}  // namespace

TEST(Routing, IntraNodeGoesThroughTheSwitchAndInterNodeThroughNics) {
  topo::Cluster c = cluster("dgx-h100", 2);
  topo::Route local = c.route(0, 1);
  EXPECT_EQ(local.links.size(), 2u);
  EXPECT_DOUBLE_EQ(local.bottleneck.value(), 450e9);
  EXPECT_DOUBLE_EQ(local.latency.value(), 1.4e-6);
  topo::Route remote = c.route(0, 8);
  EXPECT_EQ(remote.links.size(), 4u);  // GPU-NIC, NIC-leaf, leaf-NIC, NIC-GPU
  EXPECT_DOUBLE_EQ(remote.bottleneck.value(), 50e9);
}

// Ring all-reduce on n GPUs: 2(n-1)/n · S/B + 2(n-1) · latency, B the bus
// bandwidth NCCL delivers, plus NCCL's fixed 8.4 us of the Simple protocol.
TEST(Collective, RingAllReduceMatchesClosedForm) {
  topo::Cluster c = cluster("dgx-h100");
  net::NetworkOptions ring_only;
  ring_only.algorithm = net::Algorithm::kRing;
  net::Network network(c, ring_only);
  const double n = 8, bytes = 1e9, bandwidth = 450e9 * 0.8, latency = 1.4e-6, base = 8.4e-6;
  auto gpus = first(8);
  net::CollectiveCost cost = network.cost(net::CollectiveOp::kAllReduce, gpus, core::Bytes(bytes));
  EXPECT_NEAR(cost.time.value(), base + 2 * (n - 1) / n * bytes / bandwidth + 2 * (n - 1) * latency, 1e-12);
  // NCCL's default on this node is NVLS: every GPU sends and receives the
  // buffer once, at nvls_efficiency (0.61) of the line rate.
  net::Network defaults(c, {});
  net::CollectiveCost nvls = defaults.cost(net::CollectiveOp::kAllReduce, gpus, core::Bytes(bytes));
  EXPECT_EQ(nvls.algorithm, net::Algorithm::kNvls);
  EXPECT_NEAR(nvls.time.value(), base + bytes / (450e9 * 0.61) + 2 * latency, 1e-9);
  EXPECT_FALSE(cost.hierarchical);
  net::CollectiveCost gather = network.cost(net::CollectiveOp::kAllGather, gpus, core::Bytes(bytes));
  EXPECT_NEAR(gather.time.value(), base + (n - 1) / n * bytes / bandwidth + (n - 1) * latency, 1e-12);
}

// A calibration's collectives were measured on one machine: its fit costs a
// group of that many ranks inside a node, and a group of as many across
// nodes crosses the network the fit never saw, so the fabric costs it.
TEST(Collective, AMeasuredFitCostsGroupsInsideANodeOnly) {
  topo::Cluster c = cluster("dgx-h100", 2);
  net::NetworkOptions options;
  const core::LinearFit fit{core::Seconds(50e-6), core::BytesPerSecond(10e9)};  // far from the fabric's figures
  options.measured[{net::CollectiveOp::kAllReduce, 2}] = {fit, {}};
  net::Network measured(c, options);
  net::Network fabric(c, {});
  const core::Bytes bytes(1e8);
  std::vector<int> inside{0, 1}, across{0, 8};
  const net::CollectiveCost local = measured.cost(net::CollectiveOp::kAllReduce, inside, bytes);
  EXPECT_NEAR(local.time.value(), fit.time(bytes).value(), 1e-12);
  EXPECT_NE(local.time.value(), fabric.cost(net::CollectiveOp::kAllReduce, inside, bytes).time.value());
  EXPECT_DOUBLE_EQ(measured.cost(net::CollectiveOp::kAllReduce, across, bytes).time.value(),
                   fabric.cost(net::CollectiveOp::kAllReduce, across, bytes).time.value());
}

// Where the calibration kept its medians, they cost the collective,
// interpolated on log axes, and the fit only says how a what-if scales it.
// The medians are a 2-rank MPI all-reduce's on a CPU host (a quick
// dtsim-calibrate, 2026-12-03): past the caches the rate falls from 2.6 GB/s
// at 1 MiB to 1.1 GB/s at 16 MiB, and the fit of every size (2.2 GB/s) gave
// the 16 MiB all-reduce of the mlp's gradients less than half its time.
TEST(Collective, MeasuredMediansCostTheCollectiveAndTheFitScalesThem) {
  topo::Cluster c = cluster("dgx-h100");
  const core::LinearFit fit{core::Seconds(1.948e-6), core::BytesPerSecond(2.201e9)};
  const core::SizeTable medians({{core::Bytes(1048576), core::Seconds(401.48e-6)},
                                 {core::Bytes(4194304), core::Seconds(2153.761e-6)},
                                 {core::Bytes(16777216), core::Seconds(15754.398e-6)}});
  net::NetworkOptions options;
  options.measured[{net::CollectiveOp::kAllReduce, 2}] = {fit, medians};
  std::vector<int> pair{0, 1};
  const core::Bytes mlp_gradients(16.02 * 1048576);
  const double time = net::Network(c, options).cost(net::CollectiveOp::kAllReduce, pair, mlp_gradients).time.value();
  EXPECT_NEAR(time, medians.time(mlp_gradients).value(), 1e-12);
  EXPECT_GT(time, 2.0 * fit.time(mlp_gradients).value());
  // Between two sizes, on log axes: 2 MiB takes the geometric mean of 1 and 4 MiB's.
  EXPECT_NEAR(net::Network(c, options).cost(net::CollectiveOp::kAllReduce, pair, core::Bytes(2097152)).time.value(),
              std::sqrt(401.48e-6 * 2153.761e-6), 1e-12);
  // A what-if of twice the bandwidth scales the median as it scales the fit.
  options.intra_bandwidth_scale = 2.0;
  const core::Seconds fitted = fit.time(mlp_gradients);
  const core::Seconds halved = fit.latency + mlp_gradients / (fit.bandwidth * 2.0);
  EXPECT_NEAR(net::Network(c, options).cost(net::CollectiveOp::kAllReduce, pair, mlp_gradients).time.value(),
              time * (halved / fitted), 1e-12);
}

TEST(Collective, OneMemberCostsNothing) {
  topo::Cluster c = cluster("dgx-h100");
  net::Network network(c, {});
  std::vector<int> one{3};
  EXPECT_EQ(network.cost(net::CollectiveOp::kAllReduce, one, core::Bytes(1e9)).time.value(), 0.0);
}

// NCCL's ring across two nodes of 8: eight flat rings of S/8, one per NIC.
// Each ring runs through the whole node over NVLink (PXN hands the data to
// the GPU on the rail it leaves by) and crosses to the same GPU of the next
// node, so every NVLink port carries the node's 8 rings and every NIC one
// ring each way; a chunk pays the route latency of each hop it crosses.
TEST(Collective, SpanningNodesRunsNcclsFlatRings) {
  topo::Cluster c = cluster("dgx-h100", 2);
  net::NetworkOptions ring_only;
  ring_only.algorithm = net::Algorithm::kRing;
  ring_only.protocol = net::Protocol::kSimple;
  net::Network network(c, ring_only);
  const double bytes = 1e9, nvlink = 450e9 * 0.8, nic = 50e9 * 0.96, n = 16;
  const double intra_latency = 1.4e-6, inter_latency = 4e-6;  // GPU-NIC 1 us twice, NIC-leaf 1 us twice
  net::CollectiveCost cost = network.cost(net::CollectiveOp::kAllReduce, first(16), core::Bytes(bytes));
  EXPECT_FALSE(cost.hierarchical);
  const double per_flow = bytes / 8 * 2 * (n - 1) / n;
  const double latency = 2 * (n - 1) * (2 * inter_latency + 14 * intra_latency) / n;
  EXPECT_NEAR(cost.time.value(), 8.4e-6 + latency + per_flow * std::max(8 / nvlink, 1 / nic), 1e-12);
  // The other algorithms stay hierarchical: the tree runs across nodes on S/8.
  EXPECT_TRUE(network.cost(net::CollectiveOp::kAllReduce, first(16), core::Bytes(bytes), net::Algorithm::kTree).hierarchical);
}

// NCCL's maintainers measure 192 GB/s all-reduce bus bandwidth across DGX
// A100 nodes with a ring (8x 200 Gb/s HDR; NVIDIA/nccl issue #812), and
// count 24 GB/s the peak of one HDR NIC (nccl-tests issue #119). On two
// H100 nodes the node's own NVLink ring (360 GB/s) binds before the eight
// NDR NICs (8 x 48 GB/s, nccl-tests issue #267).
TEST(Collective, RingAcrossNodesReachesNcclsBusBandwidth) {
  auto busbw = [](const char* name) {
    topo::Cluster c = cluster(name, 2);
    net::NetworkOptions ring_only;
    ring_only.algorithm = net::Algorithm::kRing;
    net::Network network(c, ring_only);
    const double bytes = 8e9, n = 16;
    return bytes / network.cost(net::CollectiveOp::kAllReduce, first(16), core::Bytes(bytes)).time.value() * 2 * (n - 1) / n;
  };
  EXPECT_NEAR(busbw("dgx-a100") / 192e9, 1.0, 0.02);
  EXPECT_NEAR(busbw("dgx-h100") / 360e9, 1.0, 0.02);
}

// An all-to-all across nodes runs at one NIC's rate, 46-49 GB/s for an NDR
// NIC: "Alltoall cannot aggregate the bandwidth of multiple NICs, so the
// performance you should see is the performance of a single NIC" (an NCCL
// maintainer, NVIDIA/nccl-tests issue #267). On a rail-optimized SuperPOD
// too: PXN keeps each step's flows on their own NICs (it ran at 27 GB/s
// while ties between PXN and the spine put two flows on one NIC).
TEST(Collective, AllToAllAcrossNodesRunsAtOneNicsRate) {
  for (const char* name : {"superpod-h100", "dgx-h100"}) {
    topo::Cluster c = cluster(name, 8);
    net::Network network(c, {});
    const double bytes = 4.0 * 1024 * 1024 * 1024, n = 64;
    const double busbw = bytes / network.cost(net::CollectiveOp::kAllToAll, first(64), core::Bytes(bytes)).time.value() * (n - 1) / n;
    EXPECT_GT(busbw, 44e9) << name;
    EXPECT_LT(busbw, 50e9) << name;
  }
}

TEST(Collective, GroupWithOneGpuPerNodeSharesNothing) {
  topo::Cluster c = cluster("dgx-a100", 4);
  net::Network network(c, {});
  std::vector<int> one_per_node{0, 8, 16, 24};
  net::CollectivePlan plan = network.plan(net::CollectiveOp::kAllReduce, one_per_node, core::Bytes(1e9),
                                         net::Algorithm::kRing, net::Protocol::kSimple);
  ASSERT_EQ(plan.phases.size(), 1u);
  const net::FlowPhase& ring = plan.phases[0];
  // one 200 Gb/s HDR NIC per flow, at the 24 GB/s NCCL's maintainers count its peak
  EXPECT_NEAR(ring.bytes_per_flow.value() / (network.time(ring) - ring.latency).value(), 25e9 * 0.96, 1e3);
}

TEST(Routing, TorusNeighboursAreOneHopAndWrapAround) {
  topo::Cluster c = cluster("tpu-v4-64");
  EXPECT_TRUE(c.torus());
  EXPECT_EQ(c.route(0, 1).links.size(), 1u);
  EXPECT_EQ(c.route(0, 3).links.size(), 1u);   // wrap-around in the first dimension
  EXPECT_EQ(c.route(0, 48).links.size(), 1u);  // wrap-around in the third
  EXPECT_EQ(c.route(0, 5).links.size(), 2u);
  EXPECT_EQ(c.route(0, 42).links.size(), 6u);  // (2, 2, 2): the far corner, two hops per dimension
  EXPECT_DOUBLE_EQ(c.route(0, 1).bottleneck.value(), 50e9);
}

// Tree and halving-doubling pay log2(n) latencies where the ring pays n-1
// (Simple protocol: the route's latency per step; 8 bytes move in nanoseconds).
TEST(Collective, TreeAndHalvingDoublingLatencyGrowsWithLog2OfTheGroup) {
  topo::Cluster c = cluster("dgx-h100", 8);
  net::NetworkOptions simple;
  simple.protocol = net::Protocol::kSimple;
  net::Network network(c, simple);
  const core::Bytes tiny(8);
  auto time = [&](net::Algorithm a, int n) {
    std::vector<int> gpus;
    for (int i = 0; i < n; ++i) gpus.push_back(8 * i);  // one GPU per node: flat, across the fabric
    return network.cost(net::CollectiveOp::kAllReduce, gpus, tiny, a).time.value() - 8.4e-6;  // less NCCL's fixed part
  };
  const double alpha = 4e-6;  // GPU-NIC-leaf-NIC-GPU
  EXPECT_NEAR(time(net::Algorithm::kHalvingDoubling, 8), 2 * 3 * alpha, 1e-7);
  EXPECT_NEAR(time(net::Algorithm::kTree, 8), 2 * 3 * alpha, 1e-7);
  EXPECT_NEAR(time(net::Algorithm::kRing, 8), 2 * 7 * alpha, 1e-7);
  EXPECT_NEAR(time(net::Algorithm::kHalvingDoubling, 4) / time(net::Algorithm::kHalvingDoubling, 8), 2.0 / 3.0, 1e-3);
}

TEST(Collective, HalvingDoublingMovesWhatTheRingMoves) {
  topo::Cluster c = cluster("dgx-h100");
  net::Network network(c, {});
  const core::Bytes big(1e10);
  auto gpus = first(8);
  const double ring = network.cost(net::CollectiveOp::kAllReduce, gpus, big, net::Algorithm::kRing).time.value();
  const double hd = network.cost(net::CollectiveOp::kAllReduce, gpus, big, net::Algorithm::kHalvingDoubling).time.value();
  EXPECT_NEAR(hd / ring, 1.0, 1e-3);
}

TEST(Collective, AutoTakesTheTreeForSmallMessagesAndTheRingForLargeOnes) {
  topo::Cluster c = cluster("dgx-h100", 16);
  net::Network network(c, {});
  std::vector<int> gpus;
  for (int i = 0; i < 16; ++i) gpus.push_back(8 * i);
  EXPECT_EQ(network.cost(net::CollectiveOp::kAllReduce, gpus, core::Bytes(1024)).algorithm, net::Algorithm::kTree);
  EXPECT_EQ(network.cost(net::CollectiveOp::kAllReduce, gpus, core::Bytes(1e9)).algorithm, net::Algorithm::kRing);
}

TEST(BundledClusters, Nvl72KeepsA72GpuAllReduceOnNvlink) {
  topo::Cluster c = cluster("gb200-nvl72");
  EXPECT_EQ(c.gpu_count(), 72);
  net::Network network(c, {});
  net::CollectivePlan plan = network.plan(net::CollectiveOp::kAllReduce, first(72), core::Bytes(1e9),
                                         net::Algorithm::kRing, net::Protocol::kSimple);
  EXPECT_FALSE(plan.hierarchical);
  ASSERT_EQ(plan.phases.size(), 1u);
  const net::FlowPhase& ring = plan.phases[0];
  // the default bus efficiency of the NVLink switch
  EXPECT_NEAR(ring.bytes_per_flow.value() / (network.time(ring) - ring.latency).value(), 900e9 * 0.8, 1e6);
}

TEST(BundledClusters, H200ServersAreEightGpusOnNdr) {
  topo::Cluster c = cluster("hgx-h200");
  EXPECT_EQ(c.gpu_count(), 128);
  EXPECT_EQ(c.device().name, "H200-SXM");
}

// The RoCE cluster's leaves hold 8 servers (64 NICs) under a 2:1 uplink of
// 32 NICs' worth.
//  - A ring exchange ordered so that every flow crosses between two leaves
//    sends 64 flows each way over the uplink: each gets half the NIC rate.
//  - A ring all-reduce, ordered by node as NCCL orders its rings, crosses the
//    spine only twice per ring and never fills it: no change.
//  - An all-to-all over the two leaves fills it in some of its steps only.
TEST(BundledClusters, TheTwoToOneSpineHalvesTheFlowsThatFillIt) {
  hw::DeviceCatalog catalog;
  const std::string file = std::string(DTSIM_SOURCE_DIR) + "/topologies/roce-h100-2to1.json";
  nlohmann::json doc = core::load_json_file(file);
  topo::Cluster oversubscribed = topo::build_cluster(doc, file, catalog);
  doc["inter_node"]["oversubscription"] = 1;
  topo::Cluster non_blocking = topo::build_cluster(doc, file, catalog);
  std::vector<int> crossing;  // local GPU g of servers 0, 8, 1, 9, ..., 7, 15, for g = 0..7
  for (int g = 0; g < 8; ++g) {
    for (int s = 0; s < 8; ++s) {
      crossing.push_back(8 * s + g);
      crossing.push_back(8 * (s + 8) + g);
    }
  }
  const core::Bytes size(1e9);
  auto cost = [&](const topo::Cluster& c, net::CollectiveOp op, const std::vector<int>& g) {
    return net::Network(c, {}).cost(op, g, size, net::Algorithm::kAuto);
  };
  EXPECT_NEAR(cost(oversubscribed, net::CollectiveOp::kRingExchange, crossing).time /
                  cost(non_blocking, net::CollectiveOp::kRingExchange, crossing).time, 2.0, 1e-3);
  EXPECT_NEAR(cost(oversubscribed, net::CollectiveOp::kAllReduce, first(128)).time /
                  cost(non_blocking, net::CollectiveOp::kAllReduce, first(128)).time, 1.0, 1e-9);
  const double all_to_all = cost(oversubscribed, net::CollectiveOp::kAllToAll, first(128)).time /
                            cost(non_blocking, net::CollectiveOp::kAllToAll, first(128)).time;
  EXPECT_GT(all_to_all, 1.1);
  EXPECT_LT(all_to_all, 2.0);
}
