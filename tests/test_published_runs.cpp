// Every end-to-end case of ../shared/validation/published-runs.json and every
// row of the Megatron SC'21 table predicted with the bundled device profiles
// (no calibration, nothing fitted to a row), compared in each source's own
// metric. Positive errors are optimistic: dtsim predicts more throughput (a
// shorter step) than was measured. Prints the table per source and per GPU
// generation; holds issue 12's targets as far as they are met (README,
// "Validation").
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/plan/lower.hpp"
#include "dtsim/report/critical_path.hpp"
#include "dtsim/topo/cluster_loader.hpp"
#include "kernel_model_of.hpp"
#include "published_runs.hpp"

using namespace dtsim;
using validation::Case;
using validation::Metric;

namespace {

struct Result {
  Case c;
  double predicted = 0;
  double error = 0;  ///< positive: optimistic
  bool fits = true;  ///< dtsim's own memory model: the assumed layout fits the GPU
};

// ml-engineering's benchmark.py (estimate_tflos) per sequence, for a gated
// (SwiGLU) MLP as its Llama rows have: the dense path 6·N_dense·s, N_dense the
// blocks' weights and the LM head; attention 6·s²·d_head·heads·L (causal).
struct CausalFlops {
  double dense = 0, attention = 0;
};
CausalFlops causal_flops(const model::Graph& graph) {
  const auto& t = *graph.transformer;
  const double s = static_cast<double>(graph.seq_len), l = static_cast<double>(t.layers);
  const double h = static_cast<double>(t.hidden), v = static_cast<double>(t.vocab), f = static_cast<double>(t.ffn_hidden);
  const double d = static_cast<double>(t.head_dim), q = static_cast<double>(t.heads) * d;
  const double kv = static_cast<double>(t.kv_heads) * d;
  const double dense = l * (3.0 * h * f + h * (2.0 * q + 2.0 * kv)) + v * h;
  return {6.0 * dense * s, 6.0 * s * s * q * l};
}

double predicted_metric(const Case& c, const model::Graph& graph, double step_s, double global_batch) {
  const auto& t = *graph.transformer;
  const double b = global_batch, s = static_cast<double>(graph.seq_len), l = static_cast<double>(t.layers);
  const double h = static_cast<double>(t.hidden), v = static_cast<double>(t.vocab), f = static_cast<double>(t.ffn_hidden);
  const double gpus = c.gpus;
  // Megatron-LM training.py num_floating_point_operations (no GQA, no gated MLP here).
  const double megatron = 12.0 * b * s * l * h * h * ((2.0 + s / h) + f / h + v / (2.0 * l * h));
  switch (c.metric) {
    case Metric::kMegatronTflops: return megatron / step_s / gpus / 1e12;
    case Metric::kMegatronMfu: return megatron / step_s / gpus / 989e12;
    case Metric::kSc21Tflops:
      return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)) / step_s / gpus / 1e12;
    case Metric::kIterationTime: return step_s;
    case Metric::kTokensPerGpu: return b * s / step_s / gpus;
    case Metric::kFa2Tflops:
      return b * (6.0 * s * graph.parameter_count() + 12.0 * l * h * s * s) / step_s / gpus / 1e12;
    case Metric::kCausalTflops: {
      const CausalFlops per_sequence = causal_flops(graph);
      return b * (per_sequence.dense + per_sequence.attention) / step_s / gpus / 1e12;
    }
  }
  return 0;
}

// A case's model, and dtsim's prediction of it on the case's cluster and strategy.
struct CasePrediction {
  model::Graph graph;
  driver::Prediction prediction;
};
CasePrediction predict_case(const Case& c) {
  model::Graph graph = model::load_workload_json(c.model, c.id, {});
  hw::DeviceCatalog catalog;
  topo::Cluster cluster =
      topo::load_cluster(driver::resolve_input(c.cluster, "topologies", "--cluster"), catalog, {c.nodes});
  driver::SimulationRequest request;
  request.strategy = c.strategy;
  driver::Prediction p = driver::predict(graph, cluster, request);
  return {std::move(graph), std::move(p)};
}

