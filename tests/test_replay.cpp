#include <gtest/gtest.h>

#include "dtsim/sim/replay.hpp"

using namespace dtsim;
using core::Nanoseconds;

namespace {

// Two ranks; each computes (rank 0: 100 ns, rank 1: 300 ns), then joins one
// all-reduce of 50 ns, then computes 10 ns more.
plan::TaskGraph two_ranks() {
  plan::TaskGraph g;
  g.world = 2;
  g.gpu_of_rank = {0, 1};
  g.simulated = {{0, 0, {}}, {1, 0, {}}};
  g.simulated[0].memory.params = core::Bytes(1000);
  g.simulated[1].memory.params = core::Bytes(1000);
  g.kernels = {{"a", {}, {}, {}}, {"b", {}, {}, {}}, {"c", {}, {}, {}}};
  g.groups = {{plan::GroupKind::kDp, {0, 1}}};
  g.calls = {{plan::CommOp::kAllReduce, 0, core::Bytes(1)}};
  for (int rank = 0; rank < 2; ++rank) {
    std::uint32_t base = static_cast<std::uint32_t>(g.tasks.size());
    plan::Task compute;
    compute.rank = rank;
    compute.payload = rank;  // kernel a or b
    g.set_activation_change(compute, core::Bytes(500), core::Bytes(0));
    g.tasks.push_back(compute);
    plan::Task reduce;
    reduce.kind = plan::TaskKind::kComm;
    reduce.stream = plan::Stream::kDpComm;
    reduce.rank = rank;
    reduce.payload = 0;
    reduce.deps_begin = static_cast<std::uint32_t>(g.deps.size());
    g.deps.push_back(base);
    reduce.deps_end = static_cast<std::uint32_t>(g.deps.size());
    g.tasks.push_back(reduce);
    plan::Task tail;
    tail.rank = rank;
    tail.payload = 2;
    g.set_activation_change(tail, core::Bytes(0), core::Bytes(500));
    tail.deps_begin = static_cast<std::uint32_t>(g.deps.size());
    g.deps.push_back(base + 1);
    tail.deps_end = static_cast<std::uint32_t>(g.deps.size());
    g.tasks.push_back(tail);
  }
  return g;
}

}  // namespace

TEST(Replay, CollectiveStartsWhenTheLastMemberArrives) {
  plan::TaskGraph g = two_ranks();
  sim::TaskCosts costs{{Nanoseconds{100}, Nanoseconds{300}, Nanoseconds{10}}, {Nanoseconds{50}}, {}};
  plan::Timeline t = sim::replay(g, costs);
  EXPECT_EQ(t.spans[1].start.count, 300);  // rank 0 waits for rank 1
  EXPECT_EQ(t.spans[4].start.count, 300);
  EXPECT_EQ(t.spans[1].end.count, 350);
  EXPECT_EQ(t.spans[2].end.count, 360);
  EXPECT_EQ(t.makespan.count, 360);
}

TEST(Replay, MemoryPeaksWhileActivationsAreHeld) {
  plan::TaskGraph g = two_ranks();
  sim::TaskCosts costs{{Nanoseconds{100}, Nanoseconds{300}, Nanoseconds{10}}, {Nanoseconds{50}}, {}};
  plan::Timeline t = sim::replay(g, costs);
  EXPECT_DOUBLE_EQ(t.peak_memory[0].value(), 1500);
  EXPECT_DOUBLE_EQ(t.memory[0].back().in_use.value(), 1000);
  EXPECT_EQ(t.memory[0].back().time.count, 360);
}

TEST(Replay, TasksOnOneStreamRunInProgramOrder) {
  plan::TaskGraph g = two_ranks();
  g.simulated.pop_back();  // keep rank 0 only: the all-reduce then has one simulated member
  g.tasks.resize(3);
  g.deps.resize(2);
  sim::TaskCosts costs{{Nanoseconds{100}, Nanoseconds{300}, Nanoseconds{10}}, {Nanoseconds{50}}, {}};
  plan::Timeline t = sim::replay(g, costs);
  EXPECT_EQ(t.spans[1].start.count, 100);
  EXPECT_EQ(t.makespan.count, 160);
}

TEST(Replay, SlowerRanksTakeLongerToCompute) {
  plan::TaskGraph g = two_ranks();
  sim::TaskCosts costs{{Nanoseconds{100}, Nanoseconds{100}, Nanoseconds{10}}, {Nanoseconds{50}}, {1.0, 0.5}};
  plan::Timeline t = sim::replay(g, costs);
  EXPECT_EQ(t.spans[3].end.count, 200);  // rank 1 at half speed
  EXPECT_EQ(t.spans[1].start.count, 200);  // and the all-reduce waits for it
}

