// Golden tests: the CLI on bundled inputs, compared field by field with the
// committed reports in tests/golden/ (relative tolerance 1e-6), and the
// output of two runs identical. Regenerate with scripts/update_golden.sh after
// an intended change of a prediction, and say why in the commit.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "scratch_dir.hpp"

namespace {

constexpr double kRelativeTolerance = 1e-6;

void expect_same(const nlohmann::json& expected, const nlohmann::json& actual, const std::string& path) {
  if (expected.is_number() && actual.is_number()) {
    double e = expected.get<double>(), a = actual.get<double>();
    EXPECT_LE(std::abs(a - e), kRelativeTolerance * std::max(std::abs(e), 1e-9)) << path << ": expected " << e << ", got " << a;
    return;
  }
  ASSERT_EQ(expected.type(), actual.type()) << path;
  if (expected.is_object()) {
    for (const auto& [key, value] : expected.items()) {
      ASSERT_TRUE(actual.contains(key)) << path << "/" << key << " missing";
      // Which dtsim made a report is not a prediction: a new version keeps its goldens.
      if (path.empty() && key == "dtsim_version") {
        EXPECT_TRUE(actual[key].is_string()) << "/dtsim_version";
        continue;
      }
      expect_same(value, actual[key], path + "/" + key);
    }
    for (const auto& [key, value] : actual.items()) EXPECT_TRUE(expected.contains(key)) << path << "/" << key << " is new";
  } else if (expected.is_array()) {
    ASSERT_EQ(expected.size(), actual.size()) << path;
    for (std::size_t i = 0; i < expected.size(); ++i) expect_same(expected[i], actual[i], path + "/" + std::to_string(i));
  } else {
    EXPECT_EQ(expected, actual) << path;
  }
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, ReportMatchesTheCommittedOne) {
  std::ifstream in(std::string(DTSIM_SOURCE_DIR) + "/tests/golden/" + GetParam() + ".json");
  ASSERT_TRUE(in) << "no golden file " << GetParam();
  nlohmann::json golden = nlohmann::json::parse(in);
  CliResult run = run_dtsim(golden["args"].get<std::string>() + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  expect_same(golden["report"], nlohmann::json::parse(run.out), "");
}

std::vector<std::string> cases() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(std::string(DTSIM_SOURCE_DIR) + "/tests/golden")) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Bundled, Golden, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

// OpenBLAS starts its thread pool when it loads: dtsim opens it only in the
// commands that multiply matrices (run, validate; dtsim-calibrate), so short
// commands start in half the time (bench StartUp_DtsimVersionProcess).
TEST(StartUp, ShortCommandsDoNotLinkOpenBlas) {
  const char* bin = std::getenv("DTSIM_BIN");
  ASSERT_NE(bin, nullptr);
  const CliResult linked = run_shell(std::string("ldd '") + bin + "'");
  ASSERT_EQ(linked.exit_code, 0) << linked.out;
  EXPECT_EQ(linked.out.find("openblas"), std::string::npos) << linked.out;
}

TEST(Determinism, TwoRunsPrintTheSameBytes) {
  const std::string args = "simulate --model gpt3-1.3b --cluster dgx-a100 --nodes 2 --strategy ddp,gbs=64 --json";
  CliResult a = run_dtsim(args), b = run_dtsim(args);
  ASSERT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.out, b.out);
}

}  // namespace