Result predict(const Case& c) {
  const auto [graph, p] = predict_case(c);
  Result r{c, predicted_metric(c, graph, p.report.step_time.value(), p.strategy.s.gbs), 0, p.report.fits_in_memory};
  r.error = c.metric == Metric::kIterationTime ? c.measured / r.predicted - 1 : r.predicted / c.measured - 1;
  return r;
}

// Per group: the mean |error| the targets speak of, and the signed mean,
// lowest and highest error, which say whether a group leans optimistic.
struct Summary {
  double sum = 0, signed_sum = 0, worst = 0, lowest = 0, highest = 0;
  int n = 0;
  void add(double e) {
    sum += std::abs(e);
    signed_sum += e;
    worst = std::max(worst, std::abs(e));
    lowest = n ? std::min(lowest, e) : e;
    highest = n ? std::max(highest, e) : e;
    ++n;
  }
  [[nodiscard]] double mean() const { return n ? sum / n : 0; }
  [[nodiscard]] double signed_mean() const { return n ? signed_sum / n : 0; }
};

void print_summary(const std::string& name, const Summary& s) {
  fmt::print("{:<22} {:>5} {:>9.1f}% {:>+9.1f}% {:>+9.1f}% {:>+9.1f}%\n", name, s.n, 100 * s.mean(), 100 * s.signed_mean(),
             100 * s.lowest, 100 * s.highest);
}

// Predicts every case, prints the table and the summaries per source and per
// GPU generation, and returns the summaries per source and over all cases.
std::pair<std::map<std::string, Summary>, Summary> run_table(const std::vector<Case>& cases) {
  std::vector<Result> results;
  for (const Case& c : cases) results.push_back(predict(c));

  std::map<std::string, Summary> by_source, by_generation;
  Summary all;
  fmt::print("{:<44} {:>5} {:>12} {:>12} {:>8}\n", "case", "gpus", "measured", "predicted", "error");
  std::string source;
  for (const Result& r : results) {
    if (r.c.source != source) fmt::print("-- {}\n", source = r.c.source);
    // A layout dtsim says does not fit is not what the source ran (it must
    // have recomputed or used smaller micro-batches): its row is suspect.
    fmt::print("{:<44} {:>5} {:>12.4g} {:>12.4g} {:>+7.1f}%{}\n", r.c.id, r.c.gpus, r.c.measured, r.predicted, 100 * r.error,
               r.fits ? "" : "  (does not fit: the assumed layout is not the source's)");
    by_source[r.c.source].add(r.error);
    by_generation[r.c.generation].add(r.error);
    all.add(r.error);
  }
  fmt::print("\n{:<22} {:>5} {:>10} {:>10} {:>10} {:>10}\n", "source", "cases", "mean |e|", "mean e", "lowest", "highest");
  for (const auto& [name, s] : by_source) print_summary(name, s);
  for (const auto& [name, s] : by_generation) print_summary(name, s);
  print_summary("all", all);
  fmt::print("\nassumed where the source is silent:\n");
  for (const auto& s : validation::sources()) {
    if (by_source.count(s.name)) fmt::print("  {}: {}\n", s.name, s.assumed);
  }
  return {by_source, all};
}

