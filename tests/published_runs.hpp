#pragma once
// How each end-to-end case of ../shared/validation/published-runs.json (and
// the Megatron SC'21 table) becomes a dtsim prediction: the model, the
// cluster, the strategy, and the metric the source printed. What a source
// states is taken from the case; what it does not state is an assumption,
// named in `Source::assumed` and printed with the table.
//
// Shared by the validation test and `bench/` so both predict the same thing.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::validation {

enum class Metric {
  kMegatronTflops,   ///< Megatron-LM's num_floating_point_operations / time / GPUs (no recompute counted)
  kSc21Tflops,       ///< SC'21 eq. 3 (counts the recomputed forward)
  kIterationTime,    ///< seconds per step, as printed
  kTokensPerGpu,     ///< tokens per second per GPU
  kFa2Tflops,        ///< FlashAttention-2 Table 1: (6·s·N + 12·l·h·s²) per sequence
  kMegatronMfu,      ///< kMegatronTflops over the bf16 dense peak
  /// ml-engineering's benchmark.py: (6·N_dense·s + 6·s²·d_head·heads·L) per
  /// sequence, N_dense the blocks' weights and the LM head (causal attention).
  kCausalTflops,
};

struct Case {
  std::string id;
  std::string source;      ///< short name of the source, the table's grouping
  std::string generation;  ///< V100, A100, H100, H200, B200
  nlohmann::json model;    ///< a dtsim transformer workload
  std::string cluster;     ///< bundled topology
  int nodes = 1;
  int gpus = 1;
  std::string strategy;
  Metric metric = Metric::kIterationTime;
  double measured = 0;  ///< in the metric's unit
};

struct Source {
  std::string name;
  std::string assumed;  ///< what the source does not state and dtsim assumes
};

std::filesystem::path shared_validation_dir();
/// The cases of published-runs.json of one category ("kernel_gemm",
/// "end_to_end_training", ...); empty when ../shared is not beside the checkout.
nlohmann::json published_cases(const std::string& category);
const std::vector<Source>& sources();
/// Every end-to-end case of published-runs.json and every SC'21 row; empty
/// when ../shared is not beside the checkout.
std::vector<Case> end_to_end_cases();
/// A file of published measurements kept in this repository (tests/validation/<name>).
nlohmann::json validation_json(const std::string& name);
/// Published runs that are not in ../shared (tests/validation/outside-shared.json).
std::vector<Case> outside_shared_cases();

}  // namespace dtsim::validation
