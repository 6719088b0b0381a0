#include "dtsim/model/graph.hpp"

namespace dtsim::model {

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kGemm: return "GEMM";
    case OpKind::kAttention: return "attention";
    case OpKind::kElementwise: return "element-wise";
    case OpKind::kNorm: return "norm";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kLoss: return "loss";
  }
  return "?";
}

double Graph::parameter_count() const {
  double total = 0;
  for (const Layer& layer : layers) {
    for (const Op& op : layer.ops) total += op.params;
  }
  return total;
}

core::Flops Graph::forward_flops_per_sample() const {
  core::Flops total;
  for (const Layer& layer : layers) {
    for (const Op& op : layer.ops) total += op.forward_flops;
  }
  return total;
}

std::int64_t Graph::block_count() const {
  std::int64_t n = 0;
  for (const Layer& layer : layers) n += layer.role == LayerRole::kBlock ? 1 : 0;
  return n;
}

}  // namespace dtsim::model
