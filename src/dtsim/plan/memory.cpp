#include "dtsim/plan/memory.hpp"

namespace dtsim::plan {

BytesPerParam bytes_per_param(const Strategy& s) {
  if (s.dtype == hw::Dtype::kFp32 || s.dtype == hw::Dtype::kTf32) return {4, 4, 8, 4, 4};
  // Megatron-LM turns on accumulate_allreduce_grads_in_fp32 for bf16 only
  // (arguments.py); fp16 runs keep and reduce 16-bit gradients.
  if (s.framework == Framework::kMegatron) return s.dtype == hw::Dtype::kBf16 ? BytesPerParam{2, 4, 12, 4, 2} : BytesPerParam{2, 2, 12, 2, 2};
  return {4, 4, 8, s.zero >= 3 ? 2.0 : 4.0, 2};
}

double params_on_rank(const model::Op& op, const Strategy& s) {
  const double tp = op.split == model::TensorSplit::kSharded ? s.tp : 1;
  return op.params / tp / (op.expert ? s.ep : 1);
}

StaticMemory static_memory(double params, const ResolvedStrategy& r, core::Bytes runtime_allowance) {
  const BytesPerParam per = bytes_per_param(r.s);
  const double dp = r.s.dp * r.s.cp;  // the distributed optimizer shards over dp and cp ranks
  StaticMemory m;
  m.params = core::Bytes(params * per.params / (r.s.zero >= 3 ? dp : 1.0));
  m.grads = core::Bytes(params * per.grads / (r.s.zero >= 2 ? dp : 1.0));
  m.optimizer = core::Bytes(params * per.optimizer / (r.s.zero >= 1 ? dp : 1.0));
  m.other = runtime_allowance;
  return m;
}

core::Bytes saved_activation_bytes(const model::Layer& layer, const ResolvedStrategy& r) {
  const double tp = r.s.tp;
  const double replicated_split = r.s.sp ? tp : 1.0;  // sequence parallelism shards norms and dropout
  const double element_bytes = hw::activation_bytes(r.s.dtype);
  double elements = 0;
  core::Bytes masks;
  for (const model::Op& op : layer.ops) {
    const model::SavedActivations& s = op.saved;
    elements += s.sharded_elements / tp + s.replicated_elements / replicated_split;
    masks += s.sharded_mask / tp + s.replicated_mask / replicated_split;
    if (!r.s.flash_attention && r.s.recompute == Recompute::kNone) {  // fused attention keeps only a row statistic of the scores
      elements += s.score_elements / tp;
      masks += s.score_mask / tp;
    }
  }
  // Each context-parallel rank keeps the activations of its seq_len/cp tokens.
  return (core::Bytes(elements * element_bytes) + masks) * (static_cast<double>(r.s.mbs) / r.s.cp);
}

core::Bytes layer_input_bytes(std::int64_t tokens, std::int64_t hidden, const ResolvedStrategy& r) {
  const double split = (r.s.sp ? r.s.tp : 1.0) * r.s.cp;
  return core::Bytes(static_cast<double>(tokens * hidden) * hw::activation_bytes(r.s.dtype) * r.s.mbs / split);
}

}  // namespace dtsim::plan
