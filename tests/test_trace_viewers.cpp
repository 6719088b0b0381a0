// Chrome traces that viewers keep whole: each kind of trace dtsim writes is
// read back by Chrome DevTools' trace engine (tests/trace_check.mjs), which
// leaves out a slice that overlaps another on its thread, as Perfetto drops
// it. The measured trace of `dtsim run` is checked in test_loop.cpp.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "scratch_dir.hpp"

namespace {

struct TraceCase {
  std::string name;
  std::string args;
};

class TraceViewers : public ::testing::TestWithParam<TraceCase> {};

TEST_P(TraceViewers, DevToolsKeepsEverySliceAndBindsEveryFlow) {
  const ScratchDir scratch;
  const std::string path = scratch.file(GetParam().name + ".json");
  CliResult run = run_dtsim("simulate " + GetParam().args + " --trace " + path, true);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  CliResult check = check_traces_with_devtools(path);
  EXPECT_EQ(check.exit_code, 0) << check.out;
  EXPECT_NE(check.out.find("all kept"), std::string::npos) << check.out;
}

INSTANTIATE_TEST_SUITE_P(
    EveryKind, TraceViewers,
    ::testing::Values(
        TraceCase{"pipeline", "-m gpt3-1.3b -c dgx-a100 --nodes 2 -s tp=2,pp=4,gbs=32"},
        TraceCase{"interleaved", "-m gpt3-1.3b -c dgx-a100 --nodes 2 -s tp=2,pp=2,vpp=2,gbs=32"},
        TraceCase{"full_ddp", "-m gpt3-1.3b -c dgx-a100 -s ddp,gbs=16 --full"},
        TraceCase{"fsdp", "-m llama2-7b -c dgx-h100 -s fsdp,gbs=64"},
        TraceCase{"parameter_server", "-m resnet50 -c dgx-a100 --nodes 2 -s parameter_server,mbs=128,dtype=fp16"},
        TraceCase{"moe_context_parallel",
                  "-m mixtral-8x7b -c superpod-h100 --nodes 4 -s tp=2,cp=2,ep=4,pp=2,gbs=32,zero=1,recompute=full"}),
    [](const auto& info) { return info.param.name; });

nlohmann::json read_trace(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(Trace, OneProcessPerRankAndOneThreadPerStreamItUses) {
  const ScratchDir scratch;
  const std::string path = scratch.file("trace.json");
  CliResult run = run_dtsim("simulate --model gpt3-1.3b --cluster dgx-a100 --strategy ddp,gbs=16 --full --trace " + path);
  ASSERT_EQ(run.exit_code, 0);
  std::set<int> processes;
  std::set<std::string> thread_names;
  std::size_t spans = 0;
  const nlohmann::json trace = read_trace(path);
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["pid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") ++spans;
  }
  EXPECT_EQ(processes.size(), 8u);
  // Data parallelism computes and reduces gradients: the other five streams get no track.
  EXPECT_EQ(thread_names, (std::set<std::string>{"compute", "dp-comm"}));
  EXPECT_GT(spans, 8u * 24u);
}

TEST(Trace, PipelineTransfersGetLanesAndOneArrowEach) {
  const ScratchDir scratch;
  const std::string path = scratch.file("trace.json");
  CliResult run = run_dtsim("simulate -m gpt3-1.3b -c dgx-a100 --nodes 2 -s tp=2,pp=4,gbs=32 --trace " + path);
  ASSERT_EQ(run.exit_code, 0);
  std::map<std::string, int> phases;
  std::set<std::string> thread_names;
  const nlohmann::json trace = read_trace(path);
  for (const auto& e : trace["traceEvents"]) {
    phases[e["ph"].get<std::string>()]++;
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") {
      // Whole nanoseconds: ts x 1000 is an integer to well below a nanosecond.
      const double ts_ns = e["ts"].get<double>() * 1000.0;
      EXPECT_NEAR(ts_ns, std::round(ts_ns), 1e-6) << e.dump();
    }
  }
  // 16 GPUs over tp=2 x pp=4 leave dp=2, so 16 micro-batches a replica; each
  // crosses 3 stage boundaries forward and 3 backward: 96 transfers, one
  // arrow each on the simulated replica.
  EXPECT_EQ(phases["s"], 96);
  EXPECT_EQ(phases["f"], 96);
  // 1F1B sends and receives at once on a stage: a second lane keeps them apart.
  EXPECT_TRUE(thread_names.count("pp-p2p #2")) << ::testing::PrintToString(thread_names);
}

}  // namespace
