#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/model/workload_loader.hpp"

using namespace dtsim;

namespace {
model::Graph load(const char* text, model::LoadOptions options = {}) {
  return model::load_workload_json(nlohmann::json::parse(text), "config.json", options);
}
// The one line a model that cannot load is refused with.
std::string load_error(const char* text) {
  try {
    load(text);
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(HfConfig, LlamaConfigMatchesTheBundledWorkload) {
  model::Graph hf = load(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
      "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000,
      "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "torch_dtype": "float16", "tie_word_embeddings": false})");
  model::Graph ours = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/llama2-7b.json");
  EXPECT_DOUBLE_EQ(hf.parameter_count(), ours.parameter_count());
  EXPECT_DOUBLE_EQ(hf.forward_flops_per_sample().value(), ours.forward_flops_per_sample().value());
}

TEST(HfConfig, Gpt2SmallHas124MParameters) {
  model::Graph g = load(R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
      "n_inner": null, "vocab_size": 50257})");
  EXPECT_NEAR(g.parameter_count(), 124.4e6, 0.2e6);
}

TEST(HfConfig, Qwen2MistralMixtralAndNeoxLoad) {
  EXPECT_NO_THROW(load(R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_attention_heads": 14,
      "num_hidden_layers": 24, "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
      "tie_word_embeddings": true})", {2048}));
  EXPECT_NO_THROW(load(R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
      "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 32768})", {4096}));
  model::Graph mixtral = load(R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
      "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
      "max_position_embeddings": 32768, "num_local_experts": 8, "num_experts_per_tok": 2})", {4096});
  EXPECT_EQ(mixtral.transformer->experts, 8);
  model::Graph neox = load(R"({"model_type": "gpt_neox", "hidden_size": 2560, "intermediate_size": 10240,
      "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 50432, "max_position_embeddings": 2048})");
  EXPECT_EQ(neox.seq_len, 2048);
}

TEST(HfConfig, UnsupportedModelTypeAndBadHeadsAreOneLine) {
  try {
    load(R"({"model_type": "bart"})");
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "config.json: /model_type: expected one of llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, "
                 "gemma2, gemma3_text, phi3, olmo, olmo2, falcon, gpt2, gpt_neox, bert, roberta, deepseek_v2, deepseek_v3, "
                 "t5, mt5, got \"bart\"");
  }
  try {
    load(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 30,
        "num_hidden_layers": 32, "vocab_size": 32000, "max_position_embeddings": 4096})");
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "config.json: /num_attention_heads: expected a divisor of hidden size 4096, got 30");
  }
}

namespace {
std::string hf_dir() { return std::string(DTSIM_SOURCE_DIR) + "/tests/inputs/hf/"; }
}  // namespace

