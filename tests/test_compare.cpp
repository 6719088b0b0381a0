#include <gtest/gtest.h>

#include "dtsim/report/compare.hpp"

using dtsim::report::compare_reports;

namespace {
nlohmann::json report(double step, double peak, const char* strategy) {
  return {{"schema", "dtsim.report/1"}, {"strategy", strategy}, {"step_time_s", step},
          {"memory", {{"peak_bytes", peak}}}, {"bottlenecks", {{{"message", "compute: 90%"}}}}};
}
}  // namespace

TEST(Compare, ChangesWithinTheToleranceAreReportedButPass) {
  auto c = compare_reports(report(1.0, 100, "ddp"), report(1.04, 100, "ddp"), 0.05);
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_EQ(c.differences[0].pointer, "/step_time_s");
  EXPECT_NEAR(c.differences[0].relative, 0.04, 1e-12);
  EXPECT_TRUE(c.within_tolerance());
  EXPECT_EQ(c.fields, 5);
}

TEST(Compare, ChangesPastTheToleranceFail) {
  auto c = compare_reports(report(1.0, 100, "ddp"), report(1.0, 120, "ddp"), 0.05);
  EXPECT_FALSE(c.within_tolerance());
  EXPECT_EQ(c.differences.at(0).pointer, "/memory/peak_bytes");
}

TEST(Compare, MissingFieldsFailButMessagesAndAChangedStrategyOnlyInform) {
  // A changed strategy string is reported, not failed: the numbers are what a gate judges.
  auto other = compare_reports(report(1.0, 100, "ddp"), report(1.0, 100, "fsdp"), 0.05);
  EXPECT_TRUE(other.within_tolerance());
  ASSERT_EQ(other.differences.size(), 1u);
  EXPECT_EQ(other.differences[0].verdict, dtsim::report::Verdict::kNote);
  auto missing = report(1.0, 100, "ddp");
  missing.erase("step_time_s");
  EXPECT_FALSE(compare_reports(report(1.0, 100, "ddp"), missing, 0.05).within_tolerance());
  auto reworded = report(1.0, 100, "ddp");
  reworded["bottlenecks"][0]["message"] = "compute: 91%";
  auto c = compare_reports(report(1.0, 100, "ddp"), reworded, 0.05);
  EXPECT_EQ(c.differences.size(), 1u);
  EXPECT_TRUE(c.within_tolerance());
}

TEST(Compare, DirectionDecidesRegressionFromImprovement) {
  // A 10% faster step and 20% less memory pass as improvements; a slower step fails.
  auto faster = compare_reports(report(1.0, 100, "ddp"), report(0.9, 80, "ddp"), 0.05);
  EXPECT_TRUE(faster.within_tolerance());
  ASSERT_EQ(faster.differences.size(), 2u);
  EXPECT_TRUE(faster.differences[0].improvement());
  EXPECT_TRUE(faster.differences[1].improvement());
  EXPECT_FALSE(compare_reports(report(1.0, 100, "ddp"), report(1.1, 100, "ddp"), 0.05).within_tolerance());
  // Throughput is the other way round: less is the regression.
  auto with_rate = [](double samples) {
    auto r = report(1.0, 100, "ddp");
    r["samples_per_s"] = samples;
    r["gpus"] = 8;
    return r;
  };
  EXPECT_TRUE(compare_reports(with_rate(100), with_rate(120), 0.05).within_tolerance());
  EXPECT_FALSE(compare_reports(with_rate(100), with_rate(80), 0.05).within_tolerance());
  // A number with no better direction fails past the tolerance either way.
  auto more_gpus = with_rate(100);
  more_gpus["gpus"] = 16;
  EXPECT_FALSE(compare_reports(with_rate(100), more_gpus, 0.05).within_tolerance());
}

TEST(Compare, OnlyGatedFieldsFailEachAtItsOwnTolerance) {
  using namespace dtsim::report;
  const CompareRules rules{0.05, parse_gated_fields("step_time_s=1%,memory")};
  // 3% slower fails step_time_s's 1%; 20% more memory fails the default 5%.
  auto slower = compare_reports(report(1.0, 100, "ddp"), report(1.03, 100, "ddp"), rules);
  EXPECT_FALSE(slower.within_tolerance());
  EXPECT_DOUBLE_EQ(slower.differences[0].tolerance, 0.01);
  EXPECT_FALSE(compare_reports(report(1.0, 100, "ddp"), report(1.0, 120, "ddp"), rules).within_tolerance());
  // A field outside the gate is reported, never failed.
  auto gpus_before = report(1.0, 100, "ddp"), gpus_after = report(1.0, 100, "ddp");
  gpus_before["gpus"] = 8;
  gpus_after["gpus"] = 16;
  auto ungated = compare_reports(gpus_before, gpus_after, rules);
  EXPECT_TRUE(ungated.within_tolerance());
  EXPECT_EQ(ungated.differences.at(0).note, "not gated (--fields)");
  EXPECT_THROW(parse_gated_fields("step_time_s=fast"), std::invalid_argument);
}

TEST(Compare, StagesAndBottlenecksMatchByKeyAndNewFieldsOnlyInform) {
  using namespace dtsim::report;
  auto with_stages = [](std::vector<std::pair<int, double>> stages) {
    auto r = report(1.0, 100, "ddp");
    r["memory"]["per_stage"] = nlohmann::json::array();
    for (auto [stage, peak] : stages) r["memory"]["per_stage"].push_back({{"stage", stage}, {"peak_bytes", peak}});
    return r;
  };
  // The same stages in another order compare equal; a stage's own change names it.
  EXPECT_TRUE(compare_reports(with_stages({{0, 10}, {1, 20}}), with_stages({{1, 20}, {0, 10}}), 0.05).differences.empty());
  auto c = compare_reports(with_stages({{0, 10}, {1, 20}}), with_stages({{1, 30}, {0, 10}}), 0.05);
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_EQ(c.differences[0].pointer, "/memory/per_stage[stage=1]/peak_bytes");
  // A field a newer dtsim adds is reported, not failed.
  auto newer = report(1.0, 100, "ddp");
  newer["breakdown"] = {{"compute_slowed_s", 0.1}};
  auto added = compare_reports(report(1.0, 100, "ddp"), newer, 0.05);
  EXPECT_TRUE(added.within_tolerance());
  EXPECT_EQ(added.differences.at(0).note, "a field the older report lacks");
}

TEST(Compare, JsonAndMarkdownSayTheSame) {
  using namespace dtsim::report;
  const CompareRules rules{0.05, {}};
  auto c = compare_reports(report(1.0, 100, "ddp"), report(1.1, 100, "ddp"), rules);
  const nlohmann::json j = comparison_json(c, rules);
  EXPECT_EQ(j["schema"], "dtsim.compare/1");
  EXPECT_FALSE(j["passed"].get<bool>());
  EXPECT_EQ(j["regressions"], 1);
  EXPECT_EQ(j["differences"][0]["verdict"], "regression");
  const std::string md = comparison_markdown(c, rules);
  EXPECT_NE(md.find("**regressed**"), std::string::npos);
  EXPECT_NE(md.find("| `/step_time_s` | 1 | 1.1 | +10.00% | **regression** |"), std::string::npos) << md;
}
