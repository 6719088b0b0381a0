// Strategies from the launch configurations people already have.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/plan/launch_config.hpp"
#include "dtsim/plan/strategy.hpp"

using namespace dtsim;

namespace {
std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}
// The one line `f` fails with, or "(no error)".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "(no error)";
}
// The one line Megatron-LM arguments from run.sh fail with.
std::string megatron_error(const char* args) {
  return error_of([&] { plan::from_megatron_args(args, "run.sh"); });
}
}  // namespace

TEST(LaunchConfig, MegatronScriptMapsKeyByKey) {
  const std::string path = std::string(DTSIM_SOURCE_DIR) + "/tests/inputs/launch/gpt3_175b.sh";
  plan::LaunchStrategy l = plan::from_megatron_args(read(path), path);
  EXPECT_EQ(l.strategy, "framework=megatron,mbs=1,gbs=1536,dtype=fp16,tp=8,pp=16,overlap=off");
  EXPECT_EQ(l.seq_len, 2048);
  // What does not change a step is reported, the model's own keys with why.
  EXPECT_TRUE(contains(l.ignored, "--lr"));
  EXPECT_TRUE(contains(l.ignored, "--num-layers (the model comes from --model)"));
  EXPECT_TRUE(l.not_modelled.empty());
  // The strategy parses as dtsim's own.
  plan::Strategy s = plan::parse_strategy(l.strategy);
  EXPECT_EQ(s.tp, 8);
  EXPECT_EQ(s.pp, 16);
  EXPECT_FALSE(s.overlap);
}

// Megatron-LM before Core (the SC'21 paper's scripts, examples/sc21/): the
// virtual stages as layers per virtual stage, checkpointing by method, and
// PyTorch DDP, which overlaps its bucketed all-reduce with the backward.
TEST(LaunchConfig, Megatron2021ArgumentsMapAsThatVersionReadThem) {
  plan::LaunchStrategy interleaved = plan::from_megatron_args(
      "--activations-checkpoint-method uniform --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
      "--num-layers 60 --num-layers-per-virtual-pipeline-stage 5 --DDP-impl local --fp16",
      "run_table_1.sh");
  EXPECT_EQ(interleaved.strategy, "framework=megatron,recompute=full,tp=8,pp=4,vpp=3,dtype=fp16,overlap=off");
  EXPECT_TRUE(interleaved.not_modelled.empty());
  EXPECT_TRUE(contains(interleaved.mapped, "--num-layers-per-virtual-pipeline-stage 5 -> vpp=3"));
  plan::LaunchStrategy ddp = plan::from_megatron_args("--checkpoint-activations --DDP-impl torch", "args");
  EXPECT_EQ(ddp.strategy, "framework=megatron,recompute=full,overlap=on");
  EXPECT_EQ(plan::parse_strategy(ddp.strategy).bucket.value(), 25.0 * 1024 * 1024);
  // The block method: the first n layers of each stage's chunk (1 by default).
  plan::LaunchStrategy block = plan::from_megatron_args(
      "--activations-checkpoint-method block --activations-checkpoint-num-layers 2", "args");
  EXPECT_EQ(block.strategy, "framework=megatron,recompute=full,recompute_layers=2,overlap=off");
  EXPECT_TRUE(block.not_modelled.empty());
  EXPECT_EQ(plan::from_megatron_args("--activations-checkpoint-method block", "args").strategy,
            "framework=megatron,recompute=full,recompute_layers=1,overlap=off");
  // Uniform checkpoints every n layers: the same layers recomputed, only what is kept differs.
  plan::LaunchStrategy every2 = plan::from_megatron_args(
      "--activations-checkpoint-method uniform --activations-checkpoint-num-layers 2", "args");
  EXPECT_EQ(every2.strategy, "framework=megatron,recompute=full,overlap=off");
  EXPECT_EQ(every2.not_modelled.size(), 1U);
  // Megatron-LM's fusions, off together; one alone is said, not modelled.
  plan::LaunchStrategy unfused = plan::from_megatron_args(
      "--no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion", "args");
  EXPECT_EQ(unfused.strategy, "framework=megatron,fusions=off,overlap=off");
  EXPECT_TRUE(unfused.not_modelled.empty());
  plan::LaunchStrategy one = plan::from_megatron_args("--no-bias-gelu-fusion", "args");
  EXPECT_EQ(one.strategy, "framework=megatron,overlap=off");
  EXPECT_EQ(one.not_modelled.size(), 1U);
  EXPECT_EQ(megatron_error("--pipeline-model-parallel-size 4 --num-layers 60 --num-layers-per-virtual-pipeline-stage 4"),
            "run.sh: /num-layers-per-virtual-pipeline-stage: expected a divisor of the 15 layers a pipeline stage holds, got 4");
  EXPECT_EQ(megatron_error("--num-layers-per-virtual-pipeline-stage 4"),
            "run.sh: /num-layers-per-virtual-pipeline-stage: needs --num-layers beside it (its virtual stages are a stage's "
            "layers over it)");
  EXPECT_EQ(megatron_error("--DDP-impl apex"), "run.sh: /DDP-impl: expected local or torch, got \"apex\"");
  EXPECT_EQ(megatron_error("--activations-checkpoint-method all"),
            "run.sh: /activations-checkpoint-method: expected uniform or block, got \"all\"");
}

