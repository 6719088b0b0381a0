#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/search/capacity_plan.hpp"
#include "dtsim/search/strategy_search.hpp"
#include "dtsim/topo/cluster_loader.hpp"

using namespace dtsim;

namespace {

struct Inputs {
  hw::DeviceCatalog catalog;
  model::Graph graph = model::load_workload(driver::data_dir() / "workloads" / "gpt3-1.3b.json");
  topo::Cluster cluster = topo::load_cluster(driver::data_dir() / "topologies" / "dgx-a100.json", catalog, {2});
};

// GPT-3 1.3B's plan for 1e10 tokens at a global batch of 64; devices and GPU counts the test's.
search::PlanOptions gpt3_plan() {
  search::PlanOptions o;
  o.tokens = 1e10;
  o.global_batch = 64;
  return o;
}

}  // namespace

TEST(Search, EveryEnumeratedStrategyResolvesAndIsDistinct) {
  Inputs in;
  search::SearchOptions o;
  o.global_batch = 64;
  auto all = search::enumerate(in.graph, in.cluster, o);
  EXPECT_GT(all.size(), 100u);
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size());
  for (const std::string& s : all) EXPECT_NO_THROW(plan::resolve(plan::parse_strategy(s), in.graph, in.cluster)) << s;
}

TEST(Search, MoeLayoutsIncludeWholeExpertsOnAnEpGroupAcrossTheTpRanks) {
  Inputs in;
  in.graph = model::load_workload(driver::data_dir() / "workloads" / "mixtral-8x7b.json");
  in.cluster = topo::load_cluster(driver::data_dir() / "topologies" / "superpod-h100.json", in.catalog, {4});
  search::SearchOptions o;
  o.global_batch = 64;
  const auto all = search::enumerate(in.graph, in.cluster, o);
  std::size_t expert_grid = 0;
  for (const std::string& s : all) {
    const plan::ResolvedStrategy r = plan::resolve(plan::parse_strategy(s), in.graph, in.cluster);
    if (!r.expert_grid()) continue;
    ++expert_grid;
    EXPECT_EQ(r.s.etp, 1) << s;
    EXPECT_GT(r.s.tp, 1) << s;
  }
  EXPECT_GT(expert_grid, 100u);
  // ep 8 with tp 4, pp 2 on 32 GPUs leaves dp 4, which ep 8 cannot divide:
  // only the expert grid (etp 1 x ep 8 x expert-dp 2 per stage of 16) has it.
  EXPECT_EQ(std::count_if(all.begin(), all.end(),
                          [](const std::string& s) {
                            return s.rfind("dp=4,tp=4,pp=2,cp=1,ep=8,", 0) == 0 && s.find("etp=1") == std::string::npos;
                          }),
            0);
  EXPECT_GT(std::count_if(all.begin(), all.end(),
                          [](const std::string& s) {
                            return s.rfind("dp=4,tp=4,pp=2,cp=1,ep=8,", 0) == 0 && s.find("etp=1") != std::string::npos;
                          }),
            0);
  // Dense models get no expert keys.
  Inputs dense;
  for (const std::string& s : search::enumerate(dense.graph, dense.cluster, o))
    EXPECT_EQ(s.find("etp"), std::string::npos) << s;
}

