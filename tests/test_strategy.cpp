#include <gtest/gtest.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/topo/cluster_loader.hpp"

using namespace dtsim;

namespace {

std::string error_of(const std::string& text, const char* model = "llama2-7b", std::optional<int> nodes = std::nullopt) {
  hw::DeviceCatalog catalog;
  model::Graph g = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/" + model + ".json");
  topo::Cluster c = topo::load_cluster(std::string(DTSIM_SOURCE_DIR) + "/topologies/dgx-h100.json", catalog, {nodes});
  try {
    plan::resolve(plan::parse_strategy(text), g, c);
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Strategy, DpDefaultsToWhatTheGpusLeave) {
  hw::DeviceCatalog catalog;
  model::Graph g = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/llama2-7b.json");
  topo::Cluster c = topo::load_cluster(std::string(DTSIM_SOURCE_DIR) + "/topologies/dgx-h100.json", catalog, {4});
  plan::ResolvedStrategy r = plan::resolve(plan::parse_strategy("tp=2,gbs=64"), g, c);
  EXPECT_EQ(r.s.dp, 16);
  EXPECT_EQ(r.micro_batches, 4);
  plan::ResolvedStrategy fewer = plan::resolve(plan::parse_strategy("dp=3"), g, c);
  EXPECT_EQ(fewer.world, 3);  // the first three GPUs
}

TEST(Strategy, PresetsExpandAndLaterKeysOverride) {
  plan::Strategy s = plan::parse_strategy("horovod,bucket=32 MiB");
  EXPECT_TRUE(s.overlap);
  EXPECT_DOUBLE_EQ(s.bucket.value(), 32.0 * 1048576);
  EXPECT_EQ(plan::parse_strategy("fsdp").zero, 3);
  EXPECT_EQ(error_of("mirrored,dp=16"), "--strategy: /dp: needs 16 GPUs, the cluster has 8");
}

TEST(Strategy, BadInputIsOneLineNamingTheKey) {
  EXPECT_EQ(error_of("dp=2,pipeline=4"),
            "--strategy: /pipeline: unknown key; valid keys: dp, tp, pp, cp, ep, gpus, mbs, gbs, dtype, overlap, zero, bucket, attention, sp, schedule, vpp, recompute, ps, sync, steps, p2p_overlap, collective, protocol, placement, framework, tp_overlap, param_overlap, contention");
  EXPECT_EQ(error_of("dp=two"), "--strategy: /dp: expected an integer from 1 to 1048576, got \"two\"");
  // Integers that wrapped before: dp*mbs was taken in 32 bits (SIGFPE at mbs=2^29), mbs=1e9 a negative batch.
  EXPECT_EQ(error_of("mbs=536870912,gbs=8"), "--strategy: /mbs: dp*mbs = 4294967296 samples per step is more than 1073741824");
  EXPECT_EQ(error_of("mbs=4294967297"), "--strategy: /mbs: expected an integer from 1 to 1073741824, got \"4294967297\"");
  EXPECT_EQ(error_of("tp=1048576,pp=1048576"), "--strategy: /tp: tp*cp*pp = 1099511627776 needs more GPUs than the cluster's 8");
  EXPECT_EQ(error_of("zero=4"), "--strategy: /zero: expected an integer from 0 to 3, got \"4\"");
  EXPECT_EQ(error_of("dtype=fp64"), "--strategy: /dtype: expected one of fp32, tf32, fp16, bf16, fp8, got \"fp64\"");
  EXPECT_EQ(error_of("gpus=8,dp=3"), "--strategy: /dp: expected a divisor of the 8 GPUs that leaves tp*cp*pp = 1, got 3");
  EXPECT_EQ(error_of("dp=8,gbs=20"), "--strategy: /gbs: expected a multiple of dp*mbs = 8, got 20");
  EXPECT_EQ(error_of("tp=3,dp=1"), "--strategy: /tp: expected a divisor of the model's 32 attention heads, got 3");
  EXPECT_EQ(error_of("pp=3,dp=1"), "--strategy: /pp: expected a divisor of the model's 32 layers, got 3");
  EXPECT_EQ(error_of("dp=16"), "--strategy: /dp: needs 16 GPUs, the cluster has 8");
  EXPECT_EQ(error_of("oops"), "--strategy: unknown preset \"oops\"; presets: one_device, mirrored, multi_worker_mirrored, "
                              "ddp, horovod, zero1, zero2, zero3, fsdp, parameter_server, megatron, tpu, central_storage");
  EXPECT_EQ(error_of("tp=2", "resnet50"), "--strategy: /tp: tensor parallelism needs a transformer; resnet50 is a layer graph");
}

TEST(Strategy, MegatronPresetPutsTpInANodeAndPpAcrossNodes) {
  hw::DeviceCatalog catalog;
  model::Graph g = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/llama2-70b.json");
  topo::Cluster c = topo::load_cluster(std::string(DTSIM_SOURCE_DIR) + "/topologies/superpod-h100.json", catalog, {16});
  plan::ResolvedStrategy r = plan::resolve(plan::parse_strategy("megatron,gbs=64"), g, c);
  EXPECT_EQ(r.s.tp, 8);   // 8 GPUs per node divide 64 heads
  EXPECT_EQ(r.s.pp, 16);  // 16 nodes divide 80 layers
  EXPECT_EQ(r.s.dp, 1);
  EXPECT_TRUE(r.s.sp);
}

TEST(Strategy, PresetsThatNeedAShapeSayWhich) {
  EXPECT_EQ(error_of("tpu"), "--strategy: /tpu: the tpu preset needs a torus cluster (intra_node kind \"torus\"); dgx-h100 is not one");
  EXPECT_EQ(error_of("parameter_server,tp=2"), "--strategy: /ps: parameter servers serve data-parallel workers; tp, pp, cp and ep must be 1");
  EXPECT_EQ(error_of("dtype=fp8,cp=3"), "--strategy: /cp: expected a divisor of the sequence length 4096, got 3");
  EXPECT_EQ(error_of("ep=2"), "--strategy: /ep: expert parallelism needs an MoE model; llama2-7b is dense");
}

TEST(Strategy, ADtypeTheDeviceCannotRunIsRejected) {
  hw::DeviceCatalog catalog;
  model::Graph g = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/bert-large.json");
  topo::Cluster tpu = topo::load_cluster(std::string(DTSIM_SOURCE_DIR) + "/topologies/tpu-v4-64.json", catalog);
  try {
    plan::resolve(plan::parse_strategy("dtype=fp16"), g, tpu);
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "--strategy: /dtype: the TPU-v4 has no fp16 units; it supports bf16");
  }
}