TEST(HfConfig, PublishedConfigsLoadWithThePublishedParameterCount) {
  std::ifstream in(hf_dir() + "expected.json");
  ASSERT_TRUE(in);
  const nlohmann::json expected = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& [name, e] : expected.items()) {
    model::Graph g = model::load_workload(hf_dir() + name + "/config.json");
    EXPECT_EQ(g.name, name) << "the folder names a config without _name_or_path";
    if (e["parameters"].is_null()) continue;
    const double published = e["parameters"].get<double>();
    EXPECT_NEAR(g.parameter_count() / published, 1.0, 0.005)
        << name << ": " << g.parameter_count() << " against " << published << " (" << e["parameters_source"] << ")";
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

TEST(HfConfig, ShapesThatCostTimeComeFromTheFile) {
  // Llama-3.1 trains at 8k; 131,072 is its RoPE-extended limit.
  model::Graph llama = model::load_workload(hf_dir() + "Meta-Llama-3.1-8B/config.json");
  EXPECT_EQ(llama.seq_len, 8192);
  EXPECT_NE(llama.seq_len_source.find("original_max_position_embeddings"), std::string::npos);
  model::Graph override = model::load_workload(hf_dir() + "Meta-Llama-3.1-8B/config.json", {16384});
  EXPECT_EQ(override.seq_len, 16384);
  EXPECT_EQ(override.seq_len_source, "--seq-len");
  // Mistral-Nemo's 1,024,000 positions are a limit, not the training context.
  model::Graph long_context = model::load_workload(hf_dir() + "Mistral-Nemo-Base-2407/config.json");
  EXPECT_EQ(long_context.seq_len, 8192);
  EXPECT_NE(long_context.seq_len_source.find("capped"), std::string::npos);
  // Mistral-Nemo: 32 heads of 128 on a hidden size of 5120.
  model::Graph nemo = model::load_workload(hf_dir() + "Mistral-Nemo-Base-2407/config.json", {4096});
  EXPECT_EQ(nemo.transformer->head_dim, 128);
  const model::Op* qkv = nullptr;
  for (const model::Op& op : nemo.layers[1].ops) {
    if (op.name == "attn.qkv") qkv = &op;
  }
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->gemm.n, 32 * 128 + 2 * 8 * 128);
  // Gemma: a head size of 256 on 16 heads, wider than its hidden size of 3072.
  EXPECT_EQ(model::load_workload(hf_dir() + "gemma-7b/config.json").transformer->head_dim, 256);
  // Falcon-7B: one key/value head, attention and MLP from one norm; no position limit in the file.
  model::Graph falcon = model::load_workload(hf_dir() + "falcon-7b/config.json");
  EXPECT_EQ(falcon.transformer->kv_heads, 1);
  EXPECT_EQ(falcon.seq_len, 2048);
  EXPECT_NE(falcon.seq_len_source.find("assumed"), std::string::npos);
  // Qwen1.5-MoE: 60 routed experts of 1408, 4 per token, and the shared ones beside them.
  model::Graph moe = model::load_workload(hf_dir() + "Qwen1.5-MoE-A2.7B/config.json");
  EXPECT_EQ(moe.transformer->experts, 60);
  bool shared = false;
  for (const model::Op& op : moe.layers[1].ops) shared = shared || op.name == "moe.shared.gate_up";
  EXPECT_TRUE(shared);
  // BERT attends both ways.
  const model::Graph bert = model::load_workload(hf_dir() + "bert-base-uncased/config.json");  // alive for the loop
  for (const model::Op& op : bert.layers[1].ops) {
    if (op.kind == model::OpKind::kAttention) {
      EXPECT_FALSE(op.causal);
    }
  }
}

TEST(HfConfig, T5IsAnEncoderThenADecoderThatAttendsToIt) {
  const model::Graph t5 = model::load_workload(hf_dir() + "t5-v1_1-base/config.json");
  ASSERT_TRUE(t5.transformer);
  EXPECT_EQ(t5.transformer->layers, 24);
  EXPECT_EQ(t5.transformer->decoder_layers, 12);
  EXPECT_EQ(t5.block_count(), 24);
  // 512 input tokens, 114 target tokens: T5's span-corruption pretraining.
  EXPECT_EQ(t5.seq_len, 512);
  EXPECT_EQ(t5.transformer->decoder_seq_len, 114);
  auto find = [](const model::Layer& layer, const std::string& name) -> const model::Op* {
    for (const model::Op& op : layer.ops) {
      if (op.name == name) return &op;
    }
    return nullptr;
  };
  const model::Layer& encoder = t5.layers[1];
  const model::Layer& decoder = t5.layers[13];
  EXPECT_EQ(find(encoder, "xattn.core"), nullptr);
  ASSERT_NE(find(encoder, "attn.core"), nullptr);
  EXPECT_FALSE(find(encoder, "attn.core")->causal);
  EXPECT_EQ(find(encoder, "attn.core")->gemm.m, 512);
  ASSERT_NE(find(decoder, "attn.core"), nullptr);
  EXPECT_TRUE(find(decoder, "attn.core")->causal);
  EXPECT_EQ(find(decoder, "attn.core")->gemm.m, 114);
  // Cross-attention: 114 queries against 512 keys, none masked; keys and values from the encoder's 512 tokens.
  const model::Op* cross = find(decoder, "xattn.core");
  ASSERT_NE(cross, nullptr);
  EXPECT_FALSE(cross->causal);
  EXPECT_EQ(cross->gemm.m, 114);
  EXPECT_EQ(cross->gemm.n, 512);
  EXPECT_DOUBLE_EQ(cross->forward_flops.value(), 2.0 * 2 * 12 * 114 * 512 * 64);
  const model::Op* kv = find(decoder, "xattn.kv");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->gemm.m, 512);
  EXPECT_EQ(kv->tokens, 512);
  EXPECT_EQ(decoder.tokens, 114);
  EXPECT_EQ(find(decoder, "attn.proj")->tokens, 114);
  // The relative position bias is computed in each stack's first block only.
  EXPECT_NE(find(t5.layers[1], "attn.position_bias"), nullptr);
  EXPECT_EQ(find(t5.layers[2], "attn.position_bias"), nullptr);
  EXPECT_NE(find(t5.layers[13], "attn.position_bias"), nullptr);
  // The encoder ends in its own norm; the logits are over the target tokens.
  EXPECT_NE(find(t5.layers[12], "encoder.final_norm"), nullptr);
  EXPECT_EQ(find(t5.layers.back(), "head.logits")->gemm.m, 114);
  // v1.1's gated-GELU MLP has three matrices, the original T5's ReLU MLP two.
  EXPECT_NE(find(encoder, "mlp.gate_up"), nullptr);
  EXPECT_NE(find(model::load_workload(hf_dir() + "t5-base/config.json").layers[1], "mlp.fc1"), nullptr);
  // --seq-len sets the inputs and keeps the 114:512 ratio for the targets.
  const model::Graph longer = model::load_workload(hf_dir() + "t5-v1_1-base/config.json", {1024});
  EXPECT_EQ(longer.transformer->decoder_seq_len, 228);
}