// Megatron-Core's recomputation of some blocks (--recompute-method block,
// as Megatron-Bridge's recompute_num_layers sets it) and its checks.
TEST(LaunchConfig, MegatronCoreRecomputesSomeBlocksByTheBlockMethod) {
  plan::LaunchStrategy block = plan::from_megatron_args(
      "--recompute-granularity full --recompute-method block --recompute-num-layers 5", "args");
  EXPECT_EQ(block.strategy, "framework=megatron,recompute=full,recompute_layers=5,overlap=off");
  EXPECT_TRUE(block.not_modelled.empty());
  EXPECT_EQ(plan::parse_strategy(block.strategy).recompute_layers, 5);
  plan::LaunchStrategy uniform = plan::from_megatron_args(
      "--recompute-granularity full --recompute-method uniform --recompute-num-layers 4", "args");
  EXPECT_EQ(uniform.strategy, "framework=megatron,recompute=full,overlap=off");
  EXPECT_EQ(uniform.not_modelled.size(), 1U);
  EXPECT_EQ(megatron_error("--recompute-method block --recompute-num-layers 5"),
            "run.sh: /recompute-method: needs --recompute-granularity full beside it (as Megatron-Core does)");
  EXPECT_EQ(megatron_error("--recompute-granularity full --recompute-method block"),
            "run.sh: /recompute-method: needs --recompute-num-layers beside it (as Megatron-Core does)");
  EXPECT_EQ(megatron_error("--recompute-granularity full --recompute-method blocks --recompute-num-layers 5"),
            "run.sh: /recompute-method: expected uniform or block, got \"blocks\"");
  EXPECT_EQ(megatron_error("--recompute-granularity full --recompute-method block --recompute-num-layers 0"),
            "run.sh: /recompute-num-layers: expected an integer of at least 1, got \"0\"");
  EXPECT_EQ(megatron_error("--recompute-granularity full"),
            "run.sh: /recompute-granularity: full needs --recompute-method block or uniform beside it (as Megatron-Core "
            "does)");
  EXPECT_EQ(plan::from_megatron_args("--recompute-granularity selective", "args").strategy,
            "framework=megatron,recompute=selective,overlap=off");
}

