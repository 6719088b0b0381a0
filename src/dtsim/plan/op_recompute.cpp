#include "dtsim/plan/op_recompute.hpp"

#include "dtsim/hw/device.hpp"

namespace dtsim::plan {

std::vector<PolicyLinears> op_policy_linears(const model::Layer& layer) {
  std::vector<PolicyLinears> out(layer.ops.size());
  int matmuls = 0;
  for (std::size_t i = 0; i < layer.ops.size(); ++i) {
    const model::Op& op = layer.ops[i];
    if (op.kind != model::OpKind::kGemm) continue;
    const std::vector<std::int64_t> widths = op.linear_widths.empty() ? std::vector<std::int64_t>{op.gemm.n} : op.linear_widths;
    for (std::int64_t width : widths) {
      ++matmuls;
      (matmuls % 2 == 0 ? out[i].rerun : out[i].saved).push_back(width);
    }
  }
  return out;
}

std::size_t op_policy_stop(const model::Layer& layer) {
  for (std::size_t i = layer.ops.size(); i-- > 0;) {
    if (layer.ops[i].kind == model::OpKind::kGemm) return i;
  }
  return layer.ops.size();
}

core::Bytes op_policy_kept_bytes(const model::Graph& graph, const model::Layer& layer, const ResolvedStrategy& r) {
  const double tp = r.s.tp, replicated_split = r.s.sp ? tp : 1.0;
  const auto tokens = static_cast<double>(layer.tokens > 0 ? layer.tokens : graph.seq_len);
  const double hidden = graph.transformer ? static_cast<double>(graph.transformer->hidden) : 0.0;
  double elements = tokens * hidden / replicated_split;  // the block's input
  const std::vector<PolicyLinears> linears = op_policy_linears(layer);
  for (std::size_t i = 0; i < layer.ops.size(); ++i) {
    const model::Op& op = layer.ops[i];
    if (op.kind == model::OpKind::kAttention) elements += op.saved.output_elements / tp;
    // A column-parallel output is this rank's share of the width; a
    // row-parallel one is the whole width of partial sums, and under
    // sequence parallelism their reduce-scatter's output is kept too.
    const bool sharded = op.split == model::TensorSplit::kSharded && !op.tp_reduce_after;
    for (std::int64_t width : linears[i].saved) elements += tokens * static_cast<double>(width) / (sharded ? tp : 1.0);
    if (op.tp_reduce_after && r.s.tp > 1 && r.s.sp) elements += tokens * hidden / tp;
  }
  return core::Bytes(elements * hw::activation_bytes(r.s.dtype) * static_cast<double>(r.s.mbs) / r.s.cp);
}

}  // namespace dtsim::plan
