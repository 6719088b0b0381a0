// Whole predictions through the driver: properties that must hold whatever
// the constants, so that a wrong mechanism fails even when goldens are updated.
#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/explain.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/kernel_calls.hpp"
#include "dtsim/plan/op_recompute.hpp"
#include "dtsim/report/writers.hpp"
#include "dtsim/sim/replay.hpp"
#include "scratch_dir.hpp"

using namespace dtsim;

namespace {
driver::Simulation run(const std::string& strategy, std::optional<int> nodes = std::nullopt, bool full = false,
                       const std::string& model = "gpt3-1.3b", const std::string& cluster = "dgx-a100") {
  return driver::simulate({model, cluster, strategy, nodes, std::nullopt, std::nullopt, full, {}, {}});
}
// The layers whose forward the plan runs again before their backward.
std::set<std::string> recomputed_layer_names(const driver::Simulation& s) {
  std::set<std::string> names;
  for (const plan::Kernel& k : s.tasks.kernels) {
    const auto dot = k.name.rfind(".recompute");
    if (dot != std::string::npos) names.insert(k.name.substr(0, dot));
  }
  return names;
}
}  // namespace

TEST(Simulation, FullModeAgreesWithOneRankPerStageOnSymmetricInput) {
  driver::Simulation rep = run("ddp,gbs=32", 2);
  driver::Simulation full = run("ddp,gbs=32", 2, true);
  EXPECT_EQ(rep.timeline.makespan, full.timeline.makespan);
  EXPECT_DOUBLE_EQ(rep.report.mfu, full.report.mfu);
  EXPECT_EQ(full.tasks.spmd_ranks.size(), 16u);  // every rank runs
  EXPECT_EQ(rep.tasks.simulated.size(), 1u);
}

// --full without every rank's tasks in memory (issue 16): each rank replays
// its stage's tasks on its own groups, and the prediction is the one that
// every rank's own tasks give, to the byte of the JSON report, under
// pipelines, interleaving, ZeRO-3, context and expert parallelism, an expert
// grid and the flow-level network.
TEST(Simulation, SpmdRanksReplayWhatEveryRanksOwnTasksPredict) {
  struct Case {
    std::string model, cluster, strategy;
    int nodes;
    sim::NetworkMode network;
  };
  const std::vector<Case> cases = {
      {"gpt3-175b", "superpod-a100", "tp=8,pp=8,dp=2,gbs=64,mbs=1,recompute=full", 16, sim::NetworkMode::kAnalytic},
      {"llama2-7b", "dgx-h100", "zero3,gbs=64", 4, sim::NetworkMode::kAnalytic},
      {"llama2-7b", "dgx-h100", "tp=2,pp=2,dp=8,gbs=64,vpp=2", 4, sim::NetworkMode::kAnalytic},
      {"mixtral-8x7b", "dgx-h100", "tp=4,ep=8,etp=1,dp=8,gbs=64,sp=on", 4, sim::NetworkMode::kAnalytic},
      {"mixtral-8x7b", "dgx-h100", "tp=2,ep=4,etp=1,pp=2,vpp=2,dp=4,gbs=32,sp=on,ep_overlap=on", 4,
       sim::NetworkMode::kAnalytic},
      {"llama3-8b", "dgx-h100", "cp=2,tp=2,dp=4,gbs=16", 2, sim::NetworkMode::kAnalytic},
      {"llama2-7b", "dgx-h100", "tp=2,pp=2,dp=8,gbs=64", 4, sim::NetworkMode::kFlow},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + " " + c.strategy);
    driver::SimulationRequest request{c.model, c.cluster, c.strategy, c.nodes, std::nullopt, std::nullopt, true, {}, {}};
    request.network = c.network;
    driver::Simulation spmd = driver::simulate(request);
    request.every_rank_tasks = true;
    driver::Simulation every = driver::simulate(request);
    EXPECT_EQ(report::to_json(spmd.report).dump(), report::to_json(every.report).dump());
    EXPECT_EQ(spmd.timeline.makespan, every.timeline.makespan);
    EXPECT_EQ(spmd.timeline.events, every.timeline.events);
    // One rank's tasks per stage in memory, every rank replayed.
    EXPECT_EQ(spmd.tasks.simulated.size(), static_cast<std::size_t>(spmd.strategy.s.pp));
    EXPECT_EQ(spmd.tasks.spmd_ranks.size(), static_cast<std::size_t>(spmd.strategy.world));
    EXPECT_EQ(every.tasks.simulated.size(), static_cast<std::size_t>(every.strategy.world));
    EXPECT_LT(spmd.tasks.tasks.size() * 4, every.tasks.tasks.size());
  }
  // --explain's busiest links count every rank's traffic in both.
  driver::SimulationRequest request{"llama2-7b", "dgx-h100", "tp=2,pp=2,dp=8,gbs=64", 4, std::nullopt, std::nullopt, true, {}, {}};
  const driver::Explanation spmd = driver::explain(driver::simulate(request), request);
  request.every_rank_tasks = true;
  const driver::Explanation every = driver::explain(driver::simulate(request), request);
  ASSERT_EQ(spmd.busiest_links.size(), every.busiest_links.size());
  for (std::size_t i = 0; i < spmd.busiest_links.size(); ++i) {
    EXPECT_EQ(spmd.busiest_links[i].link, every.busiest_links[i].link);
    EXPECT_EQ(spmd.busiest_links[i].bytes.value(), every.busiest_links[i].bytes.value());
  }
}

TEST(Simulation, OverlapHidesGradientCommunication) {
  driver::Simulation on = run("ddp,gbs=32", 4);
  driver::Simulation off = run("ddp,gbs=128,overlap=off", 4);
  EXPECT_LT(on.report.breakdown.exposed_comm.dp, off.report.breakdown.exposed_comm.dp);
  EXPECT_LT(on.report.step_time, off.report.step_time);
  // Without overlap every bucket waits for the whole backward: exposed time is the sum of all-reduces.
  EXPECT_GT(off.report.breakdown.exposed_comm.dp.value(), 0);
}

// (Without autocast's gradient accumulation, which the first micro-batch
// does not run: the next test.)
TEST(Simulation, GradientAccumulationScalesComputeNotCommunication) {
  driver::Simulation one = run("ddp,gbs=8,autocast=off", 1);
  driver::Simulation two = run("ddp,gbs=16,autocast=off", 1);
  driver::Simulation four = run("ddp,gbs=32,autocast=off", 1);
  EXPECT_EQ(four.report.micro_batches, 4);
  // Each micro-batch adds one forward and backward; the optimizer step and the
  // gradient all-reduce happen once per step.
  const double per_micro_batch = (two.report.breakdown.compute - one.report.breakdown.compute).value();
  EXPECT_NEAR((four.report.breakdown.compute - two.report.breakdown.compute).value(), 2 * per_micro_batch, 1e-6);
  EXPECT_NEAR(four.report.breakdown.exposed_comm.dp.value(), one.report.breakdown.exposed_comm.dp.value(), 1e-6);
  EXPECT_NEAR(four.report.model_flops_per_step / one.report.model_flops_per_step, 4.0, 1e-9);
}

TEST(Simulation, ModelFlopsAreSixTimesParametersTimesTokensPlusAttention) {
  driver::Simulation s = run("one_device,gbs=4", std::nullopt, false, "llama2-7b", "dgx-h100");
  const double tokens = 4.0 * 4096, params = s.graph.parameter_count();
  const double layers = 32, hidden = 4096, seq = 4096;
  // 6·N·T for the weights (the embedding lookup does no matmul) plus 12·L·h·s·T for attention scores.
  const double embedding = 32000.0 * 4096;
  double expected = 6 * (params - embedding - layers * 2 * hidden - hidden) * tokens + 12 * layers * hidden * seq * tokens;
  EXPECT_NEAR(s.report.model_flops_per_step.value() / expected, 1.0, 1e-9);
}

TEST(Simulation, ZeroStagesCutMemoryInOrder) {
  auto peak = [](const std::string& s) {
    return run(s, std::nullopt, false, "llama2-7b", "dgx-h100").report.peak_bytes.value();
  };
  double ddp = peak("ddp"), z1 = peak("zero1"), z2 = peak("zero2"), z3 = peak("zero3");
  EXPECT_GT(ddp, z1);
  EXPECT_GT(z1, z2);
  EXPECT_GT(z2, z3);
}

TEST(Simulation, OneDeviceHasNoCommunication) {
  driver::Simulation s = run("one_device,gbs=2");
  EXPECT_EQ(s.report.gpus, 1);
  EXPECT_EQ(s.report.breakdown.exposed_comm.total().value(), 0);
  EXPECT_TRUE(s.tasks.calls.empty());
}

TEST(Simulation, FullModeAgreesWithDefaultModeUnderTensorAndPipelineParallelism) {
  const std::string strategy = "tp=4,pp=2,gbs=16,sp=on,recompute=selective,attention=standard";
  driver::Simulation rep = run(strategy, 2);
  driver::Simulation full = run(strategy, 2, true);
  EXPECT_EQ(rep.timeline.makespan, full.timeline.makespan);
  EXPECT_DOUBLE_EQ(rep.report.peak_bytes.value(), full.report.peak_bytes.value());
  EXPECT_EQ(rep.tasks.simulated.size(), 2u);
  EXPECT_EQ(full.tasks.spmd_ranks.size(), 16u);
}

TEST(Simulation, FullRecomputationCostsAForwardAndSavesMemory) {
  const std::string base = "tp=8,gbs=8,attention=standard";
  driver::Simulation none = run(base, 1);
  driver::Simulation full = run(base + ",recompute=full", 1);
  EXPECT_DOUBLE_EQ(full.report.model_flops_per_step.value(), none.report.model_flops_per_step.value());
  // Hardware FLOPs grow by one forward of the blocks: 4/3 of the model FLOPs, less the head that is not recomputed.
  EXPECT_GT(full.report.hardware_flops_per_step / none.report.hardware_flops_per_step, 1.25);
  EXPECT_LT(full.report.hardware_flops_per_step / none.report.hardware_flops_per_step, 1.34);
  EXPECT_LT(full.report.peak_bytes, none.report.peak_bytes);
}