TEST(LaunchConfig, MegatronFlagsAndTheirInteractions) {
  plan::LaunchStrategy l = plan::from_megatron_args(
      "--tensor-model-parallel-size=2 --context-parallel-size 2 --expert-model-parallel-size 4 --bf16 --fp8-format hybrid "
      "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap --sequence-parallel "
      "--recompute-activations --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
      "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
      "args");
  EXPECT_EQ(l.strategy,
            "framework=megatron,tp=2,cp=2,ep=4,dtype=fp8,zero=1,overlap=on,param_overlap=on,tp_overlap=on,sp=on,"
            "recompute=full,pipeline_split=balanced");
  EXPECT_TRUE(l.not_modelled.empty());
  // Megatron-LM 2021-2022's switch for the backward all-reduce beside the weight gradient.
  EXPECT_EQ(plan::from_megatron_args("--tensor-model-parallel-size 8 --no-async-tensor-model-parallel-allreduce", "args").strategy,
            "framework=megatron,tp=8,tp_overlap=off,overlap=off");
  // Megatron-LM 2021's switch for whole activations between stages (scatter-gather is its default).
  EXPECT_EQ(plan::from_megatron_args("--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 "
                                     "--no-scatter-gather-tensors-in-pipeline", "args").strategy,
            "framework=megatron,tp=4,pp=2,p2p_scatter=off,overlap=off");
  // MoE layouts: expert tensor parallelism and the capacity factor map too.
  plan::LaunchStrategy moe = plan::from_megatron_args(
      "--tensor-model-parallel-size 4 --expert-model-parallel-size 8 --expert-tensor-parallel-size 1 "
      "--moe-expert-capacity-factor 1.25 --sequence-parallel",
      "args");
  EXPECT_EQ(moe.strategy, "framework=megatron,tp=4,ep=8,etp=1,capacity_factor=1.25,sp=on,overlap=off");
  EXPECT_TRUE(moe.not_modelled.empty());
  EXPECT_EQ(plan::parse_strategy(moe.strategy).etp, 1);
  EXPECT_DOUBLE_EQ(plan::parse_strategy(moe.strategy).capacity_factor, 1.25);
  try {
    plan::from_megatron_args("--moe-expert-capacity-factor lots", "train.sh");
    FAIL() << "a capacity factor that is not a number";
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "train.sh: /moe-expert-capacity-factor: expected a factor from 1 to 64, got \"lots\"");
  }
  // The expert-parallel all-to-all overlapped with another micro-batch's compute.
  plan::LaunchStrategy a2a = plan::from_megatron_args("--expert-model-parallel-size 8 --overlap-moe-expert-parallel-comm "
                                                      "--delay-wgrad-compute", "args");
  EXPECT_EQ(a2a.strategy, "framework=megatron,ep=8,ep_overlap=on,overlap=off");
  EXPECT_TRUE(contains(a2a.not_modelled, "--delay-wgrad-compute"));
  // The gradients' dtype, as the run states it.
  EXPECT_EQ(plan::from_megatron_args("--bf16 --grad-reduce-in-bf16", "args").strategy,
            "framework=megatron,dtype=bf16,grad_reduce=bf16,overlap=off");
  EXPECT_EQ(plan::from_megatron_args("--fp16 --accumulate-allreduce-grads-in-fp32", "args").strategy,
            "framework=megatron,dtype=fp16,grad_reduce=fp32,overlap=off");
  // Transformer Engine's fused cross entropy; Megatron's own (native) stays the modelled fp32 one.
  plan::LaunchStrategy te = plan::from_megatron_args("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te", "args");
  EXPECT_EQ(te.strategy, "framework=megatron,loss=fused,overlap=off");
  plan::LaunchStrategy native = plan::from_megatron_args("--cross-entropy-loss-fusion", "args");
  EXPECT_EQ(native.strategy, "framework=megatron,overlap=off");
  EXPECT_TRUE(contains(native.not_modelled, "--cross-entropy-loss-fusion (impl native: modelled as the unfused fp32 cross entropy)"));
  // Transformer Engine's graphs of an MoE block's router and preprocessing
  // (a list argument); a layer's other scopes, or local graphs, are not modelled.
  plan::LaunchStrategy graphs = plan::from_megatron_args(
      "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router moe_preprocess --seq-length 4096", "args");
  EXPECT_EQ(graphs.strategy, "framework=megatron,cuda_graph=moe_router+moe_preprocess,overlap=off");
  EXPECT_EQ(graphs.seq_len, 4096);
  plan::LaunchStrategy attn = plan::from_megatron_args("--cuda-graph-impl transformer_engine --cuda-graph-scope attn", "args");
  EXPECT_TRUE(contains(attn.not_modelled, "--cuda-graph-scope attn"));
  plan::LaunchStrategy local = plan::from_megatron_args("--cuda-graph-impl local --cuda-graph-scope moe_router", "args");
  EXPECT_TRUE(contains(local.not_modelled, "--cuda-graph-scope moe_router (without --cuda-graph-impl transformer_engine)"));
  // FP8 GEMMs over a bf16 model, whichever flag comes first.
  EXPECT_EQ(plan::from_megatron_args("--fp8-format hybrid --bf16", "args").strategy, "framework=megatron,dtype=fp8,overlap=off");
  EXPECT_NO_THROW(plan::parse_strategy(l.strategy));
}

