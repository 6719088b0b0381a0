// The device catalog as data, devices a cluster file describes itself, and fp4.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/device.hpp"
#include "scratch_dir.hpp"

using namespace dtsim;

TEST(Devices, TheCatalogIsDataAndEveryDeviceNamesItsSource) {
  hw::DeviceCatalog catalog;
  for (const char* name : {"H800-SXM", "H20", "GH200", "GB200", "GB300", "B300", "MI325X", "MI355X", "Gaudi3", "H100-SXM", "CPU"}) {
    const hw::Device* d = catalog.find(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_FALSE(d->source.empty()) << name;
    if (d->needs_profile) continue;
    EXPECT_GT(d->hbm_capacity.value(), 0) << name;
    EXPECT_GT(d->hbm_bandwidth.value(), 0) << name;
  }
  // The H800 is an H100 with a narrower NVLink.
  EXPECT_EQ(catalog.find("H800-SXM")->peak_for(hw::Dtype::kBf16).value(),
            catalog.find("H100-SXM")->peak_for(hw::Dtype::kBf16).value());
  EXPECT_LT(catalog.find("H800-SXM")->scale_up_bandwidth.value(), catalog.find("H100-SXM")->scale_up_bandwidth.value());
  // fp4 where the datasheet has it, twice fp8's rate on Blackwell.
  EXPECT_DOUBLE_EQ(catalog.find("B200")->peak_for(hw::Dtype::kFp4).value(),
                   2 * catalog.find("B200")->peak_for(hw::Dtype::kFp8).value());
  EXPECT_EQ(catalog.find("H100-SXM")->peak_for(hw::Dtype::kFp4).value(), 0);
  // Blackwell Ultra: the GB300 has the B300's die, 1.5x the GB200's dense fp4 and the same bf16.
  EXPECT_DOUBLE_EQ(catalog.find("GB300")->peak_for(hw::Dtype::kFp4).value(),
                   1.5 * catalog.find("GB200")->peak_for(hw::Dtype::kFp4).value());
  EXPECT_DOUBLE_EQ(catalog.find("GB300")->peak_for(hw::Dtype::kBf16).value(),
                   catalog.find("GB200")->peak_for(hw::Dtype::kBf16).value());
  EXPECT_GT(catalog.find("GB300")->hbm_capacity.value(), catalog.find("GB200")->hbm_capacity.value());
  const hw::Device gb300 = catalog.with_kernel_figures(*catalog.find("GB300"));
  const hw::Device b300 = catalog.with_kernel_figures(*catalog.find("B300"));
  ASSERT_TRUE(gb300.kernel_figures && b300.kernel_figures);
  EXPECT_EQ(gb300.kernel_figures->anchors.front().rate.value(), b300.kernel_figures->anchors.front().rate.value());
}

namespace {
driver::Simulation on(const std::string& cluster, const std::string& strategy) {
  return driver::simulate({"llama3-8b", cluster, strategy, std::nullopt, std::nullopt, std::nullopt, false, {}, {}});
}

std::string cluster_with(const nlohmann::json& device) {
  static const ScratchDir scratch;
  nlohmann::json c = {{"name", "custom"},
                      {"device", device},
                      {"nodes", 1},
                      {"gpus_per_node", 8},
                      {"intra_node", {{"kind", "nvswitch"}, {"bandwidth", "450 GB/s"}, {"latency", "0.7 us"}}}};
  const std::string path = scratch.file("custom_" + std::to_string(std::hash<std::string>{}(device.dump())) + ".json");
  std::ofstream(path) << c.dump();
  return path;
}
}  // namespace

TEST(Devices, Fp4RunsWhereTheDeviceHasItAndNowhereElse) {
  // Launched as a CUDA graph: the eager step on a GB200's Grace host waits for
  // its launches in the element-wise kernels, which hides how the GEMMs differ.
  const auto fp8 = on("gb200-nvl72", "fsdp,gpus=8,gbs=8,dtype=fp8,host_launch=0");
  const auto fp4 = on("gb200-nvl72", "fsdp,gpus=8,gbs=8,dtype=fp4,host_launch=0");
  EXPECT_LT(fp4.report.step_time, fp8.report.step_time);  // faster GEMMs, the same attention and element-wise work
  EXPECT_GT(fp4.report.step_time.value(), 0.5 * fp8.report.step_time.value());
  try {
    on("dgx-h100", "fsdp,gbs=8,dtype=fp4");
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/dtype: the H100-SXM has no fp4 units"), std::string::npos) << e.what();
  }
}

TEST(Devices, AClusterFileDescribesADeviceOfItsOwn) {
  const nlohmann::json h100_like = {{"name", "My-H100"},
                                    {"peak_tflops", {{"fp32", 67}, {"tf32", 494.7}, {"fp16", 989.4}, {"bf16", 989.4}, {"fp8", 1978.9}}},
                                    {"hbm", "80 GiB"},
                                    {"hbm_bandwidth", "3350 GB/s"},
                                    {"scale_up_bandwidth", "450 GB/s"},
                                    {"pcie_bandwidth", "64 GB/s"},
                                    {"source", "a test"}};
  const auto custom = on(cluster_with(h100_like), "fsdp,gbs=8");
  EXPECT_EQ(custom.report.info.device, "My-H100");
  EXPECT_GT(custom.report.step_time.value(), 0);
  nlohmann::json broken = h100_like;
  broken["hbm"] = "0 GiB";
  try {
    on(cluster_with(broken), "fsdp,gbs=8");
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/device/hbm: expected a positive memory size"), std::string::npos) << e.what();
  }
  broken = h100_like;
  broken["peak_tflops"] = {{"bf16", -1}};
  try {
    on(cluster_with(broken), "fsdp,gbs=8");
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/device/peak_tflops/bf16: expected 0 (no such unit) to 1e6 TFLOP/s, got -1"),
              std::string::npos)
        << e.what();
  }
}
