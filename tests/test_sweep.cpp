// Commands spread over MPI ranks. `dtsim sweep`: JSON lines or CSV of
// simulate requests in, one JSON line of report per request out, in order; on
// 1, 2 and 4 local ranks (oversubscribed on a 2-core machine) the output is
// byte-identical. `dtsim search` ranks the same candidates on any number of ranks,
// and `dtsim plan` prints the same table.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "scratch_dir.hpp"

namespace {

const char* kRequests = R"(# requests of a strategy comparison
{"id": "ddp", "model": "gpt3-1.3b", "cluster": "dgx-a100", "strategy": "ddp,gbs=64"}
{"id": "fsdp", "model": "llama2-7b", "cluster": "dgx-h100", "strategy": "fsdp,gbs=32"}
{"id": "bad", "model": "llama2-7b", "cluster": "dgx-h100", "strategy": "tp=3"}
{"model": "llama3-8b", "cluster": "superpod-h100", "nodes": 4, "strategy": "zero1,gbs=256"}
{"model": "gpt3-1.3b", "cluster": "dgx-h100", "strategy": "ddp,gbs=64", "seq_len": 1024}
)";

// Open MPI keeps allocations until the process exits, and LeakSanitizer
// (scripts/test.sh's second half) would end each rank with exit code 23 for
// them. They are not dtsim's: while a guard lives, the dtsim processes it
// starts skip the leak check at exit; every other sanitizer check stays on.
class NoLeakCheckUnderMpi {
 public:
  NoLeakCheckUnderMpi() {
    const char* old = std::getenv("ASAN_OPTIONS");
    if (old) saved_ = old;
    had_ = old != nullptr;
    ::setenv("ASAN_OPTIONS", (saved_ + (saved_.empty() ? "" : ":") + "detect_leaks=0").c_str(), 1);
  }
  NoLeakCheckUnderMpi(const NoLeakCheckUnderMpi&) = delete;
  NoLeakCheckUnderMpi& operator=(const NoLeakCheckUnderMpi&) = delete;
  ~NoLeakCheckUnderMpi() {
    if (had_) ::setenv("ASAN_OPTIONS", saved_.c_str(), 1);
    else ::unsetenv("ASAN_OPTIONS");
  }

 private:
  std::string saved_;
  bool had_ = false;
};

std::vector<nlohmann::json> lines_of(const std::string& out) {
  std::vector<nlohmann::json> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

TEST(Sweep, OneReportLinePerRequestInOrderAndTheSameOnAnyNumberOfRanks) {
  ScratchDir scratch;
  const std::string file = scratch.file("requests.jsonl");
  std::ofstream(file) << kRequests;
  CliResult one = run_dtsim("sweep " + file);
  EXPECT_EQ(one.exit_code, 2);  // one request is bad input; the others still run
  const std::vector<nlohmann::json> rows = lines_of(one.out);
  ASSERT_EQ(rows.size(), 5U) << one.out;
  EXPECT_EQ(rows[0]["id"], "ddp");
  EXPECT_EQ(rows[0]["line"], 2);
  EXPECT_EQ(rows[2]["error"], file + ":4: --strategy: /tp: expected a divisor of the model's 32 attention heads, got 3");
  EXPECT_FALSE(rows[2].contains("report"));
  EXPECT_EQ(rows[3]["report"]["gpus"], 32);
  EXPECT_EQ(rows[4]["report"]["seq_len"], 1024);

  // Each report is what `simulate --json` prints for the same request.
  CliResult alone = run_dtsim("simulate --json --model llama2-7b --cluster dgx-h100 --strategy fsdp,gbs=32");
  ASSERT_EQ(alone.exit_code, 0);
  EXPECT_EQ(rows[1]["report"], nlohmann::json::parse(alone.out));

  const NoLeakCheckUnderMpi mpi;
  for (const char* ranks : {"2", "4"}) {
    CliResult many = run_dtsim("sweep --ranks " + std::string(ranks) + " " + file);
    EXPECT_EQ(many.exit_code, 2) << ranks;
    EXPECT_EQ(many.out, one.out) << ranks << " ranks";
  }
}

TEST(Sweep, CsvRowsAreTheSameRequests) {
  ScratchDir scratch;
  const std::string csv = scratch.file("requests.csv"), jsonl = scratch.file("requests.jsonl");
  std::ofstream(csv) << "id,model,cluster,strategy,nodes,seq_len\n"
                     << "ddp,gpt3-1.3b,dgx-a100,\"ddp,gbs=64\",,\n"
                     << "zero1,llama3-8b,superpod-h100,\"zero1,gbs=256\",4,4096\n";
  std::ofstream(jsonl) << R"({"id": "ddp", "model": "gpt3-1.3b", "cluster": "dgx-a100", "strategy": "ddp,gbs=64"})" << "\n"
                       << R"({"id": "zero1", "model": "llama3-8b", "cluster": "superpod-h100", "strategy": "zero1,gbs=256", "nodes": 4, "seq_len": 4096})"
                       << "\n";
  CliResult from_csv = run_dtsim("sweep " + csv), from_jsonl = run_dtsim("sweep " + jsonl);
  ASSERT_EQ(from_csv.exit_code, 0) << from_csv.out;
  ASSERT_EQ(from_jsonl.exit_code, 0);
  const auto a = lines_of(from_csv.out), b = lines_of(from_jsonl.out);
  ASSERT_EQ(a.size(), 2U);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["report"], b[i]["report"]);
}

