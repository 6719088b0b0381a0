#pragma once
/// One layer's pass on one rank as compute segments separated by the
/// tensor-parallel collectives Megatron-LM issues: all-reduce after each
/// row-parallel op in the forward and after each column-parallel op in the
/// backward; with sequence parallelism, all-gather before column-parallel and
/// reduce-scatter after row-parallel ops instead (and the reverse in the
/// backward). Context parallelism splits attention into cp blocks with a
/// ring exchange of K and V overlapped with each block; expert parallelism
/// wraps the experts in an all-to-all dispatch and combine. Built once per
/// layer and pass, shared by every micro-batch.
#include <optional>
#include <vector>

#include "dtsim/model/graph.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/plan/task_graph.hpp"

namespace dtsim::plan {

struct Step {
  bool is_comm = false;
  CommOp op = CommOp::kAllReduce;
  GroupKind group = GroupKind::kTp;  ///< tp, cp or ep
  /// Runs alongside the next compute step; the one after that waits for it
  /// (ring attention passes the next KV block while this one is computed).
  bool overlapped = false;
  int kernel = -1;
  core::Bytes bytes;  ///< collective buffer (full tensor)
  /// Runs beside the collective before it, from the same point, and the
  /// next compute step waits for both: the two levels of DeepEP's trip,
  /// which one kernel pipelines chunk by chunk.
  bool beside_previous = false;
};

class LayerSteps {
 public:
  /// New kernels are appended to `kernels`.
  LayerSteps(const model::Graph& graph, const ResolvedStrategy& strategy, std::vector<Kernel>& kernels);

  const std::vector<Step>& forward(int layer) { return build(layer, Pass::kForward); }
  /// Of a recomputed layer, its forward again (hardware FLOPs only) and then its backward.
  const std::vector<Step>& backward(int layer) { return build(layer, Pass::kBackward); }
  /// Whether the layer is recomputed (recomputed_layers).
  [[nodiscard]] bool recomputed(int layer) const { return recomputed_[static_cast<std::size_t>(layer)]; }
  /// How many leading steps of backward() are the recomputed forward.
  std::size_t recompute_steps(int layer);

  hw::OpWork work(const model::Op& op, bool backward) const;

 private:
  enum class Pass { kForward, kBackward };
  const std::vector<Step>& build(int layer, Pass pass);
  void append(std::vector<Step>& out, const model::Layer& layer, bool backward, bool recomputed);
  core::Bytes tokens_bytes(double width, std::int64_t tokens = 0) const;  ///< tokens 0: the model's seq_len
  core::Bytes bytes_moved(const model::Op& op, bool backward, double samples) const;
  double score_passes(bool backward, bool dropout, bool causal) const;
  struct EagerChain {
    double forward_bytes, backward_bytes;  ///< of the fused kernel's
    int forward_launches, backward_launches;
  };
  std::optional<EagerChain> eager_chain(model::Op::Pattern pattern) const;
  double eager_factor(model::Op::Pattern pattern, bool backward) const;
  core::Bytes embedding_gradient_bytes(const model::Op& op) const;
  int eager_launches(model::Op::Pattern pattern, bool backward) const;
  std::int64_t padded_vocab() const;
  double vocab_padding(const model::Op& op) const;

  const model::Graph& graph_;
  const ResolvedStrategy& r_;
  std::vector<Kernel>& kernels_;
  double act_bytes_;
  std::vector<std::vector<Step>> cache_;
  std::vector<std::size_t> recompute_count_;
  std::vector<bool> recomputed_;
};

}  // namespace dtsim::plan