// Two workers push to one parameter-server shard at the same moment: the
// shard serves them one after the other, in arrival order.
TEST(Replay, ServerTransfersQueueAtTheirShard) {
  plan::TaskGraph g;
  g.world = 3;
  g.gpu_of_rank = {0, 1, 2};
  g.simulated = {{0, 0, {}}, {1, 0, {}}, {2, 0, {}}};
  g.groups = {{plan::GroupKind::kPs, {0, 2}}, {plan::GroupKind::kPs, {1, 2}}};
  g.calls = {{plan::CommOp::kSendRecv, 0, core::Bytes(1)}, {plan::CommOp::kSendRecv, 1, core::Bytes(1)}};
  for (int worker = 0; worker < 2; ++worker) {
    plan::Task push;
    push.kind = plan::TaskKind::kComm;
    push.stream = plan::Stream::kServer;
    push.rank = worker;
    push.payload = worker;
    g.tasks.push_back(push);
  }
  sim::TaskCosts costs{{}, {Nanoseconds{40}, Nanoseconds{40}}, {}};
  plan::Timeline t = sim::replay(g, costs);
  EXPECT_EQ(t.spans[0].end.count, 40);
  EXPECT_EQ(t.spans[1].start.count, 40);
  EXPECT_EQ(t.makespan.count, 80);
}

namespace {

// One rank: a kernel of 1000 ns on the compute stream and, beside it, a
// collective of 400 ns that starts with it.
plan::TaskGraph kernel_beside_a_collective() {
  plan::TaskGraph g;
  g.world = 2;
  g.gpu_of_rank = {0, 1};
  g.simulated = {{0, 0, {}}};
  g.kernels = {{"a", {}, {}, {}}};
  g.groups = {{plan::GroupKind::kDp, {0, 1}}};
  g.calls = {{plan::CommOp::kAllGather, 0, core::Bytes(1)}};
  plan::Task compute;
  compute.rank = 0;
  g.tasks.push_back(compute);
  plan::Task gather;
  gather.kind = plan::TaskKind::kComm;
  gather.stream = plan::Stream::kDpComm;
  gather.rank = 0;
  g.tasks.push_back(gather);
  return g;
}

sim::TaskCosts contended(model::OpKind kind) {
  sim::TaskCosts costs{{Nanoseconds{1000}}, {Nanoseconds{400}}, {}};
  std::array<double, model::kOpKindCount> share{};
  share[static_cast<std::size_t>(kind)] = 1.0;
  costs.kernel_op_share = {share};
  costs.contention.sms = 100;
  costs.contention.hbm_bytes_per_s = 1e12;
  costs.contention.call_sms = {20};
  costs.contention.call_announced = {0};
  costs.contention.call_hbm_bytes_per_s = {5e11};
  return costs;
}

}  // namespace

TEST(Contention, AGemmBesideACollectiveRunsOnTheSmsLeft) {
  // 400 ns on 80 of 100 SMs do 320 ns of the work; the other 680 ns run alone.
  plan::Timeline t = sim::replay(kernel_beside_a_collective(), contended(model::OpKind::kGemm));
  EXPECT_EQ(t.spans[0].end.count, 1080);
  EXPECT_EQ(t.spans[1].end.count, 400);  // communication is not slowed
}

TEST(Contention, AStreamingKernelSharesTheMemory) {
  // Half the bandwidth for 400 ns does 200 ns of the work; 800 ns are left.
  plan::Timeline t = sim::replay(kernel_beside_a_collective(), contended(model::OpKind::kElementwise));
  EXPECT_EQ(t.spans[0].end.count, 1200);
}

TEST(Contention, NothingChangesWithoutFiguresOrWithoutOverlap) {
  sim::TaskCosts off = contended(model::OpKind::kGemm);
  off.contention = {};
  EXPECT_EQ(sim::replay(kernel_beside_a_collective(), off).spans[0].end.count, 1000);
  // The collective after the kernel: nothing runs beside it.
  plan::TaskGraph serial = kernel_beside_a_collective();
  serial.deps = {0};
  serial.tasks[1].deps_begin = 0;
  serial.tasks[1].deps_end = 1;
  plan::Timeline t = sim::replay(serial, contended(model::OpKind::kGemm));
  EXPECT_EQ(t.spans[0].end.count, 1000);
  EXPECT_EQ(t.spans[1].end.count, 1400);
}

