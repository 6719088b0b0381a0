#pragma once
/// Megatron-LM's rank order: tp innermost, then cp, ep, dp, and pp outermost,
///   rank = t + tp·(c + cp·(e + ep·(d + dp·p))),
/// and the groups each rank belongs to. With an expert grid (etp other than
/// tp) the dense layout has no ep dimension, and ExpertGrid regroups each
/// stage's ranks for the expert layers as Megatron-Core's expert grid does:
///   rank = et + etp·(e + ep·(ed + edp·p)).
#include <array>
#include <vector>

#include "dtsim/plan/strategy.hpp"

namespace dtsim::plan {

struct Coord {
  int t = 0, c = 0, e = 0, d = 0, p = 0;
};

class RankLayout {
 public:
  explicit RankLayout(const ResolvedStrategy& r) : tp_(r.s.tp), cp_(r.s.cp), ep_(r.layout_ep()), dp_(r.s.dp), pp_(r.s.pp) {}

  [[nodiscard]] int rank(const Coord& x) const { return x.t + tp_ * (x.c + cp_ * (x.e + ep_ * (x.d + dp_ * x.p))); }
  [[nodiscard]] Coord coord(int rank) const {
    Coord x;
    x.t = rank % tp_;
    rank /= tp_;
    x.c = rank % cp_;
    rank /= cp_;
    x.e = rank % ep_;
    rank /= ep_;
    x.d = rank % dp_;
    x.p = rank / dp_;
    return x;
  }

  /// Ranks that differ from `x` only in the listed dimensions, in rank order.
  enum Dim { kT = 1, kC = 2, kE = 4, kD = 8, kP = 16 };
  [[nodiscard]] std::vector<int> group(const Coord& x, int dims) const {
    std::vector<int> out;
    Coord y = x;
    for (y.p = dims & kP ? 0 : x.p; y.p < (dims & kP ? pp_ : x.p + 1); ++y.p)
      for (y.d = dims & kD ? 0 : x.d; y.d < (dims & kD ? dp_ : x.d + 1); ++y.d)
        for (y.e = dims & kE ? 0 : x.e; y.e < (dims & kE ? ep_ : x.e + 1); ++y.e)
          for (y.c = dims & kC ? 0 : x.c; y.c < (dims & kC ? cp_ : x.c + 1); ++y.c)
            for (y.t = dims & kT ? 0 : x.t; y.t < (dims & kT ? tp_ : x.t + 1); ++y.t) out.push_back(rank(y));
    return out;
  }

  /// The other groups that differ from `ranks` (a group) only in where they
  /// sit along the dimensions it does not span, pipeline stage aside: what
  /// the one simulated rank per stage stands for. Members keep their order.
  [[nodiscard]] std::vector<std::vector<int>> copies(const std::vector<int>& ranks) const {
    std::vector<Coord> members;
    for (int r : ranks) members.push_back(coord(r));
    int spanned = 0;
    for (const Coord& m : members) {
      spanned |= (m.t != members[0].t ? kT : 0) | (m.c != members[0].c ? kC : 0) | (m.e != members[0].e ? kE : 0) |
                 (m.d != members[0].d ? kD : 0);
    }
    const int shifted = (kT | kC | kE | kD) & ~spanned;
    std::vector<std::vector<int>> out;
    for (int shift_rank : group(Coord{}, shifted)) {
      if (shift_rank == 0) continue;  // the group itself
      const Coord shift = coord(shift_rank);
      std::vector<int> copy;
      for (Coord m : members) {
        if (shifted & kT) m.t = shift.t;
        if (shifted & kC) m.c = shift.c;
        if (shifted & kE) m.e = shift.e;
        if (shifted & kD) m.d = shift.d;
        copy.push_back(rank(m));
      }
      out.push_back(std::move(copy));
    }
    return out;
  }

 private:
  int tp_, cp_, ep_, dp_, pp_;
};

/// The expert layers' grid over the tp·cp·dp ranks of each pipeline stage:
/// etp innermost, then ep, then expert data parallelism (Megatron-Core's
/// default order for experts, cp folded into expert-dp). Only for a
/// strategy whose expert_grid() holds.
class ExpertGrid {
 public:
  enum class Span { kExpertTp, kExpert, kExpertDp };

  explicit ExpertGrid(const ResolvedStrategy& r)
      : sizes_{r.s.expert_tp(), r.s.ep, r.s.tp * r.s.cp * r.s.dp / (r.s.expert_tp() * r.s.ep)},
        stage_(r.s.tp * r.s.cp * r.s.dp) {}

  /// The ranks of `rank`'s stage that differ from it only along `span`, in rank order.
  [[nodiscard]] std::vector<int> group(int rank, Span span) const {
    std::array<int, 3> x = coord(rank % stage_);
    std::vector<int> out;
    const auto d = static_cast<std::size_t>(span);
    for (x[d] = 0; x[d] < sizes_[d]; ++x[d]) out.push_back(rank - rank % stage_ + local(x));
    return out;
  }

  /// The stage's other groups along `span`, members in the order of
  /// `ranks` (a group that group() returned).
  [[nodiscard]] std::vector<std::vector<int>> copies(const std::vector<int>& ranks, Span span) const {
    const int base = ranks.front() - ranks.front() % stage_;
    const auto d = static_cast<std::size_t>(span);
    std::vector<std::vector<int>> out;
    for (int l = 0; l < stage_; ++l) {
      // Each group once, from its member at 0 along the span.
      if (coord(l)[d] == 0 && base + l != ranks.front()) out.push_back(group(base + l, span));
    }
    return out;
  }

 private:
  [[nodiscard]] std::array<int, 3> coord(int local) const {
    return {local % sizes_[0], local / sizes_[0] % sizes_[1], local / (sizes_[0] * sizes_[1])};
  }
  [[nodiscard]] int local(const std::array<int, 3>& x) const { return x[0] + sizes_[0] * (x[1] + sizes_[1] * x[2]); }

  std::array<int, 3> sizes_;  ///< etp, ep, expert-dp (in Span's order)
  int stage_;
};

}  // namespace dtsim::plan