TEST(PublishedRuns, EndToEndWithinTargets) {
  const std::vector<Case> cases = validation::end_to_end_cases();
  if (cases.empty()) GTEST_SKIP() << "no " << validation::shared_validation_dir() << " (../shared is not beside the checkout)";
  const auto [by_source, all] = run_table(cases);

  // Issue 12's target is a mean |error| of 5% per source and no case beyond
  // 12%; it is not met (README, "Validation"). Until it is, these bounds hold
  // what the model reaches today, so that no change makes it worse unseen.
  const std::map<std::string, double> bound = {// each run as the repository's training configs set it
                                               // (2.7B's head size of 128 at 2k, the batches, ZeRO-1): 7.9% to 7.3%;
                                               // FlashAttention-1 fitted to its bars in FlashAttention-2's image: 6.8%
                                               {"flashattention-2", 0.07},
                                               // NCCL's staged traffic (3x an all-gather's) and its measured
                                               // cost to Hopper's GEMMs: 12.3% to 11.9%
                                               {"llm-foundry-mpt", 0.12},
                                               // the H100's GEMMs beside held SMs as measured (1.15-1.35x,
                                               // not a second wave's 2x): llm-foundry 9.9% to 12.1%
                                               {"megatron-core-h100", 0.125},
                                               // without the fused kernels of 2021 (fusions=off): 7.4% to 5.0%;
                                               // the V100 on DeepBench's measured GEMMs (anchor and fitted shape
                                               // figures): 2.7%, issue 12's 5% met; the A100's unfused attention
                                               // GEMMs at their measured rate: 2.8% to 5.1% (its A100 rows,
                                               // PyTorch's softmax chain of 2020, turn pessimistic)
                                               {"megatron-lm-2020", 0.055},
                                               // with its authors' arguments (examples/sc21/): 7.6% to 10.8%;
                                               // the dropout mask's traffic: 10.0%; the causal softmax kernel's
                                               // bytes as its code moves them (half a pass less forward, one
                                               // less backward): 11.1%; the head and the embedding no longer
                                               // recomputed (Megatron checkpoints its transformer layers only): 12.3%;
                                               // the context's layout copy and the Q, K, V gradients' cat: 12.0%;
                                               // Megatron's own optimizer passes, the receiving stage's gather and
                                               // the fp16 gradients' add into 16-bit main gradients: 9.8%; the
                                               // A100's unfused attention GEMMs at their measured rate: 4.4%
                                               {"megatron-sc21", 0.05}};
  for (const auto& [name, s] : by_source) {
    ASSERT_TRUE(bound.count(name)) << name;
    EXPECT_LE(s.mean(), bound.at(name)) << name << " (issue 12's target: 0.05)";
  }
  EXPECT_LE(all.mean(), 0.082);  // 8.1% (8.3% before NCCL's staged traffic, 8.7% before the A100's unfused attention GEMM figure, 8.4% before
                                 // FlashAttention-2's rows ran their repository's configs)
  EXPECT_EQ(all.n, 61);  // 50 cases of published-runs.json (one gives two ends) + 10 SC'21 rows
}