TEST(Contention, SlowdownClosedForm) {
  using sim::BusySms, sim::KernelShares;
  const KernelShares gemm{1.0, 0.0};
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {}, {}, 3e12, 0), 1.0);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {0, 16}, {}, 3e12, 0), 132.0 / 116.0);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown({0.5, 0.0}, 100, {0, 20}, {}, 1e12, 5e11), 0.5 * 1.25 + 0.5 * 2.0);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown({0.25, 0.25}, 100, {0, 20}, {}, 1e12, 5e11), 0.5 * 1.25 + 0.5 * 2.0);
  // Memory never drops below a tenth, SMs below one.
  EXPECT_DOUBLE_EQ(sim::contention_slowdown({0.0, 0.0}, 100, {}, {}, 1e12, 5e12), 10.0);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 100, {0, 500}, {}, 1e12, 0), 100.0);
}

// Where the device measured what a collective's memory traffic adds to a
// GEMM (devices/H100-SXM.json `beside_traffic`), the GEMM share runs T(h)
// times slower on top of its SMs' share: interpolated from (0, 1), held at
// the last point past it; attention and streaming kernels are not touched
// by it, and without traffic nothing changes.
TEST(Contention, GemmsBesideCommunicationTrafficRunAsMeasured) {
  using sim::BusySms, sim::KernelShares;
  const std::vector<hw::TrafficSlowdown> traffic{{core::BytesPerSecond(1e12), 1.05}, {core::BytesPerSecond(2e12), 1.25}};
  const KernelShares gemm{1.0, 0.0};
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {}, {}, 3e12, 5e11, traffic), 1.025);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {}, {}, 3e12, 1.5e12, traffic), 1.15);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {}, {}, 3e12, 4e12, traffic), 1.25);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {0, 16}, {}, 3e12, 1e12, traffic), 132.0 / 116.0 * 1.05);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {0, 16}, {}, 3e12, 0, traffic), 132.0 / 116.0);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown({0.0, 1.0}, 132, {0, 16}, {}, 3e12, 1e12, traffic), 132.0 / 116.0);
  const std::vector<hw::HeldSmsSlowdown> held{{8, 1.3}, {32, 1.4}};
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {0, 8}, held, 3e12, 1e12, traffic), 1.3 * 1.05);
}

// Hopper's persistent GEMMs beside SMs they were not told of run as the
// device's measurement says (devices/H100-SXM.json `beside_held_sms`): H(u)
// times as long beside u held SMs, interpolated from (0, 1) through the
// points, growing past the last as the SMs left shrink; attention and
// streaming kernels spread as before. Launched on the SMs a collective
// leaves (Transformer Engine's comm-GEMM overlap), a GEMM runs on them in
// proportion, and only the SMs it was not told of cost it H.
TEST(Contention, PersistentGemmsBesideUnannouncedSmsRunAsMeasured) {
  using sim::BusySms, sim::KernelShares;
  const std::vector<hw::HeldSmsSlowdown> measured{{8, 1.3}, {32, 1.4}};
  const KernelShares gemm{1.0, 0.0};
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {0, 8}, measured, 3e12, 0), 1.3);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {0, 4}, measured, 3e12, 0), 1.15);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {0, 20}, measured, 3e12, 0), 1.35);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {0, 66}, measured, 3e12, 0), 1.4 * 100.0 / 66.0);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown({0.0, 1.0}, 132, {0, 24}, measured, 3e12, 0), 132.0 / 108.0);
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {24, 0}, measured, 3e12, 0), 132.0 / 108.0);
  // Told of 16, beside 8 more it was not: 116 SMs' work, slowed as beside 8.
  EXPECT_DOUBLE_EQ(sim::contention_slowdown(gemm, 132, {16, 8}, measured, 3e12, 0), 132.0 / 116.0 * 1.3);
  // In the replay: 400 ns at 1/1.6 of the speed do 250 ns of the work; 750 ns are left.
  sim::TaskCosts costs = contended(model::OpKind::kGemm);
  costs.contention.gemm_beside_held_sms = {{20, 1.6}};
  EXPECT_EQ(sim::replay(kernel_beside_a_collective(), costs).spans[0].end.count, 1150);
  costs.contention.call_announced = {1};
  EXPECT_EQ(sim::replay(kernel_beside_a_collective(), costs).spans[0].end.count, 1080);
}