// Full recomputation checkpoints the transformer blocks, as Megatron's
// TransformerBlock and FSDP's activation checkpointing wrap them: the
// embedding and the head with its loss run their forward once and keep
// what they saved (the head's logits) until their backward.
TEST(Simulation, FullRecomputationRecomputesTheBlocksOnly) {
  driver::Simulation full = run("tp=8,gbs=8,attention=standard,recompute=full", 1);
  const std::set<std::string> recomputed = recomputed_layer_names(full);
  int blocks = 0;
  for (const model::Layer& l : full.graph.layers) {
    if (l.role == model::LayerRole::kBlock) ++blocks;
    EXPECT_EQ(recomputed.count(l.name), l.role == model::LayerRole::kBlock ? 1u : 0u) << l.name;
  }
  EXPECT_EQ(recomputed.size(), static_cast<std::size_t>(blocks));
  EXPECT_GT(blocks, 0);
}

// On a layer graph every layer is a block: recomputed, it keeps only its
// first op's input through the forward and holds what it saves again only
// during its own backward. Before the forty-third session it kept all it
// saved as well, so recompute=full cost ResNet-50 a forward and saved nothing.
TEST(Simulation, FullRecomputationOfALayerGraphKeepsEachLayersInput) {
  auto resnet = [](const std::string& recompute) {
    return run("one_device,mbs=64,gbs=64,dtype=fp16,recompute=" + recompute, 1, false, "resnet50");
  };
  const driver::Simulation none = resnet("none"), full = resnet("full");
  double inputs = 0, largest = 0;
  for (const model::Layer& l : full.graph.layers) {
    inputs += l.input_elements;
    double saved = 0;
    for (const model::Op& op : l.ops) saved += op.saved.replicated_elements;
    largest = std::max(largest, saved);
  }
  EXPECT_DOUBLE_EQ(full.graph.layers.front().input_elements, 3.0 * 224 * 224);  // the image
  const double per_element = 2.0 * 64;                                           // fp16, 64 images
  const double kept = full.report.per_stage[0].activations.value();
  EXPECT_GE(kept, inputs * per_element);
  EXPECT_LE(kept, (inputs + largest) * per_element);
  EXPECT_LT(kept, none.report.per_stage[0].activations.value() / 2);
  EXPECT_GT(full.timeline.makespan, none.timeline.makespan);
}

// Megatron's block method (recompute_layers): the first n blocks of each
// model chunk are recomputed, the others keep their activations, so time
// and memory fall between none and full.
TEST(Simulation, RecomputeLayersRecomputesTheFirstBlocksOfEachModelChunk) {
  const std::string base = "pp=2,vpp=2,gbs=16";  // GPT-3 1.3B's 24 blocks: four chunks of 6
  driver::Simulation some = run(base + ",recompute=full,recompute_layers=2", 1);
  const std::set<std::string> recomputed = recomputed_layer_names(some);
  EXPECT_EQ(recomputed, (std::set<std::string>{"block.0", "block.1", "block.6", "block.7", "block.12", "block.13",
                                               "block.18", "block.19"}));
  driver::Simulation none = run(base, 1), full = run(base + ",recompute=full", 1);
  EXPECT_LT(none.timeline.makespan, some.timeline.makespan);
  EXPECT_LT(some.timeline.makespan, full.timeline.makespan);
  EXPECT_LT(full.report.peak_bytes, some.report.peak_bytes);
  EXPECT_LT(some.report.peak_bytes, none.report.peak_bytes);
  // As many as a chunk holds, or more, is every block.
  driver::Simulation all = run(base + ",recompute=full,recompute_layers=6", 1);
  EXPECT_EQ(all.timeline.makespan, full.timeline.makespan);
  EXPECT_DOUBLE_EQ(all.report.peak_bytes.value(), full.report.peak_bytes.value());
}

// torchtitan's per-op policy (recompute=op): a Llama block reruns its 2nd,
// 4th and 6th matmuls (wk, wo, w3) and everything but attention before its
// backward, and keeps its input, wq's, wv's, w1's, w2's and attention's
// outputs; so its time and memory fall between none and full.
TEST(Simulation, OpPolicyRecomputesEveryOtherMatmulAndKeepsTheRest) {
  const std::string base = "framework=pytorch,zero=3,dp=8,mbs=1,gbs=8,dtype=bf16";
  driver::Simulation none = run(base, 1, false, "llama3-8b"), op = run(base + ",recompute=op", 1, false, "llama3-8b"),
                     full = run(base + ",recompute=full", 1, false, "llama3-8b");
  const auto& t = *op.graph.transformer;
  const double s = static_cast<double>(op.graph.seq_len), h = static_cast<double>(t.hidden);
  const double kv = static_cast<double>(t.kv_heads * t.head_dim), f = static_cast<double>(t.ffn_hidden);
  double rerun_flops = 0;
  int rerun_gemms = 0;
  for (const plan::Kernel& k : op.tasks.kernels) {
    if (k.name.rfind("block.0.recompute", 0) != 0) continue;
    for (const hw::OpWork& w : k.ops) {
      EXPECT_NE(w.kind, model::OpKind::kAttention) << "attention's output is saved, not rerun";
      if (w.kind != model::OpKind::kGemm) continue;
      rerun_flops += w.flops.value();
      ++rerun_gemms;
    }
  }
  EXPECT_EQ(rerun_gemms, 3);
  EXPECT_NEAR(rerun_flops, 2 * s * h * (kv + h + f), 1e-9 * rerun_flops);  // wk, wo, w3
  const double kept = plan::op_policy_kept_bytes(op.graph, op.graph.layers[1], op.strategy).value();
  EXPECT_DOUBLE_EQ(kept, 2 * s * (h + h + kv + f + h + h));  // input, wq, wv, w1, w2, attention
  EXPECT_LT(none.timeline.makespan, op.timeline.makespan);
  EXPECT_LT(op.timeline.makespan, full.timeline.makespan);
  EXPECT_LT(full.report.peak_bytes, op.report.peak_bytes);
  EXPECT_LT(op.report.peak_bytes, none.report.peak_bytes);
  // Only PyTorch runs the policy, and only over blocks whose matmuls it counts.
  // Under DDP's autocast the rerun linears cast their weights again: 6 bytes
  // a parameter of wk, wo and w3.
  auto recompute_bytes = [](const driver::Simulation& sim) {
    double bytes = 0;
    for (const plan::Kernel& k : sim.tasks.kernels) {
      if (k.name.rfind("block.0.recompute", 0) != 0) continue;
      for (const hw::OpWork& w : k.ops) bytes += w.bytes_moved.value();
    }
    return bytes;
  };
  const std::string ddp = "framework=pytorch,dp=8,mbs=1,gbs=8,dtype=bf16,recompute=op";
  const double cast = recompute_bytes(run(ddp, 1, false, "llama3-8b")) - recompute_bytes(run(ddp + ",autocast=off", 1, false, "llama3-8b"));
  EXPECT_NEAR(cast, 6.0 * h * (kv + h + f), 1e-6 * cast);
  auto error_of = [](const std::string& strategy, const std::string& model) -> std::string {
    try {
      run(strategy, 1, false, model);
    } catch (const core::InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error_of("framework=megatron,dp=8,gbs=8,recompute=op", "llama3-8b"),
            "--strategy: /recompute: op is torchtitan's per-op policy (PyTorch); Megatron's own are selective and full");
  EXPECT_EQ(error_of("dp=8,gbs=8,recompute=op", "mixtral-8x7b"),
            "--strategy: /recompute: op is not modelled for MoE blocks; expected none, selective or full");
}

// fully_shard (fsdp_version=2): after each all-gather the compute stream
// copies the gathered buffer into the parameters (the layer's 16-bit
// weights read and written), and before each reduce-scatter it waits for
// the gradients' copy into the reduce buffer (16-bit read, reduce dtype
// written); FullyShardedDataParallel's flat buffers need neither.
TEST(Simulation, FullyShardCopiesEachGatherOutAndEachGradientIn) {
  const std::string base = "framework=pytorch,zero=3,dp=8,mbs=1,gbs=8,dtype=bf16,grad_reduce=fp32";
  driver::Simulation one = run(base, 1, false, "llama3-8b"), two = run(base + ",fsdp_version=2", 1, false, "llama3-8b");
  double block_params = 0;
  for (const model::Op& op : two.graph.layers[1].ops) block_params += op.params;
  auto tasks_named = [](const driver::Simulation& s, const std::string& suffix) {
    int tasks = 0;
    double bytes = 0;
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.kind != plan::TaskKind::kCompute || t.rank != 0) continue;
      const plan::Kernel& k = s.tasks.kernels[static_cast<std::size_t>(t.payload)];
      if (k.name != "block.0" + suffix) continue;
      ++tasks;
      for (const hw::OpWork& w : k.ops) bytes += w.bytes_moved.value();
    }
    return std::pair{tasks, bytes};
  };
  // Gathered for the forward and again for the backward; reduced once.
  EXPECT_EQ(tasks_named(two, ".fsdp_copy_out"), std::make_pair(2, 2 * (2 * 2.0 * block_params)));
  EXPECT_EQ(tasks_named(two, ".fsdp_copy_in"), std::make_pair(1, (2.0 + 4.0) * block_params));
  EXPECT_EQ(tasks_named(one, ".fsdp_copy_out").first, 0);
  EXPECT_EQ(tasks_named(one, ".fsdp_copy_in").first, 0);
  EXPECT_GT(two.timeline.makespan, one.timeline.makespan);
  EXPECT_THROW(run("framework=pytorch,zero=2,dp=8,gbs=8,fsdp_version=2", 1, false, "llama3-8b"), core::InputError);
  EXPECT_THROW(run("framework=deepspeed,zero=3,dp=8,gbs=8,fsdp_version=2", 1, false, "llama3-8b"), core::InputError);
}

