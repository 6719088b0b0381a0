// The bad-input battery: one case per class of mistake (malformed JSON, wrong
// types, units, missing and unknown fields, impossible strategies, absurd
// scales, wrong profile schema, mismatched reports, CLI misuse), each of which
// must exit 2 with one line that names the file (or option), the field and
// what was expected. Many of these once crashed, wrapped or hung; the README's
// reliability section lists which.
#include <cctype>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "scratch_dir.hpp"

namespace {

struct Case {
  std::string what;
  std::string file;      // written to the scratch directory as $F (empty: none)
  std::string args;      // $F is replaced by the file's path
  std::string expected;  // a part of the one line; $F as above
};

std::string replaced(std::string text, const std::string& path) {
  for (std::size_t at = text.find("$F"); at != std::string::npos; at = text.find("$F", at + path.size())) {
    text.replace(at, 2, path);
  }
  return text;
}

// A one-node cluster with `nodes` and the NVSwitch's bandwidth and latency as given.
std::string cluster(const std::string& nodes, const std::string& bandwidth, const std::string& latency) {
  return R"({"name": "c", "device": "H100-SXM", "nodes": )" + nodes + R"(, "gpus_per_node": 8, "intra_node": {"kind": "nvswitch", "bandwidth": )" +
         bandwidth + R"(, "latency": )" + latency + "}}";
}

class BadInput : public testing::TestWithParam<Case> {};

TEST_P(BadInput, IsOneLineAndExitTwo) {
  const Case& c = GetParam();
  const ScratchDir scratch;
  const std::string path = scratch.file("input.json");
  if (!c.file.empty()) std::ofstream(path) << c.file;
  const CliResult r = run_dtsim(replaced(c.args, path), true);
  EXPECT_EQ(r.exit_code, 2) << c.what << ": " << r.out;
  ASSERT_FALSE(r.out.empty()) << c.what;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << c.what << ": not one line: " << r.out;
  EXPECT_EQ(r.out.rfind("dtsim: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(replaced(c.expected, path)), std::string::npos) << c.what << ": " << r.out;
}

// clang-format off
const Case kCases[] = {
  // malformed JSON
  {"truncated", R"({"name": )", "simulate -m $F -c dgx-h100 -s ddp", "$F: malformed JSON: parse error at line 1"},
  {"number beyond double", R"({"name": "m", "layers": 1e400})", "simulate -m $F -c dgx-h100 -s ddp", "$F: malformed JSON: number overflow"},
  {"nested 100000 deep", std::string(100000, '[') + std::string(100000, ']'), "simulate -m $F -c dgx-h100 -s ddp", "$F: /0/0/0/0/0"},
  {"key twice", R"({"name": "m", "name": "n"})", "simulate -m $F -c dgx-h100 -s ddp", "$F: /name: the key appears twice"},
  {"not a file", "", "simulate -m /nonexistent/model.json -c dgx-h100 -s ddp", "model.json"},
  // wrong types and units
  {"string for a count", R"({"name": "m", "kind": "transformer", "layers": "2"})", "simulate -m $F -c dgx-h100 -s ddp", "$F: /layers: expected a positive integer"},
  {"bare bandwidth", cluster("1", "450", "\"1 us\""), "simulate -m tiny-gpt -c $F -s ddp", "/intra_node/bandwidth: expected a"},
  {"zero bandwidth", cluster("1", "\"0 GB/s\"", "\"1 us\""), "simulate -m tiny-gpt -c $F -s ddp", "/intra_node/bandwidth: expected a positive, finite bandwidth"},
  {"latency of a century", cluster("1", "\"450 GB/s\"", "\"3e9 s\""), "simulate -m tiny-gpt -c $F -s ddp", "/intra_node/latency: expected a duration of at most an hour"},
  // missing and unknown fields
  {"missing hidden", R"({"name": "m", "kind": "transformer", "layers": 2})", "simulate -m $F -c dgx-h100 -s ddp", "$F: /hidden: missing field"},
  {"unknown key", R"({"name": "m", "kind": "transformer", "layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32, "hiden": 1})", "simulate -m $F -c dgx-h100 -s ddp", "$F: /hiden: unknown key"},
  {"layer with no ops", R"({"name": "g", "kind": "graph", "layers": [{"name": "l", "ops": []}]})", "simulate -m $F -c dgx-h100 -s ddp", "$F: /layers/0/ops: expected at least one op"},
  // impossible strategies
  {"tp not dividing heads", "", "simulate -m tiny-gpt -c dgx-h100 -s tp=3", "--strategy: /tp: expected a divisor"},
  {"mbs wrapping dp*mbs", "", "simulate -m tiny-gpt -c dgx-h100 -s mbs=536870912,gbs=8", "--strategy: /mbs: dp*mbs = 4294967296"},
  {"degree beyond a million", "", "simulate -m tiny-gpt -c dgx-h100 -s dp=2000000", "--strategy: /dp: expected an integer from 1 to 1048576"},
  {"zero stage 4", "", "simulate -m tiny-gpt -c dgx-h100 -s zero=4", "--strategy: /zero: expected an integer from 0 to 3"},
  {"a pipeline of an encoder-decoder", "", "simulate -m " DTSIM_SOURCE_DIR "/tests/inputs/hf/t5-base/config.json -c dgx-h100 -s tp=2,pp=2", "--strategy: /pp: t5-base is an encoder-decoder: its pipeline and context parallelism are not modelled; expected 1, got 2"},
  {"a T5 activation that does not exist", R"({"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_heads": 4, "num_layers": 2, "vocab_size": 100, "feed_forward_proj": "gated-swish"})", "simulate -m $F -c dgx-h100 -s ddp", "$F: /feed_forward_proj: expected relu, gelu, gelu_new or silu, optionally gated- (\"gated-gelu\"), got \"gated-swish\""},
  {"a sequence length for a CNN", "", "simulate -m resnet50 -c dgx-h100 -s ddp --seq-len 512", "--seq-len: " DTSIM_SOURCE_DIR "/workloads/resnet50.json is a layer graph, which has no sequence"},
  // absurd scales
  {"a million nodes", "", "simulate -m tiny-gpt -c dgx-h100 --nodes 1000000 -s ddp", "--nodes: 1000000 nodes of 8 GPUs is more than"},
  {"channels across nodes of none", R"({"name": "c", "device": "H100-SXM", "nodes": 2, "gpus_per_node": 8, "channels_across_nodes": 0, "intra_node": {"kind": "nvswitch", "bandwidth": "450 GB/s", "latency": "1 us"}})", "simulate -m tiny-gpt -c $F -s ddp", "$F: /channels_across_nodes: expected"},
  {"NVLS channels without NVLS", R"({"name": "c", "device": "H100-SXM", "nodes": 1, "gpus_per_node": 8, "intra_node": {"kind": "nvswitch", "bandwidth": "450 GB/s", "latency": "1 us", "nvls_channels": 16}})", "simulate -m tiny-gpt -c $F -s ddp", "$F: /intra_node/nvls_channels: given without \"nvls\": true"},
  {"nodes past 2^32", cluster("4294967297", "\"450 GB/s\"", "\"1 us\""), "simulate -m tiny-gpt -c $F -s ddp", "$F: /nodes: expected an integer from 1 to 1048576, got 4294967297"},
  {"100000 layers", R"({"name": "m", "kind": "transformer", "layers": 100000, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32})", "simulate -m $F -c dgx-h100 -s ddp", "$F: /layers: expected an integer from 1 to 10000"},
  {"hidden 2^40", R"({"name": "m", "kind": "transformer", "layers": 2, "hidden": 1099511627776, "heads": 4, "vocab": 100, "seq_len": 32})", "simulate -m $F -c dgx-h100 -s ddp", "$F: /hidden: expected an integer from 1 to 1048576"},
  {"sequence of 10^7 past the limit", "", "simulate -m tiny-gpt -c dgx-h100 -s ddp --seq-len 100000000", "--seq-len: expected 1 to 16777216 tokens"},
  {"a billion samples", "", "simulate -m tiny-gpt -c dgx-h100 -s dp=8,gbs=1000000000", "--strategy: /gbs: the plan would hold about"},
  // profiles and reports
  {"profile without schema", R"({"device": "H100-SXM"})", "simulate -m tiny-gpt -c dgx-h100 -s ddp --profile $F", "$F: /schema"},
  {"report of another schema", R"({"schema": "dtsim.validate/1"})", "compare $F $F", "$F: /schema: expected a dtsim report"},
  {"a fixed degree no layout has", "", "search -m gpt3-1.3b -c dgx-h100 --gbs 64 --fix tp=3", "--fix: no strategy of gpt3-1.3b on 8 GPUs of dgx-h100 has tp=3"},
  {"the real executor on a GPU cluster", "", "validate -m tiny-gpt -c dgx-h100 -s ddp", "--cluster: the real executor runs CPU clusters"},
  {"a negative price", "", "plan --model gpt3-1.3b --tokens 1e9 --devices H100-SXM --gpus 8 --price H100-SXM=-1", "--price: expected DEVICE=USD per GPU-hour with a positive price, got \"H100-SXM=-1\""},
  {"a broken report", R"({"schema": "dtsim.report/1", "step_time_s": "fast"})", "compare $F $F", "$F: /step_time_s: expected a number, as every simulate --json report has"},
  {"a model that does not fit this machine", "", "run --profile " DTSIM_SOURCE_DIR "/tests/fuzz/profile/cpu-2-ranks.json -m llama3-405b -c localhost-cpu -s dp=2,gbs=2,dtype=fp32", "--strategy: the plan needs 14176.3 GiB over its 2 ranks and this machine has"},
  {"a profile with no memory", R"({"schema": "dtsim.profile/1", "device": "CPU", "device_figures": {"dtype": "fp32", "peak": "100 GFLOP/s", "memory_bandwidth": "20 GB/s", "memory": "0 GiB"}})", "simulate -m tiny-gpt -c localhost-cpu -s dp=2,dtype=fp32 --profile $F", "$F: /device_figures/memory: expected a positive size"},
  // CLI misuse
  {"unknown option", "", "simulate -m tiny-gpt -c dgx-h100 -s ddp --bogus", "The following argument was not expected: --bogus (--help lists the options)"},
  {"nothing named (no silent llama2-7b)", "", "simulate", "--model is required"},
  {"no subcommand", "", "", "A subcommand is required"},
  {"bad tolerance", "", "compare a.json b.json --tolerance five", "--tolerance: expected a tolerance like 5% or 0.05"},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(EveryClass, BadInput, testing::ValuesIn(kCases), [](const testing::TestParamInfo<Case>& info) {
  std::string name;
  for (char ch : info.param.what) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
});

}  // namespace