TEST(Sweep, ABadFileIsOneLineBeforeAnythingRuns) {
  ScratchDir scratch;
  const std::string file = scratch.file("bad.jsonl");
  auto first_error_line = [&](const std::string& text) {
    std::ofstream(file) << text;
    CliResult r = run_dtsim("sweep --ranks 2 " + file, true);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    return r.out;
  };
  EXPECT_EQ(first_error_line("{\"model\": \"gpt3-1.3b\", \"cluster\": \"dgx-a100\"}\n"),
            "dtsim: " + file + ":1: /strategy: missing field: expected a string\n");
  EXPECT_EQ(first_error_line("{\"model\": \"gpt3-1.3b\", \"cluster\": \"dgx-a100\", \"strategy\": \"ddp\", \"gpus\": 8}\n"),
            "dtsim: " + file + ":1: /gpus: unknown key; valid keys: id, model, cluster, strategy, nodes, seq_len\n");
  EXPECT_EQ(first_error_line("{\"model\": \"gpt3-1.3b\", \"cluster\": \"dgx-a100\", \"strategy\": \"ddp\", \"nodes\": 0}\n"),
            "dtsim: " + file + ":1: /nodes: expected an integer from 1 to 1048576, got 0\n");
  EXPECT_EQ(first_error_line("# nothing\n"),
            "dtsim: " + file + ": no requests (one JSON object per line, or a CSV header and rows)\n");
}

TEST(SearchOnRanks, TheRankingIsTheSameOnOneTwoAndFourRanks) {
  auto ranked = [](const std::string& ranks) {
    CliResult r = run_dtsim("search --model gpt3-1.3b --cluster dgx-a100 --gbs 64 --json --ranks " + ranks);
    EXPECT_EQ(r.exit_code, 0) << ranks;
    nlohmann::json j = nlohmann::json::parse(r.out);
    j.erase("seconds");  // wall time, the one field that may differ
    return j;
  };
  const nlohmann::json one = ranked("1");
  EXPECT_GT(one["fitting"].get<int>(), 10);
  const NoLeakCheckUnderMpi mpi;
  EXPECT_EQ(ranked("2"), one);
  EXPECT_EQ(ranked("4"), one);
}

TEST(PlanOnRanks, TheTableAndTheJsonAreByteIdenticalOnOneTwoAndFourRanks) {
  // Four clusters (two devices, two sizes), so four ranks each plan one and two ranks two.
  const std::string plan = "plan -m gpt3-1.3b --tokens 1e11 --gpus 8,16 --devices H100-SXM,A100-SXM-80GB --gbs 256";
  const CliResult table = run_dtsim(plan);
  const CliResult json = run_dtsim(plan + " --json");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  ASSERT_EQ(json.exit_code, 0) << json.out;
  ASSERT_EQ(nlohmann::json::parse(json.out)["rows"].size(), 4u);
  const NoLeakCheckUnderMpi mpi;
  for (const char* ranks : {"2", "4"}) {
    EXPECT_EQ(run_dtsim(plan + " --ranks " + ranks).out, table.out) << ranks << " ranks";
    EXPECT_EQ(run_dtsim(plan + " --json --ranks " + ranks).out, json.out) << ranks << " ranks";
  }
  // Bad input is one line, from rank 0 only, and exit 2.
  const CliResult bad = run_dtsim("plan -m gpt3-1.3b --tokens 1e11 --gpus 12 --ranks 2", true);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.out, "dtsim: --gpus: expected multiples of 8 GPUs, got 12\n");
}

// A row whose global batch leaves each replica fewer micro-batches than
// pipeline stages is said to be held back by the batch, under the table
// and in the JSON, on one rank as on two.
TEST(PlanOnRanks, ARowTheGlobalBatchHoldsBackIsSaidSo) {
  const std::string plan = "plan -m gpt3-1.3b --tokens 1e11 --gpus 16,1024 --devices H100-SXM --gbs 64";
  const CliResult table = run_dtsim(plan);
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("batch-limited: H100-SXM on nvswitch8-ib at 1024 GPUs: a global batch of 64 leaves each "
                           "replica 1 micro-batch for "),
            std::string::npos)
      << table.out;
  EXPECT_EQ(table.out.find("at 16 GPUs"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("--gbs sets it"), std::string::npos) << table.out;
  const nlohmann::json rows = nlohmann::json::parse(run_dtsim(plan + " --json").out)["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[0]["batch_limited"].get<bool>());
  EXPECT_TRUE(rows[1]["batch_limited"].get<bool>());
  EXPECT_EQ(rows[1]["micro_batches"].get<int>(), 1);
  const NoLeakCheckUnderMpi mpi;
  EXPECT_EQ(run_dtsim(plan + " --ranks 2").out, table.out);
}

}  // namespace
