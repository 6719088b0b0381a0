// `dtsim collective` against the published nccl-tests bus bandwidths in
// ../shared/validation/nccl-tests.json (8-GPU nodes, large messages).
// Every row is held to 5%. Two are not independent: the A100 clusters take
// their bus efficiency (0.67) from the A100 row, and the H100 clusters their
// nvls_efficiency (0.61) from the NVLS row. Before that figure, dtsim's NVLS
// (each GPU sends and receives the buffer once at the links' bus efficiency)
// was 31% optimistic; NVLS is now on in the bundled H100 and H200 clusters,
// as it is NCCL's default all-reduce there.
#include <cmath>
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
    if (cluster.empty()) continue;  // H800: no such device in the catalog
    const double published = row["busbw_GBps"], predicted = predicted_busbw(cluster, algo);
    const double error = (predicted - published) / published;
    fmt::print("{:<34} {:>10.0f} {:>10.1f} {:>+7.1f}%\n", system.substr(0, 20) + " " + algo, published, predicted, 100 * error);
    EXPECT_LT(std::abs(error), 0.05) << system << " " << algo;
  }
}

}  // namespace
