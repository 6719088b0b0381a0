#include "dtsim/plan/memory.hpp"

#include <algorithm>

#include "dtsim/plan/op_recompute.hpp"

namespace dtsim::plan {

BytesPerParam bytes_per_param(const Strategy& s) {
  const auto width = [](hw::Dtype d) { return d == hw::Dtype::kFp32 ? 4.0 : 2.0; };
  if (!s.mixed_precision()) {
    const double reduce = s.grad_reduce ? width(*s.grad_reduce) : 4.0;
    return {4, 4, 8, reduce, 4};
  }
  if (s.framework == Framework::kMegatron) {
    // Megatron-LM turns accumulate_allreduce_grads_in_fp32 on under --bf16,
    // which FP8 training runs on too (arguments.py; Megatron-Bridge's
    // grad_reduce_in_fp32 defaults to true); fp16 runs keep 16-bit
    // gradients. The main_grad buffer holds the gradients in that dtype.
    const double reduce = s.grad_reduce ? width(*s.grad_reduce) : (s.dtype == hw::Dtype::kFp16 ? 2.0 : 4.0);
    return {2, reduce, 12, reduce, 2};
  }
  if (s.framework == Framework::kDeepspeed) {
    // The engine casts the model to bf16 or fp16 (engine.py); ZeRO keeps the
    // fp32 master partition beside Adam's moments (stage_1_and_2.py's
    // single_partition_of_fp32_groups) and reduces in communication_data_type,
    // the model's dtype unless set. gradient_accumulation_dtype fp32 under
    // ZeRO-1 (BF16_Optimizer's fp32 gradient buffer) is not modelled.
    const double reduce = s.grad_reduce ? width(*s.grad_reduce) : 2.0;
    return {2, 2, 12, reduce, 2};
  }
  // PyTorch DDP reduces the fp32 gradients autocast leaves; FSDP's
  // MixedPrecision with no reduce_dtype reduces in its 16-bit param_dtype.
  const double reduce = s.grad_reduce ? width(*s.grad_reduce) : (s.zero >= 3 ? 2.0 : 4.0);
  return {4, 4, 8, reduce, 2};
}

double params_on_rank(const model::Op& op, const Strategy& s) {
  const bool sharded = op.split == model::TensorSplit::kSharded;
  if (op.expert) return op.params / ((sharded ? s.expert_tp() : 1) * s.ep);
  return op.params / (sharded ? s.tp : 1);
}

double autocast_params(const model::Op& op, const Strategy& s) {
  return s.autocast_weights() && op.kind == model::OpKind::kGemm ? params_on_rank(op, s) : 0.0;
}

StaticMemory static_memory(double dense_params, double expert_params, const ResolvedStrategy& r,
                           core::Bytes runtime_allowance) {
  const BytesPerParam per = bytes_per_param(r.s);
  // The distributed optimizer shards each weight over the ranks that hold
  // the same copy of it: dense weights over dp, cp (and ep) ranks, experts
  // over their expert-dp ranks.
  const double dense = r.dense_replicas(), experts = r.expert_replicas();
  auto sharded = [&](double per_param, int from_stage) {
    const bool shard = r.s.zero >= from_stage;
    return core::Bytes(per_param * (dense_params / (shard ? dense : 1.0) + expert_params / (shard ? experts : 1.0)));
  };
  StaticMemory m;
  m.params = sharded(per.params, 3);
  m.grads = sharded(per.grads, 2);
  m.optimizer = sharded(per.optimizer, 1);
  m.other = runtime_allowance;
  return m;
}

StaticMemory static_memory(double params, const ResolvedStrategy& r, core::Bytes runtime_allowance) {
  return static_memory(params, 0.0, r, runtime_allowance);
}

core::Bytes saved_activation_bytes(const model::Layer& layer, const ResolvedStrategy& r) {
  const double tp = r.s.tp;
  const double replicated_split = r.s.sp ? tp : 1.0;  // sequence parallelism shards norms and dropout
  const double element_bytes = hw::activation_bytes(r.s.dtype);
  // Under FP8 a block's linear layers are Transformer Engine's, which keep
  // the FP8 cast of their input for the weight gradient (1 byte an element,
  // linear.py: saved_inputmat is the FP8 inputmat) where a 16-bit layer keeps
  // the input itself. The output layer (Megatron's own ColumnParallelLinear)
  // and attention stay 16-bit; so FlashAttention's output, which its
  // backward reads and a 16-bit projection keeps as its input anyway, counts
  // apart. FP4 recipes are not modelled here: their inputs count 16 bits.
  const bool fp8_linear = r.s.dtype == hw::Dtype::kFp8 && layer.role == model::LayerRole::kBlock;
  double bytes = 0;
  core::Bytes masks, weight_copies;
  for (const model::Op& op : layer.ops) {
    const model::SavedActivations& s = op.saved;
    // Autocast's 16-bit copy of a linear weight, kept for the backward.
    weight_copies += core::Bytes(autocast_params(op, r.s) * element_bytes);
    // On an expert grid an expert's input is the tokens its etp ranks
    // gathered: etp times this rank's share.
    const double input_split = op.expert && r.expert_grid() ? replicated_split / r.s.etp : replicated_split;
    // The fused cross entropy keeps the 16-bit gradient it wrote over the
    // logits, one element a logit, where the fp32 softmax takes two.
    const double sharded = op.kind == model::OpKind::kLoss && r.s.fused_loss ? s.sharded_elements / 2 : s.sharded_elements;
    const double op_bytes = fp8_linear && op.kind == model::OpKind::kGemm ? 1.0 : element_bytes;
    bytes += (sharded / tp + s.replicated_elements / input_split) * op_bytes;
    masks += s.sharded_mask / tp + s.replicated_mask / input_split;
    if (fp8_linear && r.s.flash_attention) bytes += s.output_elements / tp * element_bytes;
    // Fused attention keeps only a row statistic of the scores, selective
    // recomputation none; a block that full recomputation reruns keeps them
    // for its backward only (what it saves is held from its recomputed forward on).
    if (!r.s.flash_attention && r.s.recompute != Recompute::kSelective) {
      bytes += s.score_elements / tp * element_bytes;
      masks += s.score_mask / tp;
    }
  }
  // Each context-parallel rank keeps the activations of its seq_len/cp tokens.
  return (core::Bytes(bytes) + masks) * (static_cast<double>(r.s.mbs) / r.s.cp) + weight_copies;
}

core::Bytes layer_input_bytes(std::int64_t tokens, std::int64_t hidden, const ResolvedStrategy& r) {
  const double split = (r.s.sp ? r.s.tp : 1.0) * r.s.cp;
  return core::Bytes(static_cast<double>(tokens * hidden) * hw::activation_bytes(r.s.dtype) * r.s.mbs / split);
}

HeldActivations held_activations(const model::Graph& graph, const model::Layer& layer, core::Bytes saved,
                                 bool recomputed, const ResolvedStrategy& r) {
  if (!recomputed) return {saved, core::Bytes(0)};
  if (!graph.transformer) {
    // A layer graph's checkpointed layer keeps its first op's input.
    const core::Bytes input(layer.input_elements * hw::activation_bytes(r.s.dtype) * r.s.mbs);
    return {std::min(input, saved), saved};
  }
  if (r.s.recompute == Recompute::kOp) {
    // What the policy saves is kept; what its rerun makes back is held through the backward.
    const core::Bytes kept = std::min(op_policy_kept_bytes(graph, layer, r), saved);
    return {kept, saved - kept};
  }
  const std::int64_t tokens = layer.tokens > 0 ? layer.tokens : graph.seq_len;
  return {layer_input_bytes(tokens, graph.transformer->hidden, r), saved};
}

}  // namespace dtsim::plan
