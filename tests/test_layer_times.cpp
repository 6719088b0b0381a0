// One transformer layer's forward and backward against Korthikanti et al.'s
// Table 4 (tests/validation/korthikanti-layer-times.json): the 22B model on
// 8 A100s under tensor parallelism, with and without sequence parallelism
// and recomputation. A layer-level check between the kernel tables and the
// end-to-end rows: it says whether an end-to-end error lies in the layers or
// around them (the head, the optimizer, the pipeline). Nothing is fitted to it.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dtsim/driver/simulation.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/topo/cluster_loader.hpp"

using namespace dtsim;
using nlohmann::json;

namespace {

struct LayerTimes {
  double forward_ms = 0, backward_ms = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A layer's time is the distance between the starts of consecutive layers'
// first kernels on rank 0's compute stream (a layer's own communication and
// its waits included), forward from layer to layer, backward (with the
// recomputation) from the last layer down; the median over the blocks in the
// middle, away from the embedding and the head.
LayerTimes layer_times(const driver::Prediction& p, int layers) {
  std::vector<std::optional<double>> forward(layers + 2), backward(layers + 2);
  for (std::size_t id = 0; id < p.tasks.tasks.size(); ++id) {
    const plan::Task& t = p.tasks.tasks[id];
    if (t.rank != 0 || t.kind != plan::TaskKind::kCompute || t.layer < 1 || t.layer > layers) continue;
    if (t.phase != plan::Phase::kForward && t.phase != plan::Phase::kBackward) continue;
    auto& first = t.phase == plan::Phase::kForward ? forward : backward;
    const double start_ms = static_cast<double>(p.timeline.spans[id].start.count) * 1e-6;
    auto& slot = first[static_cast<std::size_t>(t.layer)];
    slot = slot ? std::min(*slot, start_ms) : start_ms;
  }
  std::vector<double> fwd, bwd;
  for (int l = 2; l < layers - 1; ++l) {
    const auto i = static_cast<std::size_t>(l);
    if (forward[i] && forward[i + 1]) fwd.push_back(*forward[i + 1] - *forward[i]);
    if (backward[i] && backward[i + 1]) bwd.push_back(*backward[i] - *backward[i + 1]);
  }
  return {median(fwd), median(bwd)};
}

}  // namespace

TEST(LayerTimes, Korthikanti22BLayerOnEightA100s) {
  const auto root = std::filesystem::path(DTSIM_SOURCE_DIR);
  const json table = json::parse(std::ifstream(root / "tests/validation/korthikanti-layer-times.json"));
  const json& m = table.at("model");
  const int layers = m.at("layers");
  const json model{{"name", "korthikanti-22b"}, {"kind", "transformer"}, {"layers", layers},
                   {"hidden", m.at("hidden")},  {"heads", m.at("heads")}, {"vocab", m.at("vocab")},
                   {"seq_len", m.at("seq_len")}, {"positions", "learned"}, {"bias", true}};
  const model::Graph graph = model::load_workload_json(model, "korthikanti-22b", {});
  hw::DeviceCatalog catalog;
  const topo::Cluster cluster =
      topo::load_cluster(driver::resolve_input("superpod-a100", "topologies", "--cluster"), catalog, {1});
  int rows = 0;
  double abs_sum = 0;
  std::vector<double> measured_total, predicted_total, backward_ms;
  for (const json& row : table.at("rows")) {
    driver::SimulationRequest request;
    request.strategy = table.at("strategy").get<std::string>() + "," + row.at("strategy").get<std::string>();
    const LayerTimes t = layer_times(driver::predict(graph, cluster, request), layers);
    const double fwd = row.at("forward_ms"), bwd = row.at("backward_ms");
    const double e_fwd = t.forward_ms / fwd - 1, e_bwd = t.backward_ms / bwd - 1;
    fmt::print("  {:<24} forward {:>5.2f} ms (measured {:>4.1f}, {:+5.1f}%)", row.at("experiment").get<std::string>(),
               t.forward_ms, fwd, 100 * e_fwd);
    fmt::print("  backward {:>5.2f} ms (measured {:>4.1f}, {:+5.1f}%)\n", t.backward_ms, bwd, 100 * e_bwd);
    // Today's gaps, held so that they cannot grow unseen. Since the A100's
    // unfused attention GEMMs run at their measured rate (thirty-seventh
    // session) the forward reads +3.6% to +4.0% (it read -2%) and the
    // backward -0.1% to +1.9% (it read -4% to -7%).
    EXPECT_LE(std::abs(e_fwd), 0.05) << row.at("experiment");
    EXPECT_LE(std::abs(e_bwd), 0.04) << row.at("experiment");
    abs_sum += std::abs(e_fwd) + std::abs(e_bwd);
    rows += 2;
    measured_total.push_back(fwd + bwd);
    predicted_total.push_back(t.forward_ms + t.backward_ms);
    backward_ms.push_back(t.backward_ms);
  }
  ASSERT_EQ(rows, 10);
  fmt::print("  10 figures: {:.1f}% mean |error|\n", 100 * abs_sum / rows);
  // The paper's own comparison, each technique's overhead over the baseline
  // layer: recomputing the whole layer costs far more than recomputing its
  // attention, and sequence parallelism takes a little off either.
  const auto overhead = [](const std::vector<double>& v, int i) { return v[static_cast<std::size_t>(i)] / v[0] - 1; };
  for (const auto* v : {&measured_total, &predicted_total}) {
    EXPECT_LT(overhead(*v, 1), 0.0);
    EXPECT_GT(overhead(*v, 2), 0.30);
    EXPECT_LT(overhead(*v, 3), 0.10);
    EXPECT_LT(overhead(*v, 4), overhead(*v, 3));
  }
  EXPECT_NEAR(overhead(predicted_total, 2), overhead(measured_total, 2), 0.05);  // 39% measured
  // Selective recomputation reruns exactly the attention core (QK^T, the
  // fused softmax, dropout, AV: checkpoint_core_attention), so its backward
  // less the baseline's is the core's forward, timed inside the layer:
  // 1.3 ms measured (13.2 - 11.9, each rounded to 0.1 ms, so 1.2 to 1.4),
  // dtsim's 1.53 ms (1.10 ms before the A100's unfused GEMM figure).
  const json& rows_of = table.at("rows");
  const double core_measured = rows_of[3].at("backward_ms").get<double>() - rows_of[0].at("backward_ms").get<double>();
  const double core_dtsim = backward_ms[3] - backward_ms[0];
  fmt::print("  the attention core's forward (selective's backward less the baseline's): {:.2f} ms, measured {:.1f} ms\n",
             core_dtsim, core_measured);
  EXPECT_GT(core_dtsim, 1.0 * core_measured);
  EXPECT_LT(core_dtsim, 1.3 * core_measured);  // today 1.18 of it: at this shape the core is slow
}
