#pragma once
/// Megatron-LM's rank order: tp innermost, then cp, ep, dp, and pp outermost,
///   rank = t + tp·(c + cp·(e + ep·(d + dp·p))),
/// and the groups each rank belongs to. With an expert grid (etp other than
/// tp) the dense layout has no ep dimension, and ExpertGrid regroups each
/// stage's ranks for the expert layers as Megatron-Core's expert grid does:
///   rank = et + etp·(e + ep·(ed + edp·p)).
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

 private:
  int tp_, cp_, ep_, dp_, pp_;
};

/// The expert layers' grid over the tp·cp·dp ranks of each pipeline stage:
/// etp innermost, then ep, then expert data parallelism (Megatron-Core's
/// default order for experts, cp folded into expert-dp).
class ExpertGrid {
 public:
  enum class Span { kExpertTp, kExpert, kExpertDp };

  explicit ExpertGrid(const ResolvedStrategy& r)
      : etp_(r.s.expert_tp()), ep_(r.s.ep), stage_(r.s.tp * r.s.cp * r.s.dp), edp_(stage_ / (etp_ * r.s.ep)) {}

  /// The ranks of `rank`'s stage that differ from it only along `span`, in rank order.
  [[nodiscard]] std::vector<int> group(int rank, Span span) const {
    const int base = rank - rank % stage_;
    int local = rank % stage_;
    const int et = local % etp_, e = local / etp_ % ep_, ed = local / (etp_ * ep_);
    std::vector<int> out;
    const int n = span == Span::kExpertTp ? etp_ : span == Span::kExpert ? ep_ : edp_;
    for (int i = 0; i < n; ++i) {
      local = span == Span::kExpertTp ? i + etp_ * (e + ep_ * ed)
              : span == Span::kExpert ? et + etp_ * (i + ep_ * ed)
                                      : et + etp_ * (e + ep_ * i);
      out.push_back(base + local);
    }
    return out;
  }

  /// The other groups of `span` in the stage of `ranks` (a group of that
  /// span): each member shifted along the two dimensions the group does not span.
  [[nodiscard]] std::vector<std::vector<int>> copies(const std::vector<int>& ranks, Span span) const {
    std::vector<std::vector<int>> out;
    for (int shift = 1; shift < stage_ / size(span); ++shift) {
      std::vector<int> copy;
      for (int r : ranks) {
        // Every other group of the stage is this one moved by whole steps
        // along the unspanned dimensions; enumerate them by the index of the
        // unspanned coordinates, added modulo each dimension.
        const int base = r - r % stage_, local = r % stage_;
        int et = local % etp_, e = local / etp_ % ep_, ed = local / (etp_ * ep_);
        if (span == Span::kExpertTp) {
          e = (e + shift % ep_) % ep_;
          ed = (ed + shift / ep_) % edp_;
        } else if (span == Span::kExpert) {
          et = (et + shift % etp_) % etp_;
          ed = (ed + shift / etp_) % edp_;
        } else {
          et = (et + shift % etp_) % etp_;
          e = (e + shift / etp_) % ep_;
        }
        copy.push_back(base + et + etp_ * (e + ep_ * ed));
      }
      out.push_back(std::move(copy));
    }
    return out;
  }

  [[nodiscard]] int size(Span span) const { return span == Span::kExpertTp ? etp_ : span == Span::kExpert ? ep_ : edp_; }

 private:
  int etp_, ep_, stage_, edp_;
};

}  // namespace dtsim::plan
