// Every row of Megatron-LM's weak-scaling table (Narayanan et al., SC'21,
// Table 1: GPT 1.7B to 1T on up to 3072 A100 80GB) predicted with the default
// A100 model, and compared on the table's own metric: its FLOP formula
// 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) divided by the predicted step time.
//
// Per-row settings come from the table and the paper's text: fp16, micro-batch
// 1, full activation recomputation, unfused attention (2021), the interleaved
// schedule where pp > 1, and gradients all-reduced after the backward pass
// (Megatron-LM's 2021 DDP did not overlap them; overlap came in 2023). The interleaving degree per row is not published;
// the rule used for every row is 2 virtual stages when layers/pp is even,
// else 1. No constant is fitted to any row.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dtsim/driver/simulation.hpp"

using namespace dtsim;

namespace {

std::filesystem::path table_path() {
  return std::filesystem::path(DTSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "megatron-sc21-table1.json";
}

TEST(MegatronSc21, PredictedTflopsPerGpuWithinTenPercentOnAverage) {
  if (!std::filesystem::exists(table_path())) GTEST_SKIP() << "no " << table_path() << " (../shared is not beside the checkout)";
  std::ifstream in(table_path());
  nlohmann::json table = nlohmann::json::parse(in);
  const double seq = table["common"]["seq_len"], vocab = table["common"]["vocab"];
  double total_error = 0;
  int rows = 0;
  fmt::print("{:>8} {:>5} {:>3} {:>3} {:>4} {:>10} {:>10} {:>7}\n", "params", "gpus", "tp", "pp", "vpp", "published",
             "predicted", "error");
  for (const auto& row : table["rows"]) {
    const int layers = row["layers"], hidden = row["hidden"], heads = row["heads"];
    const int tp = row["tp"], pp = row["pp"], gpus = row["gpus"], batch = row["global_batch"];
    const int vpp = pp > 1 && (layers / pp) % 2 == 0 ? 2 : 1;
    const auto model_file = std::filesystem::temp_directory_path() / fmt::format("megatron_{}.json", rows);
    std::ofstream(model_file) << nlohmann::json{{"name", fmt::format("gpt-{}b", row["params_b"].get<double>())},
                                                 {"kind", "transformer"}, {"layers", layers}, {"hidden", hidden},
                                                 {"heads", heads}, {"vocab", static_cast<int>(vocab)},
                                                 {"seq_len", static_cast<int>(seq)}, {"positions", "learned"}}
                                      .dump();
    std::string strategy = fmt::format("tp={},pp={},gbs={},mbs=1,dtype=fp16,recompute=full,attention=standard,overlap=off,p2p_overlap=off{}", tp, pp,
                                       batch, vpp > 1 ? fmt::format(",vpp={}", vpp) : std::string());
    driver::Simulation sim =
        driver::simulate({model_file.string(), "superpod-a100", strategy, gpus / 8, std::nullopt, std::nullopt, false, {}, {}});
    std::filesystem::remove(model_file);
    const double l = layers, h = hidden;
    const double flops = 96.0 * batch * seq * l * h * h * (1 + seq / (6 * h) + vocab / (16 * l * h));
    const double predicted = flops / sim.report.step_time.value() / gpus / 1e12;
    const double published = row["tflops_per_gpu"];
    const double error = (predicted - published) / published;
    fmt::print("{:>7.1f}B {:>5} {:>3} {:>3} {:>4} {:>10.0f} {:>10.1f} {:>+6.1f}%\n", row["params_b"].get<double>(), gpus,
               tp, pp, vpp, published, predicted, 100 * error);
    total_error += std::abs(error);
    ++rows;
  }
  const double mean = total_error / rows;
  fmt::print("mean absolute error over {} rows: {:.1f}%\n", rows, 100 * mean);
  // Issue 3's goal: a mean absolute error of 10% at most (README, "Validation").
  EXPECT_LE(mean, 0.10);
}

}  // namespace
