// Every kind of bad input named in the README gets one line naming the file,
// the field and what was expected, and exit code 2.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "scratch_dir.hpp"

namespace {

const std::string kInputs = std::string(DTSIM_SOURCE_DIR) + "/tests/inputs/";

void expect_one_line(const std::string& args, const std::string& line) {
  CliResult r = run_dtsim(args, true);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.out, "dtsim: " + line + "\n");
}

TEST(CliErrors, MalformedJson) {
  expect_one_line("simulate --cluster dgx-h100 --strategy fsdp --model " + kInputs + "malformed.json",
                  kInputs + "malformed.json: malformed JSON: parse error at line 4, column 1: syntax error while parsing "
                            "object key - unexpected '}'; expected string literal");
}

TEST(CliErrors, UnknownKey) {
  expect_one_line("simulate --cluster dgx-h100 --strategy fsdp --model " + kInputs + "unknown_key.json",
                  kInputs + "unknown_key.json: /hidden_size: unknown key; valid keys here: bias, causal, experts, ffn_hidden, heads, "
                            "hidden, kind, kv_heads, layers, mlp, name, norm, positions, seq_len, source, tied_embeddings, "
                            "top_k, vocab");
}

TEST(CliErrors, WrongUnit) {
  expect_one_line("simulate --model llama2-7b --strategy fsdp --cluster " + kInputs + "wrong_unit.json",
                  kInputs + "wrong_unit.json: /intra_node/bandwidth: expected a bandwidth like \"400 Gb/s\", got \"450\"");
}

TEST(CliErrors, MissingField) {
  expect_one_line("simulate --model llama2-7b --strategy fsdp --cluster " + kInputs + "missing_field.json",
                  kInputs + "missing_field.json: /gpus_per_node: missing field: expected a positive integer");
}

TEST(CliErrors, DpNotDividingTheGpus) {
  expect_one_line("simulate --model llama2-7b --cluster dgx-h100 --strategy gpus=8,dp=3",
                  "--strategy: /dp: expected a divisor of the 8 GPUs that leaves tp*cp*pp = 1, got 3");
}

TEST(CliErrors, BatchNotDivisible) {
  expect_one_line("simulate --model llama2-7b --cluster dgx-h100 --strategy ddp,gbs=12", "--strategy: /gbs: expected a multiple of dp*mbs = 8, got 12");
}

TEST(CliErrors, UnknownBundledName) {
  CliResult r = run_dtsim("simulate --cluster dgx-h100 --strategy fsdp --model llama9", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--model: no file \"llama9\" and no bundled workloads of that name; bundled: bert-large,"), std::string::npos)
      << r.out;
}

TEST(Cli, ListShowsModelsClustersDevicesHostsAndPresets) {
  CliResult r = run_dtsim("list");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* expected : {"llama2-7b", "resnet50", "dgx-h100", "superpod-a100", "MI300X", "multi_worker_mirrored",
                               // V100 has no bf16: its 16-bit rate is fp16's; the CPU's ranks are cores
                               "V100-SXM2-32GB     125.0 TFLOP/s fp16", "1 node  x  2 cores =     2 CPU ranks",
                               "128 nodes x  8 GPUs  =  1024 H100-SXM",
                               // the hosts and their time per kernel (devices/hosts.json)
                               "  x86-64              50.0 us a kernel", "  grace              137.5 us a kernel"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected;
  }
}

}  // namespace

namespace {

double step_time(const std::string& args) {
  // Llama-2's 32000-word vocabulary: every GEMM aligned, so the bundled model
  // and the profile's roofline differ only in their efficiencies.
  CliResult r = run_dtsim("simulate --model llama2-7b --cluster dgx-h100 --strategy ddp,gbs=64 --json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto key = r.out.find("\"step_time_s\": ");
  return std::stod(r.out.substr(key + 15));
}

TEST(CliProfile, AProfileReplacesTheDefaultEfficiencies) {
  const double defaults = step_time("");
  const double slower = step_time("--profile " + kInputs + "h100_profile.json");
  EXPECT_GT(slower, 1.5 * defaults);  // GEMMs and attention at half the efficiency dominate the step
}

TEST(CliProfile, AProfileOfAnotherDeviceIsRejected) {
  expect_one_line("simulate --model llama2-7b --strategy fsdp --cluster dgx-a100 --profile " + kInputs + "h100_profile.json",
                  kInputs + "h100_profile.json: /device: expected a profile of the cluster's A100-SXM-80GB, got \"H100-SXM\"");
}

}  // namespace

