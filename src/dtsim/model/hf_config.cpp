// Hugging Face config.json. Its files carry many keys dtsim has no use for
// (token ids, dropout rates, rope scaling), so unknown keys are not errors
// here, unlike dtsim's own formats; the keys that set the shape are required.
#include <fmt/format.h>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/model/transformer.hpp"
#include "dtsim/model/transformer_checks.hpp"
#include "dtsim/model/workload_loader.hpp"

namespace dtsim::model {
namespace {

std::int64_t seq_len_of(core::JsonReader& r, const char* key, const LoadOptions& options) {
  return options.seq_len ? *options.seq_len : r.count(key, kMaxSeqLen);
}

// llama, mistral, qwen2 and mixtral share Llama's key names.
TransformerConfig llama_family(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c;
  c.layers = r.count("num_hidden_layers", kMaxLayers);
  c.hidden = r.count("hidden_size", kMaxHidden);
  c.heads = r.count("num_attention_heads", kMaxHeads);
  c.kv_heads = r.count_or("num_key_value_heads", c.heads, kMaxHeads);
  c.ffn_hidden = r.count("intermediate_size", kMaxFfnHidden);
  c.vocab = r.count("vocab_size", kMaxVocab);
  c.seq_len = seq_len_of(r, "max_position_embeddings", options);
  c.mlp = MlpKind::kSwiGlu;
  c.norm = NormKind::kRmsNorm;
  c.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  c.learned_positions = false;
  if (r.has("num_local_experts")) {
    c.experts = r.count("num_local_experts", kMaxExperts);
    c.top_k = r.count("num_experts_per_tok", kMaxExperts);
  }
  return c;
}

TransformerConfig gpt2(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c;
  c.layers = r.count("n_layer", kMaxLayers);
  c.hidden = r.count("n_embd", kMaxHidden);
  c.heads = r.count("n_head", kMaxHeads);
  c.kv_heads = c.heads;
  // n_inner is null in GPT-2's own files, meaning 4 x n_embd.
  c.ffn_hidden = r.has("n_inner") && !r.raw().at("n_inner").is_null() ? r.count("n_inner", kMaxFfnHidden) : 4 * c.hidden;
  c.vocab = r.count("vocab_size", kMaxVocab);
  c.seq_len = seq_len_of(r, "n_positions", options);
  c.mlp = MlpKind::kGelu;
  c.norm = NormKind::kLayerNorm;
  c.tied_embeddings = true;
  c.learned_positions = true;
  return c;
}

TransformerConfig gpt_neox(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c;
  c.layers = r.count("num_hidden_layers", kMaxLayers);
  c.hidden = r.count("hidden_size", kMaxHidden);
  c.heads = r.count("num_attention_heads", kMaxHeads);
  c.kv_heads = c.heads;
  c.ffn_hidden = r.count("intermediate_size", kMaxFfnHidden);
  c.vocab = r.count("vocab_size", kMaxVocab);
  c.seq_len = seq_len_of(r, "max_position_embeddings", options);
  c.mlp = MlpKind::kGelu;
  c.norm = NormKind::kLayerNorm;
  c.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  c.learned_positions = false;
  return c;
}

}  // namespace

Graph load_hf_config(const nlohmann::json& document, const std::string& file, const LoadOptions& options) {
  core::JsonReader r(document, file);
  std::string type = r.choice("model_type", {"llama", "mistral", "mixtral", "qwen2", "gpt2", "gpt_neox"});
  TransformerConfig c;
  if (type == "gpt2") {
    c = gpt2(r, options);
    check_transformer(c, r, "n_head", "n_head");
  } else if (type == "gpt_neox") {
    c = gpt_neox(r, options);
    check_transformer(c, r, "num_attention_heads", "num_attention_heads");
  } else {
    c = llama_family(r, options);
    check_transformer(c, r, "num_attention_heads", "num_key_value_heads");
  }
  c.name = r.has("_name_or_path") ? r.string("_name_or_path") : fmt::format("{} (config.json)", type);
  c.source = "Hugging Face config.json: " + file;
  return build_transformer(c);
}

}  // namespace dtsim::model
