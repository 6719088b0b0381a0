#pragma once
/// Loads a model from a file: dtsim's workload JSON (`"kind": "transformer"`
/// or `"kind": "graph"`), or a Hugging Face config.json, recognised by its
/// `model_type` key. Every problem is an InputError naming file and field.
#include <cstdint>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "dtsim/model/graph.hpp"

namespace dtsim::model {

struct LoadOptions {
  /// Overrides the sequence length; Hugging Face configs only state the
  /// longest one the model supports (max_position_embeddings).
  std::optional<std::int64_t> seq_len;
};

Graph load_workload(const std::filesystem::path& path, const LoadOptions& options = {});
Graph load_workload_json(const nlohmann::json& document, const std::string& file, const LoadOptions& options = {});

/// Hugging Face config.json: llama, mistral, mixtral, qwen2, gpt2, gpt_neox.
Graph load_hf_config(const nlohmann::json& document, const std::string& file, const LoadOptions& options);
/// `"kind": "graph"`: an explicit list of layers of conv, linear, norm, pool and element-wise ops.
Graph load_layer_graph(const nlohmann::json& document, const std::string& file);

}  // namespace dtsim::model