// PyTorch autocast over fp32 weights: every micro-batch casts each linear
// weight to bf16 (6 bytes a parameter) and keeps the copy for its backward
// (2), whose bf16 weight gradient is cast back (6); after the first
// micro-batch autograd sums it into .grad (12). FSDP's 16-bit gathers,
// DeepSpeed's and Megatron's 16-bit models pay none of it.
TEST(Simulation, AutocastCastsWeightsEveryMicroBatchAndSumsFp32Gradients) {
  const std::string base = "gpus=1,mbs=1,gbs=4";
  driver::Simulation on = run(base, 1), off = run(base + ",autocast=off", 1);
  double gemm_params = 0, params = 0;
  for (const model::Layer& l : on.graph.layers) {
    for (const model::Op& op : l.ops) {
      params += op.params;
      if (op.kind == model::OpKind::kGemm) gemm_params += op.params;
    }
  }
  // The kernels' streamed bytes, per task run.
  auto streamed = [](const driver::Simulation& s, const std::string& suffix) {
    double bytes = 0;
    int tasks = 0;
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.kind != plan::TaskKind::kCompute) continue;
      const plan::Kernel& k = s.tasks.kernels[static_cast<std::size_t>(t.payload)];
      if (k.name.size() < suffix.size() || k.name.compare(k.name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
      ++tasks;
      for (const hw::OpWork& w : k.ops) bytes += w.bytes_moved.value();
    }
    return std::pair{bytes, tasks};
  };
  const int micro_batches = 4;
  // The embedding's backward also zeroes its fp32 table (2 bytes more a
  // row element than a 16-bit one: LayerSteps::embedding_gradient_bytes).
  double table = 0;
  for (const model::Layer& l : on.graph.layers) {
    for (const model::Op& op : l.ops) table += op.kind == model::OpKind::kEmbedding ? op.params : 0.0;
  }
  EXPECT_NEAR(streamed(on, ".fwd").first - streamed(off, ".fwd").first, micro_batches * 6.0 * gemm_params, 1e-6 * gemm_params);
  EXPECT_NEAR(streamed(on, ".bwd").first - streamed(off, ".bwd").first,
              micro_batches * (6.0 * gemm_params + 2.0 * table), 1e-6 * gemm_params);
  const auto [summed, sums] = streamed(on, ".grad_accumulate");
  EXPECT_NEAR(summed, (micro_batches - 1) * 12.0 * params, 1e-6 * params);
  EXPECT_GT(sums, 0);
  EXPECT_EQ(streamed(off, ".grad_accumulate").second, 0);
  EXPECT_GT(on.report.step_time, off.report.step_time);
  EXPECT_NEAR((on.report.per_stage[0].activations - off.report.per_stage[0].activations).value(), 2.0 * gemm_params,
              1e-6 * gemm_params);
  // Neither FSDP nor a 16-bit model pays it.
  for (const std::string other : {"gpus=8,mbs=1,gbs=32,zero=3", "gpus=1,mbs=1,gbs=4,framework=deepspeed",
                                  "gpus=1,mbs=1,gbs=4,framework=megatron"}) {
    EXPECT_EQ(run(other, 1).report.step_time, run(other + ",autocast=off", 1).report.step_time) << other;
  }
}

// A pipeline send carries 1/tp of the activation under Megatron-LM's
// scatter-gather and DeepSpeed's PipelineEngine (which partitions its
// output over the tensor-parallel group), and the whole of it from every
// tensor-parallel rank under p2p_scatter=off; with sequence parallelism the
// activation is 1/tp on every rank either way. GPT-3 1.3B, one micro-batch
// of one sequence of 2048 x 2048 in fp16: 8 MiB whole.
TEST(Simulation, PipelineSendsCarryTheirTensorParallelShareOrTheWholeActivation) {
  auto sent = [](const std::string& strategy) {
    const driver::Simulation s = run("tp=2,pp=2,mbs=1,gbs=8,dtype=fp16," + strategy, 1);
    double bytes = -1;
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.kind != plan::TaskKind::kComm || t.stream != plan::Stream::kPointToPoint) continue;
      const double b = s.tasks.calls[static_cast<std::size_t>(t.payload)].bytes.value();
      EXPECT_TRUE(bytes < 0 || b == bytes) << "every transfer the same size";
      bytes = b;
    }
    return bytes;
  };
  const double whole = 2048.0 * 2048.0 * 2.0;
  EXPECT_DOUBLE_EQ(sent("p2p_scatter=on"), whole / 2);
  EXPECT_DOUBLE_EQ(sent("p2p_scatter=off"), whole);
  EXPECT_DOUBLE_EQ(sent("p2p_scatter=off,sp=on"), whole / 2);
  // DeepSpeed's PipelineEngine partitions its sends (is_pipe_partitioned) unless told not to.
  EXPECT_DOUBLE_EQ(sent("framework=deepspeed"), whole / 2);
  EXPECT_DOUBLE_EQ(sent("framework=deepspeed,p2p_scatter=off"), whole);
  EXPECT_DOUBLE_EQ(sent("framework=megatron"), whole / 2);
}

// A layer graph's stage sends what its last layer outputs, which differs
// from boundary to boundary (a CNN's feature maps shrink); before, a graph
// without a transformer's hidden size sent nothing and its pipeline
// transfers were free.
TEST(Simulation, ALayerGraphsStageSendsItsLastLayersOutput) {
  auto sent = [](const std::string& model, const std::string& strategy) {
    const driver::Simulation s = run(strategy, 1, false, model);
    std::set<double> sizes;
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.kind != plan::TaskKind::kComm || t.stream != plan::Stream::kPointToPoint) continue;
      sizes.insert(s.tasks.calls[static_cast<std::size_t>(t.payload)].bytes.value());
    }
    return sizes;
  };
  // The mlp's layers each output 1024 features: 2 samples of fp16.
  EXPECT_EQ(sent("mlp", "pp=2,mbs=2,gbs=8,dtype=fp16"), std::set<double>{2.0 * 1024 * 2});
  // A first stage left without layers passes the model's input on (1024 features).
  EXPECT_EQ(sent("mlp", "pp=2,first_stage_layers=0,mbs=2,gbs=8,dtype=fp16"), std::set<double>{2.0 * 1024 * 2});
  EXPECT_EQ(sent("resnet50", "pp=2,dp=1,first_stage_layers=0,mbs=8,gbs=64,dtype=fp16"),
            std::set<double>{8.0 * 3 * 224 * 224 * 2});
  // ResNet-50 on four stages: stage 0 ends in a layer1 block (56x56x256),
  // stages 1 and 2 in layer3 blocks (14x14x1024); 8 samples of fp16.
  EXPECT_EQ(sent("resnet50", "pp=4,dp=1,mbs=8,gbs=64,dtype=fp16"),
            (std::set<double>{8.0 * 14 * 14 * 1024 * 2, 8.0 * 56 * 56 * 256 * 2}));
}

// The receiving stage all-gathers a split send over its tensor-parallel
// group before it computes on it (Megatron-LM's gather_split_1d_tensor,
// DeepSpeed's PartitionedTensor.full()): one whole activation gathered per
// receive, forward and backward; none when the send was whole, nor under
// sequence parallelism, whose activations stay split.
TEST(Simulation, APartitionedReceiveIsGatheredOverTensorParallelismBeforeItIsUsed) {
  struct Counted {
    int gathers = 0;
    double gathered_bytes = 0;
    bool every_gather_after_its_receive = true;
  };
  auto count = [](const std::string& strategy) {
    const driver::Simulation s = run("tp=2,pp=2,mbs=1,gbs=8,dtype=fp16," + strategy, 1);
    Counted c;
    for (std::uint32_t id = 0; id < s.tasks.tasks.size(); ++id) {
      const plan::Task& t = s.tasks.tasks[id];
      if (t.kind != plan::TaskKind::kComm) continue;
      const plan::CommCall& call = s.tasks.calls[static_cast<std::size_t>(t.payload)];
      if (t.stream != plan::Stream::kTpComm || call.op != plan::CommOp::kAllGather || t.layer != -1) continue;
      ++c.gathers;
      c.gathered_bytes = call.bytes.value();
      bool after = false;
      for (std::uint32_t d = t.deps_begin; d < t.deps_end; ++d) {
        const plan::Task& dep = s.tasks.tasks[s.tasks.deps[d]];
        after = after || (dep.kind == plan::TaskKind::kComm && dep.stream == plan::Stream::kPointToPoint);
      }
      c.every_gather_after_its_receive = c.every_gather_after_its_receive && after;
    }
    return c;
  };
  const double whole = 2048.0 * 2048.0 * 2.0;
  const Counted split = count("p2p_scatter=on");
  EXPECT_GT(split.gathers, 0);
  EXPECT_DOUBLE_EQ(split.gathered_bytes, whole);
  EXPECT_TRUE(split.every_gather_after_its_receive);
  // One rank a stage is lowered: the second stage gathers each micro-batch's
  // activation, the first each gradient, 4 micro-batches (dp 2, gbs 8).
  EXPECT_EQ(split.gathers, 2 * 4);
  EXPECT_EQ(count("p2p_scatter=off").gathers, 0);
  EXPECT_EQ(count("p2p_scatter=on,sp=on").gathers, 0);
  EXPECT_GT(count("framework=deepspeed").gathers, 0);
}

// DeepSpeed's ZeRO-2 reduces each backward's gradients to the ranks that
// own them, every micro-batch; its ZeRO-1, like DDP, reduces once a step.
TEST(Simulation, DeepSpeedZeroTwoReducesEveryMicroBatch) {
  auto reduced = [](const std::string& strategy) {
    const driver::Simulation s = run(strategy, 1);
    double bytes = 0;
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.kind == plan::TaskKind::kComm && t.stream == plan::Stream::kDpComm && t.phase == plan::Phase::kBackward) {
        bytes += s.tasks.calls[static_cast<std::size_t>(t.payload)].bytes.value();
      }
    }
    return bytes;
  };
  const double once = reduced("framework=deepspeed,zero=2,mbs=1,gbs=8");
  EXPECT_GT(once, 0);
  EXPECT_NEAR(reduced("framework=deepspeed,zero=2,mbs=1,gbs=32"), 4 * once, 1e-6 * once);
  EXPECT_NEAR(reduced("framework=deepspeed,zero=1,mbs=1,gbs=32"), once, 1e-6 * once);
  EXPECT_NEAR(reduced("framework=pytorch,zero=2,grad_reduce=bf16,mbs=1,gbs=32"), once, 1e-6 * once);
}

