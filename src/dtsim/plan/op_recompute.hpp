#pragma once
/// torchtitan's per-op selective activation checkpointing (`[activation_checkpoint]
/// mode = "selective"`, `selective_ac_option = "op"`; strategy `recompute=op`).
/// Each block runs under PyTorch's selective checkpoint with a policy that
/// saves the outputs of matmuls (aten.mm), of scaled_dot_product_attention
/// and of reduce_scatter, but every second matmul's is dropped: counting a
/// block's matmuls from 1 in the order its forward calls them, the even ones
/// are rerun. Everything else (norms, rotary, activations, residual adds,
/// all-gathers) is rerun too, before the block's backward, up to the input
/// of its last linear layer (the checkpoint's early stop: nothing after it
/// is read by the backward). torchtitan/parallelisms/parallelize_llama.py,
/// no_recompute_list and _custom_policy (157a12c56, April 2024).
#include <cstdint>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/model/graph.hpp"
#include "dtsim/plan/strategy.hpp"

namespace dtsim::plan {

/// Of one op of a block: the widths of its linear layers (Op::linear_widths,
/// or the GEMM's own width) whose outputs the policy reruns and saves.
struct PolicyLinears {
  std::vector<std::int64_t> rerun;
  std::vector<std::int64_t> saved;
};

/// Per op of the layer, in order; empty for ops that are not linear layers.
std::vector<PolicyLinears> op_policy_linears(const model::Layer& layer);

/// The index of the layer's last linear layer: the rerun stops before it
/// (layer.ops.size() when it has none).
std::size_t op_policy_stop(const model::Layer& layer);

/// What a block keeps from its forward to its backward under the policy: its
/// input (the checkpoint's argument), the saved matmul outputs, attention's
/// output and, under sequence parallelism, its reduce-scatters' outputs.
core::Bytes op_policy_kept_bytes(const model::Graph& graph, const model::Layer& layer, const ResolvedStrategy& r);

}  // namespace dtsim::plan
