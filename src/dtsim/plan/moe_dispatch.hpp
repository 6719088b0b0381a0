#pragma once
/// The kernels an MoE block runs around its experts besides their GEMMs and
/// the all-to-alls: the router's top-k and load-balancing loss, the token
/// dispatcher's counts, and the permutations that put each token's top_k
/// copies in expert order and back. Their bytes are few next to the experts'
/// GEMMs; their launches are many, and a dropless dispatcher's host waits for
/// the GPU in every block, so on small experts they are what the step waits for.
#include "dtsim/core/units.hpp"
#include "dtsim/hw/cost_model.hpp"
#include "dtsim/plan/strategy.hpp"

namespace dtsim::plan {

/// Where in a block's forward each group of kernels runs; the backward runs
/// each group's gradient kernels in the reverse order.
enum class MoeStage {
  kBeforeDispatch,  ///< routing, the dispatcher's counts, the permutation into expert order
  kAfterDispatch,   ///< the routing weights' all-to-all, the sort of what arrived by local expert
  kBeforeCombine,   ///< the sort back into the order the senders sent
  kAfterCombine,    ///< the permutation back into token order, each token's copies summed
};

/// What the block's tokens are, on this rank.
struct MoeTokens {
  core::Bytes routed;    ///< this rank's tokens times top_k (what the dispatch all-to-all moves)
  core::Bytes gathered;  ///< routed over the etp ranks of an expert (what the experts compute on)
  int top_k = 1;
  std::int64_t local_experts = 1;
};

/// One stage's kernels as a single work item: the bytes its permutations
/// move and the launches of all its kernels (none: nothing to add).
hw::OpWork moe_dispatch_work(MoeStage stage, bool backward, const ResolvedStrategy& r, const MoeTokens& tokens);

}  // namespace dtsim::plan