TEST(WorkloadJson, HeadSizeAndSharedExpertsAreKeysOfItsOwn) {
  model::Graph nemo = load(R"({"name": "nemo-like", "kind": "transformer", "layers": 2, "hidden": 5120, "heads": 32,
      "kv_heads": 8, "head_dim": 128, "ffn_hidden": 14336, "vocab": 131072, "seq_len": 4096, "mlp": "swiglu",
      "norm": "rmsnorm", "positions": "rope", "tied_embeddings": false})");
  EXPECT_EQ(nemo.transformer->head_dim, 128);
  model::Graph moe = load(R"({"name": "moe", "kind": "transformer", "layers": 2, "hidden": 1024, "heads": 8,
      "ffn_hidden": 512, "vocab": 1000, "seq_len": 128, "mlp": "swiglu", "experts": 8, "top_k": 2, "shared_ffn": 2048})");
  model::Graph dense_only = load(R"({"name": "moe", "kind": "transformer", "layers": 2, "hidden": 1024, "heads": 8,
      "ffn_hidden": 512, "vocab": 1000, "seq_len": 128, "mlp": "swiglu", "experts": 8, "top_k": 2})");
  // Shared experts add 3 x 1024 x 2048 parameters a layer.
  EXPECT_DOUBLE_EQ(moe.parameter_count() - dense_only.parameter_count(), 2 * 3.0 * 1024 * 2048);
  EXPECT_EQ(load_error(R"({"name": "x", "kind": "transformer", "layers": 2, "hidden": 1024, "heads": 8, "vocab": 1000,
        "seq_len": 128, "shared_ffn": 2048})"),
            "config.json: /shared_ffn: expected experts > 0: shared experts run beside routed ones");
}

// Attention dropout, which unfused attention pays for: each family's key
// and, where the file leaves it out, its config class's default (Llama's
// names: none; GPT-2 and BERT: 0.1); dtsim's own files default to 0.1.
TEST(HfConfig, AttentionDropoutPerFamily) {
  const char* llama = R"({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 8,
      "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 2048})";
  EXPECT_DOUBLE_EQ(load(llama).transformer->attention_dropout, 0.0);
  EXPECT_DOUBLE_EQ(load(R"({"model_type": "qwen2", "hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 8,
      "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 2048, "attention_dropout": 0.05})")
                       .transformer->attention_dropout,
                   0.05);
  EXPECT_DOUBLE_EQ(load(R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 2, "n_positions": 1024,
      "vocab_size": 50257})").transformer->attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(load(R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 2, "n_positions": 1024,
      "vocab_size": 50257, "attn_pdrop": 0.0})").transformer->attention_dropout, 0.0);
  EXPECT_DOUBLE_EQ(load(R"({"model_type": "bert", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
      "num_hidden_layers": 2, "vocab_size": 30522, "max_position_embeddings": 512,
      "attention_probs_dropout_prob": 0.2})").transformer->attention_dropout, 0.2);
  EXPECT_DOUBLE_EQ(load(R"({"name": "x", "kind": "transformer", "layers": 2, "hidden": 1024, "heads": 8, "vocab": 1000,
      "seq_len": 128})").transformer->attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(load(R"({"name": "x", "kind": "transformer", "layers": 2, "hidden": 1024, "heads": 8, "vocab": 1000,
      "seq_len": 128, "attention_dropout": 0})").transformer->attention_dropout, 0.0);
  EXPECT_EQ(load_error(R"({"name": "x", "kind": "transformer", "layers": 2, "hidden": 1024, "heads": 8, "vocab": 1000,
        "seq_len": 128, "attention_dropout": 1})"),
            "config.json: /attention_dropout: expected a probability from 0 up to 1 (not 1), got 1");
  EXPECT_EQ(load_error(R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 2, "n_positions": 1024,
      "vocab_size": 50257, "attn_pdrop": -0.1})"),
            "config.json: /attn_pdrop: expected a probability from 0 up to 1 (not 1), got -0.1");
}

