// `dtsim collective` against the published nccl-tests bus bandwidths in
// ../shared/validation/nccl-tests.json (8-GPU nodes, large messages).
// Every row is held to 5%. Two are not independent: the A100 clusters take
// their bus efficiency (0.67) from the A100 row, and the H100 clusters their
// nvls_efficiency (0.61) from the NVLS row; the H800 row checks that figure
// on NVLink of 200 GB/s a direction (hgx-h800). Before that figure, dtsim's NVLS
// (each GPU sends and receives the buffer once at the links' bus efficiency)
// was 31% optimistic; NVLS is now on in the bundled H100 and H200 clusters,
// as it is NCCL's default all-reduce there.
#include <cmath>
#include <sstream>
#include <vector>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace {

double predicted_busbw(const std::string& cluster, const std::string& algorithm) {
  CliResult r = run_dtsim("collective --cluster " + cluster + " --op all_reduce --group 8 --sizes 4GiB:4GiB --json --algorithm " +
                          algorithm);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return nlohmann::json::parse(r.out)["rows"][0]["busbw_GBps"].get<double>();
}

TEST(NcclTests, RingBusBandwidthOfEightGpuNodes) {
  const auto path = std::filesystem::path(DTSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "nccl-tests.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path << " (../shared is not beside the checkout)";
  std::ifstream in(path);
  const auto table = nlohmann::json::parse(in);
  fmt::print("{:<34} {:>10} {:>10} {:>8}\n", "system / algorithm", "published", "predicted", "error");
  for (const auto& row : table["rows"]) {
    const std::string system = row["system"], algorithm = row["algorithm"];
    std::string cluster, algo = "ring";
    if (system.rfind("8x H100", 0) == 0) cluster = "dgx-h100";
    if (system.rfind("8x A100", 0) == 0) cluster = "dgx-a100";
    if (algorithm.rfind("NVLS", 0) == 0) algo = "nvls";
    // NCCL's default all-reduce on a Hopper NVSwitch node is NVLS (the H100 row says so).
    if (system.rfind("8x H800", 0) == 0) cluster = "hgx-h800", algo = "nvls";
    ASSERT_FALSE(cluster.empty()) << system;
    const double published = row["busbw_GBps"], predicted = predicted_busbw(cluster, algo);
    const double error = (predicted - published) / published;
    fmt::print("{:<34} {:>10.0f} {:>10.1f} {:>+7.1f}%\n", system.substr(0, 20) + " " + algo, published, predicted, 100 * error);
    EXPECT_LT(std::abs(error), 0.05) << system << " " << algo;
  }
}


// vTrain's node (tests/validation/vtrain-runs.json, all_reduce): float
// all-reduce over 2, 4 and 8 of its A100s at 1 GiB, against dtsim on the
// cluster that takes its bus efficiency from the 8-GPU row. Held as today:
// 8 and 4 GPUs within 3%, and 2 GPUs faster in dtsim by 10-20% (the table's
// 197 GB/s against one bus efficiency for every group size; README, "vTrain's
// A100 runs"). Its smaller sizes were timed around torch.distributed calls,
// host cost included, and are not compared.
TEST(NcclTests, VtrainsNodeAtOneGibibyte) {
  const auto root = std::filesystem::path(DTSIM_SOURCE_DIR) / "tests" / "validation";
  const auto table = nlohmann::json::parse(std::ifstream(root / "vtrain-runs.json"));
  const std::string cluster = (root / "vtrain-a100.json").string();
  for (const int gpus : {2, 4, 8}) {
    const auto& rows = table["all_reduce"]["by_gpus"][std::to_string(gpus)];
    const auto& gib = rows.back();
    ASSERT_EQ(gib["bytes"].get<double>(), 1073741824.0) << gpus;
    CliResult r = run_dtsim(fmt::format("collective --cluster {} --nodes 1 --group {} --sizes 1GiB:1GiB --json", cluster, gpus));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const double predicted = nlohmann::json::parse(r.out)["rows"][0]["busbw_GBps"].get<double>();
    const double error = predicted / gib["busbw_GBps"].get<double>() - 1;
    fmt::print("vTrain's node, {} GPUs: measured {:.1f} GB/s, dtsim {:.1f}: {:+.1f}%\n", gpus,
               gib["busbw_GBps"].get<double>(), predicted, 100 * error);
    if (gpus == 2) {
      EXPECT_GT(error, 0.10);
      EXPECT_LT(error, 0.20);
    } else {
      EXPECT_LT(std::abs(error), 0.03) << gpus;
    }
  }
}

// The text output is nccl-tests' own: a script that reads its columns by
// position (size, count, type, redop, root, out-of-place time, algbw, busbw,
// #wrong, then in place) and its "Avg bus bandwidth" footer reads dtsim's.
TEST(NcclTests, TextOutputHasNcclTestsColumnsFlagsAndFooter) {
  CliResult r = run_dtsim("collective --cluster dgx-h100 --op all_gather -b 8 -e 64M -f 8 -d bfloat16");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  double footer = -1;
  bool header = false;
  while (std::getline(lines, line)) {
    if (line.find("#       size         count      type   redop    root     time   algbw   busbw #wrong") == 0) header = true;
    if (line.rfind("# Avg bus bandwidth    : ", 0) == 0) footer = std::stod(line.substr(25));
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    rows.push_back(w);
  }
  EXPECT_TRUE(header) << r.out;
  // 8 bytes hold no whole bfloat16 per rank of 8 and are skipped; 64 B ... 16 MiB remain.
  EXPECT_NE(r.out.find("# 8 B: no whole bfloat16 per rank, skipped"), std::string::npos) << r.out;
  ASSERT_EQ(rows.size(), 7U) << r.out;
  double busbw_sum = 0;
  double size = 64;
  for (const auto& w : rows) {
    ASSERT_GE(w.size(), 13U);
    EXPECT_EQ(std::stod(w[0]), size);
    EXPECT_EQ(std::stod(w[1]), size / 2);  // elements of 2 bytes
    EXPECT_EQ(w[2], "bfloat16");
    EXPECT_EQ(w[3], "none");  // all_gather reduces nothing
    EXPECT_EQ(w[4], "-1");    // and has no root
    EXPECT_EQ(w[8], "N/A");
    EXPECT_EQ(w[5], w[9]);  // in place costs what out of place does
    const double time_us = std::stod(w[5]), algbw = std::stod(w[6]), busbw = std::stod(w[7]);
    EXPECT_NEAR(algbw, size / time_us / 1e3, 0.01 + 0.01 * algbw);
    EXPECT_NEAR(busbw, algbw * 7.0 / 8.0, 0.01 + 0.01 * busbw);
    busbw_sum += busbw;
    size *= 8;
  }
  EXPECT_NEAR(footer, busbw_sum / 7, 0.01 + 0.001 * footer);

  // nccl-tests' flags and dtsim's --sizes name the same rows.
  CliResult flags = run_dtsim("collective --cluster dgx-h100 -b 1M -e 64M --json");
  CliResult sizes = run_dtsim("collective --cluster dgx-h100 --sizes 1MiB:64MiB --json");
  ASSERT_EQ(flags.exit_code, 0);
  EXPECT_EQ(flags.out, sizes.out);
  CliResult rooted = run_dtsim("collective --cluster dgx-h100 --op broadcast -r 3 -b 1M -e 1M --json");
  ASSERT_EQ(rooted.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(rooted.out)["rows"][0]["root"], 3);
}

}  // namespace
