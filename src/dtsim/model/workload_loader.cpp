#include "dtsim/model/workload_loader.hpp"

#include <fmt/format.h>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/model/transformer.hpp"
#include "dtsim/model/transformer_checks.hpp"

namespace dtsim::model {
namespace {

Graph load_transformer(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c;
  c.name = r.string("name");
  c.source = r.string_or("source", "");
  c.layers = r.count("layers", kMaxLayers);
  c.hidden = r.count("hidden", kMaxHidden);
  c.heads = r.count("heads", kMaxHeads);
  c.kv_heads = r.count_or("kv_heads", c.heads, kMaxHeads);
  if (r.has("head_dim")) c.head_dim = r.count("head_dim", kMaxHidden);
  c.ffn_hidden = r.count_or("ffn_hidden", 4 * c.hidden, kMaxFfnHidden);
  c.vocab = r.count("vocab", kMaxVocab);
  c.seq_len = options.seq_len.value_or(r.count("seq_len", kMaxSeqLen));
  c.mlp = r.choice_or("mlp", {"gelu", "swiglu"}, "gelu") == "swiglu" ? MlpKind::kSwiGlu : MlpKind::kGelu;
  c.norm = r.choice_or("norm", {"layernorm", "rmsnorm"}, "layernorm") == "rmsnorm" ? NormKind::kRmsNorm
                                                                                     : NormKind::kLayerNorm;
  c.tied_embeddings = r.boolean_or("tied_embeddings", true);
  c.linear_bias = r.boolean_or("bias", false);
  // ALiBi (MPT, BLOOM) biases the scores inside the attention kernel: no table, no rotation.
  const std::string positions = r.choice_or("positions", {"learned", "rope", "alibi"}, "learned");
  c.learned_positions = positions == "learned";
  c.rotary = positions == "rope";
  c.experts = r.integer_or("experts", 0);
  c.top_k = r.integer_or("top_k", c.experts > 0 ? 2 : 0);
  if (r.has("shared_ffn")) {
    c.shared_ffn = r.count("shared_ffn", kMaxFfnHidden);
    if (c.experts == 0) r.fail("shared_ffn", "expected experts > 0: shared experts run beside routed ones");
  }
  c.causal = r.boolean_or("causal", true);
  c.attention_dropout = dropout_or(r, "attention_dropout", 0.1);
  // Multi-head latent attention: kv_lora_rank turns it on; head_dim is then the query-key head size.
  if (r.has("kv_lora_rank")) {
    c.kv_lora_rank = r.count("kv_lora_rank", kMaxHidden);
    c.qk_rope_dim = r.count("qk_rope_dim", kMaxHidden);
    c.v_head_dim = r.count("v_head_dim", kMaxHidden);
    if (r.has("q_lora_rank")) c.q_lora_rank = r.count("q_lora_rank", kMaxHidden);
    if (c.head_dim <= c.qk_rope_dim) {
      r.fail("head_dim", fmt::format("expected a query-key head size above qk_rope_dim {} (MLA), got {}", c.qk_rope_dim, c.head_dim));
    }
    c.kv_heads = c.heads;
  }
  if (r.has("first_dense")) {
    c.first_dense = r.count("first_dense", kMaxLayers);
    c.dense_ffn = r.count("dense_ffn", kMaxFfnHidden);
    if (c.experts == 0) r.fail("first_dense", "expected experts > 0: dense first blocks precede MoE ones");
  }
  if (r.has("window")) c.window = r.count("window", kMaxSeqLen);
  if (r.has("global_every")) {
    c.global_every = r.count("global_every", kMaxLayers);
    if (c.window == 0) r.fail("global_every", "expected a window: global blocks alternate with sliding-window ones");
  }
  r.finish();
  check_transformer(c, r);
  return build_transformer(c);
}

}  // namespace

Graph load_workload_json(const nlohmann::json& document, const std::string& file, const LoadOptions& options) {
  if (options.seq_len && (*options.seq_len < 1 || *options.seq_len > kMaxSeqLen)) {
    throw core::InputError("--seq-len", "", fmt::format("expected 1 to {} tokens, got {}", kMaxSeqLen, *options.seq_len));
  }
  if (document.is_object() && document.contains("model_type")) return load_hf_config(document, file, options);
  core::JsonReader r(document, file);
  std::string kind = r.choice("kind", {"transformer", "graph"});
  if (kind == "graph") {
    if (options.seq_len) {
      throw core::InputError("--seq-len", "", fmt::format("{} is a layer graph, which has no sequence; --seq-len applies to "
                                                         "transformers", file));
    }
    return load_layer_graph(document, file);
  }
  return load_transformer(r, options);
}

Graph load_workload(const std::filesystem::path& path, const LoadOptions& options) {
  return load_workload_json(core::load_json_file(path), path.string(), options);
}

}  // namespace dtsim::model
