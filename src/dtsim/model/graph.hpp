#pragma once
/// The model as layers of ops. Every figure is per sample (one sequence of
/// seq_len tokens, or one image) and unsharded; the planner scales by the
/// micro-batch and divides by the parallel degrees. Counts of tensor elements
/// are dtype-free; the planner multiplies them by the bytes of the dtype.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtsim/core/units.hpp"

namespace dtsim::model {

enum class OpKind { kGemm, kAttention, kElementwise, kNorm, kEmbedding, kLoss };
inline constexpr std::size_t kOpKindCount = 6;
/// "GEMM", "attention", "element-wise", "norm", "embedding", "loss".
std::string_view to_string(OpKind kind);

/// How tensor parallelism (Megatron) splits an op's compute and weights.
enum class TensorSplit {
  kSharded,     ///< column- or row-parallel GEMM, attention heads, vocab-parallel head
  kReplicated,  ///< norms, dropout, residual: every tp rank repeats it (sequence parallelism shards it)
};

/// A GEMM of (m x k) by (k x n); m counts rows per sample (tokens), batch counts
/// independent GEMMs of that shape per sample (attention heads).
struct GemmShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
};

/// Activation memory an op keeps for its backward pass, per sample.
struct SavedActivations {
  double sharded_elements = 0;     ///< divided by tp
  double replicated_elements = 0;  ///< divided by tp only under sequence parallelism
  core::Bytes sharded_mask;        ///< 1-byte dropout masks, divided by tp
  core::Bytes replicated_mask;
  /// The s x s attention scores (softmax output, dropout output and mask) that
  /// selective recomputation drops; sharded by tp.
  double score_elements = 0;
  core::Bytes score_mask;
  /// The attention's output, which a fused kernel's backward reads again
  /// (FlashAttention saves it); sharded by tp. The projection after it keeps
  /// the same tensor as its input, so it counts apart only where that
  /// projection keeps an FP8 copy instead (plan::saved_activation_bytes).
  double output_elements = 0;
};

struct Op {
  std::string name;
  OpKind kind = OpKind::kElementwise;
  TensorSplit split = TensorSplit::kReplicated;
  /// Matrix FLOPs (2 per multiply-add); element-wise ops count none, by the
  /// convention of model-FLOPs accounting.
  core::Flops forward_flops;
  core::Flops backward_flops;
  /// Tensor elements read and written by the forward and backward kernels,
  /// per sample (activations: they grow with the micro-batch).
  double forward_elements_moved = 0;
  double backward_elements_moved = 0;
  /// Weight elements a GEMM reads once per micro-batch in the forward (the
  /// backward reads them again and writes their gradient: twice that).
  double weight_elements_moved = 0;
  /// Unfused attention: elements of the s x s scores (all heads, per sample)
  /// that each pass over them moves; how many passes is the framework's.
  double score_elements = 0;
  /// Unfused attention that drops out its probabilities (attention dropout
  /// above 0): the dropout's passes over the scores and its 1-byte mask.
  bool score_dropout = false;
  /// Attention with a causal mask: only the lower triangle is computed (model
  /// FLOPs still count the whole square, as the published formulas do).
  bool causal = false;
  /// Sliding-window (local) attention: each query attends to at most this
  /// many keys (Mistral, Gemma-2/3's local layers); 0: all of them.
  std::int64_t window = 0;
  /// What a memory-bound op computes, where frameworks run it differently:
  /// one fused kernel (Transformer Engine, PyTorch's native LayerNorm) or
  /// many element-wise kernels (PyTorch eager RMSNorm and rotary embedding).
  /// Chains a framework may run fused or as separate kernels: RMSNorm and
  /// rotary (PyTorch eager), and Megatron-LM's fused ones: bias and
  /// activation, bias, dropout and residual add, or dropout and add where
  /// the linear layers have no bias.
  enum class Pattern : std::uint8_t {
    kPlain,
    kRmsNorm,
    kRotary,
    kBiasActivation,
    kBiasDropoutAdd,
    kDropoutAdd
  } pattern = Pattern::kPlain;
  double params = 0;
  SavedActivations saved;
  GemmShape gemm;
  /// A row-parallel op whose output tp ranks must sum (all-reduce, or
  /// reduce-scatter under sequence parallelism).
  bool tp_reduce_after = false;
  /// A column-parallel op whose input tp ranks must gather under sequence parallelism.
  bool tp_gather_before = false;
  /// An MoE expert op: sharded over ep; its FLOPs already count top_k experts per token.
  bool expert = false;
  /// The output widths of the separate linear layers a PyTorch model writes
  /// for this one GEMM, in the order its forward calls them (Llama's q, k
  /// and v projections; its gate and up projections); empty: one. A policy
  /// that counts matmuls (torchtitan's per-op recomputation) counts these.
  std::vector<std::int64_t> linear_widths;
  /// Tokens per sample the op's input holds, which sizes its tensor-parallel
  /// collectives; 0: the model's seq_len. An encoder-decoder's decoder ops run
  /// over the target tokens, its cross-attention keys over the encoder's.
  std::int64_t tokens = 0;
};

enum class LayerRole { kEmbedding, kBlock, kHead };

struct Layer {
  std::string name;
  LayerRole role = LayerRole::kBlock;
  std::vector<Op> ops;
  /// Tokens per sample of the layer's input (what full recomputation keeps); 0: the model's seq_len.
  std::int64_t tokens = 0;
  /// Elements per sample of the layer's input: all that full recomputation
  /// keeps of a layer graph's layer. Layer graphs set it from their first op;
  /// 0 for a transformer's, whose input is `tokens` x hidden.
  double input_elements = 0;
  /// Elements per sample of the layer's output: what a pipeline stage that
  /// ends with it sends on, and the gradient it receives back. Layer graphs
  /// set it from their last op; 0 for a transformer's, whose layers all
  /// output seq_len x hidden.
  double output_elements = 0;
};

/// The shape of a transformer, kept for validating strategies against it.
struct TransformerShape {
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t ffn_hidden = 0;
  std::int64_t vocab = 0;
  std::int64_t experts = 0;  ///< 0 for a dense model
  std::int64_t top_k = 0;
  std::int64_t head_dim = 0;  ///< attention head size (hidden / heads unless the model sets its own)
  /// Encoder-decoder models (T5): the decoder's blocks, counted in `layers` too; 0 otherwise.
  std::int64_t decoder_layers = 0;
  std::int64_t decoder_seq_len = 0;  ///< the decoder's tokens per sample (seq_len is the encoder's)
  double attention_dropout = 0;      ///< on the attention probabilities (TransformerConfig::attention_dropout)
  std::int64_t expert_groups = 0;    ///< group-limited routing (TransformerConfig::expert_groups); 0: none
  std::int64_t group_top_k = 0;
};

struct Graph {
  std::string name;
  std::string source;  ///< where the figures come from
  std::int64_t seq_len = 0;  ///< tokens per sample; 0 for non-sequence models
  std::string seq_len_source;  ///< where seq_len came from when a loader chose it (config.json's key)
  std::optional<TransformerShape> transformer;
  std::vector<Layer> layers;

  [[nodiscard]] double parameter_count() const;
  [[nodiscard]] core::Flops forward_flops_per_sample() const;
  [[nodiscard]] std::int64_t block_count() const;
};

}  // namespace dtsim::model
