#include <numeric>

#include <gtest/gtest.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/plan/lower.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/model/transformer.hpp"
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
            "--strategy: /pipeline: unknown key; valid keys: dp, tp, pp, cp, ep, etp, gpus, mbs, gbs, dtype, grad_reduce, overlap, zero, bucket, attention, sp, schedule, vpp, recompute, recompute_layers, ps, sync, steps, p2p_overlap, p2p_scatter, collective, protocol, placement, framework, optimizer, loss, host_launch, tp_overlap, param_overlap, ep_overlap, dispatcher, autocast, fusions, prefetch, contention, first_stage_layers, last_stage_layers, pipeline_split, accumulation, capacity_factor, cuda_graph, fsdp_version, bf16_optimizer");
  EXPECT_EQ(error_of("dp=two"), "--strategy: /dp: expected an integer from 1 to 1048576, got \"two\"");
  EXPECT_EQ(error_of("fsdp,prefetch=-1"), "--strategy: /prefetch: expected an integer from 0 to 64, got \"-1\"");
  // Integers that wrapped before: dp*mbs was taken in 32 bits (SIGFPE at mbs=2^29), mbs=1e9 a negative batch.
  EXPECT_EQ(error_of("mbs=536870912,gbs=8"), "--strategy: /mbs: dp*mbs = 4294967296 samples per step is more than 1073741824");
  EXPECT_EQ(error_of("mbs=4294967297"), "--strategy: /mbs: expected an integer from 1 to 1073741824, got \"4294967297\"");
  EXPECT_EQ(error_of("tp=1048576,pp=1048576"), "--strategy: /tp: tp*cp*pp = 1099511627776 needs more GPUs than the cluster's 8");
  EXPECT_EQ(error_of("zero=4"), "--strategy: /zero: expected an integer from 0 to 3, got \"4\"");
  EXPECT_EQ(error_of("tp_overlap=yes"), "--strategy: /tp_overlap: expected on, async or off, got \"yes\"");
  EXPECT_EQ(error_of("host_launch=8"), "--strategy: /host_launch: expected a duration like \"1.5 us\", got \"8\"");
  EXPECT_EQ(error_of("host_launch=2ms"), "--strategy: /host_launch: expected at most 1 ms per launch, got \"2ms\"");
  EXPECT_DOUBLE_EQ(plan::parse_strategy("host_launch=0").host_launch->value(), 0.0);
  EXPECT_DOUBLE_EQ(plan::parse_strategy("host_launch=12 us").host_launch->value(), 12e-6);
  EXPECT_EQ(error_of("loss=chunked"), "--strategy: /loss: expected fused or unfused, got \"chunked\"");
  EXPECT_TRUE(plan::parse_strategy("loss=fused").fused_loss);
  EXPECT_EQ(error_of("grad_reduce=fp8"), "--strategy: /grad_reduce: expected fp32, bf16 or fp16, got \"fp8\"");
  EXPECT_EQ(plan::parse_strategy("grad_reduce=bf16").grad_reduce, hw::Dtype::kBf16);
  EXPECT_FALSE(plan::parse_strategy("dtype=bf16").grad_reduce.has_value());
  EXPECT_EQ(error_of("dtype=fp64"), "--strategy: /dtype: expected one of fp32, tf32, fp16, bf16, fp8, fp4, got \"fp64\"");
  EXPECT_EQ(error_of("gpus=8,dp=3"), "--strategy: /dp: expected a divisor of the 8 GPUs that leaves tp*cp*pp = 1, got 3");
  EXPECT_EQ(error_of("dp=8,gbs=20"), "--strategy: /gbs: expected a multiple of dp*mbs = 8, got 20");
  EXPECT_EQ(error_of("tp=3,dp=1"), "--strategy: /tp: expected a divisor of the model's 32 attention heads, got 3");
  EXPECT_EQ(error_of("pp=3,dp=1"), "(no error)");  // 32 blocks on 3 stages: 11, 10, 11, as Megatron-Core allows
  EXPECT_EQ(error_of("dp=16"), "--strategy: /dp: needs 16 GPUs, the cluster has 8");
  EXPECT_EQ(error_of("oops"), "--strategy: unknown preset \"oops\"; presets: one_device, mirrored, multi_worker_mirrored, "
                              "ddp, horovod, zero1, zero2, zero3, fsdp, parameter_server, megatron, tpu, central_storage");
  EXPECT_EQ(error_of("tp=2", "resnet50"), "--strategy: /tp: tensor parallelism needs a transformer; resnet50 is a layer graph");
}

