// Flow-level networking: max-min sharing of links (net::SharedLinks), the
// engine running collectives through it, and its agreement with the
// analytic costs where nothing contends.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/net/shared_links.hpp"
#include "dtsim/sim/replay.hpp"
#include "dtsim/topo/cluster_loader.hpp"

using namespace dtsim;

namespace {

using Loads = std::vector<std::pair<int, int>>;

double finish_of(const net::SharedLinks& links, int id) {
  for (const auto& c : links.changed()) {
    if (c.id == id) return c.finish_s;
  }
  ADD_FAILURE() << "activity " << id << " was not re-solved";
  return -1;
}

}  // namespace

TEST(SharedLinks, TwoFlowsOnOneLinkGetHalfEach) {
  net::SharedLinks links({100.0});
  const int a = links.add(0, Loads{{0, 1}}, 100);
  EXPECT_DOUBLE_EQ(links.rate(a), 100);
  EXPECT_DOUBLE_EQ(finish_of(links, a), 1.0);
  const int b = links.add(0, Loads{{0, 1}}, 100);
  EXPECT_DOUBLE_EQ(links.rate(a), 50);
  EXPECT_DOUBLE_EQ(links.rate(b), 50);
  EXPECT_DOUBLE_EQ(finish_of(links, a), 2.0);
  // Half-way, a leaves; b has 50 bytes left and the whole link again.
  links.remove(1.0, a);
  EXPECT_DOUBLE_EQ(links.rate(b), 100);
  EXPECT_DOUBLE_EQ(finish_of(links, b), 1.5);
}

// The textbook case: link 0 (10 B/s) carries x and y, link 1 (4 B/s) carries
// x and z. Link 1 is the bottleneck of x and z (2 each); y takes what x
// leaves on link 0 (8).
TEST(SharedLinks, MaxMinFairnessGivesTheUnusedShareToOthers) {
  net::SharedLinks links({10.0, 4.0});
  const int x = links.add(0, Loads{{0, 1}, {1, 1}}, 1e9);
  const int y = links.add(0, Loads{{0, 1}}, 1e9);
  const int z = links.add(0, Loads{{1, 1}}, 1e9);
  EXPECT_DOUBLE_EQ(links.rate(x), 2);
  EXPECT_DOUBLE_EQ(links.rate(z), 2);
  EXPECT_DOUBLE_EQ(links.rate(y), 8);
}

// A ring of 4 puts 2 flows on a shared link: it moves at half the link per flow.
TEST(SharedLinks, FlowsOfOneActivityCountOnTheirLinksAndCapsHold) {
  net::SharedLinks links({100.0, 100.0});
  const int ring = links.add(0, Loads{{0, 2}, {1, 1}}, 10);
  EXPECT_DOUBLE_EQ(links.rate(ring), 50);
  const int capped = links.add(0, Loads{{1, 1}}, 10, 20.0);
  EXPECT_DOUBLE_EQ(links.rate(capped), 20);
  EXPECT_DOUBLE_EQ(links.rate(ring), 50);
}

// Activities on disjoint links are not re-solved when another starts.
TEST(SharedLinks, OnlyTheConnectedComponentIsSolvedAgain) {
  net::SharedLinks links({1.0, 1.0});
  links.add(0, Loads{{0, 1}}, 1);
  links.add(0, Loads{{1, 1}}, 1);
  EXPECT_EQ(links.changed().size(), 1u);
}

// Inside a component, an activity whose rate a start leaves as it was keeps
// its progress and finish untouched: x, bound by link 1 (4 B/s, shared with
// z), keeps 2 B/s when y joins link 0 (10 B/s), so only y is reported. Its
// finish then depends on its own history alone, as copies of a group that
// start together need in order to finish together to the nanosecond.
TEST(SharedLinks, ActivitiesWhoseRateStaysAreNotTouched) {
  net::SharedLinks links({10.0, 4.0});
  const int x = links.add(0, Loads{{0, 1}, {1, 1}}, 10);
  links.add(0, Loads{{1, 1}}, 10);
  ASSERT_DOUBLE_EQ(links.rate(x), 2);
  const int y = links.add(1.0, Loads{{0, 1}}, 10);
  ASSERT_EQ(links.changed().size(), 1u);
  EXPECT_EQ(links.changed().front().id, y);
  EXPECT_DOUBLE_EQ(links.rate(x), 2);
  EXPECT_DOUBLE_EQ(links.rate(y), 8);
}