// A persistent GEMM holds every SM: a collective launched while one runs
// starts as it ends, and the GEMM keeps its speed (measured on an H100: a
// GEMM launched first ran 1.02-1.04x as long beside a kernel that wanted
// SMs; calibrate/profiles/h100-sxm/framework-checks). One rank: a kernel of
// 1000 ns and, on the data-parallel stream, a collective of 300 ns that holds
// no SMs, then one of 400 ns on 20 SMs.
TEST(Contention, ACollectiveWaitsForThePersistentGemmInFlight) {
  plan::TaskGraph g = kernel_beside_a_collective();
  g.calls.push_back({plan::CommOp::kAllGather, 0, core::Bytes(1)});
  plan::Task second = g.tasks[1];
  second.payload = 1;
  second.tag = 1;
  g.tasks.push_back(second);
  sim::TaskCosts costs = contended(model::OpKind::kGemm);
  costs.call = {Nanoseconds{300}, Nanoseconds{400}};
  costs.contention.call_sms = {0, 20};
  costs.contention.call_announced = {0, 0};
  costs.contention.call_hbm_bytes_per_s = {0, 0};
  costs.contention.gemm_beside_held_sms = {{20, 1.6}};
  // Its GEMMs' places unknown (not a persistent device): the second collective
  // starts at 300 and the GEMM runs 400 ns at 1/1.6 of its speed.
  plan::Timeline t = sim::replay(g, costs);
  EXPECT_EQ(t.spans[2].start.count, 300);
  EXPECT_EQ(t.spans[0].end.count, 1150);
  // The whole kernel a GEMM: the collective waits for it.
  costs.kernel_gemm_spans = {{{0.0, 1.0}}};
  t = sim::replay(g, costs);
  EXPECT_EQ(t.spans[0].end.count, 1000);
  EXPECT_EQ(t.spans[2].start.count, 1000);
  EXPECT_EQ(t.spans[2].end.count, 1400);
  // A GEMM over its first half: the collective starts at 500, and the kernel's
  // second half (not a GEMM here, but costed as its shares say) runs beside it.
  costs.kernel_gemm_spans = {{{0.0, 0.5}}};
  t = sim::replay(g, costs);
  EXPECT_EQ(t.spans[2].start.count, 500);
  EXPECT_EQ(t.spans[0].end.count, 1150);
  // Announced to the GEMM (Transformer Engine's overlap): no wait.
  costs.kernel_gemm_spans = {{{0.0, 1.0}}};
  costs.contention.call_announced = {0, 1};
  EXPECT_EQ(sim::replay(g, costs).spans[2].start.count, 300);
}

namespace {
// One rank, three kernels in program order: a 100 us one, then two of 1 us.
plan::TaskGraph three_kernels(bool first_syncs) {
  plan::TaskGraph g;
  g.world = 1;
  g.gpu_of_rank = {0};
  g.simulated = {{0, 0, {}}};
  g.kernels = {{"router", {}, {}, {}, first_syncs}, {"a", {}, {}, {}}, {"b", {}, {}, {}}};
  for (int k = 0; k < 3; ++k) {
    plan::Task t;
    t.rank = 0;
    t.payload = k;
    g.tasks.push_back(t);
  }
  return g;
}
}  // namespace

// The host launches one kernel every 10 us and runs ahead of the GPU: the
// short kernels were launched long before the first ends. Where the host
// waits for the first kernel (Megatron-Core's dispatcher reading the tokens
// per expert), it launches the next at its end and the one after 10 us
// later: the GPU waits for each.
TEST(Replay, AfterASyncTheGpuWaitsForEachLaunch) {
  const Nanoseconds us{1000};
  sim::TaskCosts costs{{Nanoseconds{100 * us.count}, us, us}, {}, {}};
  costs.kernel_launches = {1, 1, 1};
  costs.host_launch = Nanoseconds{10 * us.count};
  const plan::Timeline ahead = sim::replay(three_kernels(false), costs);
  EXPECT_EQ(ahead.makespan.count, 102 * us.count);
  const plan::Timeline synced = sim::replay(three_kernels(true), costs);
  EXPECT_EQ(synced.spans[1].start.count, 100 * us.count);  // launched as the sync ends
  EXPECT_EQ(synced.spans[2].start.count, 110 * us.count);  // one launch later
  EXPECT_EQ(synced.makespan.count, 111 * us.count);
  EXPECT_EQ(synced.host_wait[0].count, 9 * us.count);  // the GPU idles from 101 to 110 us
  // A sync the host reaches after the kernel ended costs nothing more.
  costs.kernel = {us, us, us};
  const plan::Timeline late = sim::replay(three_kernels(true), costs);
  EXPECT_EQ(late.spans[1].start.count, 10 * us.count);
  EXPECT_EQ(late.makespan.count, 21 * us.count);
}
