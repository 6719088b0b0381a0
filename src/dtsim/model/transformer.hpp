#pragma once
/// Builds the op graph of a decoder or encoder transformer: MHA or GQA
/// attention, GeLU or SwiGLU MLP, LayerNorm or RMSNorm, tied or untied
/// embeddings, and MoE blocks with `experts` and `top_k`.
#include <cstdint>
#include <string>

#include "dtsim/model/graph.hpp"

namespace dtsim::model {

enum class MlpKind { kGelu, kSwiGlu };
enum class NormKind { kLayerNorm, kRmsNorm };

/// The largest shapes a model file may give, stated in its errors: an order of
/// magnitude or more past any published model, small enough that counts,
/// FLOPs and bytes stay exact.
inline constexpr std::int64_t kMaxLayers = 10000;
inline constexpr std::int64_t kMaxHidden = 1 << 20;
inline constexpr std::int64_t kMaxHeads = 1 << 16;
inline constexpr std::int64_t kMaxFfnHidden = 1 << 22;
inline constexpr std::int64_t kMaxVocab = 1 << 24;
inline constexpr std::int64_t kMaxSeqLen = 1 << 24;
inline constexpr std::int64_t kMaxExperts = 1 << 16;

struct TransformerConfig {
  std::string name;
  std::string source;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;    ///< equal to heads for MHA
  std::int64_t ffn_hidden = 0;  ///< per expert for MoE
  std::int64_t vocab = 0;
  std::int64_t seq_len = 0;
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  bool tied_embeddings = true;
  bool learned_positions = false;  ///< GPT-2/3 and BERT add a seq_len x hidden table
  bool rotary = true;              ///< RoPE rotates queries and keys (not with learned positions or ALiBi)
  std::int64_t experts = 0;        ///< 0: dense MLP
  std::int64_t top_k = 0;
  bool causal = true;  ///< decoders mask future tokens; encoders (BERT) attend both ways
};

/// Expects a validated config (the loaders check it): heads divide hidden,
/// kv_heads divide heads, top_k <= experts.
Graph build_transformer(const TransformerConfig& config);

}  // namespace dtsim::model