TEST(Simulation, ContextParallelismSplitsActivationsAndOverlapsTheKvRing) {
  auto llama = [](const std::string& s) {
    return driver::simulate({"llama3-8b", "dgx-h100", s, std::nullopt, std::nullopt, std::nullopt, false, {}, {}});
  };
  driver::Simulation one = llama("gpus=2,tp=2,gbs=1,recompute=selective,autocast=off");
  driver::Simulation two = llama("gpus=4,tp=2,cp=2,gbs=1,recompute=selective,autocast=off");
  // Each cp rank keeps the activations of half the tokens (autocast's weight
  // copies, which cp does not split, left out).
  EXPECT_NEAR(two.report.per_stage[0].activations / one.report.per_stage[0].activations, 0.5, 0.02);
  // The KV exchange hides behind attention blocks: far less exposed than it takes.
  core::Seconds ring;
  for (std::size_t id = 0; id < two.tasks.tasks.size(); ++id) {
    const plan::Task& t = two.tasks.tasks[id];
    if (t.stream == plan::Stream::kCpComm) ring += core::to_seconds(two.timeline.spans[id].end - two.timeline.spans[id].start);
  }
  EXPECT_GT(ring.value(), 0);
  EXPECT_LT(two.report.breakdown.exposed_comm.cp.value(), 0.5 * ring.value());
  EXPECT_DOUBLE_EQ(two.report.model_flops_per_step.value(), one.report.model_flops_per_step.value());
}

TEST(Simulation, ExpertParallelismShardsExpertsAndAddsAllToAll) {
  auto mixtral = [](const std::string& s, bool full = false) {
    return driver::simulate({"mixtral-8x7b", "dgx-h100", s, 2, std::nullopt, std::nullopt, full, {}, {}});
  };
  driver::Simulation dense = mixtral("tp=2,pp=4,gbs=4,zero=1,recompute=full");
  driver::Simulation ep = mixtral("tp=2,pp=4,ep=2,gbs=4,zero=1,recompute=full");
  EXPECT_LT(ep.report.per_stage[0].params, dense.report.per_stage[0].params * 0.6);
  EXPECT_GT(ep.report.breakdown.exposed_comm.ep.value(), 0);
  driver::Simulation full = mixtral("tp=2,pp=4,ep=2,gbs=4,zero=1,recompute=full", true);
  EXPECT_EQ(full.timeline.makespan, ep.timeline.makespan);
}

namespace {
driver::Simulation resnet(const std::string& strategy, std::vector<double> speeds) {
  return driver::simulate({"resnet50", "dgx-a100", strategy + ",gpus=4,mbs=256,dtype=fp16", std::nullopt, std::nullopt,
                           std::nullopt, false, std::move(speeds), {}});
}
}  // namespace

TEST(ParameterServer, AsynchronousWorkersOutrunAStragglerThatStallsSynchronousOnes) {
  const std::vector<double> even{1, 1, 1, 1}, straggler{1, 1, 1, 0.5};
  double async_even = resnet("parameter_server,ps=4", even).report.samples_per_s;
  double async_slow = resnet("parameter_server,ps=4", straggler).report.samples_per_s;
  double sync_even = resnet("parameter_server,ps=4,sync=on", even).report.samples_per_s;
  double sync_slow = resnet("parameter_server,ps=4,sync=on", straggler).report.samples_per_s;
  double ddp_slow = resnet("ddp", straggler).report.samples_per_s;
  EXPECT_NEAR(async_even / sync_even, 1.0, 0.05);
  // Asynchronous: three full workers and a half one, 3.5/4 of the throughput.
  EXPECT_NEAR(async_slow / async_even, 3.5 / 4, 0.03);
  // Synchronous (PS or all-reduce): everyone waits for the straggler, half the throughput.
  EXPECT_NEAR(sync_slow / sync_even, 0.5, 0.03);
  EXPECT_NEAR(ddp_slow / sync_even, 0.5, 0.05);
}

TEST(ParameterServer, StalenessIsZeroWhenSynchronousOrAloneAndGrowsWithWorkers) {
  auto stats = [](const driver::Simulation& s) { return *s.report.parameter_server; };
  EXPECT_EQ(stats(resnet("parameter_server,ps=4,sync=on", {})).max_staleness, 0);
  EXPECT_EQ(stats(driver::simulate({"resnet50", "dgx-a100", "parameter_server,gpus=1,mbs=64", std::nullopt, std::nullopt,
                                    std::nullopt, false, {}, {}}))
                .max_staleness,
            0);
  auto four = stats(resnet("parameter_server,ps=4", {}));
  EXPECT_EQ(four.shards, 4);
  EXPECT_GT(four.mean_staleness, 1.0);  // the other three workers' updates land between a pull and a push
  EXPECT_LE(four.max_staleness, 2 * 3);
  int pushes = 0;
  for (int n : four.staleness_histogram) pushes += n;
  EXPECT_EQ(pushes, 4 * four.iterations);
}

// A parameter-server step of a transformer: full recomputation keeps only
// each block's input, as the collective lowering counts it, and the
// breakdown is the mean step's, as the step time is (it covered all the
// steps simulated, 188% of the step for this one, until the twenty-ninth
// session).
TEST(ParameterServer, RecomputationAndTheBreakdownAreTheMeanStepsAsWithCollectives) {
  auto gpt = [](const std::string& strategy) {
    return driver::simulate(
        {"gpt3-1.3b", "dgx-a100", strategy + ",gbs=64,mbs=8", std::nullopt, std::nullopt, std::nullopt, false, {}, {}});
  };
  const driver::Simulation kept = gpt("parameter_server,sync=on,recompute=none");
  const driver::Simulation rerun = gpt("parameter_server,sync=on,recompute=full");
  const driver::Simulation collective = gpt("ddp,recompute=full");
  EXPECT_LT(rerun.report.per_stage[0].activations.value(), 0.25 * kept.report.per_stage[0].activations.value());
  EXPECT_NEAR(rerun.report.per_stage[0].activations.value() / collective.report.per_stage[0].activations.value(), 1.0,
              1e-9);
  EXPECT_GT(rerun.report.breakdown.compute.value(), kept.report.breakdown.compute.value());
  const driver::Simulation asynchronous = gpt("parameter_server,recompute=none");
  for (const driver::Simulation* s : {&kept, &rerun, &asynchronous}) {
    const report::Breakdown& b = s->report.breakdown;
    const double sum = b.compute.value() + b.exposed_comm.total().value() + b.bubble.value();
    EXPECT_GT(s->report.parameter_server->iterations, 1);
    EXPECT_LE(b.compute.value(), s->report.step_time.value());
    // Asynchronous workers' step time is their throughput's, which the
    // stragglers' tails of the last step do not lengthen.
    const double mean_step = core::to_seconds(s->timeline.makespan).value() / s->report.parameter_server->iterations;
    EXPECT_NEAR(sum / mean_step, 1.0, 0.01) << s->report.info.strategy;
  }
  EXPECT_NEAR(core::to_seconds(kept.timeline.makespan).value() / kept.report.parameter_server->iterations /
                  kept.report.step_time.value(),
              1.0, 1e-9);
}

TEST(ParameterServer, CentralStorageKeepsWeightsOnTheFirstHost) {
  driver::Simulation s = driver::simulate({"resnet50", "dgx-a100", "central_storage,mbs=128", 2, std::nullopt, std::nullopt,
                                           false, {}, {}});
  EXPECT_EQ(s.report.gpus, 8);  // one node, however many the cluster has
  EXPECT_EQ(s.tasks.ps_shards, 1);
  EXPECT_EQ(s.tasks.gpu_of_rank.back(), s.cluster.host_endpoint(0));
  EXPECT_EQ(s.report.per_stage[0].optimizer.value(), 0);  // Adam's state lives with the variables on the host
}

TEST(Explain, TheCriticalPathSpansTheStepAndWhatIfsAreRealResimulations) {
  driver::SimulationRequest request{"gpt3-1.3b", "dgx-a100", "ddp,gbs=128,overlap=off", 4, {}, {}, false, {}, {}};
  driver::Simulation sim = driver::simulate(request);
  driver::Explanation why = driver::explain(sim, request);
  double path = 0;
  for (const auto& s : why.critical_path.shares) path += s.time.value();
  EXPECT_NEAR(path, core::to_seconds(sim.timeline.makespan).value(), 1e-9);  // from 0 to the last task, nothing lost
  bool dp_on_path = false;
  for (const auto& s : why.critical_path.shares) dp_on_path |= s.kind == "comm: dp" && s.time.value() > 0;
  EXPECT_TRUE(dp_on_path);  // without overlap the all-reduces follow the backward
  // Compute on the path is split by op kind, GEMMs first for a transformer of this size.
  std::map<std::string, double> by_kind;
  for (const auto& s : why.critical_path.shares) by_kind[s.kind] = s.time.value();
  for (const char* kind : {"compute: GEMM", "compute: attention", "compute: norm", "compute: element-wise"}) {
    EXPECT_GT(by_kind[kind], 0) << kind;
  }
  EXPECT_EQ(why.critical_path.shares.front().kind, "compute: GEMM");
  ASSERT_EQ(why.what_if.size(), 5u);
  for (const auto& w : why.what_if) {
    EXPECT_GE(w.saving, -1e-9) << w.resource;  // nothing gets slower when a resource gets better
    EXPECT_LT(w.saving, 0.5 + 1e-9) << w.resource;  // doubling one resource at most halves the step
  }
  EXPECT_GE(why.what_if.front().saving, why.what_if.back().saving);
  EXPECT_EQ(why.verdict.rfind("Bound by ", 0), 0u);
  ASSERT_FALSE(why.busiest_links.empty());
  EXPECT_LE(why.busiest_links.size(), 5u);
  for (const auto& l : why.busiest_links) {
    EXPECT_NE(l.link.find(" -> "), std::string::npos);
    EXPECT_GT(l.utilization, 0.0);
    EXPECT_LE(l.utilization, 1.0 + 1e-9);  // no link carries more than its rate allows over the step
  }
  // One node: doubling the network changes nothing.
  driver::SimulationRequest one_node{"gpt3-1.3b", "dgx-a100", "ddp,gbs=32", 1, {}, {}, false, {}, {}};
  driver::Simulation single = driver::simulate(one_node);
  for (const auto& w : driver::explain(single, one_node).what_if) {
    if (w.resource == "inter-node links") {
      EXPECT_NEAR(w.saving, 0.0, 1e-9);
    }
  }
}

