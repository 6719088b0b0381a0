// dtsim validate's table: what it counts as a rank's busy time by kind, so
// that the predicted and the measured column count the same thing.
#include <gtest/gtest.h>

#include "dtsim/report/validation.hpp"

using namespace dtsim;
using core::Nanoseconds;

namespace {

// Two pipeline stages: rank 0 sends an activation forward (the sender of a
// forward send is member 0), rank 1 receives it.
plan::TaskGraph one_send() {
  plan::TaskGraph g;
  g.world = 2;
  g.gpu_of_rank = {0, 1};
  g.simulated = {{0, 0, {}}, {1, 1, {}}};
  g.groups = {{plan::GroupKind::kPp, {0, 1}}};
  g.calls = {{plan::CommOp::kSendRecv, 0, core::Bytes(8192)}};
  for (int rank = 0; rank < 2; ++rank) {
    plan::Task t;
    t.kind = plan::TaskKind::kComm;
    t.stream = plan::Stream::kPointToPoint;
    t.phase = plan::Phase::kForward;
    t.rank = rank;
    t.payload = 0;
    g.tasks.push_back(t);
  }
  return g;
}

plan::Timeline timeline(plan::TaskSpan send, plan::TaskSpan receive, std::int64_t makespan) {
  plan::Timeline t;
  t.spans = {send, receive};
  t.makespan = Nanoseconds{makespan};
  return t;
}

}  // namespace

// The receiver reached its receive at 0 and the data came at 100-110: the
// prediction counts its wait, as a measured MPI_Recv does; the send, posted
// and left (MPI_Isend), is counted on neither side.
TEST(ValidationTable, AReceiveCountsItsWaitForTheSenderAndASendIsNotCounted) {
  const plan::TaskGraph g = one_send();
  const plan::Timeline predicted =
      timeline({Nanoseconds{100}, Nanoseconds{110}, Nanoseconds{0}}, {Nanoseconds{100}, Nanoseconds{110}, Nanoseconds{0}}, 110);
  const plan::Timeline measured =
      timeline({Nanoseconds{100}, Nanoseconds{101}}, {Nanoseconds{0}, Nanoseconds{120}}, 120);
  const report::Validation v = report::validate(g, predicted, measured);
  ASSERT_EQ(v.kinds.size(), 1u);
  EXPECT_EQ(v.kinds[0].what, "comm: pp");
  // Averaged over the two ranks: the receive's 110 and 120 ns.
  EXPECT_NEAR(v.kinds[0].predicted.value(), 55e-9, 1e-15);
  EXPECT_NEAR(v.kinds[0].measured.value(), 60e-9, 1e-15);
  EXPECT_NEAR(v.kinds[0].error(), -5.0 / 60.0, 1e-12);
}

// Without a time reached (a measured span, or a task that waited for no
// one) a task counts from its start.
TEST(ValidationTable, ASpanWithoutATimeReachedCountsFromItsStart) {
  const plan::TaskGraph g = one_send();
  const plan::Timeline t = timeline({Nanoseconds{0}, Nanoseconds{5}}, {Nanoseconds{40}, Nanoseconds{50}}, 50);
  const report::Validation v = report::validate(g, t, t);
  ASSERT_EQ(v.kinds.size(), 1u);
  EXPECT_NEAR(v.kinds[0].predicted.value(), 5e-9, 1e-15);
  EXPECT_DOUBLE_EQ(v.kinds[0].error(), 0.0);
}
