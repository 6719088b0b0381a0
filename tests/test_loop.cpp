// The closed loop end to end on 2 MPI ranks: calibrate this machine, then
// predict and run each strategy the CPU backend supports, and require the
// median step-time error of five validations (each a fresh quick
// calibration, then the median of 3 steps) under 15%, or of at least three
// where the machine left fewer clean. An attempt counts only
// when the machine was the same machine for calibration and run: every rank
// held at least 90% of a core, and validate called the machine steady: its
// reference probe (cached GEMMs and a copy from memory, timed before and
// after the calibration and before and after the run) foretold a change of
// the step of no more than 5%, each half weighted by the share of the step it
// stands for. On a 2-core machine with other work beside it, attempts that
// fail either check are retried, and the test skips with what it measured
// when none is clean, rather than grading the neighbour's load.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "scratch_dir.hpp"

namespace {

// One calibration for the LoopCli tests, in a directory removed at exit.
const std::filesystem::path& profile() {
  static const ScratchDir scratch;
  static const std::filesystem::path path = [] {
    const std::filesystem::path p = scratch.file("profile.json");
    const char* calibrate = std::getenv("DTSIM_CALIBRATE_BIN");
    const std::string command = std::string(calibrate) + " --quick -o " + p.string() + " > /dev/null";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return p;
  }();
  return path;
}

struct Attempts {
  std::vector<double> clean_errors;
  std::string rejected;  // why the others did not count, one line each
};

// Up to ten validations, until five ran on an undisturbed machine; five
// disturbed ones in a row with none clean say the machine is busy for now.
// Five, not three: on a 2-core CI machine single clean attempts of one case
// spread from -11% to +16%, and the median of three crossed 15% at +20.5%
// (2026-11-30), where nobody could tell which part of the step had missed.
Attempts validate_until_five_clean(const std::string& model, const std::string& strategy) {
  Attempts out;
  for (int attempt = 1; attempt <= 10 && out.clean_errors.size() < 5; ++attempt) {
    if (attempt == 6 && out.clean_errors.empty()) break;
    CliResult r = run_dtsim("validate --json --steps 3 --quick-calibration -m " + model + " -s " + strategy);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    if (r.exit_code != 0) return {{1e9}, ""};
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("schema"), "dtsim.validate/1");
    EXPECT_GT(j.at("step").at("measured_s").get<double>(), 0);
    EXPECT_GT(j.at("peak_memory").at("measured_bytes").get<double>(), 0);
    // The executor's GEMM operands and MPI buffers, apart from the plan's memory.
    EXPECT_GT(j.at("kernel_scratch_bytes").get<double>(), 0);
    EXPECT_EQ(j.at("step_times_s").size(), 3u);
    EXPECT_FALSE(j.contains("passed")) << "without --max-error there is nothing to pass";
    const double share = std::min(j.at("cpu_share").at("calibration").get<double>(), j.at("cpu_share").at("run").get<double>());
    const nlohmann::json& conditions = j.at("conditions");
    const double step_drift = conditions.at("step_drift").get<double>();
    const double error = j.at("step").at("error").get<double>();
    std::string why;
    if (share < 0.9) {
      why = "a rank got " + std::to_string(static_cast<int>(100 * share)) + "% of a core";
    } else if (!conditions.at("steady").get<bool>()) {
      why = "the reference probe foretold a step " + std::to_string(static_cast<int>(std::lround(100 * step_drift))) +
            "% off";
    }
    // Each kind's error too, so that a CI log says which part of the step
    // missed (matmuls against the GEMM tables, the optimizer against the
    // streaming ones, collectives against their fits).
    std::string kinds;
    for (const nlohmann::json& k : j.at("kinds")) {
      kinds += (kinds.empty() ? "" : ", ") + k.at("what").get<std::string>() + " " +
               std::to_string(static_cast<int>(std::lround(100 * k.at("error").get<double>()))) + "%";
    }
    std::printf("  attempt %d: error %+.1f%% (%s), least share of a core %.0f%%, probe halves moved up to %.0f%% "
                "(within the calibration %.0f%%), foretelling %.1f%% for a step of %.0f%% matmuls%s\n",
                attempt, 100 * error, kinds.c_str(), 100 * share, 100 * conditions.at("drift").get<double>(),
                100 * conditions.at("calibration_drift").get<double>(), 100 * step_drift,
                100 * conditions.at("gemm_share").get<double>(), why.empty() ? "" : (" (not counted: " + why + ")").c_str());
    std::fflush(stdout);
    if (why.empty()) out.clean_errors.push_back(error);
    else out.rejected += "attempt " + std::to_string(attempt) + ": " + why + "; ";
  }
  return out;
}

struct Case {
  const char* model;
  const char* strategy;
};

class Loop : public testing::TestWithParam<Case> {};

// The CPU and its caches, once in the log: a CI machine is not the
// development machine, and a miss that only one of them shows (a GEMM shape
// between grid points, 2026-12-03) is read against what each has.
void print_machine_once() {
  static const bool printed = [] {
    std::string model = "unknown";
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
      if (line.rfind("model name", 0) == 0) {
        model = line.substr(line.find(':') + 2);
        break;
      }
    }
    std::string caches;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream level(dir + "level"), type(dir + "type"), size(dir + "size");
      std::string l, t, z;
      if (!(level >> l) || !(type >> t) || !(size >> z)) break;
      if (t == "Instruction") continue;
      caches += (caches.empty() ? "" : ", ") + ("L" + l) + " " + z;
    }
    std::printf("machine: %s; caches of cpu0: %s\n", model.c_str(), caches.empty() ? "unknown" : caches.c_str());
    return true;
  }();
  (void)printed;
}