TEST(LaunchConfig, DeepSpeedConfigMapsKeyByKey) {
  const nlohmann::json ds = nlohmann::json::parse(R"({
    "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3, "overlap_comm": true, "reduce_bucket_size": 5e8,
                          "offload_optimizer": {"device": "cpu"}, "stage3_prefetch_bucket_size": 5e8},
    "optimizer": {"type": "AdamW"}, "gradient_clipping": 1.0})");
  plan::LaunchStrategy l = plan::from_deepspeed_config(ds, "ds.json");
  // In the order nlohmann keeps the keys (sorted).
  EXPECT_EQ(l.strategy,
            "framework=deepspeed,dtype=bf16,accumulation=4,optimizer=fused,mbs=2,overlap=on,bucket=1000000000 B,zero=3");
  EXPECT_TRUE(contains(l.not_modelled, "zero_optimization.offload_optimizer"));
  EXPECT_TRUE(contains(l.ignored, "zero_optimization.stage3_prefetch_bucket_size"));
  EXPECT_TRUE(contains(l.mapped, "optimizer.type AdamW -> optimizer=fused (DeepSpeed's)"));
  EXPECT_TRUE(contains(l.mapped, "(DeepSpeed) -> framework=deepspeed"));
  plan::Strategy s = plan::parse_strategy(l.strategy);
  EXPECT_EQ(s.zero, 3);
  EXPECT_EQ(s.accumulation, 4);
  EXPECT_TRUE(s.fused_optimizer());
  EXPECT_EQ(s.framework, plan::Framework::kDeepspeed);
  EXPECT_EQ(plan::from_deepspeed_config(nlohmann::json::parse(R"({"communication_data_type": "fp32"})"), "ds.json").strategy,
            "framework=deepspeed,grad_reduce=fp32,overlap=off");
  // DeepSpeed runs PyTorch's own Adam when asked to; other optimizers are not modelled.
  EXPECT_EQ(plan::from_deepspeed_config(nlohmann::json::parse(R"({"optimizer": {"type": "Adam", "params": {"torch_adam": true}}})"),
                                        "ds.json").strategy,
            "framework=deepspeed,optimizer=unfused,overlap=off");
  // Without overlap_comm DeepSpeed overlaps the reduction at stage 3 only
  // (zero/config.py); dtsim's own default is to overlap.
  for (int stage : {0, 1, 2, 3}) {
    const plan::LaunchStrategy d = plan::from_deepspeed_config(
        nlohmann::json::parse(fmt::format(R"({{"zero_optimization": {{"stage": {}}}}})", stage)), "ds.json");
    EXPECT_EQ(plan::parse_strategy(d.strategy).overlap, stage == 3) << stage;
    EXPECT_TRUE(contains(d.mapped, fmt::format("(no zero_optimization.overlap_comm) -> overlap={} (DeepSpeed's default at stage {})",
                                               stage == 3 ? "on" : "off", stage)));
  }
  // dtsim runs DeepSpeed's bucket defaults; turning them off is not modelled.
  const plan::LaunchStrategy buckets = plan::from_deepspeed_config(
      nlohmann::json::parse(R"({"zero_optimization": {"stage": 2, "contiguous_gradients": false, "use_multi_rank_bucket_allreduce": false}})"),
      "ds.json");
  EXPECT_TRUE(contains(buckets.not_modelled, "zero_optimization.contiguous_gradients false"));
  EXPECT_TRUE(contains(buckets.not_modelled, "zero_optimization.use_multi_rank_bucket_allreduce false"));
  EXPECT_TRUE(contains(plan::from_deepspeed_config(nlohmann::json::parse(R"({"optimizer": {"type": "OneBitAdam"}})"), "ds.json")
                           .not_modelled,
                       "optimizer.type OneBitAdam"));
  // The PipelineEngine partitions its sends over tensor parallelism unless told not to.
  const plan::LaunchStrategy whole = plan::from_deepspeed_config(
      nlohmann::json::parse(R"({"pipeline": {"pipe_partitioned": false, "grad_partitioned": false}})"), "ds.json");
  EXPECT_EQ(whole.strategy, "framework=deepspeed,p2p_scatter=off,overlap=off");
  EXPECT_TRUE(contains(whole.mapped, "pipeline.pipe_partitioned false -> p2p_scatter=off"));
  EXPECT_TRUE(contains(whole.not_modelled, "pipeline.grad_partitioned"));
  EXPECT_TRUE(plan::parse_strategy("framework=deepspeed,tp=2").splits_pipeline_sends());
  EXPECT_TRUE(contains(plan::from_deepspeed_config(nlohmann::json::parse(R"({"pipeline": {"activation_checkpoint_interval": 1}})"),
                                                   "ds.json")
                           .not_modelled,
                       "pipeline"));
}