// Runs published outside ../shared, in the repository with their sources: the
// H200 and B200 rows dtsim had no check on, torchtitan's FSDP2 runs, Llama 3
// 405B and DeepSeek-V3 at thousands of GPUs, BLOOM-176B, vTrain's 109
// Megatron-DeepSpeed runs on up to 512 A100s, and the 185 rows of
// llm-foundry's MPT tables that shared/ does not hold, and its 18 at 128 to
// 512 H100s. The bounds hold today's error so it
// cannot grow unseen (the README says where it comes from).
TEST(PublishedRuns, OutsideSharedWithinTodaysError) {
  const std::vector<Case> cases = validation::outside_shared_cases();
  ASSERT_EQ(cases.size(), 2U + 8U + 6U + 2U + 1U + 1U + 185U + 18U + 11U + 109U);
  const auto [by_source, all] = run_table(cases);
  struct Bound {
    double mean, worst;
  };
  const std::map<std::string, Bound> bound = {// DeepSpeed's bf16 model reduces in bf16 (framework=deepspeed):
                                              // 8.5% and 29.9% became 11.0% and 31.2%; Blackwell's GEMM shape
                                              // figures fitted to XLA's sm_100 table: 22.6% and 33.1%; DeepSpeed's
                                              // ZeRO-2 path as stage_1_and_2.py runs it: 19.4% and 29.6%
                                              {"ml-engineering", {0.20, 0.30}},
                                              // Korthikanti et al.'s runs, optimistic on every row like SC'21's
                                              // (6.2% and 10.4%, 5.7% and 9.2% with the dropout mask's traffic,
                                              // 6.4% and 10.9% with the causal softmax kernel's own bytes, 7.0%
                                              // with only the blocks recomputed, 6.8% and 10.5% with the layout copies;
                                              // 3.2% and 7.3% with Megatron's own optimizer passes, the receiving
                                              // stage's gather and the fp16 gradients' add into main gradients;
                                              // 1.3% and 4.0% with the A100's unfused attention GEMM figure)
                                              {"megatron-2022", {0.02, 0.045}},
                                              // worst: the GB300 and the GB200 (Blackwell Ultra's doubled
                                              // exponent rate for attention and 1,400 W dtsim takes as the
                                              // B300's), then the 405B on 128 B200s; GEMM rows divided by
                                              // cp took the mean from 9.0% to 7.6%; FP8 tiles' fixed part
                                              // at twice the k took the GB300 from -12.7% to -13.0%
                                              {"megatron-bridge", {0.09, 0.135}},
                                              // dtsim leaves out part of what bounds these MoE runs (README,
                                              // "Megatron-Bridge's Qwen3 MoE rows"): today's error, held;
                                              // 1.14 and 2.61 with the 8 us launch, 0.56 and 1.66 before
                                              // the dispatcher's sync, 0.47 and 1.16 before the router's,
                                              // the dispatcher's and the permutations' kernels (0.345 and
                                              // 0.936 with them, before the B200 row's CUDA graphs of its
                                              // router and preprocessing; 0.390 and 0.936 before the GB200
                                              // row's Grace host, which took it from +40.1% to -23.6%)
                                              {"megatron-bridge MoE", {0.37, 0.96}},
                                              // the H100's GEMMs beside held SMs as measured: 7.7% to 8.8%
                                              {"llm-foundry H100 bf16", {0.09, 0.35}},
                                              {"llm-foundry H100 fp8", {0.06, 0.11}},
                                              // 128 to 512 H100s, January 2024 (README, "llm-foundry at 128 to 512
                                              // H100s"): optimistic on every row, most where flash-attn 2 ran and
                                              // most at 512 GPUs, where the source loses 3-10% per GPU that dtsim
                                              // does not
                                              {"llm-foundry H100 128+", {0.205, 0.37}},
                                              {"llm-foundry A100 80GB", {0.06, 0.40}},
                                              // worst: MPT-70B on 64 GPUs, which the source
                                              // itself puts at 276 tokens/s/GPU against 376 on 128
                                              {"llm-foundry A100 40GB", {0.085, 0.53}},
                                              // FSDP2 on 64 A100s, optimistic on every row like the
                                              // llm-foundry FSDP rows (README, "torchtitan"); worst:
                                              // Llama 2 70B at batch 1 with the per-op policy, whose
                                              // FSDP collectives are the largest share of its step.
                                              // 13.9% and 23.1% before fully_shard's copies
                                              {"torchtitan", {0.105, 0.16}},
                                              // Llama 3 405B on 8,192 and 16,384 H100s: optimistic at
                                              // both scales by about the same share (README, "Llama 3 405B")
                                              {"llama3-paper", {0.21, 0.21}},
                                              // DeepSeek-V3 on 2,048 H800s with DeepEP's FP8 dispatch
                                              // (README, "DeepSeek-V3"); 0.235 with Megatron-Core's
                                              // all-to-all, 0.134 while a pass paused between its levels,
                                              // 0.036 (pessimistic) with the levels one after the other
                                              // where DeepEP's kernel runs them at once
                                              {"deepseek-v3", {0.11, 0.11}},
                                              // BLOOM-176B on 384 A100s (README, "BLOOM"): optimistic as the
                                              // SC'21 rows of the same kernels are, by more; its pipeline
                                              // sends split over tp, as DeepSpeed's PipelineEngine partitions
                                              // them (0.243 with every rank's whole activation), and
                                              // BF16_Optimizer's fp32 gradients summed every micro-batch
                                              // (0.273 before); 0.164 with the A100's unfused attention GEMMs
                                              // at their measured rate
                                              {"bloom", {0.17, 0.17}},
                                              // vTrain's 109 runs on Megatron-DeepSpeed (README, "vTrain's
                                              // A100 runs"): right at 175B, optimistic as the hidden size
                                              // shrinks, as SC'21's rows are. Worst: rows the source
                                              // measured 1.5-2x slower than its own neighbours of one
                                              // layout (3.6B at tp 8 and 64 sequences a micro-batch,
                                              // 39.1B at tp 2). Their pipeline sends split over tp as the engine
                                              // partitions them: 175B 2.3% to 3.4%, 39.1B 15.0% to 16.3%. The
                                              // A100's unfused attention GEMMs at their measured rate: 3.6B
                                              // 21.9% to 12.6%, 18.4B 14.3% to 10.0%, 39.1B 15.0% to 11.2%
                                              {"vtrain 3.6B", {0.13, 0.98}},
                                              {"vtrain 18.4B", {0.105, 0.27}},
                                              {"vtrain 39.1B", {0.115, 0.66}},
                                              {"vtrain 175B", {0.02, 0.04}}};
  for (const auto& [name, s] : by_source) {
    ASSERT_TRUE(bound.count(name)) << name;
    EXPECT_LE(s.mean(), bound.at(name).mean) << name;
    EXPECT_LE(s.worst, bound.at(name).worst) << name;
  }
  const Summary& mleng = by_source.at("ml-engineering");
  EXPECT_GT(mleng.lowest, 0.0) << "ml-engineering: no longer optimistic; tighten the bound";
}

