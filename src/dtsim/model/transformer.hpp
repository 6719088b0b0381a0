#pragma once
/// Builds the op graph of a decoder, encoder or encoder-decoder transformer: MHA or GQA
/// attention (a head size of its own where the model sets one), GeLU or
/// gated (SwiGLU, GeGLU) MLP, LayerNorm or RMSNorm, tied or untied
/// embeddings, and MoE blocks with `experts` and `top_k`, and shared experts
/// every token runs beside the routed ones.
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
  std::string seq_len_source;   ///< where seq_len came from, for the summary ("" for dtsim's own files)
  std::int64_t head_dim = 0;    ///< 0: hidden / heads (Gemma, Mistral-Nemo and Qwen3 set their own)
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  bool tied_embeddings = true;
  bool learned_positions = false;  ///< GPT-2/3 and BERT add a seq_len x hidden table
  bool rotary = true;              ///< RoPE rotates queries and keys (not with learned positions or ALiBi)
  std::int64_t experts = 0;        ///< 0: dense MLP
  std::int64_t top_k = 0;
  /// Group-limited routing (DeepSeek's n_group, topk_group): the experts
  /// form expert_groups equal groups in order, and a token picks its top_k
  /// among those of group_top_k groups; 0: any expert.
  std::int64_t expert_groups = 0;
  std::int64_t group_top_k = 0;
  bool causal = true;  ///< decoders mask future tokens; encoders (BERT) attend both ways
  /// Dropout on the attention probabilities. Only unfused attention pays for
  /// it (two more passes over the s x s scores each way and a 1-byte mask,
  /// in time and in saved activations); a fused kernel drops out inside.
  /// GPT-2, BERT and Megatron-LM train with 0.1, Llama and most later
  /// decoders with none.
  double attention_dropout = 0.1;
  /// Width of the shared experts' MLP (Qwen2-MoE, DeepSeek): a dense MLP
  /// every token runs beside its routed experts; 0: none.
  std::int64_t shared_ffn = 0;
  /// MoE models whose first blocks are dense (DeepSeek's first_k_dense_replace):
  /// those blocks run an MLP of dense_ffn.
  std::int64_t first_dense = 0;
  std::int64_t dense_ffn = 0;
  /// Multi-head latent attention (DeepSeek-V2/V3) when kv_lora_rank > 0:
  /// head_dim is the query-key head size (its rotary part qk_rope_dim
  /// included), v_head_dim the value head size; q_lora_rank 0 projects the
  /// queries directly.
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_rope_dim = 0;
  std::int64_t v_head_dim = 0;
  // What changes the parameter count more than the time (the ops' work is
  // element-wise and small), so that loaded checkpoints count right:
  bool linear_bias = false;     ///< biases on every linear layer (GPT-2, BERT)
  bool qkv_bias = false;        ///< biases on the query, key and value projections only (Qwen2)
  bool norm_params = true;      ///< false: OLMo's non-parametric LayerNorm
  bool post_norms = false;      ///< Gemma-2/3: a norm after attention and after the MLP as well
  bool shared_norm = false;     ///< Falcon-7B: attention and MLP in parallel from one norm
  /// Norms on queries and keys: parameters per layer (OLMo-2 normalises the
  /// whole projection, Qwen3 and Gemma-3 each head); 0: none.
  std::int64_t qk_norm_params = 0;
  /// Sliding-window attention: a query sees at most `window` keys (0: all).
  /// With `global_every` k > 0, every k-th block attends globally and the
  /// others locally (Gemma-2: 2, Gemma-3: 6); 0: every block is local.
  std::int64_t window = 0;
  std::int64_t global_every = 0;
  std::int64_t type_vocab = 0;  ///< BERT's token-type (segment) embeddings
  bool mlm_head = false;        ///< BERT's masked-LM head: a dense layer and a norm before the logits
  /// Encoder-decoder (T5) when > 0: `layers` encoder blocks attend both ways
  /// over seq_len input tokens, then this many decoder blocks attend causally
  /// over decoder_seq_len target tokens, each with cross-attention to the
  /// encoder's output; one embedding table serves both.
  std::int64_t decoder_layers = 0;
  std::int64_t decoder_seq_len = 0;
  /// T5's relative position bias: buckets x heads parameters, computed once
  /// per stack (its first block) as a heads x queries x keys bias; 0: none.
  std::int64_t position_buckets = 0;

  [[nodiscard]] std::int64_t head_size() const { return head_dim > 0 ? head_dim : hidden / heads; }
};

/// Expects a validated config (the loaders check it): heads divide hidden,
/// kv_heads divide heads, top_k <= experts.
Graph build_transformer(const TransformerConfig& config);

}  // namespace dtsim::model
