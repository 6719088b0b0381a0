// The closed loop end to end on 2 MPI ranks: calibrate this machine, then
// predict and run each strategy the CPU backend supports, and require the
// step-time error under 25%. Shared machines are noisy, so each strategy is
// validated three times (each a fresh quick calibration, then the median of 3
// steps) and the median error is what must hold.
#include <algorithm>
#include <cmath>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace {

const std::filesystem::path& profile() {
  static const std::filesystem::path path = [] {
    auto p = std::filesystem::temp_directory_path() / ("dtsim-loop-test-" + std::to_string(::getpid()) + ".json");
    const char* calibrate = std::getenv("DTSIM_CALIBRATE_BIN");
    const std::string command = std::string(calibrate) + " --quick -o " + p.string() + " > /dev/null";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return p;
  }();
  return path;
}

// The median error of three validations on an undisturbed machine. A
// validation where a rank got less than 90% of a core (calibration or run)
// measured the machine's other load, not the model: it is retried, up to six
// attempts; nullopt when none was undisturbed.
std::optional<double> validated_error(const std::string& model, const std::string& strategy) {
  std::vector<double> errors;
  for (int attempt = 0; attempt < 6 && errors.size() < 3; ++attempt) {
    // Calibrating right before each run keeps both under the same machine conditions.
    CliResult r = run_dtsim("validate --json --steps 3 --quick-calibration -m " + model + " -s " + strategy);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    if (r.exit_code != 0) return 1e9;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("schema"), "dtsim.validate/1");
    EXPECT_GT(j.at("step").at("measured_s").get<double>(), 0);
    EXPECT_GT(j.at("peak_memory").at("measured_bytes").get<double>(), 0);
    EXPECT_EQ(j.at("step_times_s").size(), 3u);
    const double share = std::min(j.at("cpu_share").at("calibration").get<double>(), j.at("cpu_share").at("run").get<double>());
    const double error = j.at("step").at("error").get<double>();
    std::printf("  attempt %d: error %+.1f%%, least share of a core %.0f%%%s\n", attempt + 1, 100 * error, 100 * share,
                share < 0.9 ? " (machine busy: not counted)" : "");
    if (share >= 0.9) errors.push_back(error);
  }
  if (errors.empty()) return std::nullopt;
  std::sort(errors.begin(), errors.end());
  return errors[errors.size() / 2];
}

struct Case {
  const char* model;
  const char* strategy;
};

class Loop : public testing::TestWithParam<Case> {};

TEST_P(Loop, StepTimeErrorUnder25Percent) {
  const std::optional<double> error = validated_error(GetParam().model, GetParam().strategy);
  if (!error) GTEST_SKIP() << "every attempt ran on a busy machine (a rank got under 90% of a core)";
  std::printf("%s %s: median step-time error %+.1f%%\n", GetParam().model, GetParam().strategy, 100 * *error);
  EXPECT_LT(std::abs(*error), 0.25);
}

INSTANTIATE_TEST_SUITE_P(
    CpuBackend, Loop,
    testing::Values(Case{"tiny-gpt", "one_device,gbs=4,mbs=2,dtype=fp32"}, Case{"tiny-gpt", "dp=2,gbs=8,mbs=2,dtype=fp32"},
                    Case{"tiny-gpt", "tp=2,gbs=8,mbs=2,dtype=fp32"},
                    Case{"tiny-gpt", "pp=2,gbs=8,mbs=1,dtype=fp32,schedule=gpipe"},
                    Case{"tiny-gpt", "pp=2,gbs=8,mbs=1,dtype=fp32,schedule=1f1b"},
                    Case{"mlp", "one_device,gbs=256,mbs=128,dtype=fp32"}, Case{"mlp", "dp=2,gbs=512,mbs=128,dtype=fp32"},
                    Case{"mlp", "pp=2,gbs=512,mbs=64,dtype=fp32,schedule=1f1b"}));

TEST(LoopCli, MaxErrorMakesItARegressionCheck) {
  CliResult r = run_dtsim("validate --steps 1 --warmup 0 --max-error 0.0001% --profile " + profile().string() +
                              " -s dp=2,gbs=4,mbs=2,dtype=fp32", true);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("exceeds --max-error 0.0001%"), std::string::npos) << r.out;
}

TEST(LoopCli, RunReportsTheMeasuredStep) {
  CliResult r = run_dtsim("run --json --steps 2 --profile " + profile().string() + " -s dp=2,gbs=4,mbs=2,dtype=fp32");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("schema"), "dtsim.run/1");
  EXPECT_EQ(j.at("step_times_s").size(), 2u);
}

TEST(LoopCli, ACpuClusterWithoutAProfileIsOneClearLine) {
  CliResult r = run_dtsim("simulate -m tiny-gpt -c localhost-cpu -s dp=2,dtype=fp32", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "dtsim: --profile: the CPU device of cluster localhost-cpu has no datasheet figures; measure them with "
                   "dtsim-calibrate and pass its profile\n");
}

TEST(LoopCli, BadCalibrationOptionsAreOneLineBeforeAnyRankStarts) {
  const std::string command = std::string(std::getenv("DTSIM_CALIBRATE_BIN")) + " --gemm-sizes 0,12 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
  const int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_EQ(out, "dtsim-calibrate: --gemm-sizes: expected sizes from 1 to 16384 separated by commas, got \"0\"\n");
}

TEST(LoopCli, AProfileWithoutKernelTablesIsRejectedForTheCpu) {
  const auto path = std::filesystem::temp_directory_path() / "dtsim-loop-bad-profile.json";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(R"({"schema": "dtsim.profile/1", "device": "CPU"})", f);
  std::fclose(f);
  CliResult r = run_dtsim("run --profile " + path.string(), true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "dtsim: " + path.string() + ": /kernels: a profile of the CPU needs device_figures and kernels "
                   "(dtsim-calibrate writes both)\n");
}

}  // namespace