// ml-engineering's step decomposition (tests/validation/ml-engineering-decomposition.json):
// the two steps of its H200-against-B200 study, each split as bench_decompose.py
// splits the measured one, into FlashAttention's kernels and everything else by
// attention's share of the kernel time that is not NCCL's (here: the critical
// path's compute and optimizer time), and the two FlashAttention kernels alone.
// The steps' totals say by how much dtsim is off; these say where. The bounds
// hold what they say today (README, "ml-engineering's step decomposition").
TEST(PublishedRuns, MlEngineeringDecompositionPlacesTheError) {
  const nlohmann::json table = validation::validation_json("ml-engineering-decomposition.json");
  const std::vector<Case> cases = validation::outside_shared_cases();
  struct Split {
    double attention = 0, rest = 0;  ///< signed errors, positive: optimistic
  };
  std::map<std::string, Split> split;
  fmt::print("{:<10} {:<16} {:>9} {:>10} {:>8} {:>12} {:>13}\n", "gpu", "bucket", "measured", "predicted", "error",
             "measured ms", "predicted ms");
  for (const auto& row : table["steps"]) {
    const auto c = std::find_if(cases.begin(), cases.end(), [&](const Case& k) { return k.id == row["id"]; });
    ASSERT_NE(c, cases.end()) << row["id"];
    const auto [graph, p] = predict_case(*c);
    const report::CriticalPath path = report::critical_path(p.tasks, p.timeline, p.costs.kernel_op_share);
    double attention_s = 0, kernels_s = 0;
    for (const report::PathShare& share : path.shares) {
      if (share.kind == "compute: attention") attention_s += share.time.value();
      if (share.kind.rfind("compute", 0) == 0 || share.kind == "optimizer") kernels_s += share.time.value();
    }
    ASSERT_GT(kernels_s, 0) << c->id;
    // One sequence a GPU and step: the FLOPs per GPU are one sequence's.
    const double step_s = p.report.step_time.value(), attention_share = attention_s / kernels_s;
    const CausalFlops flops = causal_flops(graph);
    const double attention_tflops = flops.attention / (step_s * attention_share) / 1e12;
    const double rest_tflops = flops.dense / (step_s * (1 - attention_share)) / 1e12;
    const double total_tflops = (flops.dense + flops.attention) / step_s / 1e12;
    Split& e = split[row["gpu"]];
    e.attention = attention_tflops / row["attention_tflops"].get<double>() - 1;
    e.rest = rest_tflops / row["rest_tflops"].get<double>() - 1;
    const std::string gpu = row["gpu"];
    const auto print = [&](const char* bucket, double measured_tflops, double predicted_tflops, double flop, double error) {
      fmt::print("{:<10} {:<16} {:>9.0f} {:>10.0f} {:>+7.1f}% {:>12.1f} {:>13.1f}\n", gpu, bucket, measured_tflops,
                 predicted_tflops, 100 * error, 1e3 * flop / (measured_tflops * 1e12), 1e3 * flop / (predicted_tflops * 1e12));
    };
    print("attention", row["attention_tflops"], attention_tflops, flops.attention, e.attention);
    print("everything else", row["rest_tflops"], rest_tflops, flops.dense, e.rest);
    print("total", row["total_tflops"], total_tflops, flops.dense + flops.attention,
          total_tflops / row["total_tflops"].get<double>() - 1);
  }
  // The kernels alone at the boost clock of a short loop: FlashAttention-4 on
  // the B200 over FlashAttention-3 on the H200, forward and backward.
  const hw::DeviceCatalog catalog;
  const auto kernel_time = [&](const std::string& device, const std::string& kernel, std::int64_t seq) {
    const hw::KernelModel model = test_support::model_of(catalog, device);
    const hw::AttentionKernel* k = model.figures().find_attention(kernel);
    if (k == nullptr) {
      ADD_FAILURE() << device << " has no " << kernel;
      return std::nan("");
    }
    // Batch 1, 32 query heads of 128, causal, as bench_flash_attn.py.
    return model.attention(*k, 32, seq, 128, true, false).value() + model.attention(*k, 32, seq, 128, true, true).value();
  };
  std::map<std::int64_t, double> ratio_error;
  for (const auto& point : table["isolated_ratio"]) {
    const std::int64_t seq = point["seq_len"];
    const double predicted = kernel_time("H200-SXM", "flash3", seq) / kernel_time("B200", "flash4", seq);
    ratio_error[seq] = predicted / point["b200_over_h200"].get<double>() - 1;
    fmt::print("FlashAttention-4 on the B200 over -3 on the H200, {} tokens: measured {:.2f}x, predicted {:.2f}x ({:+.1f}%)\n",
               seq, point["b200_over_h200"].get<double>(), predicted, 100 * ratio_error[seq]);
  }
  // A bucket holds its kernels and its share of the step's idle time, so the
  // kernels ran at least at the measured bucket's rate: on the H200
  // FlashAttention-3 ran in the step at 97.9% of dtsim's burst rate or more,
  // where dtsim holds it at the share a matmul keeps at the power limit
  // (0.888) and so is 15.7% slow; on the B200 FlashAttention-4 ran at 96% of
  // dtsim's held rate or more. What the dense path loses is not found (README,
  // "ml-engineering's step decomposition").
  const auto within = [](double e, double lo, double hi, const std::string& what) {
    EXPECT_GE(e, lo) << what << ": moved past today's gap; say why in the README and tighten";
    EXPECT_LE(e, hi) << what << ": grew past today's gap";
  };
  within(split["H200-SXM"].attention, -0.20, -0.11, "H200 attention bucket");
  within(split["B200"].attention, -0.07, 0.02, "B200 attention bucket");
  within(split["H200-SXM"].rest, 0.10, 0.19, "H200 dense bucket");
  within(split["B200"].rest, 0.30, 0.40, "B200 dense bucket");
  within(ratio_error[8192], 0.17, 0.27, "FlashAttention-4 over -3 at 8k");
  within(ratio_error[32768], 0.11, 0.21, "FlashAttention-4 over -3 at 32k");
}

}  // namespace