TEST(Strategy, TpOverlapDefaultsToWhatTheFrameworkRuns) {
  // Megatron's column-parallel layers overlap their backward collectives
  // since September 2021; other frameworks wait for each one.
  EXPECT_EQ(plan::parse_strategy("framework=megatron").tp_overlap_mode(), plan::TpOverlap::kAsync);
  EXPECT_EQ(plan::parse_strategy("framework=pytorch").tp_overlap_mode(), plan::TpOverlap::kOff);
  EXPECT_EQ(plan::parse_strategy("framework=megatron,tp_overlap=off").tp_overlap_mode(), plan::TpOverlap::kOff);
  EXPECT_EQ(plan::parse_strategy("framework=pytorch,tp_overlap=async").tp_overlap_mode(), plan::TpOverlap::kAsync);
  EXPECT_EQ(plan::parse_strategy("tp_overlap=on").tp_overlap_mode(), plan::TpOverlap::kOn);
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
  EXPECT_EQ(error_of("framework=megatron,cuda_graph=moe_router"),
            "--strategy: /cuda_graph: the moe_router and moe_preprocess scopes graph an MoE block's router; llama2-7b is dense");
  EXPECT_EQ(error_of("cuda_graph=moe_router", "mixtral-8x7b"),
            "--strategy: /cuda_graph: Megatron-Core's partial CUDA graphs of an MoE block; expected framework=megatron");
  EXPECT_EQ(error_of("cuda_graph=moe_preprocess", "mixtral-8x7b"),
            "--strategy: /cuda_graph: moe_preprocess needs moe_router in the scope too (Megatron-Core refuses it alone)");
  EXPECT_EQ(error_of("cuda_graph=attn", "mixtral-8x7b"),
            "--strategy: /cuda_graph: expected off, moe_router or moe_router+moe_preprocess, got \"attn\"");
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

namespace {
// Blocks per virtual stage of a strategy on a model of `layers` blocks.
std::vector<std::size_t> blocks_per_stage(const std::string& text, int layers) {
  plan::Strategy s = plan::parse_strategy(text);
  model::TransformerConfig c;
  c.name = "blocks";
  c.layers = layers;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 4;
  c.ffn_hidden = 256;
  c.vocab = 100;
  c.seq_len = 16;
  const model::Graph g = model::build_transformer(c);
  std::vector<std::size_t> out;
  for (const auto& stage : plan::stage_layers(g, s)) {
    std::size_t n = 0;
    for (int layer : stage) n += g.layers[static_cast<std::size_t>(layer)].role == model::LayerRole::kBlock ? 1 : 0;
    out.push_back(n);
  }
  return out;
}
}  // namespace

TEST(Strategy, PipelineStagesNeedNotDivideTheBlocks) {
  // Llama-3.1-405B: 126 blocks on 16 stages, the embedding and the head
  // counted as a block each: 7, then 8 on each of 14, then 7 (Llama 3's layout).
  std::vector<std::size_t> llama(16, 8);
  llama.front() = llama.back() = 7;
  EXPECT_EQ(blocks_per_stage("pp=16,pipeline_split=balanced", 126), llama);
  // Its interleaved form (Llama 3, section 3.3.2): one block a virtual stage,
  // the first holding the embedding only and the last the output layer only.
  std::vector<std::size_t> one_each(128, 1);
  one_each.front() = one_each.back() = 0;
  EXPECT_EQ(blocks_per_stage("pp=16,vpp=8,pipeline_split=balanced", 126), one_each);
  // BLOOM's 70 blocks on 12 stages: as even as they go.
  const auto bloom = blocks_per_stage("pp=12", 70);
  EXPECT_EQ(std::accumulate(bloom.begin(), bloom.end(), std::size_t{0}), 70u);
  EXPECT_EQ(*std::max_element(bloom.begin(), bloom.end()) - *std::min_element(bloom.begin(), bloom.end()), 1u);
  // Megatron-Core's --decoder-first/last-pipeline-num-layers: thin ends, even middle.
  EXPECT_EQ(blocks_per_stage("pp=4,first_stage_layers=2,last_stage_layers=4", 30),
            (std::vector<std::size_t>{2, 12, 12, 4}));
  // Interleaved: virtual stages, unevenly.
  EXPECT_EQ(blocks_per_stage("pp=2,vpp=2", 10), (std::vector<std::size_t>{2, 3, 2, 3}));
}

TEST(Strategy, StageLayersThatCannotFitAreOneLine) {
  EXPECT_EQ(error_of("pp=4,first_stage_layers=20,last_stage_layers=20"),
            "--strategy: /first_stage_layers: first and last stages hold 40 of the model's 32 blocks; the stages between "
            "hold the rest, at least one each");
  EXPECT_EQ(error_of("first_stage_layers=2"),
            "--strategy: /first_stage_layers: needs more than one pipeline stage (pp or vpp > 1)");
  EXPECT_EQ(error_of("pp=8,vpp=8"),
            "--strategy: /vpp: expected at most 32 blocks' worth of stages: 64 stages (pp*vpp = 8*8) for 32 blocks");
  // Balanced, the embedding and the head may fill a stage of their own; no more than that.
  EXPECT_EQ(error_of("pp=2,vpp=17,pipeline_split=balanced,gbs=16"), "(no error)");
  EXPECT_EQ(error_of("pp=5,vpp=7,pipeline_split=balanced"),
            "--strategy: /vpp: expected at most 34 blocks' worth of stages: 35 stages (pp*vpp = 5*7) for 32 blocks and "
            "the embedding and head counted as blocks");
  EXPECT_EQ(error_of("pp=2,pipeline_split=uneven"), "--strategy: /pipeline_split: expected even or balanced, got \"uneven\"");
}

TEST(Strategy, RecomputeLayersCountsWhatFullRecomputationReruns) {
  EXPECT_EQ(error_of("recompute_layers=4"),
            "--strategy: /recompute_layers: counts the blocks full recomputation reruns; it needs recompute=full");
  EXPECT_EQ(error_of("recompute=selective,recompute_layers=4"),
            "--strategy: /recompute_layers: counts the blocks full recomputation reruns; it needs recompute=full");
  EXPECT_EQ(error_of("recompute=full,recompute_layers=4"), "(no error)");
  EXPECT_EQ(error_of("recompute=full,recompute_layers=-1"),
            "--strategy: /recompute_layers: expected an integer from 0 to 10000, got \"-1\"");
}