TEST(LaunchConfig, BadValuesAreOneLineNamingTheKey) {
  EXPECT_EQ(error_of([] { plan::from_megatron_args("--tensor-model-parallel-size $TP", "run.sh"); }),
            "run.sh: /tensor-model-parallel-size: expected an integer of at least 1, got \"$TP\"");
  EXPECT_EQ(error_of([] { plan::from_megatron_args("python train.py", "run.sh"); }),
            "run.sh: expected Megatron-LM arguments (--tensor-model-parallel-size ...), found none");
  EXPECT_EQ(error_of([] { plan::from_deepspeed_config(nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": "auto"})"), "ds.json"); }),
            "ds.json: /train_micro_batch_size_per_gpu: is \"auto\" (set by the HF Trainer at launch): give the number it becomes");
  EXPECT_EQ(error_of([] { plan::from_deepspeed_config(nlohmann::json::parse(R"({"zero_optimization": {"stage": 4}})"), "ds.json"); }),
            "ds.json: /zero_optimization/stage: expected 0 to 3, got 4");
  EXPECT_EQ(error_of([] { plan::from_deepspeed_config(nlohmann::json::parse(R"({"optimizer": {"lr": 1}})"), "ds.json"); }),
            "ds.json: /optimizer/type: expected the optimizer's name, like \"AdamW\"");
  EXPECT_EQ(error_of([] {
              plan::from_deepspeed_config(nlohmann::json::parse(R"({"optimizer": {"type": "Adam", "params": {"torch_adam": "yes"}}})"),
                                          "ds.json");
            }),
            "ds.json: /optimizer/params/torch_adam: expected true or false, got \"yes\"");
  EXPECT_EQ(error_of([] { plan::from_deepspeed_config(nlohmann::json::parse(R"({"pipeline": {"pipe_partitioned": 0}})"), "ds.json"); }),
            "ds.json: /pipeline/pipe_partitioned: expected true or false, got 0");
  EXPECT_EQ(error_of([] { plan::from_deepspeed_config(nlohmann::json::parse(R"({"communication_data_type": "fp8"})"), "ds.json"); }),
            "ds.json: /communication_data_type: expected \"fp32\", \"bf16\" or \"fp16\", got \"fp8\"");
  EXPECT_EQ(error_of([] { plan::parse_strategy("optimizer=lion"); }), "--strategy: /optimizer: expected fused or unfused, got \"lion\"");
}

TEST(LaunchConfig, TheUsersKeysOverrideTheLaunchConfigs) {
  EXPECT_EQ(plan::merge_strategies("framework=megatron,tp=8,pp=16,mbs=1", "mbs=2,vpp=2"),
            "framework=megatron,tp=8,pp=16,mbs=2,vpp=2");
}

TEST(Strategy, AccumulationSetsTheGlobalBatch) {
  EXPECT_EQ(plan::parse_strategy("accumulation=4").accumulation, 4);
}
