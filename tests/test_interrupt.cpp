// Ctrl-C on the long commands: `search` and `plan` stop starting new work,
// print the best they have with a line that says so, and exit 130; `validate`
// and `dtsim-calibrate` stop their MPI ranks, say so, leave no rank running
// and no scratch file behind, and exit 130.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scratch_dir.hpp"

namespace {

struct Interrupted {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `dtsim ARGS`, waits until its stderr holds `ready` (so its handler is
// installed and work is under way), then sends SIGINT once.
Interrupted interrupt_after_progress(const std::string& args, const std::string& ready) {
  const ScratchDir scratch;
  const std::string out = scratch.file("out"), err = scratch.file("err");
  const char* bin = std::getenv("DTSIM_BIN");
  const std::string script = "\"" + std::string(bin ? bin : "dtsim") + "\" " + args + " > " + out + " 2> " + err +
                             " & p=$!; i=0; while ! grep -q \"" + ready + "\" " + err + " 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done; "
                             "kill -INT $p; wait $p; echo $?";
  Interrupted r;
  FILE* pipe = popen(("sh -c '" + script + "'").c_str(), "r");
  char code[16] = {};
  if (pipe && std::fgets(code, sizeof code, pipe)) r.exit_code = std::atoi(code);
  if (pipe) pclose(pipe);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// About 1,000 configurations: seconds on two cores, far more than the first one takes.
constexpr const char* kSearch = "search --model gpt3-175b --cluster superpod-a100 --nodes 128 --gbs 1536 --top 3";
// The search is interrupted once a tenth of its configurations are done: the
// first ones it tries (tp=1 and the shallowest pipelines) run out of memory, so an
// earlier Ctrl-C can rightly find nothing to rank (CI's ASan build once sent it
// after 2 of 990, none of which fit). A tenth holds dozens that fit.
constexpr const char* kSearchReady = " 10%";
// Ten clusters, the first of 8 GPUs: its progress line comes early, the 1024-GPU ones keep it busy.
constexpr const char* kPlan = "plan --model llama2-7b --tokens 2e12 --gpus 8,1024";

// What an interrupted search and plan print, on one process or on ranks alike.
void expect_partial_search(const Interrupted& r) {
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("dtsim: interrupted: the best of the "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("(stopped by Ctrl-C)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n   1 "), std::string::npos) << "no ranked row: " << r.out;
}
void expect_partial_plan(const Interrupted& r) {
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("dtsim: interrupted: the "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("stopped by Ctrl-C: the rows above are the clusters planned before it"), std::string::npos) << r.out;
}

TEST(Interrupt, SearchPrintsTheBestSoFarAndExits130) {
  expect_partial_search(interrupt_after_progress(kSearch, kSearchReady));
}

TEST(Interrupt, PlanPrintsTheClustersPlannedSoFarAndExits130) {
  expect_partial_plan(interrupt_after_progress(kPlan, "planned"));
}

// Starts `COMMAND` in a process group of its own with TMPDIR in a scratch
// folder, waits until `ready` (a shell test) holds, then sends SIGINT to the
// whole group, as a terminal's Ctrl-C does. Reports whether any process of the
// group outlived it and what the scratch folder still holds.
struct GroupInterrupted : Interrupted {
  bool group_outlived = true;
  std::string temp_files;
  int left_running = -1;  ///< processes still running in the scratch folder (mpirun, ranks), whatever their group
};

GroupInterrupted interrupt_group_when(const std::string& command, const std::string& ready) {
  const ScratchDir scratch;
  const std::string tmp = scratch.file("tmp"), out = scratch.file("out"), err = scratch.file("err");
  const std::string script = scratch.file("interrupt.sh");
  std::ofstream(script) << "set -m\n"
                        << "mkdir -p " << tmp << " && cd " << tmp << "\n"
                        << "export TMPDIR=" << tmp << " ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\n"
                        << command << " > " << out << " 2> " << err << " &\n"
                        << "p=$!; i=0; ERR=" << err << "\n"
                        << "while ! { " << ready << "; } && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done\n"
                        << "kill -INT -- -$p; wait $p; echo $?\n"
                        // Up to 10 s for the group to go: a loaded machine may take a moment to reap the ranks.
                        << "j=0; while kill -0 -- -$p 2>/dev/null && [ $j -lt 100 ]; do sleep 0.1; j=$((j+1)); done\n"
                        << "kill -0 -- -$p 2>/dev/null && echo outlived || echo gone\n"
                        << "ls | grep -v '^ompi' | tr '\\n' ' '; echo\n"
                        // Anything started there (mpirun runs in a group of its own for search and plan),
                        // counted from / so that the counting shell's own subshells are not. Up to 10 s
                        // more: a rank mpirun has signalled may finish exiting just after mpirun.
                        << "running() { cd / && n=0; for d in /proc/[0-9]*; do [ \"${d#/proc/}\" != $$ ] && "
                        << "[ \"$(readlink $d/cwd 2>/dev/null)\" = " << tmp << " ] && n=$((n+1)); done; echo $n; cd " << tmp
                        << "; }\n"
                        << "k=0; while [ \"$(running)\" != 0 ] && [ $k -lt 100 ]; do sleep 0.1; k=$((k+1)); done; running\n";
  GroupInterrupted r;
  FILE* pipe = popen(("bash " + script).c_str(), "r");
  std::string code, fate;
  char buffer[512];
  std::vector<std::string> lines;
  while (pipe && std::fgets(buffer, sizeof buffer, pipe)) lines.emplace_back(buffer);
  if (pipe) pclose(pipe);
  if (lines.size() >= 4) {
    r.exit_code = std::atoi(lines[0].c_str());
    r.group_outlived = lines[1] != "gone\n";
    r.temp_files = lines[2].substr(0, lines[2].size() - 1);
    r.left_running = std::atoi(lines[3].c_str());
  }
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string binary(const char* variable, const char* fallback) {
  const char* bin = std::getenv(variable);
  return bin ? bin : fallback;
}

// On MPI ranks (--ranks 2) the launcher turns the terminal's Ctrl-C into
// SIGUSR1, which mpirun passes to the ranks: they stop, gather what they
// have, and rank 0 prints the best so far, as one process would.
TEST(Interrupt, SearchOnRanksPrintsTheBestSoFarAndExits130) {
  GroupInterrupted r = interrupt_group_when(binary("DTSIM_BIN", "dtsim") + " " + kSearch + " --ranks 2",
                                            std::string("grep -q '") + kSearchReady + "' $ERR 2>/dev/null");
  expect_partial_search(r);
  EXPECT_EQ(r.left_running, 0) << "mpirun or a rank outlived Ctrl-C";
}

TEST(Interrupt, PlanOnRanksPrintsTheClustersPlannedSoFarAndExits130) {
  GroupInterrupted r = interrupt_group_when(binary("DTSIM_BIN", "dtsim") + " " + kPlan + " --ranks 2",
                                            "grep -q planned $ERR 2>/dev/null");
  expect_partial_plan(r);
  EXPECT_EQ(r.left_running, 0) << "mpirun or a rank outlived Ctrl-C";
}

TEST(Interrupt, ValidateStopsItsRanksAndRemovesTheProfileItCalibrated) {
  // Once the calibrated profile is written, the ranks are into the real run.
  GroupInterrupted r = interrupt_group_when(
      binary("DTSIM_BIN", "dtsim") + " validate --quick-calibration -m tiny-gpt -c localhost-cpu -s dp=2,gbs=8,mbs=2,dtype=fp32",
      "ls dtsim-validate-*.json >/dev/null 2>&1");
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(r.err, "dtsim: stopped by Ctrl-C: mpirun stopped the 2 ranks; their scratch files are removed\n");
  EXPECT_FALSE(r.group_outlived) << "a rank or mpirun outlived Ctrl-C";
  EXPECT_EQ(r.left_running, 0) << "a rank or mpirun outlived Ctrl-C";
  EXPECT_EQ(r.temp_files, "") << "left in the temporary directory";
}

TEST(Interrupt, CalibrateStopsItsRanksAndSaysSo) {
  const std::string calibrate = binary("DTSIM_CALIBRATE_BIN", "");
  if (calibrate.empty()) GTEST_SKIP() << "DTSIM_CALIBRATE_BIN is not set (meson test sets it)";
  // A second in, the ranks are measuring; the profile is written only at the end.
  GroupInterrupted r = interrupt_group_when(calibrate + " --quick -o profile.json", "sleep 1");
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("dtsim-calibrate: stopped by Ctrl-C: mpirun stopped the 2 ranks\n"), std::string::npos) << r.err;
  EXPECT_FALSE(r.group_outlived) << "a rank or mpirun outlived Ctrl-C";
  EXPECT_EQ(r.temp_files, "") << "a profile written by a calibration that was stopped";
}

}  // namespace