// Spreading ranks over nodes puts tensor parallelism on the network: the
// packed placement keeps it on NVLink and is faster. Random is a fixed shuffle.
// Without launch costs (host_launch=0): tp 8 leaves a 1.3B model's ranks
// kernels shorter than an eager step's host time per kernel, which would
// set the step either way.
TEST(Simulation, PlacementDecidesWhichLinksAGroupCrosses) {
  auto step = [](const std::string& placement) {
    return run("tp=8,dp=2,gbs=16,host_launch=0,placement=" + placement, 2, false, "gpt3-1.3b", "dgx-h100")
        .report.step_time.value();
  };
  const double packed = step("packed"), spread = step("spread");
  EXPECT_GT(spread, 1.2 * packed);
  EXPECT_DOUBLE_EQ(step("random"), step("random"));
  driver::Simulation s = run("tp=8,dp=2,gbs=16,placement=spread", 2, false, "gpt3-1.3b", "dgx-h100");
  EXPECT_EQ(s.tasks.gpu_of_rank[1], 8);  // rank 1 on the second node
}

namespace {

// overlap=off means after the pipeline flush, also under interleaving: no
// data-parallel reduction starts before the last backward kernel has ended
// (it used to start as soon as each model chunk's last backward was done).
TEST(Simulation, WithoutOverlapGradientsWaitForThePipelineFlushAlsoWhenInterleaved) {
  driver::SimulationRequest request{"gpt3-1.3b", "dgx-h100", "pp=2,vpp=2,dp=4,gbs=32,overlap=off", 1, {}, {}, false, {}, {}};
  driver::Simulation sim = driver::simulate(request);
  for (int rank : {0, 4}) {
    std::int64_t last_backward = 0, first_reduce = std::numeric_limits<std::int64_t>::max();
    for (std::size_t i = 0; i < sim.tasks.tasks.size(); ++i) {
      const plan::Task& t = sim.tasks.tasks[i];
      if (t.rank != sim.tasks.simulated[static_cast<std::size_t>(rank == 0 ? 0 : 1)].rank) continue;
      const auto& span = sim.timeline.spans[i];
      if (t.kind == plan::TaskKind::kCompute && t.phase == plan::Phase::kBackward) {
        last_backward = std::max(last_backward, span.end.count);
      }
      if (t.kind == plan::TaskKind::kComm && t.stream == plan::Stream::kDpComm && t.phase == plan::Phase::kBackward) {
        first_reduce = std::min(first_reduce, span.start.count);
      }
    }
    EXPECT_GE(first_reduce, last_backward) << "stage of rank " << rank;
  }
  // With overlap each chunk's gradients leave during the rest of the backward.
  request.strategy = "pp=2,vpp=2,dp=4,gbs=32,overlap=on";
  EXPECT_LT(driver::simulate(request).report.step_time.value(), sim.report.step_time.value());
}

// The ZeRO-1 parameter all-gather overlapped with the forward (Megatron-Core
// --overlap-param-gather) is cheaper than gathering after the optimizer step.
TEST(Simulation, OverlappedParameterGatherHidesBehindTheForward) {
  driver::SimulationRequest request{"llama2-7b", "dgx-h100", "framework=megatron,zero=1,gbs=16", 2, {}, {}, false, {}, {}};
  const double after = driver::simulate(request).report.step_time.value();
  request.strategy = "framework=megatron,zero=1,gbs=16,param_overlap=on";
  const double overlapped = driver::simulate(request).report.step_time.value();
  EXPECT_LT(overlapped, after);
  request.strategy = "framework=megatron,zero=3,param_overlap=on";
  EXPECT_THROW(driver::simulate(request), core::InputError);
}

}  // namespace

TEST(Simulation, MegatronReducesTheInputGradientBesideTheWeightGradient) {
  // Megatron-LM's column-parallel layers (since September 2021) start the
  // input gradient's collective and compute the weight gradient beside it;
  // under sequence parallelism they keep their input sharded and gather it
  // again in the backward, beside the data gradient.
  auto tp_calls = [](const driver::Simulation& s, plan::CommOp op) {
    int n = 0;
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.kind != plan::TaskKind::kComm || t.rank != 0) continue;
      const plan::CommCall& c = s.tasks.calls[static_cast<std::size_t>(t.payload)];
      n += s.tasks.groups[static_cast<std::size_t>(c.group)].kind == plan::GroupKind::kTp && c.op == op ? 1 : 0;
    }
    return n;
  };
  const std::string base = "framework=megatron,tp=8,gbs=4,mbs=1,dtype=fp16,host_launch=0";  // the host floor aside
  const driver::Simulation after = run(base + ",tp_overlap=off", 1);
  const driver::Simulation beside = run(base, 1);  // tp_overlap=async, Megatron's default
  EXPECT_EQ(tp_calls(after, plan::CommOp::kAllReduce), tp_calls(beside, plan::CommOp::kAllReduce));
  EXPECT_LT(beside.report.breakdown.exposed_comm.tp.value(), 0.8 * after.report.breakdown.exposed_comm.tp.value());
  EXPECT_LT(beside.report.step_time, after.report.step_time);
  // The same FLOPs either way: the passes are split, not repeated.
  EXPECT_DOUBLE_EQ(beside.report.hardware_flops_per_step.value(), after.report.hardware_flops_per_step.value());
  // Under sp: one more gather per column-parallel layer and micro-batch (QKV,
  // the MLP's first GEMM, the output layer) than without the async path.
  const driver::Simulation sp_after = run(base + ",sp=on,tp_overlap=off", 1);
  const driver::Simulation sp_beside = run(base + ",sp=on", 1);
  const int layers = 24, micro_batches = 4;
  EXPECT_EQ(tp_calls(sp_beside, plan::CommOp::kAllGather) - tp_calls(sp_after, plan::CommOp::kAllGather),
            (2 * layers + 1) * micro_batches);
  EXPECT_EQ(tp_calls(sp_beside, plan::CommOp::kReduceScatter), tp_calls(sp_after, plan::CommOp::kReduceScatter));
  // PyTorch's tensor parallelism waits for each collective, as before.
  const driver::Simulation pytorch = run("framework=pytorch,tp=8,gbs=4,mbs=1,dtype=fp16", 1);
  const driver::Simulation pytorch_off = run("framework=pytorch,tp=8,gbs=4,mbs=1,dtype=fp16,tp_overlap=off", 1);
  EXPECT_EQ(pytorch.timeline.makespan, pytorch_off.timeline.makespan);
}

TEST(Simulation, CommunicationBesideKernelsSlowsThemOnlyWhereItOverlaps) {
  // FSDP's gathers and reduce-scatters run beside the layers' kernels: they
  // take SMs and memory bandwidth, so compute grows; without overlap (one
  // device) nothing changes.
  driver::Simulation on = run("fsdp,gbs=16", 1, false, "gpt3-1.3b", "dgx-h100");
  driver::Simulation off = run("fsdp,gbs=16,contention=off", 1, false, "gpt3-1.3b", "dgx-h100");
  EXPECT_GT(on.report.breakdown.compute.value(), off.report.breakdown.compute.value() * 1.01);
  EXPECT_GT(on.report.step_time, off.report.step_time);
  // Bounded by the slowdown of every kernel at its worst: 16 channels of 132 SMs, memory halved.
  EXPECT_LT(on.report.breakdown.compute.value(), off.report.breakdown.compute.value() * 2.0);
  // The report says how much of compute the contention added: what the kernels lost.
  const double added = on.report.breakdown.compute.value() - off.report.breakdown.compute.value();
  EXPECT_NEAR(on.report.breakdown.compute_slowed.value(), added, 0.05 * added);
  EXPECT_EQ(off.report.breakdown.compute_slowed.value(), 0.0);
  driver::Simulation alone = run("one_device,gbs=4", 1, false, "gpt3-1.3b", "dgx-h100");
  driver::Simulation alone_off = run("one_device,gbs=4,contention=off", 1, false, "gpt3-1.3b", "dgx-h100");
  EXPECT_EQ(alone.timeline.makespan, alone_off.timeline.makespan);
}

TEST(Simulation, ExpertParallelismIsCarvedOutOfDataParallelismAsInMegatronCore) {
  // tp 2, pp 2, dp 8 is 32 GPUs; ep 8 regroups the 8 data-parallel ranks of
  // each expert layer, it does not multiply them.
  driver::Simulation s = driver::simulate(
      {"mixtral-8x7b", "superpod-h100", "tp=2,pp=2,dp=8,ep=8,gbs=64,zero=1,recompute=full", 4, std::nullopt,
       std::nullopt, false, {}, {}});
  EXPECT_EQ(s.tasks.world, 32);
  EXPECT_EQ(s.report.gpus, 32);
  EXPECT_EQ(s.report.micro_batches, 8);  // 64 samples over 8 data-parallel ranks, one a micro-batch
  std::map<plan::GroupKind, std::size_t> size;
  for (const plan::CommGroup& g : s.tasks.groups) size[g.kind] = g.ranks.size();
  EXPECT_EQ(size[plan::GroupKind::kEp], 8u);
  EXPECT_EQ(size[plan::GroupKind::kDp], 8u);  // dense weights: reduced over all 8 data-parallel ranks
  EXPECT_EQ(size.count(plan::GroupKind::kExpertDp), 0u);  // each expert lives on one rank of the 8
  try {
    driver::simulate({"mixtral-8x7b", "superpod-h100", "tp=2,pp=2,dp=8,ep=8,gbs=64", 2, std::nullopt, std::nullopt,
                      false, {}, {}});
    FAIL() << "dp=8 with tp 2 and pp 2 needs 32 GPUs";
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "--strategy: /dp: needs 32 GPUs, the cluster has 16");
  }
}

