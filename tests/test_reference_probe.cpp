// The reference probe's arithmetic: how far its halves moved, and the change
// of a step they foretell. validate calls a machine steady by these, and the
// loop test counts only the attempts it calls steady.
#include <gtest/gtest.h>

#include "dtsim/exec/reference_probe.hpp"

namespace {

using dtsim::core::Seconds;
using dtsim::exec::ProbeTimes;

TEST(ReferenceProbe, EachHalfIsComparedOnItsOwn) {
  const ProbeTimes then{Seconds(2e-3), Seconds(2e-3)};
  // The copy twice as slow and the GEMMs as fast: the sum moves 50%, the copy 100%.
  const ProbeTimes now{Seconds(2e-3), Seconds(4e-3)};
  EXPECT_DOUBLE_EQ(dtsim::exec::probe_drift(then, now), 1.0);
  EXPECT_DOUBLE_EQ(dtsim::exec::probe_drift(then.total(), now.total()), 0.5);
}

TEST(ReferenceProbe, AStepMovesByTheHalvesItIsMadeOf) {
  const ProbeTimes then{Seconds(2e-3), Seconds(2e-3)};
  const ProbeTimes slower_copy{Seconds(2e-3), Seconds(3e-3)};  // +50% copy
  // A step of matmuls only does not see the memory's change; one of streams sees all of it.
  EXPECT_DOUBLE_EQ(dtsim::exec::step_drift(then, slower_copy, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(dtsim::exec::step_drift(then, slower_copy, 0.0), 0.5);
  // 80% matmuls (the mlp on one rank): a fifth of the copy's change.
  EXPECT_NEAR(dtsim::exec::step_drift(then, slower_copy, 0.8), 0.1, 1e-12);
  // Opposite moves of the halves cancel in proportion.
  const ProbeTimes mixed{Seconds(1.8e-3), Seconds(2.2e-3)};  // GEMMs -10%, copy +10%
  EXPECT_NEAR(dtsim::exec::step_drift(then, mixed, 0.5), 0.0, 1e-12);
}

TEST(ReferenceProbe, AProfileWithTheTotalOnlyIsComparedByItsTotal) {
  // Profiles written before the halves were kept carry the whole probe, read as a gemm half with no copy.
  const ProbeTimes old_profile{Seconds(4e-3), Seconds(0)};
  const ProbeTimes now{Seconds(2e-3), Seconds(2.4e-3)};
  EXPECT_NEAR(dtsim::exec::probe_drift(old_profile, now), 0.1, 1e-12);
  EXPECT_NEAR(dtsim::exec::step_drift(old_profile, now, 0.9), 0.1, 1e-12);
}

}  // namespace