TEST(Search, RankedFastestFirstAllFitAndTheFrontIsNotDominated) {
  Inputs in;
  search::SearchOptions o;
  o.global_batch = 64;
  o.threads = 2;
  std::size_t calls = 0;
  o.progress = [&](std::size_t done, std::size_t total) {
    ++calls;
    EXPECT_LE(done, total);
  };
  search::SearchResult r = search::run_search(in.graph, in.cluster, o);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_EQ(calls, r.simulated);
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    EXPECT_TRUE(r.ranked[i].report.fits_in_memory);
    if (i > 0) {
      EXPECT_GE(r.ranked[i - 1].report.samples_per_s, r.ranked[i].report.samples_per_s);
    }
  }
  EXPECT_TRUE(r.ranked.front().pareto);
  for (const auto& a : r.ranked) {
    for (const auto& b : r.ranked) {
      const bool dominates = b.report.samples_per_s >= a.report.samples_per_s && b.report.peak_bytes <= a.report.peak_bytes &&
                             (b.report.samples_per_s > a.report.samples_per_s || b.report.peak_bytes < a.report.peak_bytes);
      if (a.pareto) {
        EXPECT_FALSE(dominates) << a.strategy << " is dominated by " << b.strategy;
      }
    }
  }
  // The search's best is what simulate reports for that strategy.
  driver::Prediction again = driver::predict(in.graph, in.cluster, {"", "", r.ranked.front().strategy, {}, {}, {}, false, {}, {}});
  EXPECT_DOUBLE_EQ(again.report.step_time.value(), r.ranked.front().report.step_time.value());
}

TEST(Search, FixedAndBoundedDimensionsAreHonoured) {
  Inputs in;
  search::SearchOptions o;
  o.global_batch = 64;
  o.fixed = {{"tp", 2}};
  o.at_most = {{"pp", 2}};
  for (const std::string& s : search::enumerate(in.graph, in.cluster, o)) {
    plan::Strategy st = plan::parse_strategy(s);
    EXPECT_EQ(st.tp, 2) << s;
    EXPECT_LE(st.pp, 2) << s;
  }
}


TEST(Plan, DaysGpuHoursAndCostFollowFromThroughput) {
  const Inputs in;
  search::PlanOptions o = gpt3_plan();
  o.devices = {"A100-SXM-80GB", "H100-SXM"};
  o.gpu_counts = {8, 16};
  o.price_per_gpu_hour = {{"H100-SXM", 2.0}};
  auto rows = search::plan_capacity(in.graph, in.catalog, o);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& r : rows) {
    ASSERT_TRUE(r.strategy) << r.device << " " << r.gpus;
    // Training takes the goodput's share of the wall clock (0.9 by default).
    EXPECT_NEAR(r.days * 86400 * r.tokens_per_s * 0.9, o.tokens, 1e-3 * o.tokens);
    EXPECT_NEAR(r.gpu_hours, r.days * 24 * r.gpus, 1e-9 * r.gpu_hours);
    EXPECT_EQ(r.cost.has_value(), r.device == "H100-SXM");
    if (r.cost) {
      EXPECT_NEAR(*r.cost, 2.0 * r.gpu_hours, 1e-6 * *r.cost);
    }
  }
  EXPECT_LT(rows[2].days, rows[0].days);  // H100 trains faster than A100 on 8 GPUs
  EXPECT_LT(rows[1].days, rows[0].days);  // and 16 GPUs faster than 8
}

TEST(Plan, GoodputStretchesTheCalendarAndSkippedShapesSayWhy) {
  const Inputs in;
  search::PlanOptions o = gpt3_plan();
  o.devices = {"H100-SXM", "B200"};
  o.gpu_counts = {8};
  o.shapes = {"nvswitch8-ib", "nvl72"};
  std::vector<std::pair<std::size_t, std::size_t>> calls;
  o.progress = [&](std::size_t done, std::size_t total) { calls.emplace_back(done, total); };
  o.goodput = 1.0;
  const auto ideal = search::plan_capacity(in.graph, in.catalog, o);
  // One call per cluster planned: H100 on nvswitch8-ib, B200 on both.
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls.back(), std::make_pair(std::size_t{3}, std::size_t{3}));
  o.goodput = 0.8;
  const auto real = search::plan_capacity(in.graph, in.catalog, o);
  ASSERT_EQ(real.size(), ideal.size());
  for (std::size_t i = 0; i < real.size(); ++i) {
    EXPECT_DOUBLE_EQ(real[i].tokens_per_s, ideal[i].tokens_per_s);  // the step is the same
    EXPECT_NEAR(real[i].days, ideal[i].days / 0.8, 1e-9 * real[i].days);
    EXPECT_NEAR(real[i].gpu_hours, ideal[i].gpu_hours / 0.8, 1e-9 * real[i].gpu_hours);
  }
  EXPECT_EQ(search::skipped_shapes(in.catalog, o),
            std::vector<std::string>{"H100-SXM on nvl72: the shape needs 900 GB/s of scale-up bandwidth a GPU each way, "
                                     "the H100-SXM has 450"});
  o.goodput = 0;
  EXPECT_THROW(search::plan_capacity(in.graph, in.catalog, o), core::InputError);
}

