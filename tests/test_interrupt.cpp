// Ctrl-C on the long commands: `search` and `plan` stop starting new work,
// print the best they have with a line that says so, and exit 130.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

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

// Starts `dtsim ARGS`, waits until it has printed progress on stderr (so its
// handler is installed and work is under way), then sends SIGINT once.
Interrupted interrupt_after_progress(const std::string& args) {
  const ScratchDir scratch;
  const std::string out = scratch.file("out"), err = scratch.file("err");
  const char* bin = std::getenv("DTSIM_BIN");
  const std::string script = "\"" + std::string(bin ? bin : "dtsim") + "\" " + args + " > " + out + " 2> " + err +
                             " & p=$!; i=0; while [ ! -s " + err + " ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done; "
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

TEST(Interrupt, SearchPrintsTheBestSoFarAndExits130) {
  // About 1,000 configurations: seconds on two cores, far more than the first one takes.
  Interrupted r = interrupt_after_progress("search --model gpt3-175b --cluster superpod-a100 --nodes 128 --gbs 1536 --top 3");
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("dtsim: interrupted: the best of the "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("(stopped by Ctrl-C)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n   1 "), std::string::npos) << "no ranked row: " << r.out;
}

TEST(Interrupt, PlanPrintsTheClustersPlannedSoFarAndExits130) {
  // Ten clusters, the first of 8 GPUs: its progress line comes early, the 1024-GPU ones keep it busy.
  Interrupted r = interrupt_after_progress("plan --model llama2-7b --tokens 2e12 --gpus 8,1024");
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("dtsim: interrupted: the "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("stopped by Ctrl-C: the rows above are the clusters planned before it"), std::string::npos) << r.out;
}

}  // namespace