namespace {

// Two nodes of two GPUs with one NIC each: both GPUs of a node share it.
topo::Cluster one_nic_per_node() {
  nlohmann::json doc = {
      {"name", "one-nic"}, {"device", "H100-SXM"}, {"nodes", 2}, {"gpus_per_node", 2},
      {"intra_node", {{"kind", "nvswitch"}, {"bandwidth", "450 GB/s"}, {"latency", "1 us"}}},
      {"inter_node", {{"kind", "fat_tree"}, {"nics_per_node", 1}, {"nic_bandwidth", "400 Gb/s"}, {"latency", "1 us"}}}};
  hw::DeviceCatalog catalog;
  return topo::build_cluster(doc, "one-nic.json", catalog);
}

// Ranks 0 and 1 (node 0) each send 1 GB to ranks 2 and 3 (node 1) at once.
plan::TaskGraph two_sends() {
  plan::TaskGraph g;
  g.world = 4;
  g.gpu_of_rank = {0, 1, 2, 3};
  g.simulated = {{0, 0, {}}, {1, 0, {}}, {2, 1, {}}, {3, 1, {}}};
  g.groups = {{plan::GroupKind::kPp, {0, 2}}, {plan::GroupKind::kPp, {1, 3}}};
  g.calls = {{plan::CommOp::kSendRecv, 0, core::Bytes(1e9)}, {plan::CommOp::kSendRecv, 1, core::Bytes(1e9)}};
  for (int rank = 0; rank < 4; ++rank) {
    plan::Task send;
    send.kind = plan::TaskKind::kComm;
    send.stream = plan::Stream::kPointToPoint;
    send.rank = rank;
    send.payload = rank % 2;
    g.tasks.push_back(send);
  }
  return g;
}

}  // namespace

// The contention case, in the engine: two sends through one NIC take
// twice as long as either alone; the analytic mode cannot see it.
TEST(FlowReplay, SendsSharingANicSlowEachOtherDown) {
  topo::Cluster cluster = one_nic_per_node();
  net::Network network(cluster, {});
  plan::TaskGraph g = two_sends();
  hw::CostModel cost_model(cluster.device(), {});
  const plan::Timeline analytic = sim::replay(g, sim::cost_tasks(g, cost_model, network));
  const plan::Timeline flow = sim::replay(g, sim::cost_tasks(g, cost_model, network, sim::NetworkMode::kFlow));
  const double alone = 1e9 / (50e9 * 0.96);  // a 400 Gb/s NIC at a NIC's default bus efficiency
  EXPECT_NEAR(analytic.makespan.count * 1e-9, alone, alone * 1e-3);
  EXPECT_NEAR(flow.makespan.count * 1e-9, 2 * alone, alone * 1e-3);
}

// Nothing contends: data parallelism on one node (one bucket at a time on
// the data-parallel stream) and a pipeline across nodes. Both modes agree
// to within the nanosecond rounding of each phase.
TEST(FlowReplay, AgreesWithTheAnalyticModeWhereNothingContends) {
  for (const auto& [strategy, nodes] : {std::pair{std::string("ddp,gbs=16"), 1}, std::pair{std::string("pp=2,gbs=16,mbs=2"), 2}}) {
    driver::SimulationRequest request{"gpt3-1.3b", "dgx-h100", strategy, nodes, std::nullopt, std::nullopt, true, {}, {}};
    const double analytic = driver::simulate(request).report.step_time.value();
    request.network = sim::NetworkMode::kFlow;
    const double flow = driver::simulate(request).report.step_time.value();
    EXPECT_NEAR(flow / analytic, 1.0, 1e-4) << strategy;
  }
}

// Tensor-parallel all-reduces of one node and the pipeline sends of another
// never share a link, so flow-level mode costs them as the analytic mode does;
// data parallelism over the same NICs as the pipeline sends costs more.
// (Without contention: a transfer that ends later also moves when the
// kernels beside it run their second waves, which can shorten a step.)
TEST(FlowReplay, DataParallelAndPipelineTrafficShareNics) {
  driver::SimulationRequest request{"gpt3-1.3b", "roce-h100-2to1", "tp=2,pp=2,dp=4,gbs=16,mbs=1,contention=off", 2, std::nullopt,
                                    std::nullopt, true, {}, {}};
  const double analytic = driver::simulate(request).report.step_time.value();
  request.network = sim::NetworkMode::kFlow;
  const double flow = driver::simulate(request).report.step_time.value();
  EXPECT_GT(flow, analytic * 1.0002);
}

// One rank per stage with its groups' copies on the links predicts what
// simulating all ranks does.
TEST(FlowReplay, CopiesOfTheSimulatedGroupsStandForTheOtherRanks) {
  driver::SimulationRequest request{"gpt3-1.3b", "roce-h100-2to1", "tp=2,pp=2,dp=4,gbs=16,mbs=1", 2, std::nullopt,
                                    std::nullopt, false, {}, {}};
  request.network = sim::NetworkMode::kFlow;
  const double representative = driver::simulate(request).report.step_time.value();
  request.full = true;
  const double every_rank = driver::simulate(request).report.step_time.value();
  EXPECT_NEAR(representative / every_rank, 1.0, 1e-6);
}