TEST_P(Loop, StepTimeErrorUnder15Percent) {
  print_machine_once();
  Attempts attempts = validate_until_five_clean(GetParam().model, GetParam().strategy);
  std::vector<double>& errors = attempts.clean_errors;
  std::sort(errors.begin(), errors.end());
  if (errors.empty()) {
    GTEST_SKIP() << "the machine was busy or changed speed in every attempt (" << attempts.rejected << ")";
  }
  // A median of one or two is not robust to one outlier: two clean attempts
  // of +44.5% (its matmuls 46% off, both probes steady) and +5.2% failed at
  // +24.8% (2026-12-01). Three or more, or a skip that says what was seen.
  if (errors.size() < 3) {
    std::string seen;
    for (double e : errors) seen += (seen.empty() ? "" : ", ") + std::to_string(std::lround(100 * e)) + "%";
    GTEST_SKIP() << "only " << errors.size() << " clean attempt(s) (" << seen << "), too few for a median; the others: "
                 << attempts.rejected;
  }
  // An even number of clean attempts has the mean of the middle two as its
  // median; taking the upper one graded a +17.7% beside a -7.4% alone.
  const std::size_t mid = errors.size() / 2;
  const double median = errors.size() % 2 == 1 ? errors[mid] : (errors[mid - 1] + errors[mid]) / 2;
  std::printf("%s %s: median step-time error %+.1f%% of %zu clean attempts\n", GetParam().model, GetParam().strategy,
              100 * median, errors.size());
  EXPECT_LT(std::abs(median), 0.15);
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

// validate's own calibration measures the plan's GEMM calls whole, beside
// the grid, and its memory-bound calls past the streaming tables: the mlp's stages at mbs 64 make two distinct calls (forward and
// data gradient 64 x 1024 by 1024 x 1024, weight gradient 1024 x 64 by 64 x 1024).
TEST(LoopCli, ValidateCalibratesThePlansOwnGemmCalls) {
  const ScratchDir scratch;
  const std::string saved = scratch.file("validate-profile.json");
  CliResult r = run_dtsim("validate --steps 1 --warmup 0 --quick-calibration --save-profile " + saved +
                          " -m mlp -s pp=2,gbs=128,mbs=64,dtype=fp32,schedule=1f1b");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream file(saved);
  const nlohmann::json p = nlohmann::json::parse(file);
  std::set<std::vector<std::int64_t>> shapes;
  for (const nlohmann::json& c : p.at("kernels").at("gemm_calls")) {
    EXPECT_GT(c.at("median_us").get<double>(), 0);
    EXPECT_EQ(c.at("dtype"), "fp32");
    shapes.insert({c.at("m").get<std::int64_t>(), c.at("n").get<std::int64_t>(), c.at("k").get<std::int64_t>(),
                   c.at("count").get<std::int64_t>()});
  }
  EXPECT_EQ(shapes, (std::set<std::vector<std::int64_t>>{{64, 1024, 1024, 1}, {1024, 1024, 64, 1}}));
  EXPECT_EQ(p.at("kernels").at("gemm").size(), 64u) << "the grid is still measured, for any other plan";
  // The Adam step over a stage's two layers, 2 x (1024 x 1024 + 1024) fp32
  // weights at 92 bytes each (torch.optim.Adam unfused, plan/lower.cpp), is
  // larger than the grid's 64 MiB: timed whole as the table's last point.
  const nlohmann::json& elementwise = p.at("kernels").at("elementwise");
  ASSERT_EQ(elementwise.size(), 9u) << "4 KiB to 64 MiB in x4 steps (8), and the step";
  EXPECT_EQ(elementwise.back().at("bytes").get<double>(), 2.0 * (1024 * 1024 + 1024) * 92);
  EXPECT_GT(elementwise.back().at("median_us").get<double>(), elementwise[7].at("median_us").get<double>());
}

TEST(LoopCli, RunReportsTheMeasuredStep) {
  CliResult r = run_dtsim("run --json --steps 2 --profile " + profile().string() + " -s dp=2,gbs=4,mbs=2,dtype=fp32");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("schema"), "dtsim.run/1");
  EXPECT_EQ(j.at("step_times_s").size(), 2u);
  EXPECT_GT(j.at("kernel_scratch_bytes").get<double>(), 0);
}

TEST(LoopCli, TheMeasuredTraceIsKeptWholeByDevTools) {
  const ScratchDir scratch;
  const std::string trace = scratch.file("run.json");
  CliResult r = run_dtsim("run --steps 1 --warmup 0 --profile " + profile().string() +
                          " -s pp=2,gbs=8,mbs=1,dtype=fp32,schedule=1f1b --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  CliResult check = check_traces_with_devtools(trace);
  EXPECT_EQ(check.exit_code, 0) << check.out;
  // Measured sends and receives start at different times, so DevTools links
  // every one of the 16 transfers (8 micro-batches, forward and backward).
  EXPECT_NE(check.out.find("16 flows bound (16 linked by DevTools)"), std::string::npos) << check.out;
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
  const ScratchDir scratch;
  const std::filesystem::path path = scratch.file("bad-profile.json");
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
