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

TEST(Compare, DifferentRunsAndMissingFieldsFailButMessagesOnlyInform) {
  auto other = report(1.0, 100, "fsdp");
  EXPECT_FALSE(compare_reports(report(1.0, 100, "ddp"), other, 0.05).within_tolerance());
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
  EXPECT_TRUE(faster.differences[0].improvement);
  EXPECT_TRUE(faster.differences[1].improvement);
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