namespace {
TEST(CliErrors, WorkerSpeedCountMustMatchTheGpus) {
  expect_one_line("simulate --model resnet50 --cluster dgx-a100 --strategy ddp --worker-speed 1,0.5",
                  "--worker-speed: expected 8 speeds (one per GPU used), got 2");
}
}  // namespace

namespace {
TEST(CliErrors, CollectiveRejectsUnknownOpsAndAlgorithms) {
  expect_one_line("collective --op all_reduse",
                  "--op: expected all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all or send_recv, "
                  "got \"all_reduse\"");
  expect_one_line("collective --algorithm bruck",
                  "--algorithm: expected one of auto, ring, tree, halving_doubling, direct, nvls, sharp, ps, "
                  "reduce_broadcast, got \"bruck\"");
  expect_one_line("collective --sizes 8:8GiB", "--sizes: expected a size like \"80 GiB\", got \"8\" (a range is written 8B:8GiB)");
  expect_one_line("collective -b 8x", "--minbytes: expected a size like 8, 64K, 8G or \"8 GiB\", got \"8x\"");
  expect_one_line("collective -b 1M -e 8", "--maxbytes: expected a range from small to large, like 8B:8GiB or -b 8 -e 8G");
  expect_one_line("collective --sizes 8B:1KiB -b 8", "--sizes: give either --sizes or nccl-tests' -b/-e, not both");
  expect_one_line("collective -f 1", "--stepfactor: expected 2 or more, got 1");
  expect_one_line("collective -d fp33", "--datatype: expected int8, uint8, int32, uint32, int64, uint64, half, float, "
                                        "double, bfloat16, f8e4m3 or f8e5m2, got \"fp33\"");
  expect_one_line("collective -o all", "--redop: expected sum, prod, min, max or avg, got \"all\"");
  expect_one_line("collective --op reduce -r 8", "--root: expected 0 to 7, got 8");
}
}  // namespace

namespace {
TEST(CliCompare, ExitCodesFollowTheTolerance) {
  const ScratchDir scratch;
  const std::string a = scratch.file("a.json"), b = scratch.file("b.json");
  ASSERT_EQ(run_dtsim("simulate --model llama2-7b --cluster dgx-h100 --strategy zero2 --json > " + a).exit_code, 0);
  ASSERT_EQ(run_dtsim("simulate --model llama2-7b --cluster dgx-h100 --strategy zero2,overlap=off --json > " + b).exit_code, 0);
  EXPECT_EQ(run_dtsim("compare " + a + " " + a).exit_code, 0);
  // The strategy string differs: reported, not failed; the numbers are judged.
  EXPECT_EQ(run_dtsim("compare " + a + " " + b + " --tolerance 50% --fields step_time_s,memory").exit_code, 0);
  EXPECT_EQ(run_dtsim("compare " + a + " " + b + " --tolerance 50%").exit_code, 1);  // exposed dp comm grew 175%
  EXPECT_EQ(run_dtsim("compare " + a + " " + b + " --tolerance 0 --fields step_time_s").exit_code, 1);
  // A CI job's outputs: JSON on stdout, a Markdown summary appended to a file.
  const std::string md = scratch.file("summary.md");
  CliResult j = run_dtsim("compare " + a + " " + b + " --tolerance 0 --fields step_time_s --json --markdown " + md);
  EXPECT_EQ(j.exit_code, 1);
  EXPECT_FALSE(nlohmann::json::parse(j.out)["passed"].get<bool>());
  std::ifstream summary(md);
  std::string first_line;
  std::getline(summary, first_line);
  EXPECT_EQ(first_line, "### dtsim compare: **regressed**");
  expect_one_line("compare " + a + " " + kInputs + "h100_profile.json",
                  kInputs + "h100_profile.json: /schema: expected a dtsim report (\"schema\": \"dtsim.report/1\"), as "
                            "simulate --json writes");
  expect_one_line("compare " + a + " " + a + " --tolerance five", "--tolerance: expected a tolerance like 5% or 0.05, got \"five\"");
}
}  // namespace

namespace {
TEST(CliPlan, WritesAChartAndRejectsUnknownDevices) {
  const ScratchDir scratch;
  const std::string svg = scratch.file("plan.svg");
  CliResult r = run_dtsim("plan --model gpt3-1.3b --tokens 1e9 --gbs 64 --devices H100-SXM --gpus 8,16 --chart " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("<path d=\"M"), std::string::npos);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
  CliResult bad = run_dtsim("plan --model gpt3-1.3b --tokens 1e9 --devices H900", true);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("dtsim: --devices: expected devices among"), std::string::npos) << bad.out;
}
}  // namespace

