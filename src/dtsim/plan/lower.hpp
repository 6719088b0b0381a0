#pragma once
/// Lowering of a model under a strategy onto a cluster into the TaskGraph.
///
/// Ranks follow Megatron's order, tp innermost, then dp, then pp:
/// rank = t + tp * (d + dp * p). Each rank runs its stage's layers per
/// micro-batch in the 1F1B order (pp = 1 degenerates to forward/backward per
/// micro-batch, i.e. gradient accumulation); tensor-parallel all-reduces
/// split each layer into compute segments; gradients are reduced in buckets
/// after the last micro-batch's backward of their layers (PyTorch DDP), or
/// reduce-scattered and the parameters all-gathered after the step (ZeRO).
#include "dtsim/model/graph.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::plan {

struct LowerOptions {
  /// Every rank gets tasks. Otherwise only one rank per pipeline stage does
  /// (SPMD symmetry), its collectives still costed on the real groups.
  bool full = false;
  /// Without `full`: every rank runs its stage's simulated rank's tasks on
  /// its own copies of the groups (TaskGraph::spmd_ranks), so the replay
  /// simulates every rank while the graph holds one rank's tasks per stage.
  bool spmd_ranks = false;
};

TaskGraph lower(const model::Graph& graph, const ResolvedStrategy& strategy, const topo::Cluster& cluster,
                const LowerOptions& options = {});

/// Layers per virtual stage (pp*vpp of them): the embedding on the first,
/// the head on the last, blocks spread as evenly as they go over the stages
/// whose count the strategy does not fix (first_stage_layers,
/// last_stage_layers), counting the embedding and the head as a block each
/// under balanced_split. Returns, for each stage, its layer indices.
std::vector<std::vector<int>> stage_layers(const model::Graph& graph, const Strategy& strategy);

/// Per layer of the graph, whether its forward runs again before its
/// backward. Full recomputation checkpoints the transformer blocks and
/// nothing else: Megatron's TransformerBlock (ParallelTransformer.
/// _checkpointed_forward in 2020-2022) wraps its layers only, as FSDP's and
/// Hugging Face's activation checkpointing wrap each block; the embedding
/// and the head with its loss keep what they saved. With recompute_layers,
/// only the first that many blocks of each virtual stage (Megatron-Core's
/// block method counts a model chunk's layers). A layer graph's layers are
/// all blocks. All false without recompute=full.
std::vector<bool> recomputed_layers(const model::Graph& graph, const Strategy& strategy);

}  // namespace dtsim::plan