namespace {
// The group of `kind` that holds `rank`, or none.
std::vector<int> group_of(const driver::Simulation& s, plan::GroupKind kind, int rank) {
  for (const plan::CommGroup& g : s.tasks.groups) {
    if (g.kind == kind && std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end()) return g.ranks;
  }
  return {};
}
// Model FLOPs of the compute tasks of one rank in a step.
double model_flops_of_rank(const driver::Simulation& s, int rank) {
  double flops = 0;
  for (const plan::Task& t : s.tasks.tasks) {
    if (t.kind == plan::TaskKind::kCompute && t.rank == rank) {
      flops += s.tasks.kernels[static_cast<std::size_t>(t.payload)].model_flops.value();
    }
  }
  return flops;
}
}  // namespace

TEST(Simulation, ExpertTensorParallelismRegroupsEachStageAsMegatronCoresExpertGrid) {
  auto mixtral = [](const std::string& strategy, bool full = false) {
    return driver::simulate({"mixtral-8x7b", "superpod-h100", strategy + ",pp=2,sp=on,gbs=64,zero=1,recompute=full", 4,
                             std::nullopt, std::nullopt, full, {}, {}});
  };
  // 32 GPUs, tp 4, pp 2: each stage holds 16 ranks (dp 4).
  const driver::Simulation tp_experts = mixtral("tp=4,ep=4");  // etp = tp: experts split as the attention is
  const driver::Simulation whole = mixtral("tp=4,etp=1,ep=8");
  const driver::Simulation halves = mixtral("tp=4,etp=2,ep=8");
  using G = plan::GroupKind;
  // etp = tp: one rank of each tp group forms an ep group, which spans two nodes.
  EXPECT_EQ(group_of(tp_experts, G::kEp, 0), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(group_of(tp_experts, G::kTp, 0), (std::vector<int>{0, 1, 2, 3}));
  // etp 1: etp x ep x expert-dp = 1 x 8 x 2 over the stage's 16 ranks; the ep
  // group is one node and spans the tp ranks; dense weights still reduce over dp.
  EXPECT_EQ(group_of(whole, G::kEp, 0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(group_of(whole, G::kExpertDp, 0), (std::vector<int>{0, 8}));
  EXPECT_TRUE(group_of(whole, G::kExpertTp, 0).empty());
  EXPECT_EQ(group_of(whole, G::kDp, 0), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(group_of(whole, G::kEp, 16), (std::vector<int>{16, 17, 18, 19, 20, 21, 22, 23}));  // stage 1
  // etp 2: 2 x 8 x 1, so no expert-dp group; ep strides over the etp pairs.
  EXPECT_EQ(group_of(halves, G::kExpertTp, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(group_of(halves, G::kEp, 0), (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_TRUE(group_of(halves, G::kExpertDp, 0).empty());
  // The one simulated rank per stage stands for all: its groups' copies are
  // the stage's other groups of the same span.
  for (const plan::CommGroup& g : halves.tasks.groups) {
    if (g.kind == G::kExpertTp) {
      EXPECT_EQ(g.copies.size(), 7u);
    }
    if (g.kind == G::kEp) {
      ASSERT_EQ(g.copies.size(), 1u);
      EXPECT_EQ(g.copies[0].front() % 16, 1);
    }
  }
  // The same work per rank, whatever the grid: each rank computes the experts
  // of its 1/tp of the tokens (even routing).
  EXPECT_NEAR(model_flops_of_rank(whole, 0) / model_flops_of_rank(tp_experts, 0), 1.0, 1e-9);
  EXPECT_NEAR(model_flops_of_rank(halves, 0) / model_flops_of_rank(tp_experts, 0), 1.0, 1e-9);
  // Whole experts on 8 ranks hold twice the expert weights of experts split
  // over 16 (tp 4 x ep 4 or etp 2 x ep 8).
  EXPECT_GT(whole.report.per_stage[0].params.value(), 1.8 * tp_experts.report.per_stage[0].params.value());
  EXPECT_NEAR(halves.report.per_stage[0].params / tp_experts.report.per_stage[0].params, 1.0, 1e-9);
  // An all-to-all inside the node beats one across nodes.
  EXPECT_LT(whole.report.breakdown.exposed_comm.ep.value(), 0.25 * tp_experts.report.breakdown.exposed_comm.ep.value());
  // One simulated rank per stage predicts what simulating all 32 does.
  for (const std::string st : {"tp=4,etp=1,ep=8", "tp=4,etp=2,ep=8", "tp=2,cp=2,etp=1,ep=2"}) {
    EXPECT_EQ(mixtral(st).timeline.makespan, mixtral(st, true).timeline.makespan) << st;
  }
}

TEST(Simulation, ZeroThreeGathersAndScattersTheExpertsToo) {
  // FSDP over an MoE model: every layer's experts are sharded like its dense
  // weights, so they are gathered before it runs and their gradients
  // reduce-scattered after, over the ranks holding the same experts.
  const driver::Simulation s = driver::simulate(
      {"mixtral-8x7b", "superpod-h100", "dp=32,ep=4,gbs=64,zero=3", 4, std::nullopt, std::nullopt, false, {}, {}});
  double gathered = 0, scattered = 0, dense_gathered = 0;
  for (const plan::Task& t : s.tasks.tasks) {
    if (t.kind != plan::TaskKind::kComm) continue;
    const plan::CommCall& c = s.tasks.calls[static_cast<std::size_t>(t.payload)];
    const plan::GroupKind kind = s.tasks.groups[static_cast<std::size_t>(c.group)].kind;
    if (kind == plan::GroupKind::kExpertDp && c.op == plan::CommOp::kAllGather) gathered += c.bytes.value();
    if (kind == plan::GroupKind::kExpertDp && c.op == plan::CommOp::kReduceScatter) scattered += c.bytes.value();
    if (kind == plan::GroupKind::kDp && c.op == plan::CommOp::kAllGather) dense_gathered += c.bytes.value();
  }
  // A quarter of the 8 experts on each rank: far more bytes than the dense
  // weights (attention, norms, router, embedding and head).
  EXPECT_GT(gathered, 3.0 * dense_gathered);
  EXPECT_GT(scattered, 0.0);
}

TEST(Simulation, ExpertTensorParallelismIsRefusedWithMegatronsReasons) {
  auto refused = [](const std::string& model, const std::string& strategy) {
    try {
      driver::simulate({model, "superpod-h100", strategy, 4, std::nullopt, std::nullopt, false, {}, {}});
      return std::string("accepted");
    } catch (const core::InputError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(refused("llama3-8b", "tp=4,etp=1"), "--strategy: /etp: expert tensor parallelism needs an MoE model; llama3-8b is dense");
  EXPECT_EQ(refused("mixtral-8x7b", "tp=4,etp=1,ep=8,pp=2"),
            "--strategy: /sp: expected sp=on: with tp = 4 and etp = 1, the experts take the tokens sequence parallelism "
            "splits over the tp ranks, as Megatron-Core requires");
  EXPECT_EQ(refused("mixtral-8x7b", "tp=4,etp=4,ep=8,pp=4,sp=on"),
            "--strategy: /ep: expected a divisor of the 2 data-parallel ranks (expert parallelism is carved out of data "
            "parallelism, as in Megatron-Core), got 8");
  EXPECT_EQ(refused("mixtral-8x7b", "tp=4,etp=2,ep=8,pp=4,sp=on"),
            "--strategy: /etp: expected etp*ep to divide the tp*cp*dp = 8 ranks of a pipeline stage (Megatron-Core's "
            "expert grid), got etp*ep = 2*8");
  EXPECT_EQ(refused("mixtral-8x7b", "tp=4,etp=3,ep=8,sp=on"),
            "--strategy: /etp: expected a divisor of the experts' 14336 hidden units, got 3");
}

TEST(Simulation, CapacityFactorPadsExpertsAndTheirAllToAll) {
  auto mixtral = [](const std::string& extra) {
    return driver::simulate({"mixtral-8x7b", "superpod-h100", "tp=2,pp=2,ep=8,gbs=64,zero=1,recompute=full" + extra, 4,
                             std::nullopt, std::nullopt, false, {}, {}});
  };
  const auto balanced = mixtral("");
  const auto padded = mixtral(",capacity_factor=1.25");
  EXPECT_GT(padded.report.step_time, balanced.report.step_time);
  EXPECT_GT(padded.report.breakdown.exposed_comm.ep, balanced.report.breakdown.exposed_comm.ep);
  // The padding is work the hardware does, not work the model counts.
  EXPECT_DOUBLE_EQ(padded.report.model_flops_per_step.value(), balanced.report.model_flops_per_step.value());
  EXPECT_GT(padded.report.hardware_flops_per_step.value(), balanced.report.hardware_flops_per_step.value());
  try {
    run("ddp,gbs=8,capacity_factor=1.25");
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "--strategy: /capacity_factor: a capacity factor sizes MoE experts; gpt3-1.3b is dense");
  }
}

// A plan is refused before it is built when it would need more memory than
// the machine has: the line says what it would need and what to change.
// Every rank's tasks (for a trace of --full) need 1.3 GiB here; --full
// replaying one rank's tasks per stage needs a tenth of it and goes ahead
// in 0.5 GiB, and the symmetric mode, a thousandth of the tasks, in less.
TEST(Simulation, APlanLargerThanTheMemoryIsRefusedBeforeItIsBuilt) {
  driver::SimulationRequest request{"gpt3-175b", "superpod-a100", "tp=8,pp=8,gbs=1536,mbs=1", 128, {}, {}, true, {}, {}};
  auto refusal = [&](double budget_gib) -> std::string {
    request.memory_budget = core::Bytes(budget_gib * 1073741824.0);
    try {
      driver::simulate(request);
    } catch (const core::InputError& e) {
      return e.what();
    }
    return "(went ahead)";
  };
  request.every_rank_tasks = true;
  EXPECT_EQ(refusal(0.5), "--strategy: /gbs: the plan would hold about 7.2e+06 tasks for 96 micro-batches on 1024 "
                          "lowered ranks: about 1.3 GiB and 8 s; this machine has 0.5 GiB available: drop --full (one "
                          "rank per stage is simulated, the others are its copies)");
  request.every_rank_tasks = false;
  EXPECT_GT(driver::simulate(request).report.step_time.value(), 0);
  EXPECT_EQ(refusal(0.05), "--strategy: /gbs: the plan would hold about 7.2e+06 tasks for 96 micro-batches on 1024 "
                           "replayed ranks: about 0.1 GiB and 8 s; this machine has 0.1 GiB available: drop --full (one "
                           "rank per stage is simulated, the others are its copies)");
  request.full = false;
  EXPECT_GT(driver::simulate(request).report.step_time.value(), 0);
}

// ZeRO-3's prefetch depth: blocking gathers expose every all-gather, one layer
// ahead (PyTorch FSDP's limit_all_gathers) hides them where compute is longer,
// and deeper ones gain nothing more here; the gathered weights held grow with it.
TEST(Simulation, Zero3PrefetchDepthExposesOrHidesTheGathers) {
  auto run = [](const std::string& prefetch) {
    return driver::simulate({"llama2-7b", "dgx-h100", "fsdp,gbs=16,prefetch=" + prefetch, std::nullopt, std::nullopt,
                             std::nullopt, false, {}, {}});
  };
  const auto blocking = run("0"), one = run("1"), two = run("2"), ideal = run("unbounded");
  EXPECT_GT(blocking.report.step_time.value(), 1.1 * one.report.step_time.value());
  EXPECT_GT(blocking.report.breakdown.exposed_comm.dp.value(), 10 * one.report.breakdown.exposed_comm.dp.value());
  // Deeper prefetch hides no more here; it only moves which kernels the gathers slow (contention), by under 0.1%.
  EXPECT_LE(ideal.report.step_time.value(), one.report.step_time.value() * 1.001);
  EXPECT_LE(two.report.step_time.value(), one.report.step_time.value() * 1.001);
  EXPECT_GT(two.report.per_stage[0].other.value(), one.report.per_stage[0].other.value());
  EXPECT_GT(one.report.per_stage[0].other.value(), blocking.report.per_stage[0].other.value());
}

// Megatron-LM pads the vocabulary to a multiple of 128 x tp, so its output
// layer's data gradient stays 16-byte aligned; a PyTorch model runs the
// 50257 words GPT-2's tokenizer has, and on an H100 that GEMM runs at the
// measured misaligned rate.
TEST(Simulation, MegatronPadsTheVocabularyAndPytorchPaysForAnOddOne) {
  ScratchDir scratch;
  auto step = [&](int vocab, const std::string& framework, int tp) {
    const std::string path = scratch.file("v" + std::to_string(vocab) + ".json");
    std::ofstream(path) << R"({"name": "v", "kind": "transformer", "layers": 4, "hidden": 2048, "heads": 16,
      "ffn_hidden": 8192, "seq_len": 2048, "positions": "learned", "vocab": )" << vocab << "}";
    driver::Simulation s = run("framework=" + framework + ",dp=1,tp=" + std::to_string(tp) + ",mbs=4,gbs=8,dtype=bf16",
                               std::nullopt, false, path, "dgx-h100");
    return std::pair{s.report.step_time.value(), s.report.hardware_flops_per_step.value()};
  };
  // Megatron: 50257 words run as 50304 (tp 1) or 51200 (tp 8), the same GEMMs as a padded vocabulary.
  // (The embedding's table and the optimizer keep the stated size: a microsecond.)
  EXPECT_NEAR(step(50257, "megatron", 1).first, step(50304, "megatron", 1).first, 1e-5);
  EXPECT_DOUBLE_EQ(step(50257, "megatron", 1).second, step(50304, "megatron", 1).second);
  EXPECT_DOUBLE_EQ(step(50257, "megatron", 8).second, step(51200, "megatron", 8).second);
  EXPECT_LT(step(50257, "megatron", 1).second, step(51200, "megatron", 1).second);
  // PyTorch: the unpadded vocabulary's data gradient costs several times its aligned time.
  const double odd = step(50257, "pytorch", 1).first, padded = step(50264, "pytorch", 1).first;
  EXPECT_GT(odd, padded * 1.05) << odd << " against " << padded;
}

// The optimizer step as it runs: PyTorch's AdamW as eager element-wise passes
// (clip_grad_norm_ 12 bytes a parameter, then 80) against a fused kernel (38
// with Megatron's bf16 weight copy and gradient zeroing). Both stream the
// same parameters; only the passes differ, and nothing else in the step.
TEST(Simulation, AnUnfusedOptimizerMakesMorePassesOverTheState) {
  auto optimizer = [](const driver::Simulation& s) {
    double seconds = 0, bytes = 0;
    for (std::size_t id = 0; id < s.tasks.tasks.size(); ++id) {
      const plan::Task& t = s.tasks.tasks[id];
      if (t.rank != s.report.breakdown.rank || t.phase != plan::Phase::kOptimizer || t.kind != plan::TaskKind::kCompute) continue;
      seconds += core::to_seconds(s.timeline.spans[id].end - s.timeline.spans[id].start).value();
      for (const hw::OpWork& w : s.tasks.kernels[static_cast<std::size_t>(t.payload)].ops) bytes += w.bytes_moved.value();
    }
    return std::pair{seconds, bytes};
  };
  const auto [fused_s, fused_bytes] = optimizer(run("ddp,gbs=32,dtype=bf16,optimizer=fused", 1));
  const auto [unfused_s, unfused_bytes] = optimizer(run("ddp,gbs=32,dtype=bf16,optimizer=unfused", 1));
  const auto [auto_s, auto_bytes] = optimizer(run("ddp,gbs=32,dtype=bf16", 1));
  EXPECT_NEAR(unfused_bytes / fused_bytes, 92.0 / 38.0, 1e-9);
  EXPECT_NEAR(unfused_s / fused_s, 92.0 / 38.0, 0.02);  // HBM-bound: time follows the bytes
  EXPECT_DOUBLE_EQ(auto_bytes, unfused_bytes);         // PyTorch's default: torch.optim.AdamW, foreach
  const auto [megatron_s, megatron_bytes] = optimizer(run("ddp,framework=megatron,gbs=32,dtype=bf16", 1));
  EXPECT_GT(megatron_s, 0);
  EXPECT_LT(megatron_bytes, unfused_bytes);  // Megatron's is fused
}

// The host launches a GPU's kernels one every host_launch, from the step's
// start: a step of kernels shorter than their launches takes at least its
// launches (the busiest rank's, all but the first), and the breakdown says
// the GPU waited for the host; a step of long kernels is unchanged, and a
// CPU rank, its own host, never waits.
TEST(Simulation, KernelsShorterThanTheirLaunchesWaitForTheHost) {
  const driver::Simulation tiny = run("ddp,gbs=64,mbs=8,host_launch=8us", std::nullopt, false, "tiny-gpt", "dgx-h100");
  const driver::Simulation ideal = run("ddp,gbs=64,mbs=8,host_launch=0", std::nullopt, false, "tiny-gpt", "dgx-h100");
  std::uint64_t launches = 0;
  for (const plan::Task& t : tiny.tasks.tasks) {
    if (t.rank != tiny.report.breakdown.rank || t.stream == plan::Stream::kPointToPoint) continue;
    launches += t.kind == plan::TaskKind::kCompute ? tiny.costs.kernel_launches[static_cast<std::size_t>(t.payload)] : 1;
  }
  EXPECT_GT(launches, 100u);
  const double host_s = 8e-6 * static_cast<double>(launches - 1);
  EXPECT_GE(tiny.report.step_time.value(), host_s);
  EXPECT_GT(host_s, 1.2 * ideal.report.step_time.value());  // launch-bound: the host sets the step
  EXPECT_GT(tiny.report.breakdown.host_wait.value(), 0.2 * tiny.report.step_time.value());
  EXPECT_LE(tiny.report.breakdown.host_wait.value(), tiny.report.breakdown.bubble.value());
  EXPECT_EQ(ideal.report.breakdown.host_wait.value(), 0.0);
  EXPECT_EQ(tiny.report.bottlenecks[1].kind, "host_wait");

  // Twice the launch cost: the launch-bound step follows it.
  const driver::Simulation slow = run("ddp,gbs=64,mbs=8,host_launch=16us", std::nullopt, false, "tiny-gpt", "dgx-h100");
  EXPECT_GE(slow.report.step_time.value(), 2 * host_s);

  // The default, an eager step's host time per kernel (50 us), is longer still.
  const driver::Simulation eager = run("ddp,gbs=64,mbs=8", std::nullopt, false, "tiny-gpt", "dgx-h100");
  EXPECT_GE(eager.report.step_time.value(), 50e-6 * static_cast<double>(launches - 1));

  // Unset, host_launch is the cluster's host's: a GB200's Grace takes 2.75x
  // the x86-64 server's time per kernel (devices/hosts.json), and the report
  // names it; the strategy's key overrides it.
  const driver::Simulation grace = run("ddp,gpus=8,gbs=64,mbs=8", std::nullopt, false, "tiny-gpt", "gb200-nvl72");
  const driver::Simulation grace_as_x86 =
      run("ddp,gpus=8,gbs=64,mbs=8,host_launch=50us", std::nullopt, false, "tiny-gpt", "gb200-nvl72");
  EXPECT_EQ(grace.report.info.host, "grace");
  EXPECT_NEAR(grace.report.info.host_launch.value(), 137.5e-6, 1e-9);
  EXPECT_EQ(eager.report.info.host, "x86-64");
  EXPECT_DOUBLE_EQ(eager.report.info.host_launch.value(), 50e-6);
  EXPECT_DOUBLE_EQ(grace_as_x86.report.info.host_launch.value(), 50e-6);
  EXPECT_GT(grace.report.step_time.value(), 2.5 * grace_as_x86.report.step_time.value());

  // Llama-2-7B's kernels are far longer than their launches: nothing moves.
  const driver::Simulation big = run("fsdp,gbs=8", std::nullopt, false, "llama2-7b", "dgx-h100");
  const driver::Simulation big_ideal = run("fsdp,gbs=8,host_launch=0", std::nullopt, false, "llama2-7b", "dgx-h100");
  EXPECT_EQ(big.timeline.makespan, big_ideal.timeline.makespan);
  EXPECT_EQ(big.report.breakdown.host_wait.value(), 0.0);

  // A CPU rank runs its own kernels: there is no host ahead of it.
  auto on_cpu = [](const std::string& strategy) {
    return driver::simulate({"tiny-gpt", "localhost-cpu", strategy, std::nullopt, std::nullopt,
                             DTSIM_SOURCE_DIR "/tests/fuzz/profile/cpu-2-ranks.json", false, {}, {}});
  };
  const driver::Simulation cpu = on_cpu("dp=2,gbs=8,mbs=2,dtype=fp32");
  EXPECT_EQ(cpu.report.info.host, "");  // the report names no host for it
  EXPECT_EQ(cpu.timeline.makespan, on_cpu("dp=2,gbs=8,mbs=2,dtype=fp32,host_launch=0").timeline.makespan);
  EXPECT_EQ(cpu.report.breakdown.host_wait.value(), 0.0);
}

// PyTorch eager runs RMSNorm and rotary as chains of element-wise ops, each a
// launch; Megatron-Core's Transformer Engine runs each as one fused kernel.
TEST(Simulation, EagerChainsLaunchAKernelPerOp) {
  auto norm_launches = [](const driver::Simulation& s, bool backward) {
    for (const plan::Kernel& k : s.tasks.kernels) {
      for (const hw::OpWork& w : k.ops) {
        if (w.kind == model::OpKind::kNorm && w.backward == backward) return hw::host_launches(w);
      }
    }
    return -1;
  };
  const driver::Simulation eager = run("ddp,gbs=8", std::nullopt, false, "llama2-7b", "dgx-h100");
  const driver::Simulation megatron = run("ddp,framework=megatron,gbs=8", std::nullopt, false, "llama2-7b", "dgx-h100");
  EXPECT_EQ(norm_launches(eager, false), 8);
  EXPECT_EQ(norm_launches(eager, true), 12);
  EXPECT_EQ(norm_launches(megatron, false), 1);
  EXPECT_EQ(norm_launches(megatron, true), 1);
}

// Megatron-Core's --overlap-moe-expert-parallel-comm: in the steady state a
// forward and a backward pass run as one, taking turns at each all-to-all,
// so the compute stream runs one pass's work while the other's all-to-all
// is in flight (model_chunk_schedule_plan.py). Off, plans are as before.
TEST(Simulation, EpOverlapRunsOnePassesComputeBesideTheOthersAllToAll) {
  const std::string base = "framework=megatron,tp=1,pp=2,vpp=2,dp=4,ep=4,gbs=32,mbs=1";
  const driver::Simulation plain = run(base, 2, false, "mixtral-8x7b", "superpod-h100");
  const driver::Simulation merged = run(base + ",ep_overlap=on", 2, false, "mixtral-8x7b", "superpod-h100");
  EXPECT_LT(merged.report.breakdown.exposed_comm.ep.value(), 0.5 * plain.report.breakdown.exposed_comm.ep.value());
  EXPECT_LT(merged.report.step_time.value(), plain.report.step_time.value());
  // The same work either way: only its order changes.
  EXPECT_EQ(merged.tasks.tasks.size(), plain.tasks.tasks.size());
  EXPECT_DOUBLE_EQ(merged.report.hardware_flops_per_step.value(), plain.report.hardware_flops_per_step.value());
  // On a stage's compute stream a forward's compute follows a backward's
  // before that forward's pass is over: the passes interleave.
  auto interleaved = [](const driver::Simulation& s) {
    int switches = 0;
    std::optional<std::pair<int, plan::Phase>> last;
    for (const plan::Task& t : s.tasks.tasks) {
      if (t.rank != 0 || t.kind != plan::TaskKind::kCompute || t.phase == plan::Phase::kOptimizer) continue;
      const std::pair<int, plan::Phase> now{t.micro_batch, t.phase};
      if (last && *last != now) ++switches;
      last = now;
    }
    return switches;
  };
  EXPECT_GT(interleaved(merged), 4 * interleaved(plain));
  // As Megatron-Core, one more warm-up forward keeps each pair's passes
  // apart: on every stage, and without a pipeline, a micro-batch's backward
  // starts only after its forward has ended (the last stage would otherwise
  // pair the two).
  auto forward_ends_first = [](const driver::Simulation& s) {
    std::map<std::pair<int, int>, std::size_t> last_forward, first_backward;  // (rank, micro-batch) -> task order
    for (std::size_t i = 0; i < s.tasks.tasks.size(); ++i) {
      const plan::Task& t = s.tasks.tasks[i];
      if (t.kind != plan::TaskKind::kCompute || t.phase == plan::Phase::kOptimizer) continue;
      const std::pair<int, int> key{t.rank, t.micro_batch};
      if (t.phase == plan::Phase::kForward) last_forward[key] = i;
      else if (!first_backward.count(key)) first_backward[key] = i;
    }
    for (const auto& [key, b] : first_backward) {
      if (last_forward.count(key) && last_forward.at(key) > b) return false;
    }
    return !first_backward.empty();
  };
  EXPECT_TRUE(forward_ends_first(merged));
  EXPECT_TRUE(forward_ends_first(run("framework=megatron,dp=8,ep=8,gbs=32,ep_overlap=on", 1, false, "mixtral-8x7b", "dgx-h100")));
  // Megatron-Core's conditions, refused as it refuses them.
  EXPECT_THROW(run("framework=megatron,dp=8,ep_overlap=on", 1, false, "mixtral-8x7b", "dgx-h100"), core::InputError);
  EXPECT_THROW(run("framework=megatron,pp=2,dp=4,ep=4,gbs=16,ep_overlap=on", 1, false, "mixtral-8x7b", "dgx-h100"),
               core::InputError);
}

// Megatron-Core's all-to-all dispatcher (dropless) makes the host wait for
// the router before it dispatches, once per MoE layer in every forward and
// recomputed forward; padded to capacity, or in an eager PyTorch model, the
// plan has no such sync. The host then launches the experts' GEMMs one by
// one while the GPU waits for them.
TEST(Simulation, MegatronsDispatcherMakesTheHostWaitBeforeTheExperts) {
  auto qwen = [](const std::string& s) {
    return driver::simulate({"qwen3-30b-a3b", "dgx-h100", s, std::nullopt, std::nullopt, std::nullopt, false, {}, {}});
  };
  auto syncs = [](const driver::Simulation& sim) {
    int n = 0;
    for (const plan::Task& t : sim.tasks.tasks) {
      if (t.rank == 0 && t.kind == plan::TaskKind::kCompute &&
          sim.tasks.kernels[static_cast<std::size_t>(t.payload)].host_sync) {
        ++n;
      }
    }
    return n;
  };
  const std::string base = "framework=megatron,ep=8,gbs=16,mbs=1,dtype=bf16,zero=1";
  const driver::Simulation megatron = qwen(base);
  EXPECT_EQ(syncs(megatron), 48 * 2);  // 48 MoE layers, 2 micro-batches
  EXPECT_EQ(syncs(qwen(base + ",recompute=full")), 48 * 2 * 2);
  EXPECT_EQ(syncs(qwen(base + ",capacity_factor=1")), 0);
  EXPECT_EQ(syncs(qwen("framework=pytorch,ep=8,gbs=16,mbs=1,dtype=bf16,zero=1")), 0);
  // The same plan replayed without its syncs. Where the host would run
  // ahead of the GPU (launches of 40 us), the sync stops it and the GPU
  // then waits for the launches after it. At the eager 50 us the host is
  // behind the GPU nearly everywhere (the block's routing and dispatch
  // kernels, moe_dispatch.hpp): the GPU is mostly done when the host reaches
  // the sync, which costs little (after the first backward, whose dense
  // embedding gradient lets the host get a little ahead). At micro-batches
  // of 4 the kernels outlast their launches and the host catches up:
  // nothing changes.
  auto without_syncs = [](const driver::Simulation& synced) {
    plan::TaskGraph ahead = synced.tasks;
    for (plan::Kernel& k : ahead.kernels) k.host_sync = false;
    return sim::replay(ahead, synced.costs).makespan.count;
  };
  const driver::Simulation ahead = qwen(base + ",host_launch=40us");
  EXPECT_GT(ahead.timeline.makespan.count, 1.015 * static_cast<double>(without_syncs(ahead)));
  EXPECT_GE(megatron.timeline.makespan.count, without_syncs(megatron));
  EXPECT_LT(megatron.timeline.makespan.count, 1.005 * static_cast<double>(without_syncs(megatron)));
  EXPECT_GT(megatron.report.breakdown.host_wait.value(), 0.0);
  const driver::Simulation large = qwen("framework=megatron,ep=8,gbs=128,mbs=4,dtype=bf16,zero=1");
  EXPECT_EQ(large.timeline.makespan.count, without_syncs(large));
}
