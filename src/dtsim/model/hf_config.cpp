// Hugging Face config.json. Its files carry many keys dtsim has no use for
// (token ids, rope frequencies, dropout rates other than attention's), so unknown keys are not
// errors here, unlike dtsim's own formats; the keys that set the shape are
// required. Each family reads its own key names into one TransformerConfig.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/model/transformer.hpp"
#include "dtsim/model/transformer_checks.hpp"
#include "dtsim/model/workload_loader.hpp"

namespace dtsim::model {
namespace {

// config.json writes `null` for "not set" (head_dim, rope_scaling, sliding_window).
bool present(const core::JsonReader& r, const char* key) { return r.has(key) && !r.raw().at(key).is_null(); }

// The sequence a model was pretrained at, which is what a training step
// costs: a config that extends its context by RoPE scaling (Llama-3.1's
// 131,072 from 8,192) keeps the original under rope_scaling. Otherwise the
// position limit, up to 8,192: beyond that it is a long-context limit
// reached by a late phase of training (Mistral-Nemo's 1,024,000, Qwen2.5's
// 131,072), and most of the tokens were trained at 4k-8k. A config without
// one (Falcon) gets 2,048, its family's. --seq-len overrides all of them,
// and the summary says which applied.
constexpr std::int64_t kLongestDefaultContext = 8192;
void set_seq_len(TransformerConfig& c, core::JsonReader& r, const LoadOptions& options, const char* positions_key) {
  if (options.seq_len) {
    c.seq_len = *options.seq_len;
    c.seq_len_source = "--seq-len";
    return;
  }
  if (present(r, "rope_scaling") && r.raw().at("rope_scaling").is_object()) {
    core::JsonReader scaling = r.object("rope_scaling");
    if (present(scaling, "original_max_position_embeddings")) {
      c.seq_len = scaling.count("original_max_position_embeddings", kMaxSeqLen);
      c.seq_len_source = "rope_scaling.original_max_position_embeddings: the pretraining context";
      return;
    }
  }
  if (present(r, positions_key)) {
    const std::int64_t limit = r.count(positions_key, kMaxSeqLen);
    c.seq_len = std::min(limit, kLongestDefaultContext);
    c.seq_len_source = limit <= kLongestDefaultContext
                           ? positions_key
                           : fmt::format("{} {} capped at {}, a usual pretraining context; --seq-len sets it",
                                         positions_key, limit, kLongestDefaultContext);
    return;
  }
  c.seq_len = 2048;
  c.seq_len_source = fmt::format("no {} in the file: 2048 assumed", positions_key);
}

std::int64_t head_dim_of(core::JsonReader& r) { return present(r, "head_dim") ? r.count("head_dim", kMaxHidden) : 0; }

// Llama's key names, which most decoder families kept.
TransformerConfig llama_keys(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c;
  c.layers = r.count("num_hidden_layers", kMaxLayers);
  c.hidden = r.count("hidden_size", kMaxHidden);
  c.heads = r.count("num_attention_heads", kMaxHeads);
  c.kv_heads = present(r, "num_key_value_heads") ? r.count("num_key_value_heads", kMaxHeads) : c.heads;
  c.head_dim = head_dim_of(r);
  c.ffn_hidden = r.count("intermediate_size", kMaxFfnHidden);
  c.vocab = r.count("vocab_size", kMaxVocab);
  set_seq_len(c, r, options, "max_position_embeddings");
  c.mlp = MlpKind::kSwiGlu;
  c.norm = NormKind::kRmsNorm;
  c.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  c.learned_positions = false;
  // LlamaConfig and the classes that kept its names default to none.
  c.attention_dropout = dropout_or(r, "attention_dropout", 0.0);
  return c;
}

TransformerConfig llama_family(core::JsonReader& r, const LoadOptions& options, const std::string& type) {
  TransformerConfig c = llama_keys(r, options);
  if (type == "mixtral") {
    c.experts = r.count("num_local_experts", kMaxExperts);
    c.top_k = r.count("num_experts_per_tok", kMaxExperts);
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    c.experts = r.count("num_experts", kMaxExperts);
    c.top_k = r.count("num_experts_per_tok", kMaxExperts);
    c.ffn_hidden = r.count("moe_intermediate_size", kMaxFfnHidden);
    if (present(r, "shared_expert_intermediate_size")) {
      c.shared_ffn = r.count("shared_expert_intermediate_size", kMaxFfnHidden);
    }
  }
  if (type == "qwen2" || type == "qwen2_moe") c.qkv_bias = true;
  if (type == "qwen3" || type == "qwen3_moe") c.qk_norm_params = 2 * c.head_size();
  if (type == "olmo") {
    c.norm = NormKind::kLayerNorm;  // without weights or biases
    c.norm_params = false;
  }
  if (type == "olmo2") c.qk_norm_params = (c.heads + c.kv_heads) * c.head_size();
  // Sliding windows: Mistral 7B v0.1 and Phi-3 on every layer, Gemma-2 on
  // every other one, Gemma-3 on five of six. Qwen2 keeps its window off
  // unless use_sliding_window says so; Mistral's later files write null.
  const bool windowed = type == "mistral" || type == "mixtral" || type == "phi3" || type == "gemma2" ||
                        type == "gemma3_text" || ((type == "qwen2" || type == "qwen2_moe") && r.boolean_or("use_sliding_window", false));
  if (windowed && present(r, "sliding_window")) {
    c.window = r.count("sliding_window", kMaxSeqLen);
    if (type == "gemma2") c.global_every = 2;
    if (type == "gemma3_text") c.global_every = present(r, "sliding_window_pattern") ? r.count("sliding_window_pattern", kMaxLayers) : 6;
  }
  if (type == "gemma" || type == "gemma2" || type == "gemma3_text") {
    c.tied_embeddings = r.boolean_or("tie_word_embeddings", true);  // Gemma's files leave it to the default
    c.post_norms = type != "gemma";
    if (type == "gemma3_text") c.qk_norm_params = 2 * c.head_size();
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
  c.ffn_hidden = present(r, "n_inner") ? r.count("n_inner", kMaxFfnHidden) : 4 * c.hidden;
  c.vocab = r.count("vocab_size", kMaxVocab);
  set_seq_len(c, r, options, "n_positions");
  c.mlp = MlpKind::kGelu;
  c.norm = NormKind::kLayerNorm;
  c.tied_embeddings = true;
  c.learned_positions = true;
  c.linear_bias = true;
  c.attention_dropout = dropout_or(r, "attn_pdrop", 0.1);  // GPT2Config's default
  return c;
}

// GPT-NeoX and Pythia: Llama's key names, a GeLU MLP, LayerNorm, biases.
TransformerConfig gpt_neox(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c = llama_keys(r, options);
  c.mlp = MlpKind::kGelu;
  c.norm = NormKind::kLayerNorm;
  c.linear_bias = true;
  return c;
}

// Falcon: multi-query attention (7B) or grouped queries (40B, 180B: the
// "new decoder architecture", which also gives the MLP a norm of its own),
// attention and MLP in parallel, a 4h GeLU MLP, no biases.
TransformerConfig falcon(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c;
  c.layers = r.count(r.has("num_hidden_layers") ? "num_hidden_layers" : "n_layer", kMaxLayers);
  c.hidden = r.count("hidden_size", kMaxHidden);
  c.heads = r.count(r.has("num_attention_heads") ? "num_attention_heads" : "n_head", kMaxHeads);
  const bool new_architecture = r.boolean_or("new_decoder_architecture", false);
  if (new_architecture) {
    c.kv_heads = r.count(r.has("num_kv_heads") ? "num_kv_heads" : "n_head_kv", kMaxHeads);
  } else {
    c.kv_heads = r.boolean_or("multi_query", true) ? 1 : c.heads;
  }
  c.ffn_hidden = present(r, "ffn_hidden_size") ? r.count("ffn_hidden_size", kMaxFfnHidden) : 4 * c.hidden;
  c.vocab = r.count("vocab_size", kMaxVocab);
  set_seq_len(c, r, options, "max_position_embeddings");
  c.mlp = MlpKind::kGelu;
  c.norm = NormKind::kLayerNorm;
  c.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  c.learned_positions = false;
  c.rotary = !r.boolean_or("alibi", false);
  c.shared_norm = r.boolean_or("parallel_attn", true) && !new_architecture;
  c.linear_bias = r.boolean_or("bias", false);
  c.attention_dropout = dropout_or(r, "attention_dropout", 0.0);  // FalconConfig's default
  return c;
}

// BERT and RoBERTa: a post-norm encoder (every token sees every other), learned
// positions and token types, biases everywhere, the masked-LM head.
TransformerConfig bert(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c = llama_keys(r, options);
  c.mlp = MlpKind::kGelu;
  c.norm = NormKind::kLayerNorm;
  c.tied_embeddings = true;
  c.learned_positions = true;
  c.rotary = false;
  c.causal = false;
  c.linear_bias = true;
  c.type_vocab = present(r, "type_vocab_size") ? r.count("type_vocab_size", kMaxVocab) : 0;
  c.mlm_head = true;
  c.attention_dropout = dropout_or(r, "attention_probs_dropout_prob", 0.1);  // BertConfig's default
  return c;
}

// DeepSeek-V2/V3: multi-head latent attention, fine-grained routed experts
// with shared ones, and dense first blocks.
TransformerConfig deepseek(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c = llama_keys(r, options);
  c.kv_heads = c.heads;  // MLA gives every head its own keys and values
  c.q_lora_rank = present(r, "q_lora_rank") ? r.count("q_lora_rank", kMaxHidden) : 0;
  c.kv_lora_rank = r.count("kv_lora_rank", kMaxHidden);
  c.qk_rope_dim = r.count("qk_rope_head_dim", kMaxHidden);
  c.head_dim = r.count("qk_nope_head_dim", kMaxHidden) + c.qk_rope_dim;
  c.v_head_dim = r.count("v_head_dim", kMaxHidden);
  c.dense_ffn = c.ffn_hidden;  // intermediate_size: the dense first blocks'
  if (present(r, "n_routed_experts")) {
    c.experts = r.count("n_routed_experts", kMaxExperts);
    c.top_k = r.count("num_experts_per_tok", kMaxExperts);
    c.ffn_hidden = r.count("moe_intermediate_size", kMaxFfnHidden);
    c.shared_ffn = present(r, "n_shared_experts") ? r.count("n_shared_experts", kMaxExperts) * c.ffn_hidden : 0;
    if (c.shared_ffn > kMaxFfnHidden) {
      r.fail("n_shared_experts", fmt::format("expected shared experts of at most {} in all, got {}", kMaxFfnHidden, c.shared_ffn));
    }
    if (present(r, "n_group") && present(r, "topk_group")) {
      c.expert_groups = r.count("n_group", c.experts);
      c.group_top_k = r.count("topk_group", c.expert_groups);
      if (c.experts % c.expert_groups != 0) {
        r.fail("n_group", fmt::format("expected a divisor of the {} routed experts, got {}", c.experts, c.expert_groups));
      }
    }
    c.first_dense = present(r, "first_k_dense_replace") ? r.integer("first_k_dense_replace") : 0;
    if (c.first_dense < 0 || c.first_dense > c.layers) {
      r.fail("first_k_dense_replace", fmt::format("expected 0 to {} dense first blocks, got {}", c.layers, c.first_dense));
    }
  }
  return c;
}

// T5 (and its v1.1, mT5, Flan-T5): an encoder-decoder with RMS norms without
// biases, relative position biases, a ReLU MLP or a gated one
// ("gated-gelu"), and its own key names. Its pretraining step (span
// corruption at 15% noise, mean span 3) reads 512 input tokens and writes
// 114 target tokens; --seq-len sets the input and keeps that ratio.
constexpr std::int64_t kT5Inputs = 512, kT5Targets = 114;
TransformerConfig t5(core::JsonReader& r, const LoadOptions& options) {
  TransformerConfig c;
  c.layers = r.count("num_layers", kMaxLayers);
  c.decoder_layers = present(r, "num_decoder_layers") ? r.count("num_decoder_layers", kMaxLayers) : c.layers;
  c.hidden = r.count("d_model", kMaxHidden);
  c.heads = r.count("num_heads", kMaxHeads);
  c.kv_heads = c.heads;
  c.head_dim = r.count("d_kv", kMaxHidden);
  c.ffn_hidden = r.count("d_ff", kMaxFfnHidden);
  c.vocab = r.count("vocab_size", kMaxVocab);
  c.position_buckets =
      present(r, "relative_attention_num_buckets") ? r.count("relative_attention_num_buckets", kMaxSeqLen) : 32;
  const std::string projection = r.string_or("feed_forward_proj", "relu");
  const bool gated = projection.rfind("gated-", 0) == 0;
  const std::string activation = gated ? projection.substr(6) : projection;
  if (activation != "relu" && activation != "gelu" && activation != "gelu_new" && activation != "silu") {
    r.fail("feed_forward_proj", fmt::format("expected relu, gelu, gelu_new or silu, optionally gated- (\"gated-gelu\"), "
                                            "got \"{}\"", projection));
  }
  c.mlp = gated ? MlpKind::kSwiGlu : MlpKind::kGelu;
  c.norm = NormKind::kRmsNorm;
  c.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  c.learned_positions = false;
  c.rotary = false;
  c.causal = false;  // the encoder's; the decoder's blocks are causal
  c.attention_dropout = dropout_or(r, "dropout_rate", 0.1);  // T5Config's; T5Attention drops out its weights at it
  if (options.seq_len) {
    c.seq_len = *options.seq_len;
    c.decoder_seq_len = std::max<std::int64_t>(1, (*options.seq_len * kT5Targets + kT5Inputs / 2) / kT5Inputs);
    c.seq_len_source = fmt::format("--seq-len; the decoder's {} target tokens keep T5's 114 per 512", c.decoder_seq_len);
  } else {
    c.seq_len = kT5Inputs;
    c.decoder_seq_len = kT5Targets;
    c.seq_len_source = "T5's pretraining: 512 input tokens, 114 decoder target tokens (span corruption, Raffel et al. 2020)";
  }
  return c;
}

// The model's name: the config's own, else the folder it sits in (where
// `huggingface-cli download` puts it), else its type.
std::string name_of(core::JsonReader& r, const std::string& file, const std::string& type) {
  if (present(r, "_name_or_path")) {
    std::string name = r.string("_name_or_path");
    if (!name.empty()) return name;
  }
  const std::filesystem::path folder = std::filesystem::path(file).parent_path().filename();
  if (!folder.empty() && folder != "." && folder != "..") return folder.string();
  return fmt::format("{} (config.json)", type);
}

}  // namespace

Graph load_hf_config(const nlohmann::json& document, const std::string& file, const LoadOptions& options) {
  core::JsonReader top(document, file);
  // Multimodal Gemma-3 keeps its language model under text_config.
  const bool nested = present(top, "text_config") && top.raw().at("text_config").is_object() &&
                      top.raw().at("text_config").contains("model_type");
  core::JsonReader r = nested ? top.object("text_config") : top;
  const std::string type = r.choice(
      "model_type", {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                     "gemma3_text", "phi3", "olmo", "olmo2", "falcon", "gpt2", "gpt_neox", "bert", "roberta", "deepseek_v2",
                     "deepseek_v3", "t5", "mt5"});
  TransformerConfig c;
  if (type == "gpt2") {
    c = gpt2(r, options);
    check_transformer(c, r, "n_head", "n_head");
  } else if (type == "gpt_neox") {
    c = gpt_neox(r, options);
    check_transformer(c, r, "num_attention_heads", "num_attention_heads");
  } else if (type == "falcon") {
    c = falcon(r, options);
    check_transformer(c, r, "num_attention_heads", "num_kv_heads");
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    c = deepseek(r, options);
    check_transformer(c, r, "num_attention_heads", "num_attention_heads");
  } else if (type == "t5" || type == "mt5") {
    c = t5(r, options);
    check_transformer(c, r, "num_heads", "num_heads");
  } else if (type == "bert" || type == "roberta") {
    c = bert(r, options);
    check_transformer(c, r, "num_attention_heads", "num_attention_heads");
  } else {
    c = llama_family(r, options, type);
    check_transformer(c, r, "num_attention_heads", "num_key_value_heads");
  }
  c.name = name_of(top, file, type);
  c.source = "Hugging Face config.json: " + file;
  return build_transformer(c);
}

}  // namespace dtsim::model
