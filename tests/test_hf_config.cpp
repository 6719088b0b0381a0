#include <gtest/gtest.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/model/workload_loader.hpp"

using namespace dtsim;

namespace {
model::Graph load(const char* text, model::LoadOptions options = {}) {
  return model::load_workload_json(nlohmann::json::parse(text), "config.json", options);
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
    load(R"({"model_type": "t5"})");
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "config.json: /model_type: expected one of llama, mistral, mixtral, qwen2, gpt2, gpt_neox, got \"t5\"");
  }
  try {
    load(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 30,
        "num_hidden_layers": 32, "vocab_size": 32000, "max_position_embeddings": 4096})");
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "config.json: /num_attention_heads: expected a divisor of hidden size 4096, got 30");
  }
}
