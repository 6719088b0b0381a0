#include "dtsim/plan/moe_dispatch.hpp"

namespace dtsim::plan {

namespace {

struct Launches {
  int forward = 0, backward = 0;
};

// Megatron-Core's all-to-all dispatcher with Transformer Engine's fused
// router and permutation (moe_router_fusion, moe_permute_fusion: what
// Megatron-Bridge's MoE recipes set), dropless, with a load-balancing loss,
// as Megatron-Core 92c8482e (Megatron-Bridge 25.11's) runs one block of one
// micro-batch. Counted from the code: router.py TopKRouter.routing,
// token_dispatcher.py MoEAlltoAllTokenDispatcher, moe_utils.py and
// Transformer Engine's permutation.py (three Triton passes build the row map
// a permutation reads, two the map a chunk sort reads).
Launches megatron_launches(MoeStage stage, bool ep, bool sort, MoeGraph graph) {
  switch (stage) {
    case MoeStage::kBeforeDispatch: {
      // Routing: the fused top-k with its score function, the scores for the
      // auxiliary loss, the tokens per expert, the fused loss, the loss over
      // its coefficient for the log and the log tracker's add. Backward: the
      // loss's scale (ones_like and a product), the loss, the scores, the
      // top-k, and the logits' two gradients summed.
      const Launches routing{6, 6};
      // preprocess(): the tokens per expert and their cast; with ep > 1 the
      // input splits, the counts' all-gather over ep, the local experts'
      // slice and three sums; then the copies to the host for the sync (4
      // with ep > 1, 1 without).
      const Launches counts{ep ? 12 : 3, 0};
      // permute(): the row map's three passes and the permutation; backward
      // the un-permutation of the gradient (and of the routing weights').
      const Launches permute{4, 1};
      // Under Megatron-Core's partial CUDA graphs each pass replays one graph
      // (the norm's and the router's GEMM kernels inside it: LayerSteps
      // marks them graphed): the routing's kernels, and with moe_preprocess
      // the counts' and the permutation's, all but the copies to the host,
      // which read the graph's outputs (token_dispatcher.py).
      const int copies = ep ? 4 : 1;
      switch (graph) {
        case MoeGraph::kOff:
          return {routing.forward + counts.forward + permute.forward, routing.backward + counts.backward + permute.backward};
        case MoeGraph::kRouter: return {1 + counts.forward + permute.forward, 1 + counts.backward + permute.backward};
        case MoeGraph::kRouterPreprocess: return {1 + copies, 1};
      }
      return {};
    }
    case MoeStage::kAfterDispatch:
      // The routing weights' own all-to-all; sort_chunks_by_idxs by local
      // expert (its map and the sort; backward one sort by the same map).
      return {(ep ? 1 : 0) + (sort ? 2 : 0), (ep ? 1 : 0) + (sort ? 1 : 0)};
    case MoeStage::kBeforeCombine: return {sort ? 2 : 0, sort ? 1 : 0};
    case MoeStage::kAfterCombine: return {1, 1};  // unpermute(); backward a permutation
  }
  return {};
}

}  // namespace

hw::OpWork moe_dispatch_work(MoeStage stage, bool backward, const ResolvedStrategy& r, const MoeTokens& tokens) {
  const bool megatron = r.s.framework == Framework::kMegatron;
  const bool sort = megatron && tokens.local_experts > 1;
  const double k = tokens.top_k > 0 ? tokens.top_k : 1;
  // The permutation reads each token once and writes its top_k copies; the
  // way back reads the copies and writes their sum; each gradient moves
  // the same. A chunk sort reads and writes every copy.
  const core::Bytes permutation = tokens.routed * (1.0 + 1.0 / k);
  const core::Bytes chunk_sort = sort ? tokens.gathered * 2.0 : core::Bytes(0);
  hw::OpWork w;
  w.kind = model::OpKind::kElementwise;
  w.backward = backward;
  switch (stage) {
    case MoeStage::kBeforeDispatch:
    case MoeStage::kAfterCombine: w.bytes_moved = permutation; break;
    case MoeStage::kAfterDispatch:
    case MoeStage::kBeforeCombine: w.bytes_moved = chunk_sort; break;
  }
  if (megatron) {
    const Launches l = megatron_launches(stage, r.s.ep > 1, sort, r.s.moe_graph);
    w.eager_launches = backward ? l.backward : l.forward;
  } else {
    // Other frameworks: the permutations' bytes as one kernel each way; an
    // eager model's router and its loop of per-expert gathers are not counted.
    w.eager_launches = w.bytes_moved.value() > 0 ? 1 : 0;
  }
  return w;
}

}  // namespace dtsim::plan
