// NCCL's protocols and channels, and the algorithms beyond ring and tree
// (SHARP, parameter-server push/pull, reduce then broadcast), against
// closed forms.
#include <gtest/gtest.h>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/topo/cluster_loader.hpp"

using namespace dtsim;

namespace {

topo::Cluster bundled(const char* name, std::optional<int> nodes = std::nullopt, bool sharp = false) {
  hw::DeviceCatalog catalog;
  const std::string file = std::string(DTSIM_SOURCE_DIR) + "/topologies/" + name + ".json";
  nlohmann::json doc = core::load_json_file(file);
  if (sharp) doc["inter_node"]["sharp"] = true;
  return topo::build_cluster(doc, file, catalog, {nodes});
}

std::vector<int> first(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// The Simple protocol only: closed forms below count its latency per step.
net::NetworkOptions simple_protocol() {
  net::NetworkOptions o;
  o.protocol = net::Protocol::kSimple;
  return o;
}

constexpr double kNvlink = 450e9 * 0.8;  // H100 NVSwitch port at the default bus efficiency

}  // namespace

// Small buffers go by LL (a fraction of Simple's per-step latency), large
// ones by Simple (LL moves a quarter of the bytes per second).
TEST(Protocols, AutoTakesLlForSmallBuffersAndSimpleForLargeOnes) {
  topo::Cluster c = bundled("dgx-h100");
  net::Network network(c, {});
  EXPECT_EQ(network.cost(net::CollectiveOp::kAllReduce, first(8), core::Bytes(8)).protocol, net::Protocol::kLl);
  EXPECT_EQ(network.cost(net::CollectiveOp::kAllReduce, first(8), core::Bytes(1e9)).protocol, net::Protocol::kSimple);
  const auto plan = [&](net::Protocol p) {
    return network.plan(net::CollectiveOp::kAllReduce, first(8), core::Bytes(8), net::Algorithm::kRing, p);
  };
  // NCCL's NVLink ring latencies per step: LL 0.47 us, Simple 3.4 us; fixed parts LL 3.6 us, Simple 8.4 us.
  const double ll_steps = plan(net::Protocol::kLl).phases[0].latency.value() - 3.6e-6;
  const double simple_steps = plan(net::Protocol::kSimple).phases[0].latency.value() - 8.4e-6;
  EXPECT_NEAR(ll_steps / simple_steps, 0.47 / 3.4, 1e-9);
  // LL sends a 4-byte flag with every 4 bytes and polls: a quarter of the rate for all-reduce.
  EXPECT_NEAR(plan(net::Protocol::kLl).phases[0].bytes_per_flow / plan(net::Protocol::kSimple).phases[0].bytes_per_flow, 4.0, 1e-9);
}

// LL128 only where every link is NVLink, unless named.
TEST(Protocols, Ll128StaysOnNvlinkUnlessNamed) {
  topo::Cluster c = bundled("dgx-h100", 2);
  net::Network network(c, {});
  for (double size = 1024; size < 1e10; size *= 4) {
    EXPECT_NE(network.cost(net::CollectiveOp::kAllReduce, first(16), core::Bytes(size)).protocol, net::Protocol::kLl128);
  }
  net::NetworkOptions ll128;
  ll128.protocol = net::Protocol::kLl128;
  EXPECT_EQ(net::Network(c, ll128).cost(net::CollectiveOp::kAllReduce, first(16), core::Bytes(1e6)).protocol,
            net::Protocol::kLl128);
}

// Simple adds a channel per 32 KiB (512 threads x 64 bytes): 64 KiB runs 2 of
// 16 channels at 2/16 of the rate.
TEST(Protocols, SmallBuffersRunOnFewerChannels) {
  topo::Cluster c = bundled("dgx-h100");
  net::Network network(c, {});
  net::CollectivePlan p = network.plan(net::CollectiveOp::kAllReduce, first(8), core::Bytes(65536), net::Algorithm::kRing,
                                       net::Protocol::kSimple);
  EXPECT_EQ(p.channels, 2);
  EXPECT_DOUBLE_EQ(p.phases[0].rate_fraction, 2.0 / 24.0);
  EXPECT_EQ(network.plan(net::CollectiveOp::kAllReduce, first(8), core::Bytes(1e9), net::Algorithm::kRing,
                         net::Protocol::kSimple).channels, 24);
}

// NVLS runs on NCCL's NVLS channels (16 on Hopper) at every size: no ramp
// over the ring's 24, and 16 SMs taken from the kernels beside it.
TEST(Protocols, NvlsRunsOnItsOwnChannelsAtEverySize) {
  topo::Cluster c = bundled("dgx-h100");
  net::Network network(c, {});
  for (double bytes : {65536.0, 1e9}) {
    net::CollectivePlan p = network.plan(net::CollectiveOp::kAllReduce, first(8), core::Bytes(bytes), net::Algorithm::kNvls,
                                         net::Protocol::kSimple);
    EXPECT_EQ(p.channels, 16) << bytes;
    for (const net::FlowPhase& phase : p.phases) EXPECT_DOUBLE_EQ(phase.rate_fraction, c.nvls_rate_fraction()) << bytes;
  }
}

// NCCL sizes a communicator's channels from its topology search: 24 rings
// over one H100 node's NVSwitch, 2 per NIC (16) once it spans nodes.
TEST(Protocols, CommunicatorsAcrossNodesRunOnTwoChannelsPerNic) {
  topo::Cluster c = bundled("dgx-h100", 2);
  net::Network network(c, {});
  std::vector<int> two_nodes{0, 8};
  EXPECT_EQ(network.plan(net::CollectiveOp::kAllReduce, two_nodes, core::Bytes(1e9), net::Algorithm::kRing,
                         net::Protocol::kSimple).channels, 16);
  EXPECT_EQ(network.plan(net::CollectiveOp::kAllReduce, first(8), core::Bytes(1e9), net::Algorithm::kRing,
                         net::Protocol::kSimple).channels, 24);
  // Half the buffer that fills 16 channels fills 8 of them across nodes.
  EXPECT_EQ(network.plan(net::CollectiveOp::kAllReduce, two_nodes, core::Bytes(8 * 32768.0), net::Algorithm::kRing,
                         net::Protocol::kSimple).channels, 8);
}

// Reduce onto GPU 0, then broadcast from it: its switch port carries 7 buffers each way.
TEST(Algorithms, ReduceThenBroadcastLoadsTheRoot) {
  topo::Cluster c = bundled("dgx-h100");
  net::Network network(c, simple_protocol());
  const double s = 1e9;
  const double t = network.cost(net::CollectiveOp::kAllReduce, first(8), core::Bytes(s), net::Algorithm::kReduceBroadcast).time.value();
  EXPECT_NEAR(t, 8.4e-6 + 2 * 7 * s / kNvlink + 2 * 1.4e-6, 1e-9);
}

// Push to the host CPU and pull back: each GPU's PCIe link carries S each way.
TEST(Algorithms, ParameterServerPushesToTheHostsAndPullsBack) {
  topo::Cluster c = bundled("dgx-h100");
  net::Network network(c, simple_protocol());
  const double s = 1e9, pcie = 64e9 * 0.8;
  const double t = network.cost(net::CollectiveOp::kAllReduce, first(8), core::Bytes(s), net::Algorithm::kParameterServer).time.value();
  EXPECT_NEAR(t, 8.4e-6 + 2 * s / pcie + 2 * 1e-6, 1e-9);
}

// SHARP: each node sends its buffer up once and receives the sum, S/B,
// where a ring over 4 nodes moves 2·3/4·S/B.
TEST(Algorithms, SharpMovesEachBufferOnceAcrossTheNetwork) {
  topo::Cluster c = bundled("superpod-h100", 4, true);
  net::Network network(c, simple_protocol());
  const std::vector<int> one_per_node{0, 8, 16, 24};
  const core::Bytes s(4e9);
  const double sharp = network.cost(net::CollectiveOp::kAllReduce, one_per_node, s, net::Algorithm::kSharp).time.value();
  const double ring = network.cost(net::CollectiveOp::kAllReduce, one_per_node, s, net::Algorithm::kRing).time.value();
  EXPECT_NEAR(ring / sharp, 1.5, 0.01);
  EXPECT_EQ(network.cost(net::CollectiveOp::kAllReduce, one_per_node, s).algorithm, net::Algorithm::kSharp);
  // Without "sharp": true the switches do not reduce, and auto never picks it.
  topo::Cluster plain = bundled("superpod-h100", 4);
  EXPECT_NE(net::Network(plain, simple_protocol()).cost(net::CollectiveOp::kAllReduce, one_per_node, s).algorithm, net::Algorithm::kSharp);
}

// Reduce: chunks pipelined along the ring to the root, S/B like broadcast;
// reduce_broadcast's reduce half loads the root's port with 7 buffers.
TEST(Algorithms, ReduceMovesTheBufferOnceAlongTheRing) {
  topo::Cluster c = bundled("dgx-h100");
  net::Network network(c, simple_protocol());
  const double s = 1e9;
  const double ring = network.cost(net::CollectiveOp::kReduce, first(8), core::Bytes(s), net::Algorithm::kRing).time.value();
  EXPECT_NEAR(ring, 8.4e-6 + s / kNvlink + 7 * 1.4e-6, 1e-9);
  const double to_root = network.cost(net::CollectiveOp::kReduce, first(8), core::Bytes(s), net::Algorithm::kReduceBroadcast).time.value();
  EXPECT_NEAR(to_root, 8.4e-6 + 7 * s / kNvlink + 1.4e-6, 1e-9);
}
