#pragma once
/// A strategy from the launch configurations people already have: a
/// Megatron-LM argument list and a DeepSpeed config JSON. Each key that
/// shapes a training step maps to a strategy key; the others are reported,
/// never silently dropped: those dtsim does not model (offloading) apart from
/// those that do not change a step's time (learning rate, paths, logging).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::plan {

struct LaunchStrategy {
  std::string strategy;                 ///< key=value,... for parse_strategy
  std::optional<std::int64_t> seq_len;  ///< Megatron's --seq-length
  std::vector<std::string> mapped;      ///< "--tensor-model-parallel-size 8 -> tp=8"
  std::vector<std::string> not_modelled;  ///< keys that change the step in ways dtsim does not model
  std::vector<std::string> ignored;     ///< keys that do not change a step's time, and keys dtsim does not know
};

/// Megatron-LM's arguments as a launch script passes them to pretrain_gpt.py:
/// `--key value` or `--key=value`, flags alone; anything before the first
/// `--` (torchrun and its options) and line continuations are skipped.
/// Errors name `source` and the argument.
LaunchStrategy from_megatron_args(std::string_view args, const std::string& source);

/// A DeepSpeed config (ds_config.json). Errors name `file` and the JSON pointer.
LaunchStrategy from_deepspeed_config(const nlohmann::json& config, const std::string& file);

/// `base` with the keys of `overrides` (key=value,...) replacing its own:
/// the user's --strategy wins over a launch config.
std::string merge_strategies(const std::string& base, const std::string& overrides);

}  // namespace dtsim::plan