TEST(HfConfig, SlidingWindowsPerFamily) {
  auto windows = [](const model::Graph& g) {
    std::vector<std::int64_t> out;
    for (const model::Layer& layer : g.layers) {
      for (const model::Op& op : layer.ops) {
        if (op.kind == model::OpKind::kAttention) out.push_back(op.window);
      }
    }
    return out;
  };
  // Mistral 7B v0.1: every layer sees 4,096 keys.
  const auto mistral = windows(model::load_workload(hf_dir() + "Mistral-7B-v0.1/config.json"));
  EXPECT_EQ(mistral.size(), 32u);
  EXPECT_TRUE(std::all_of(mistral.begin(), mistral.end(), [](std::int64_t w) { return w == 4096; }));
  // Gemma-2: local and global layers alternate, the first local.
  const auto gemma2 = windows(model::load_workload(hf_dir() + "gemma-2-9b/config.json"));
  EXPECT_EQ(gemma2[0], 4096);
  EXPECT_EQ(gemma2[1], 0);
  EXPECT_EQ(std::count(gemma2.begin(), gemma2.end(), 0), 21);
  // Qwen2.5 ships a window it does not use; Mistral-Nemo writes null.
  const auto qwen = windows(model::load_workload(hf_dir() + "Qwen2.5-7B/config.json"));
  EXPECT_TRUE(std::all_of(qwen.begin(), qwen.end(), [](std::int64_t w) { return w == 0; }));
  const auto nemo = windows(model::load_workload(hf_dir() + "Mistral-Nemo-Base-2407/config.json"));
  EXPECT_TRUE(std::all_of(nemo.begin(), nemo.end(), [](std::int64_t w) { return w == 0; }));
}

TEST(WorkloadJson, LatentAttentionAndDenseFirstBlocksMatchTheirConfigJson) {
  // DeepSeek-V2-Lite written as dtsim's own workload: the same graph as its config.json.
  model::Graph ours = load(R"({"name": "v2-lite", "kind": "transformer", "layers": 27, "hidden": 2048, "heads": 16,
      "head_dim": 192, "kv_lora_rank": 512, "qk_rope_dim": 64, "v_head_dim": 128, "ffn_hidden": 1408, "experts": 64,
      "top_k": 6, "shared_ffn": 2816, "first_dense": 1, "dense_ffn": 10944, "vocab": 102400, "seq_len": 4096,
      "mlp": "swiglu", "norm": "rmsnorm", "positions": "rope", "tied_embeddings": false})");
  model::Graph hf = model::load_workload(hf_dir() + "DeepSeek-V2-Lite/config.json");
  EXPECT_DOUBLE_EQ(ours.parameter_count(), hf.parameter_count());
  EXPECT_DOUBLE_EQ(ours.forward_flops_per_sample().value(), hf.forward_flops_per_sample().value());
  // The first block is dense, the second MoE.
  auto has = [](const model::Layer& l, const char* name) {
    return std::any_of(l.ops.begin(), l.ops.end(), [&](const model::Op& op) { return op.name == name; });
  };
  EXPECT_FALSE(has(hf.layers[1], "moe.router"));
  EXPECT_TRUE(has(hf.layers[2], "moe.router"));
  EXPECT_TRUE(has(hf.layers[1], "attn.kv_down"));
}

TEST(WorkloadJson, AHeadSizeThatMakesProjectionsAbsurdIsOneLine) {
  EXPECT_EQ(load_error(R"({"name": "x", "kind": "transformer", "layers": 2, "hidden": 1024, "heads": 65536,
        "head_dim": 1048576, "vocab": 1000, "seq_len": 128})"),
            "config.json: /heads: expected heads x head size of at most 1048576, got 65536 x 1048576");
}