namespace {
// A named algorithm that cannot run is an error, not a silent ring (issue 12).
TEST(CliErrors, AnAlgorithmTheClusterCannotRunIsNamed) {
  expect_one_line("collective --cluster dgx-a100 --algorithm nvls --sizes 1MiB:2MiB",
                  "--algorithm: nvls cannot run all_reduce on 8 GPUs of dgx-a100: it needs an all_reduce within one "
                  "node whose intra_node has \"nvls\": true");
  expect_one_line("simulate --model gpt3-1.3b --cluster dgx-a100 --strategy ddp,collective=sharp",
                  "--strategy: /collective: cluster dgx-a100 cannot run sharp: it needs an all_reduce over a fabric "
                  "whose inter_node has \"sharp\": true");
}

TEST(CliErrors, AnAttentionKernelTheDeviceLacksIsNamed) {
  expect_one_line("simulate --model gpt3-1.3b --cluster dgx-a100 --strategy ddp,attention=flash3",
                  "--strategy: /attention: the A100-SXM-80GB has no figures for flash3 (" + std::string(DTSIM_SOURCE_DIR) +
                      "/devices/A100-SXM-80GB.json); it has flash2, flash1, triton, or standard");
  expect_one_line("kernel gemm --device H100-SXM --m 0 --n 8 --k 8", "--m: expected a positive integer, got 0");
  expect_one_line("kernel gemm --device H100-SXM --n 8 --k 8", "--m: missing: gemm needs it");
  expect_one_line("kernel gemm --device L40S --m 8 --n 8 --k 8",
                  "--device: no kernel figures for the L40S (no devices/L40S.json); simulate costs it with the roofline");
  expect_one_line("kernel conv --device H100-SXM", "kind: expected gemm, attention or memory, got \"conv\"");
}
}  // namespace

namespace {
// dtsim kernel on the shape that reached H100's published maximum matmul rate
// prints that rate; the JSON names the figures it used.
TEST(CliKernel, TheAnchorShapeGivesThePublishedRate) {
  CliResult r = run_dtsim("kernel gemm --device H100-SXM --m 2048 --n 2048 --k 13312 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j.at("tflops").get<double>(), 794.5, 0.1);
  EXPECT_NE(j.at("figures").get<std::string>().find("devices/H100-SXM.json"), std::string::npos);
  r = run_dtsim("kernel attention --device A100-SXM-80GB --batch 8 --seq 2048 --heads 16 --head-dim 128 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("kernel"), "flash2");  // PyTorch's kernel on Ampere
}
}  // namespace

TEST(CliErrors, LaunchConfigsAreOneAtATimeAndTheStrategyOnlyOverridesKeys) {
  expect_one_line("simulate -m llama2-7b -c dgx-h100 --megatron-args \"--tensor-model-parallel-size 2\" --deepspeed-config x.json",
                  "--deepspeed-config: expected one launch config, got --megatron-args as well");
  expect_one_line("simulate -m llama2-7b -c dgx-h100 --megatron-args \"--tensor-model-parallel-size 2\" -s fsdp",
                  "--strategy: a launch config sets the strategy; --strategy may only override keys, not name a preset");
  expect_one_line("simulate -m llama2-7b -c dgx-h100", "--strategy: expected a strategy (or --megatron-args, --deepspeed-config)");
}

TEST(CliErrors, CompareFieldsThatCannotBeReadAreOneLine) {
  const std::string golden = std::string(DTSIM_SOURCE_DIR) + "/tests/golden/gpt3-1.3b_dgx-a100x4_ddp.json";
  // The golden file is {"args", "report"}: not a report itself; the --fields error comes first.
  expect_one_line("compare " + golden + " " + golden + " --fields step_time_s=fast",
                  "--fields: expected field=tolerance like step_time_s=2%, got \"step_time_s=fast\"");
}

TEST(CliHelp, SimulateListsEveryStrategyKeyTheParserKnows) {
  CliResult help = run_dtsim("simulate --help");
  ASSERT_EQ(help.exit_code, 0);
  const auto at = help.out.find("Keys: ");
  ASSERT_NE(at, std::string::npos) << help.out;
  std::string keys = help.out.substr(at + 6, help.out.find('\n', at) - at - 6);
  int listed = 0;
  for (std::size_t start = 0; start < keys.size();) {
    std::size_t end = keys.find(", ", start);
    const std::string key = keys.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? keys.size() : end + 2;
    // The parser knows it: a bad value is about the value, never "unknown key".
    CliResult r = run_dtsim("simulate -m tiny-gpt -c dgx-h100 -s " + key + "=?", true);
    EXPECT_EQ(r.exit_code, 2) << key;
    EXPECT_EQ(r.out.find("unknown key"), std::string::npos) << key << ": " << r.out;
    ++listed;
  }
  EXPECT_GE(listed, 33);
}
