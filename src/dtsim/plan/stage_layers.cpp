// How a model's blocks spread over pipeline stages (declared in lower.hpp).
#include <cstdint>

#include "dtsim/plan/lower.hpp"

namespace dtsim::plan {

std::vector<std::vector<int>> stage_layers(const model::Graph& graph, const Strategy& s) {
  const int stages = s.pp * s.vpp;
  std::vector<int> blocks, embedding, head;
  for (std::size_t i = 0; i < graph.layers.size(); ++i) {
    switch (graph.layers[i].role) {
      case model::LayerRole::kEmbedding: embedding.push_back(static_cast<int>(i)); break;
      case model::LayerRole::kHead: head.push_back(static_cast<int>(i)); break;
      default: blocks.push_back(static_cast<int>(i)); break;
    }
  }
  // Blocks per stage: the fixed ones first, then the rest spread evenly over
  // the free stages (in units that count the embedding and the head as a
  // block each under balanced_split).
  std::vector<std::int64_t> count(static_cast<std::size_t>(stages), -1);
  if (s.first_stage_layers >= 0 && stages > 1) count.front() = s.first_stage_layers;
  if (s.last_stage_layers >= 0 && stages > 1) count.back() = s.last_stage_layers;
  std::int64_t remaining = static_cast<std::int64_t>(blocks.size());
  std::vector<std::size_t> free;
  for (std::size_t v = 0; v < count.size(); ++v) {
    if (count[v] >= 0) remaining -= count[v];
    else free.push_back(v);
  }
  if (!free.empty()) {
    const bool embedding_unit = s.balanced_split && free.front() == 0 && stages > 1;
    const bool head_unit = s.balanced_split && free.back() == count.size() - 1 && stages > 1;
    const std::int64_t units = remaining + (embedding_unit ? 1 : 0) + (head_unit ? 1 : 0);
    const auto f = static_cast<std::int64_t>(free.size());
    for (std::int64_t j = 0; j < f; ++j) count[free[static_cast<std::size_t>(j)]] = (j + 1) * units / f - j * units / f;
    if (embedding_unit) count.front() = std::max<std::int64_t>(0, count.front() - 1);
    if (head_unit) count.back() = std::max<std::int64_t>(0, count.back() - 1);
    // Rounding the units away can leave a block over or short: the last free stage settles it.
    std::int64_t placed = 0;
    for (std::int64_t c : count) placed += c;
    count[free.back()] += static_cast<std::int64_t>(blocks.size()) - placed;
  }
  std::vector<std::vector<int>> out(static_cast<std::size_t>(stages));
  out.front() = embedding;
  std::size_t next = 0;
  for (std::size_t v = 0; v < out.size(); ++v) {
    for (std::int64_t k = 0; k < count[v] && next < blocks.size(); ++k) out[v].push_back(blocks[next++]);
  }
  out.back().insert(out.back().end(), head.begin(), head.end());
  return out;
}

std::vector<bool> recomputed_layers(const model::Graph& graph, const Strategy& s) {
  std::vector<bool> out(graph.layers.size(), false);
  if (s.recompute == Recompute::kOp) {
    // torchtitan wraps every block in its selective checkpoint.
    for (std::size_t i = 0; i < graph.layers.size(); ++i) out[i] = graph.layers[i].role == model::LayerRole::kBlock;
    return out;
  }
  if (s.recompute != Recompute::kFull) return out;
  for (const std::vector<int>& chunk : stage_layers(graph, s)) {
    int blocks = 0;
    for (int layer : chunk) {
      if (graph.layers[static_cast<std::size_t>(layer)].role != model::LayerRole::kBlock) continue;
      out[static_cast<std::size_t>(layer)] = s.recompute_layers == 0 || blocks < s.recompute_layers;
      ++blocks;
    }
  }
  return out;
}

}  // namespace dtsim::plan
