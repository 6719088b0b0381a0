#include "dtsim/plan/deep_ep.hpp"

#include <algorithm>

namespace dtsim::plan {
namespace {

// C(a, k) / C(b, k): the odds that k experts drawn from b avoid b - a of them.
double avoid(double a, double b, std::int64_t k) {
  double p = 1;
  for (std::int64_t j = 0; j < k; ++j) p *= std::max(0.0, (a - static_cast<double>(j)) / (b - static_cast<double>(j)));
  return p;
}

// C(n, k) as a double (small n).
double choose(std::int64_t n, std::int64_t k) {
  if (k < 0 || k > n) return 0;
  double c = 1;
  for (std::int64_t j = 1; j <= k; ++j) c = c * static_cast<double>(n - k + j) / static_cast<double>(j);
  return c;
}

// The odds that a block of `size` consecutive experts, aligned on its size,
// holds at least one of a token's top_k.
double hit(const model::TransformerShape& t, double size) {
  const double experts = static_cast<double>(t.experts);
  const std::int64_t k = t.top_k, groups = t.expert_groups, chosen = t.group_top_k;
  if (groups <= 1 || chosen >= groups) return 1 - avoid(experts - size, experts, k);
  const double group = experts / static_cast<double>(groups);
  const double pool = group * static_cast<double>(chosen);  // the experts of the chosen groups
  if (size <= group && static_cast<std::int64_t>(group) % static_cast<std::int64_t>(size) == 0) {
    // Inside one group: hit only when that group is chosen.
    return static_cast<double>(chosen) / static_cast<double>(groups) * (1 - avoid(pool - size, pool, k));
  }
  if (static_cast<std::int64_t>(size) % static_cast<std::int64_t>(group) == 0) {
    // Whole groups: i of its c groups among the chosen ones (hypergeometric).
    const auto c = static_cast<std::int64_t>(size / group);
    double p = 0;
    for (std::int64_t i = 1; i <= std::min(c, chosen); ++i) {
      const double odds = choose(c, i) * choose(groups - c, chosen - i) / choose(groups, chosen);
      p += odds * (1 - avoid(pool - static_cast<double>(i) * group, pool, k));
    }
    return p;
  }
  return 1 - avoid(experts - size, experts, k);  // groups that straddle the block: as if unlimited
}

}  // namespace

DeepEpCopies deep_ep_copies(const model::TransformerShape& t, int ep, int nodes) {
  const double experts = static_cast<double>(t.experts);
  const double n = nodes, g = static_cast<double>(ep) / n;
  const double nodes_hit = n * hit(t, experts / n);
  const double gpus_hit = static_cast<double>(ep) * hit(t, experts / ep);
  // By symmetry the token's own node is hit with odds nodes_hit / n, and the
  // GPU a visit lands on (one of each node's g) with gpus_hit / ep.
  return {nodes_hit * (n - 1) / n, gpus_hit * (g - 1) / g};
}

}  // namespace dtsim::plan