TEST(Plan, ClusterShapesAreCompetingAnswersAndNvl72IsBlackwellOnly) {
  const Inputs in;
  search::PlanOptions o = gpt3_plan();
  o.devices = {"H100-SXM", "B200"};
  o.gpu_counts = {64};
  o.shapes = {"nvswitch8-ib", "nvswitch8-ib-2:1", "nvswitch8-4x100g", "nvl72"};
  auto rows = search::plan_capacity(in.graph, in.catalog, o);
  ASSERT_EQ(rows.size(), 7u);  // 3 shapes for H100, 4 for B200
  std::map<std::string, double> h100_days;
  for (const auto& r : rows) {
    ASSERT_TRUE(r.strategy) << r.device << " " << r.shape;
    if (r.device == "H100-SXM") h100_days[r.shape] = r.days;
    EXPECT_FALSE(r.device == "H100-SXM" && r.shape == "nvl72");
  }
  // Less network never trains faster: the oversubscribed spine and the thinner cloud NICs cost time or nothing.
  EXPECT_GE(h100_days["nvswitch8-ib-2:1"], h100_days["nvswitch8-ib"] * (1 - 1e-9));
  EXPECT_GE(h100_days["nvswitch8-4x100g"], h100_days["nvswitch8-ib"] * (1 - 1e-9));
  // One 64-GPU NVLink domain puts every collective on NVLink: no slower than 8 nodes on InfiniBand.
  EXPECT_LE(rows[6].days, rows[3].days * (1 + 1e-9));
  EXPECT_EQ(rows[6].shape, "nvl72");
  EXPECT_EQ(rows[3].shape, "nvswitch8-ib");

  o.shapes = {"dgx-1"};
  try {
    search::plan_capacity(in.graph, in.catalog, o);
    FAIL() << "an unknown shape was accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--shapes: expected shapes among nvswitch8-ib, nvswitch8-ib-2:1, nvswitch8-4x100g, "
                                     "nvl72, got \"dgx-1\"");
  }
}

TEST(Plan, AGlobalBatchTooSmallForTheGpusIsSaidToHoldTheRowBack) {
  const Inputs in;
  search::PlanOptions o = gpt3_plan();
  o.devices = {"H100-SXM"};
  // 16 GPUs leave every layout at least as many micro-batches as stages
  // (64 / dp = 4 tp pp); on 1024 GPUs dp <= 64 forces tp pp >= 16, so pp >= 2
  // with one micro-batch a replica.
  o.gpu_counts = {16, 1024};
  auto rows = search::plan_capacity(in.graph, in.catalog, o);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    ASSERT_TRUE(r.strategy) << r.gpus;
    const plan::Strategy s = plan::parse_strategy(*r.strategy);
    EXPECT_EQ(r.pipeline_stages, s.pp) << *r.strategy;
    EXPECT_EQ(r.micro_batches * s.dp * s.mbs, o.global_batch) << *r.strategy;
    EXPECT_GT(r.bubble_fraction, 0) << *r.strategy;
    EXPECT_LT(r.bubble_fraction, 1) << *r.strategy;
  }
  EXPECT_FALSE(rows[0].batch_limited()) << *rows[0].strategy;
  EXPECT_TRUE(rows[1].batch_limited()) << *rows[1].strategy;
  EXPECT_EQ(rows[1].micro_batches, 1);
  EXPECT_GE(rows[1].pipeline_stages, 2);
  // The idle share is what the limit costs: more of the step than the row with micro-batches to fill its pipeline.
  EXPECT_GT(rows[1].bubble_fraction, rows[0].bubble_fraction);
}