// Every layout the published runs use builds as Megatron-Core lays it out:
// the GPU count, each group's size, and every block on exactly one stage.
TEST(PublishedRuns, EveryPublishedLayoutBuildsWithItsRanksGroupsAndStages) {
  const std::vector<Case> cases = validation::end_to_end_cases();
  if (cases.empty()) GTEST_SKIP() << "no " << validation::shared_validation_dir() << " (../shared is not beside the checkout)";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id);
    const auto [graph, p] = predict_case(c);
    const plan::Strategy& s = p.strategy.s;
    EXPECT_EQ(p.tasks.world, c.gpus);
    EXPECT_EQ(std::int64_t{s.tp} * s.pp * s.cp * s.ep * s.dp, c.gpus);
    for (const plan::CommGroup& g : p.tasks.groups) {
      const auto n = static_cast<int>(g.ranks.size());
      if (g.kind == plan::GroupKind::kTp) {
        EXPECT_EQ(n, s.tp);
      }
      if (g.kind == plan::GroupKind::kDp) {
        EXPECT_EQ(n, s.dp * s.cp * s.ep);
      }
      // Every copy of a group has its size and no rank twice.
      std::set<int> seen(g.ranks.begin(), g.ranks.end());
      EXPECT_EQ(static_cast<int>(seen.size()), n);
      for (const auto& copy : g.copies) EXPECT_EQ(copy.size(), g.ranks.size());
    }
    std::vector<int> owner(graph.layers.size(), 0);
    for (const auto& stage : plan::stage_layers(graph, s)) {
      for (int layer : stage) ++owner[static_cast<std::size_t>(layer)];
    }
    EXPECT_TRUE(std::all_of(owner.begin(), owner.end(), [](int n) { return n == 1; }));
  }
}
