// dtsim validate's table: what it counts as a rank's busy time by kind, so
// that the predicted and the measured column count the same thing.
#include <algorithm>
#include <utility>

#include <gtest/gtest.h>

#include "dtsim/report/validation.hpp"

using namespace dtsim;
using core::Nanoseconds;

namespace {

// Two pipeline stages: rank 0 sends an activation forward (the sender of a
// forward send is member 0); rank 1 computes (task 1), then receives it
// (task 2), in that order of predicted start.
plan::TaskGraph one_send() {
  plan::TaskGraph g;
  g.world = 2;
  g.gpu_of_rank = {0, 1};
  g.simulated = {{0, 0, {}}, {1, 1, {}}};
  g.kernels = {{"other micro-batch", {}, {}, {}}};
  g.groups = {{plan::GroupKind::kPp, {0, 1}}};
  g.calls = {{plan::CommOp::kSendRecv, 0, core::Bytes(8192)}};
  plan::Task send;
  send.kind = plan::TaskKind::kComm;
  send.stream = plan::Stream::kPointToPoint;
  send.rank = 0;
  plan::Task compute;
  compute.rank = 1;
  plan::Task receive = send;
  receive.rank = 1;
  g.tasks = {send, compute, receive};
  return g;
}

// The send's, the compute's and the receive's span, in nanoseconds; the
// step ends with the last of them.
using Span = std::pair<std::int64_t, std::int64_t>;
plan::Timeline timeline(Span send, Span compute, Span receive) {
  plan::Timeline t;
  for (const Span& s : {send, compute, receive}) {
    t.spans.push_back({Nanoseconds{s.first}, Nanoseconds{s.second}});
    t.makespan = std::max(t.makespan, Nanoseconds{s.second});
  }
  return t;
}

double busy(const report::Validation& v, const std::string& kind, bool predicted) {
  for (const report::ValidationRow& r : v.kinds) {
    if (r.what == kind) return (predicted ? r.predicted : r.measured).value();
  }
  ADD_FAILURE() << "no row " << kind;
  return -1;
}

}  // namespace

// Rank 1's compute ends at 50 and the data comes at 100-110: the executor,
// which runs a rank's tasks one after another, calls its MPI_Recv at 50 and
// waits in it, so the prediction counts the receive from 50 too (60 ns).
// The send, posted and left (MPI_Isend), is in neither column.
TEST(ValidationTable, AReceiveCountsItsWaitForTheSenderAndASendIsNotCounted) {
  const plan::TaskGraph g = one_send();
  const plan::Timeline predicted = timeline({100, 110}, {0, 50}, {100, 110});
  const plan::Timeline measured = timeline({100, 101}, {0, 50}, {50, 120});
  const report::Validation v = report::validate(g, predicted, measured);
  ASSERT_EQ(v.kinds.size(), 2u);
  // Averaged over the two ranks: the receive's 60 and 70 ns.
  EXPECT_NEAR(busy(v, "comm: pp", true), 30e-9, 1e-15);
  EXPECT_NEAR(busy(v, "comm: pp", false), 35e-9, 1e-15);
  EXPECT_NEAR(busy(v, "compute (memory-bound)", true), 25e-9, 1e-15);
}

// A transfer the prediction posts early and finishes while the rank still
// computes (its own stream) is over when the executor reaches it: no busy time.
TEST(ValidationTable, AReceiveOverBeforeTheRankReachesItCostsNothing) {
  const plan::TaskGraph g = one_send();
  const plan::Timeline predicted = timeline({100, 110}, {0, 200}, {100, 110});
  const report::Validation v = report::validate(g, predicted, predicted);
  EXPECT_DOUBLE_EQ(busy(v, "comm: pp", true), 0.0);
  EXPECT_NEAR(busy(v, "comm: pp", false), 5e-9, 1e-15);  // a measured span is counted whole
}
