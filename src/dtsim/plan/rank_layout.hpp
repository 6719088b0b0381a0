#pragma once
/// Megatron-LM's rank order: tp innermost, then cp, ep, dp, and pp outermost,
///   rank = t + tp·(c + cp·(e + ep·(d + dp·p))),
/// and the groups each rank belongs to.
#include <vector>

#include "dtsim/plan/strategy.hpp"

namespace dtsim::plan {

struct Coord {
  int t = 0, c = 0, e = 0, d = 0, p = 0;
};

class RankLayout {
 public:
  explicit RankLayout(const Strategy& s) : s_(s) {}

  [[nodiscard]] int rank(const Coord& x) const { return x.t + s_.tp * (x.c + s_.cp * (x.e + s_.ep * (x.d + s_.dp * x.p))); }

  /// Ranks that differ from `x` only in the listed dimensions, in rank order.
  enum Dim { kT = 1, kC = 2, kE = 4, kD = 8, kP = 16 };
  [[nodiscard]] std::vector<int> group(const Coord& x, int dims) const {
    std::vector<int> out;
    Coord y = x;
    for (y.p = dims & kP ? 0 : x.p; y.p < (dims & kP ? s_.pp : x.p + 1); ++y.p)
      for (y.d = dims & kD ? 0 : x.d; y.d < (dims & kD ? s_.dp : x.d + 1); ++y.d)
        for (y.e = dims & kE ? 0 : x.e; y.e < (dims & kE ? s_.ep : x.e + 1); ++y.e)
          for (y.c = dims & kC ? 0 : x.c; y.c < (dims & kC ? s_.cp : x.c + 1); ++y.c)
            for (y.t = dims & kT ? 0 : x.t; y.t < (dims & kT ? s_.tp : x.t + 1); ++y.t) out.push_back(rank(y));
    return out;
  }

 private:
  const Strategy& s_;
};

}  // namespace dtsim::plan
