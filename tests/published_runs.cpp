#include "published_runs.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "dtsim/plan/launch_config.hpp"

namespace dtsim::validation {
namespace {

using nlohmann::json;

json load(const std::filesystem::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// A file of the published runs kept in this repository (tests/validation/).
std::filesystem::path validation_file(const std::string& name) {
  return std::filesystem::path(DTSIM_SOURCE_DIR) / "tests" / "validation" / name;
}

json transformer(const std::string& name, int layers, int hidden, int heads, int ffn, int vocab, int seq,
                 const std::string& positions) {
  return json{{"name", name},   {"kind", "transformer"}, {"layers", layers}, {"hidden", hidden},
              {"heads", heads}, {"ffn_hidden", ffn},     {"vocab", vocab},   {"seq_len", seq},
              {"positions", positions}};
}

std::string sp_if_tp(int tp) { return tp > 1 ? ",sp=on" : ""; }

// Megatron-Core r0.8 on H100 (the Megatron-LM README's table): the flags the
// README names are the strategy's; mbs, SP, VP and recomputation are not stated.
void megatron_core(const json& c, std::vector<Case>& out) {
  const json& m = c["model"];
  const json& p = c["parallel"];
  const int layers = m["layers"], hidden = m["hidden"], heads = m["heads"], vocab = m["vocab"], seq = m["seq_len"];
  json model = transformer(c["id"], layers, hidden, heads, 4 * hidden, vocab, seq, "rope");
  // The sizes the README names (1.7B, 7.1B, 16B, ...) count the embedding
  // and the output layer apart: 12·l·h² + 2·V·h (--untie-embeddings-and-output-weights).
  model["tied_embeddings"] = false;
  auto add = [&](const std::string& id, int tp, int pp, int gpus, int gbs, Metric metric, double measured) {
    Case k;
    k.id = id;
    k.source = "megatron-core-h100";
    k.generation = "H100";
    k.model = model;
    k.cluster = "dgx-h100";
    k.gpus = gpus;
    k.nodes = gpus / 8;
    k.strategy = fmt::format("framework=megatron,tp={},pp={},dp={},gbs={},mbs=1,dtype=bf16,zero=1,overlap=on,param_overlap=on,tp_overlap=on,"
                             "attention=flash{}",
                             tp, pp, gpus / (tp * pp), gbs, sp_if_tp(tp));
    k.metric = metric;
    k.measured = measured;
    out.push_back(k);
  };
  if (c["id"].get<std::string>().find("strong_scaling") != std::string::npos) {
    // Only the two ends are printed; the layout is the weak-scaling row's (tp 8, pp 6).
    add(std::string(c["id"]) + "@96", 8, 6, 96, p["global_batch"], Metric::kMegatronMfu, c["measured"]["mfu_at_96_gpus"]);
    add(std::string(c["id"]) + "@4608", 8, 6, 4608, p["global_batch"], Metric::kMegatronMfu,
        c["measured"]["mfu_at_4608_gpus"]);
    return;
  }
  add(c["id"], p["tp"], p["pp"], c["hardware"]["num_gpus"], p["global_batch"], Metric::kMegatronTflops,
      c["measured"]["tflops_per_gpu"]);
}

// Megatron-LM's September 2020 README: GPT-2 style models, fp16, activation
// checkpointing and unfused attention as its scripts ran them, the batch per
// GPU equal to the global batch over data-parallel ranks (no accumulation).
// That code (commit 5281919420) has none of the fused kernels of 2021
// (fusions=off), nor the tensor-parallel all-reduce beside the weight
// gradient (tp_overlap=off). Its README says which data-parallel implementation:
// PyTorch's DDP, which overlaps the all-reduce with the backward, "is more
// efficient at larger model parallel sizes", and slower for 1.2B with no
// model parallelism and 2.5B with 2-way: overlapped from 4-way on.
void megatron_2020(const json& c, std::vector<Case>& out) {
  const json& m = c["model"];
  const json& p = c["parallel"];
  const int tp = p["tp"], dp = p["dp"], gbs = p["global_batch"];
  const bool v100 = c["hardware"]["gpu"].get<std::string>().find("V100") != std::string::npos;
  Case k;
  k.id = c["id"];
  k.source = "megatron-lm-2020";
  k.generation = v100 ? "V100" : "A100";
  k.model = transformer(c["id"], m["layers"], m["hidden"], m["heads"], m["ffn_hidden"], m["vocab"], m["seq_len"],
                        "learned");
  k.model["bias"] = true;  // GPT-2's linear layers
  k.cluster = v100 ? "dgx2-v100" : "dgx-a100-40gb";
  k.gpus = tp * dp;
  k.nodes = std::max(1, k.gpus / (v100 ? 16 : 8));
  k.strategy = fmt::format("framework=megatron,tp={},dp={},gbs={},mbs={},dtype=fp16,recompute=full,"
                           "attention=standard,overlap={},fusions=off,tp_overlap=off",
                           tp, dp, gbs, gbs / dp, dp > 1 && tp >= 4 ? "on" : "off");
  k.metric = Metric::kIterationTime;
  k.measured = c["measured"]["iteration_time_s"];
  out.push_back(k);
}

// One row of llm-foundry's MPT tables: PyTorch FSDP FULL_SHARD, the stated
// micro-batch, accumulation, checkpointing and precision (amp_fp8: Transformer
// Engine's FP8 GEMMs); FlashAttention in Triton; ALiBi has no position table.
struct MptRow {
  std::string id, gpu;  ///< h100_80gb, a100_80gb or a100_40gb
  json model;           ///< layers, hidden, heads, ffn_hidden, vocab
  int seq = 0, gpus = 0, microbatch = 0, global_batch = 0;
  bool fp8 = false, recompute = false;
  double tokens_per_gpu = 0;
  std::string attention = "triton";  ///< llm-foundry's attn_impl: triton, or flash (flash-attn 2: flash2)
  int zero = 3;                      ///< FULL_SHARD; SHARD_GRAD_OP as 2
  std::string grad_reduce;           ///< empty: FSDP's, the 16-bit dtype
};

Case mpt_case(const MptRow& row, const std::string& source) {
  const json& m = row.model;
  Case k;
  k.id = row.id;
  k.source = source;
  k.generation = row.gpu.find("h100") != std::string::npos ? "H100" : "A100";
  k.model = transformer(row.id, m["layers"], m["hidden"], m["heads"], m["ffn_hidden"], m["vocab"], row.seq, "alibi");
  k.cluster = k.generation == "H100" ? "dgx-h100" : row.gpu == "a100_40gb" ? "dgx-a100-40gb" : "dgx-a100";
  k.gpus = row.gpus;
  k.nodes = std::max(1, k.gpus / 8);
  // Composer's DecoupledAdamW (the yamls' decoupled_adamw): a loop of eager ops over the tensors.
  k.strategy = fmt::format("framework=pytorch,dp={},zero={},mbs={},gbs={},dtype={},attention={},recompute={},optimizer=unfused{}",
                           k.gpus, row.zero, row.microbatch, row.global_batch, row.fp8 ? "fp8" : "bf16", row.attention,
                           row.recompute ? "full" : "none", row.grad_reduce.empty() ? "" : ",grad_reduce=" + row.grad_reduce);
  k.metric = Metric::kTokensPerGpu;
  k.measured = row.tokens_per_gpu;
  return k;
}

// The MPT rows of published-runs.json.
void llm_foundry(const json& c, std::vector<Case>& out) {
  const json& p = c["parallel"];
  out.push_back(mpt_case({c["id"], c["hardware"]["gpu"], c["model"], c["model"]["seq_len"], c["hardware"]["num_gpus"],
                          p["microbatch"], p["global_batch"], false,
                          p["recompute"].get<std::string>().find("full") != std::string::npos,
                          c["measured"]["tokens_per_sec_per_gpu"], "triton", 3, ""},
                         "llm-foundry-mpt"));
}

// The rows of llm-foundry's tables outside ../shared; each GPU and precision
// is a source of its own in the table.
void llm_foundry_table(const json& table, std::vector<Case>& out) {
  for (const json& row : table["rows"]) {
    const std::string gpu = row["gpu"];
    const bool fp8 = row["precision"].get<std::string>().find("fp8") != std::string::npos;
    const std::string source = gpu == "h100_80gb" ? (fp8 ? "llm-foundry H100 fp8" : "llm-foundry H100 bf16")
                               : gpu == "a100_80gb" ? "llm-foundry A100 80GB" : "llm-foundry A100 40GB";
    out.push_back(mpt_case({row["id"], gpu, table["models"][row["model"].get<std::string>()], row["seq_len"], row["gpus"],
                            row["microbatch"], row["global_batch"], fp8, row["activation_checkpointing"],
                            row["tokens_per_sec_per_gpu"], "triton", 3, ""},
                           source));
  }
}

// llm-foundry's table of MPT runs on 128 to 512 H100s (January 2024), each
// with what its sweep.py ran the model with: flash-attn 2 for 1B, 3B, 7B and
// 70B, Triton for 13B and 30B; SHARD_GRAD_OP for 1B and 3B, run as zero=2
// (dtsim gathers the updated weights after the optimizer step, where FSDP
// gathers them layer by layer in the next forward); gradients reduced in
// fp32, as Composer 0.17's DEFAULT mixed precision reduces them.
void llm_foundry_large_scale(const json& table, std::vector<Case>& out) {
  for (const json& row : table["rows"]) {
    out.push_back(mpt_case({row["id"], row["gpu"], table["models"][row["model"].get<std::string>()], row["seq_len"],
                            row["gpus"], row["microbatch"], row["global_batch"], false, row["activation_checkpointing"],
                            row["tokens_per_sec_per_gpu"], row["attn_impl"] == "flash" ? "flash2" : "triton",
                            row["sharding"] == "SHARD_GRAD_OP" ? 2 : 3, row["mp_mode"] == "DEFAULT" ? "fp32" : ""},
                           "llm-foundry H100 128+"));
  }
}

// FlashAttention-2's Table 1: GPT-3 1.3B and 2.7B on 8 A100 80GB, each run
// as the repository's training configs set it (tests/validation/
// flash-attention-2-training.json): the heads, the micro-batch and global
// batch, bf16 autocast, and torch's ZeroRedundancyOptimizer over AdamW
// (zero=1, its foreach step). The paper states none of them.
void flash_attention_2(const json& c, const json& training, std::vector<Case>& out) {
  const json& m = c["model"];
  const std::string impl = c["measured"]["attention_impl"];
  const int seq = m["seq_len"], hidden = m["hidden"];
  const auto run = std::find_if(training["runs"].begin(), training["runs"].end(), [&](const json& r) {
    return r["model"] == m["name"] && r["seq_len"].get<int>() == seq;
  });
  if (run == training["runs"].end()) {
    throw std::runtime_error(fmt::format("flash-attention-2-training.json: no run of {} at {} tokens", m["name"].get<std::string>(), seq));
  }
  const json& config = *run;
  const int mbs = config["microbatch"], gbs = config["global_batch"];
  Case k;
  k.id = c["id"];
  k.source = "flashattention-2";
  k.generation = "A100";
  k.model = transformer(c["id"], m["layers"], hidden, config["heads"], 4 * hidden, 50257, seq, "learned");
  k.cluster = "dgx-a100";
  k.gpus = 8;
  k.nodes = 1;
  const std::string attention = impl == "no_flashattention" ? "standard" : impl == "flashattention1" ? "flash1" : "flash2";
  k.strategy = fmt::format("framework=pytorch,dp=8,mbs={},gbs={},dtype=bf16,attention={},zero=1,optimizer=unfused", mbs, gbs,
                           attention);
  k.metric = Metric::kFa2Tflops;
  k.measured = c["measured"]["tflops_per_gpu"];
  out.push_back(k);
}

// Megatron-LM SC'21 Table 1 (A100 80GB, Selene), each row with the arguments
// its authors ran (tests/validation/megatron-sc21-scripts.json, from the
// repository's examples/sc21/run_table_1.sh), mapped as --megatron-args
// maps them. The Megatron-LM of that commit adds what no argument says: its
// attention unfused, its pipeline sends blocking (p2p_communication.py waits
// on them and synchronises the device), and its tensor-parallel all-reduces
// after their layer's backward (the asynchronous one came in September 2021,
// 16c90445e7: tp_overlap=off).
void megatron_sc21(const json& table, std::vector<Case>& out) {
  const auto scripts_path = validation_file("megatron-sc21-scripts.json");
  const json scripts = load(scripts_path);
  const int seq = table["common"]["seq_len"], vocab = table["common"]["vocab"];
  for (const json& row : table["rows"]) {
    const int layers = row["layers"], hidden = row["hidden"], gpus = row["gpus"];
    const double params = row["params_b"];
    const auto script = std::find_if(scripts["rows"].begin(), scripts["rows"].end(),
                                     [&](const json& r) { return r["params_b"].get<double>() == params; });
    if (script == scripts["rows"].end()) throw std::runtime_error(fmt::format("{}: no row of {}B", scripts_path.string(), params));
    const std::string args = scripts["common"].get<std::string>() + " " + (*script)["args"].get<std::string>();
    Case k;
    k.id = fmt::format("sc21_{}B", params);
    k.source = "megatron-sc21";
    k.generation = "A100";
    k.model = transformer(k.id, layers, hidden, row["heads"], 4 * hidden, vocab, seq, "learned");
    k.model["bias"] = true;  // Megatron-LM's GPT of 2021: biases on its linear layers
    k.cluster = "superpod-a100";
    k.gpus = gpus;
    k.nodes = gpus / 8;
    k.strategy = plan::merge_strategies(plan::from_megatron_args(args, scripts_path.string()).strategy,
                                        "attention=standard,p2p_overlap=off,tp_overlap=off");
    k.metric = Metric::kSc21Tflops;
    k.measured = row["tflops_per_gpu"];
    out.push_back(k);
  }
}

// A bundled workload (workloads/<name>.json) as a case runs it: named after
// the case, at the case's sequence length.
json bundled_workload(const std::string& name, const std::string& case_id, int seq_len) {
  json model = load(std::filesystem::path(DTSIM_SOURCE_DIR) / "workloads" / (name + ".json"));
  model["name"] = case_id;
  model["seq_len"] = seq_len;
  return model;
}

// ml-engineering's H200-against-B200 study: Llama-3.1-8B on one node of 8,
// DeepSpeed ZeRO-2 with overlapped reduction, one 8k sequence per GPU and step.
void ml_engineering(const json& c, std::vector<Case>& out) {
  const std::string gpu = c["gpu"];
  Case k;
  k.id = c["id"];
  k.source = "ml-engineering";
  k.generation = gpu == "B200" ? "B200" : "H200";
  k.model = bundled_workload("llama3-8b", k.id, c["seq_len"]);
  k.cluster = gpu == "B200" ? "dgx-b200" : "hgx-h200";
  k.gpus = c["gpus"];
  k.nodes = 1;
  // framework=deepspeed: the bf16 model, reduction in bf16 and DeepSpeed's
  // FusedAdam (its "AdamW" optimizer type).
  k.strategy = fmt::format("framework=deepspeed,dp={},zero=2,overlap=on,mbs=1,gbs={},dtype=bf16,attention={}", k.gpus,
                           k.gpus, c["attention"].get<std::string>());
  k.metric = Metric::kCausalTflops;
  k.measured = c["tflops_per_gpu"];
  out.push_back(k);
}

// Korthikanti et al.'s runs (Megatron-LM, May 2022) on Selene's A100s with
// one data-parallel rank: tp 8 and a stage per node, each model with full
// recomputation and with sequence parallelism plus selective recomputation.
// That code fuses softmax, bias-GeLU and bias-dropout-add but not attention,
// blocks on its pipeline sends, and runs its column-parallel layers'
// backward collectives asynchronously (tp_overlap's default under Megatron).
void megatron_2022(const json& c, std::vector<Case>& out) {
  const json& m = c["model"];
  const int hidden = m["hidden"], pp = c["pp"];
  Case k;
  k.id = c["id"];
  k.source = "megatron-2022";
  k.generation = "A100";
  k.model = transformer(k.id, m["layers"], hidden, m["heads"], 4 * hidden, m["vocab"], m["seq_len"], "learned");
  k.model["bias"] = true;
  k.cluster = "superpod-a100";
  k.gpus = c["gpus"];
  k.nodes = pp;
  const bool selective = c["recompute"] == "selective";
  k.strategy = fmt::format("framework=megatron,tp={},pp={},vpp={},dp=1,mbs={},gbs={},dtype={},recompute={},sp={},"
                           "attention=standard,p2p_overlap=off",
                           c["tp"].get<int>(), pp, c["vpp"].get<int>(), c["mbs"].get<int>(), c["gbs"].get<int>(),
                           c["dtype"].get<std::string>(), selective ? "selective" : "full", selective ? "on" : "off");
  k.metric = Metric::kIterationTime;
  k.measured = c["iteration_time_s"];
  out.push_back(k);
}

// torchtitan's April 2024 runs on 64 A100s (docs/performance.md): FSDP2
// over bf16 parameters with gradients reduce-scattered in fp32, PyTorch's
// SDPA (FlashAttention-2 on the A100), foreach AdamW, eager mode. The rows
// whose recomputation dtsim runs as torchtitan does: none, full, and its
// per-op selective policy (recompute=op); not its every-n-th-layer one,
// whose n the document does not give.
void torchtitan(const json& c, std::vector<Case>& out) {
  const json& m = c["model"];
  const int seq = c["seq_len"], gpus = c["gpus"], batch = c["local_batch"];
  Case k;
  k.id = c["id"];
  k.source = "torchtitan";
  k.generation = "A100";
  k.model = transformer(k.id, m["layers"], m["hidden"], m["heads"], m["ffn_hidden"], m["vocab"], seq, "rope");
  k.model.update({{"kv_heads", m["kv_heads"]},
                  {"mlp", "swiglu"},
                  {"norm", "rmsnorm"},
                  {"tied_embeddings", false},
                  {"attention_dropout", 0.0}});  // Llama's configs: no attention dropout
  k.cluster = "dgx-a100";
  k.gpus = gpus;
  k.nodes = gpus / 8;
  k.strategy = fmt::format("framework=pytorch,dp={},zero=3,fsdp_version=2,mbs={},gbs={},dtype=bf16,grad_reduce=fp32,attention=flash,"
                           "recompute={},optimizer=unfused",
                           gpus, batch, gpus * batch, c["recompute"].get<std::string>());
  k.metric = Metric::kTokensPerGpu;
  k.measured = c["wps_per_gpu"];
  out.push_back(k);
}

// Llama 3 405B's pre-training at 8K tokens on 8,192 and 16,384 H100s (the
// Llama 3 paper's Table 4). What the paper states: the layout, the batch
// (16M tokens), gradients reduced in fp32, FSDP that keeps the gathered
// weights for the step, an interleaved schedule whose first chunk holds the
// embedding alone and whose last the output layer alone (126 blocks on
// 16 x 8 chunks: one a chunk), no recomputation. What it leaves out is
// assumed, each named in sources(): fused kernels (its activations could not
// fit otherwise), tensor-parallel collectives after their GEMMs (the paper
// overlaps DP and PP communication only), and a non-blocking fabric.
void llama3_paper(const json& c, std::vector<Case>& out) {
  const json& p = c["parallel"];
  const int gpus = c["gpus"], dp = p["dp"], batch_per_dp = p["batch_per_dp"];
  Case k;
  k.id = c["id"];
  k.source = "llama3-paper";
  k.generation = "H100";
  k.model = bundled_workload("llama3-405b", k.id, c["seq_len"]);
  k.cluster = "superpod-h100";
  k.gpus = gpus;
  k.nodes = gpus / 8;
  k.strategy = fmt::format("framework=megatron,tp={},pp={},dp={},mbs=1,gbs={},vpp=8,pipeline_split=balanced,dtype=bf16,"
                           "zero=1,overlap=on,param_overlap=on,grad_reduce=fp32,sp=on,tp_overlap=off,attention=flash",
                           p["tp"].get<int>(), p["pp"].get<int>(), dp, dp * batch_per_dp);
  k.metric = Metric::kCausalTflops;
  k.measured = c["tflops_per_gpu"];
  out.push_back(k);
}

// BLOOM-176B's pre-training on 384 A100s of Jean Zay (BigScience's
// tr11-176B-ml: its slurm script's arguments, its log's iteration time at
// the full batch). Megatron's model code with its fused kernels and unfused
// attention (framework=megatron, attention=standard) on DeepSpeed's
// PipelineEngine: 1F1B, blocking sends of each tensor-parallel rank's 1/tp
// of the activation (the engine partitions it over the tensor-parallel
// group, is_pipe_partitioned), the tensor-parallel all-reduces after their
// GEMMs (the Megatron-LM it forked predates the asynchronous one), and its
// BF16_Optimizer's fp32 gradients, summed from the bf16 ones after every
// micro-batch (bf16_optimizer=on) and reduced after the flush, with the
// step sharded over dp (zero=1, overlap=off, grad_reduce=fp32). The cluster is
// the run's README's description (tests/validation/jean-zay-a100.json).
void bloom(const json& c, std::vector<Case>& out) {
  const json& m = c["model"];
  const json& p = c["parallel"];
  const int gpus = c["gpus"];
  Case k;
  k.id = c["id"];
  k.source = "bloom";
  k.generation = "A100";
  k.model = transformer(k.id, m["layers"], m["hidden"], m["heads"], m["ffn_hidden"], m["vocab"], m["seq_len"], "alibi");
  k.model["bias"] = true;
  k.cluster = validation_file("jean-zay-a100.json").string();
  k.gpus = gpus;
  k.nodes = gpus / 8;
  k.strategy = fmt::format("framework=megatron,tp={},pp={},dp={},mbs={},gbs={},dtype=bf16,recompute=full,zero=1,overlap=off,"
                           "grad_reduce=fp32,bf16_optimizer=on,attention=standard,p2p_overlap=off,tp_overlap=off,"
                           "first_stage_layers={},last_stage_layers={}",
                           p["tp"].get<int>(), p["pp"].get<int>(), p["dp"].get<int>(), p["mbs"].get<int>(),
                           p["gbs"].get<int>(), p["first_stage_layers"].get<int>(), p["last_stage_layers"].get<int>());
  k.metric = Metric::kIterationTime;
  k.measured = c["iteration_time_s"];
  out.push_back(k);
}

// vTrain's measured runs (tests/validation/vtrain-runs.json): GPT models on
// Microsoft's Megatron-DeepSpeed, fp16 (the repository's own model of them
// casts to half and moves 2-byte activations), every block recomputed. Under
// --deepspeed that code builds GPTModelPipe, so DeepSpeed's PipelineEngine
// runs every layout, pp=1 included: each tensor-parallel rank sends its
// share of the stage's activation, blocking (p2p_overlap=off), and
// the fp16 gradients are all-reduced after the last micro-batch
// (overlap=off, grad_reduce=fp16; the configs' use_gradient_bucket false).
// Its arguments.py turns the asynchronous tensor-parallel all-reduce off
// under DeepSpeed (tp_overlap=off). GPT-2's vocabulary, learned positions,
// biases; Megatron's fused softmax over unfused attention.
void vtrain(const json& row, std::vector<Case>& out) {
  const double params = row["params_b"];
  const int tp = row["tp"], dp = row["dp"], pp = row["pp"], gpus = row["gpus"];
  Case k;
  k.id = fmt::format("vtrain_{}b_tp{}_dp{}_pp{}_mbs{}", params, tp, dp, pp, row["mbs"].get<int>());
  if (row.contains("repeat")) k.id += fmt::format("_repeat{}", row["repeat"].get<int>());  // the same layout measured again
  k.source = fmt::format("vtrain {}B", params);
  k.generation = "A100";
  const int hidden = row["hidden"];
  k.model = transformer(k.id, row["layers"], hidden, row["heads"], 4 * hidden, 50257, row["seq_len"], "learned");
  k.model["bias"] = true;
  k.cluster = validation_file("vtrain-a100.json").string();
  k.gpus = gpus;
  k.nodes = gpus / 8;
  k.strategy = fmt::format("framework=megatron,tp={},pp={},dp={},mbs={},gbs={},dtype=fp16,recompute=full,zero=0,overlap=off,"
                           "grad_reduce=fp16,attention=standard,p2p_overlap=off,tp_overlap=off",
                           tp, pp, dp, row["mbs"].get<int>(), row["gbs"].get<int>());
  k.metric = Metric::kIterationTime;
  k.measured = row["iteration_ms"].get<double>() / 1000;
  out.push_back(k);
}

// DeepSeek-V3's pre-training on 2,048 H800s (its technical report): the
// published config.json, pp 16, ep 64 over 8 nodes, ZeRO-1 over dp 128, FP8
// GEMMs. DualPipe, which overlaps a forward and a backward chunk with each
// one's all-to-all beside the other's compute, runs as the nearest schedule
// dtsim has: the interleaved one with two chunks a rank and the
// all-to-all overlap (vpp=2, ep_overlap=on); its 120 micro-batches a replica
// round up to 128, a multiple of pp, as the interleaved schedule needs. Its
// dispatch is DeepEP's in FP8 (dispatcher=deepep_fp8): once per node, node-limited.
void deepseek_v3(const json& c, std::vector<Case>& out) {
  const json& p = c["parallel"];
  const int gpus = c["gpus"], dp = p["dp"], pp = p["pp"];
  const int per_replica = (p["global_batch"].get<int>() / dp + pp - 1) / pp * pp;
  Case k;
  k.id = c["id"];
  k.source = "deepseek-v3";
  k.generation = "H800";
  k.model = load(std::filesystem::path(DTSIM_SOURCE_DIR) / "tests" / "inputs" / "hf" / "DeepSeek-V3" / "config.json");
  k.cluster = "hgx-h800";
  k.gpus = gpus;
  k.nodes = gpus / 8;
  k.strategy = fmt::format("framework=megatron,tp={},pp={},ep={},etp=1,dp={},mbs=1,gbs={},vpp=2,ep_overlap=on,dtype=fp8,"
                           "dispatcher=deepep_fp8,zero=1,overlap=on,param_overlap=on,grad_reduce=fp32,attention=flash",
                           p["tp"].get<int>(), pp, p["ep"].get<int>(), dp, dp * per_replica);
  k.metric = Metric::kTokensPerGpu;
  k.measured = c["tokens_per_sec_per_gpu"];
  out.push_back(k);
}

// One row of Megatron-Bridge's 25.11 table (tests/validation/megatron-bridge.json):
// the table's layout; from the recipe, FP8 GEMMs, gradients reduced in bf16,
// Transformer Engine's fused cross entropy, the distributed optimizer with
// both overlaps, sequence parallelism and TP overlap when tp > 1, and the
// pipeline split that counts the embedding and the loss as layers. MoE rows
// (ep > 1) are a source of their own, their experts unsplit (etp 1).
void megatron_bridge(const json& row, std::vector<Case>& out) {
  struct System {
    const char* generation;
    const char* cluster;
    int gpus_per_node;  ///< of one NVLink domain: a DGX, or a 72-GPU NVL72 rack
  };
  static const std::map<std::string, System> systems = {{"DGX-H100", {"H100", "dgx-h100", 8}},
                                                        {"DGX-B200", {"B200", "dgx-b200", 8}},
                                                        {"DGX-GB200", {"GB200", "gb200-nvl72", 72}},
                                                        {"DGX-GB300", {"GB300", "gb300-nvl72", 72}}};
  const System& system = systems.at(row["system"].get<std::string>());
  const int gpus = row["gpus"], tp = row["tp"], pp = row["pp"], cp = row["cp"], vp = row["vp"];
  const int ep = row.value("ep", 1);
  Case k;
  k.id = row["id"];
  k.source = ep > 1 ? "megatron-bridge MoE" : "megatron-bridge";
  k.generation = system.generation;
  k.model = bundled_workload(row["model"], k.id, row.value("seq_len", 8192));
  k.cluster = system.cluster;
  k.gpus = gpus;
  k.nodes = (gpus + system.gpus_per_node - 1) / system.gpus_per_node;
  std::string extra;
  if (tp > 1) extra += ",sp=on,tp_overlap=on";
  if (vp > 1) extra += fmt::format(",vpp={}", vp);
  if (ep > 1) extra += fmt::format(",ep={},etp=1", ep);
  if (row["embedding_and_loss_in_pipeline_split"]) {
    // Megatron's account_for_embedding_in_pipeline_split and ..._loss_...: each
    // takes a block's place, so the first and the last virtual stage hold one
    // block fewer than the others.
    const int per_stage = (k.model["layers"].get<int>() + 2) / (pp * vp);
    extra += fmt::format(",first_stage_layers={},last_stage_layers={}", per_stage - 1, per_stage - 1);
  }
  // The recipe's moe_a2a_overlap: Megatron-Core's overlap_moe_expert_parallel_comm.
  if (row["moe_a2a_overlap"]) extra += ",ep_overlap=on";
  // cuda_graph_scope full_iteration: the replay launches the step at once.
  if (row["full_iteration_cuda_graph"]) extra += ",host_launch=0";
  // cuda_graph_scope moe_router, moe_preprocess (the 30B on B200 and GB200):
  // the router and the dispatcher's preprocessing as one graph per pass.
  if (row.contains("cuda_graph_scope")) {
    std::string scope;
    for (const auto& name : row["cuda_graph_scope"]) scope += (scope.empty() ? "" : "+") + name.get<std::string>();
    extra += ",cuda_graph=" + scope;
  }
  // The recipe's grad_reduce_in_fp32 = False (the main gradients and their
  // reduction in bf16) and cross_entropy_fusion_impl te.
  k.strategy = fmt::format("framework=megatron,tp={},pp={},cp={},dp={},gbs={},mbs={},dtype=fp8,grad_reduce=bf16,loss=fused,zero=1,"
                           "overlap=on,param_overlap=on,attention=flash{}",
                           tp, pp, cp, gpus / (tp * pp * cp), row["gbs"].get<int>(), row["mbs"].get<int>(), extra);
  k.metric = Metric::kTokensPerGpu;
  k.measured = row["tokens_per_sec_per_gpu"];
  out.push_back(k);
}

}  // namespace

std::filesystem::path shared_validation_dir() {
  return std::filesystem::path(DTSIM_SOURCE_DIR) / ".." / "shared" / "validation";
}

const std::vector<Source>& sources() {
  static const std::vector<Source> all = {
      {"megatron-core-h100", "bf16; micro-batch 1; sequence parallel with tp; no recomputation; no interleaving; "
                             "distributed optimizer (zero=1); GPT with 4h MLP, GeLU, RoPE; untied embeddings (the sizes the source names)"},
      {"megatron-lm-2020", "batch per GPU = global/dp (no accumulation); DGX-2 V100 as 16 V100-SXM2 on NVSwitch"},
      {"llm-foundry-mpt", "attention in Triton (the source: flash/triton); ALiBi inside the attention kernel; A100 80GB nodes as dgx-a100 "
                          "(the source: 1600 Gb/s RoCE per node); gradients reduced in bf16 (Composer's PURE, and its DEFAULT "
                          "before composer#2628)"},
      {"flashattention-2", "each run as the repository's training configs set it (heads, micro-batch, global batch, "
                           "bf16 autocast, ZeroRedundancyOptimizer over AdamW as zero=1; tests/validation/"
                           "flash-attention-2-training.json); the baseline without FlashAttention in the same layout; GPT-3 "
                           "vocabulary 50257; learned positions"},
      {"megatron-sc21", "nothing: each row runs its authors' arguments (examples/sc21/run_table_1.sh)"},
      {"llm-foundry H100 bf16", "as llm-foundry-mpt; the H100 nodes as dgx-h100 (the source does not state their network)"},
      {"llm-foundry H100 fp8", "as llm-foundry H100 bf16, the GEMMs in FP8 as Transformer Engine runs them (amp_fp8)"},
      {"llm-foundry H100 128+", "the H100 nodes as dgx-h100 (the source does not state their network); ALiBi inside "
                                       "the attention kernel; SHARD_GRAD_OP as zero=2 (the updated weights gathered after "
                                       "the optimizer step, not layer by layer in the next forward)"},
      {"llm-foundry A100 80GB", "as llm-foundry-mpt"},
      {"llm-foundry A100 40GB", "as llm-foundry-mpt; the nodes as dgx-a100-40gb (the source: 1600 Gb/s RoCE per node)"},
      {"megatron-bridge", "FP8 as dtsim's dtype=fp8 (the recipe's per-tensor current scaling); the 8B's full-iteration "
                          "CUDA graph as host_launch=0 (no launch cost; nothing else of the graph modelled)"},
      {"megatron-bridge MoE", "as megatron-bridge; FP8-MX (MXFP8) as dtype=fp8; routing as dtsim's even split (the table forces "
                              "the balance); the dispatcher as Megatron-Core's all-to-all dispatcher (its kernels and NCCL's "
                              "all-to-all), also for the GB200's HybridEP and the 16 H100s' DeepEP; the 235B's moe_a2a_overlap as "
                              "ep_overlap=on (its delay_wgrad_compute not modelled); the host as an eager step's on the cluster's CPU "
                              "(devices/hosts.json: x86-64 50 us a kernel, measured on PyTorch; the GB200's Grace 2.75x "
                              "that), waiting at the dispatcher's sync; the 30B's CUDA graphs of the "
                              "router and the preprocessing as cuda_graph=moe_router+moe_preprocess; not modelled: Transformer "
                              "Engine's own host costs"},
      {"megatron-2022", "micro-batch, interleaving and fp16 as Calculon's validation runs them (the paper states the model, "
                        "tp and pp); Selene's nodes as superpod-a100"},
      {"ml-engineering", "ZeRO-2 as dtsim's zero=2 (DeepSpeed's bucketing and its blocking parameter "
                                  "all-gather after the step as modelled)"},
      {"llama3-paper", "Meta's kernels as Megatron-Core's fused ones (framework=megatron: RMSNorm, RoPE and SwiGLU fused, "
                       "cuDNN's flash attention); tensor-parallel collectives with sequence parallelism, each after its GEMM "
                       "(tp_overlap=off); FSDP without resharding as the distributed optimizer with its gathers ahead of the "
                       "forward (zero=1, param_overlap=on); vpp=8 from the paper's embedding-only first chunk; one sequence a "
                       "micro-batch; the RoCE fabric as superpod-h100's non-blocking 400 Gb/s a GPU (the paper: 1:7 above "
                       "3,072-GPU pods); attention fully causal (the paper masks across documents); TFLOP/s counting causal "
                       "attention"},
      {"deepseek-v3", "DualPipe as the interleaved schedule with two chunks a rank and the all-to-all overlap "
                      "(vpp=2, ep_overlap=on; 128 micro-batches a replica for the paper's 120); HAI-LLM's kernels as "
                      "Megatron-Core's fused ones (framework=megatron); FP8 GEMMs as dtsim's per-tensor dtype=fp8 (the "
                      "paper scales per 1x128 tile and 128x128 block); the dispatch as DeepEP's (dispatcher=deepep_fp8: once "
                      "per node over InfiniBand, then NVLink, FP8 forward, the two levels at once in one kernel; balanced "
                      "node-limited routing; the kernels' 20 SMs as NCCL's channels); no recomputation (the paper reruns RMSNorm "
                      "and the MLA up-projections); the multi-token-prediction module not run; routing balanced; the "
                      "multi-plane fabric as hgx-h800's rail-optimized one"},
      {"bloom", "the Omni-Path fabric (an enhanced 8D hypercube) as one non-blocking switch at the links' 100 Gb/s, "
                "NCCL over it as over InfiniBand; the node's NVLink as an HGX A100's NVSwitch; DeepSpeed's BF16_Optimizer "
                "as zero=1 with its fp32 gradients summed every micro-batch (bf16_optimizer=on; it all-reduces them "
                "where dtsim reduce-scatters them: about 0.4 s a step uncharged); not modelled: the attention mask the "
                "PipelineEngine sends whole beside each partitioned activation, the tied embedding's all-reduce "
                "between the first and the last stage, DeepSpeed's Python between its pipeline instructions"},
      {"vtrain 3.6B", "the A100s as the 80 GB part and the 800 Gb/s a node as 4 HDR NICs on one non-blocking switch "
                      "(tests/validation/vtrain-a100.json; NVSwitch at the bus efficiency of the source's own all-reduce "
                      "table); fp16 with DeepSpeed's unsharded FP16 optimizer (zero=0); GPT-2's vocabulary of 50257; not "
                      "modelled: the attention mask the PipelineEngine sends beside each activation, the next stage's "
                      "all-gather of its parts, DeepSpeed's Python between its pipeline instructions"},
      {"vtrain 18.4B", "as vtrain 3.6B"},
      {"vtrain 39.1B", "as vtrain 3.6B"},
      {"vtrain 175B", "as vtrain 3.6B"},
      {"torchtitan", "the 64 A100s as 8 dgx-a100 nodes (the document does not state the network); the norms as dtsim "
                     "costs an RMSNorm (torchtitan's configs ran its Triton fused_rmsnorm for the 13B, PyTorch's for the 70Bs)"},
  };
  return all;
}

json published_cases(const std::string& category) {
  const auto path = shared_validation_dir() / "published-runs.json";
  json out = json::array();
  if (!std::filesystem::exists(path)) return out;
  const json all = load(path);  // kept alive for the loop: operator[] on a temporary would dangle
  for (const json& c : all["cases"]) {
    if (c["category"] == category) out.push_back(c);
  }
  return out;
}

std::vector<Case> end_to_end_cases() {
  std::vector<Case> out;
  const auto sc21 = shared_validation_dir() / "megatron-sc21-table1.json";
  const json published = published_cases("end_to_end_training");
  if (published.empty() || !std::filesystem::exists(sc21)) return out;
  const json fa2_training = load(validation_file("flash-attention-2-training.json"));
  for (const json& c : published) {
    const std::string id = c["id"];
    if (id.rfind("megatron_readme_h100", 0) == 0) megatron_core(c, out);
    else if (id.rfind("megatron2020", 0) == 0) megatron_2020(c, out);
    else if (id.rfind("mpt_", 0) == 0) llm_foundry(c, out);
    else if (id.rfind("fa2_t1", 0) == 0) flash_attention_2(c, fa2_training, out);
  }
  megatron_sc21(load(sc21), out);
  return out;
}

std::vector<Case> outside_shared_cases() {
  std::vector<Case> out;
  const json all = load(validation_file("outside-shared.json"));
  for (const json& c : all["cases"]) {
    const std::string id = c["id"];
    if (id.rfind("mleng_", 0) == 0) ml_engineering(c, out);
    if (id.rfind("korthikanti_", 0) == 0) megatron_2022(c, out);
    if (id.rfind("torchtitan_", 0) == 0) torchtitan(c, out);
    if (id.rfind("llama3_405b_", 0) == 0) llama3_paper(c, out);
    if (id.rfind("deepseek_v3_", 0) == 0) deepseek_v3(c, out);
    if (id.rfind("bloom_", 0) == 0) bloom(c, out);
  }
  llm_foundry_table(load(validation_file("llm-foundry-mpt.json")), out);
  llm_foundry_large_scale(load(validation_file("llm-foundry-mpt-large-scale.json")), out);
  const json bridge = load(validation_file("megatron-bridge.json"));
  for (const json& row : bridge["rows"]) megatron_bridge(row, out);
  const json vtrain_runs = load(validation_file("vtrain-runs.json"));
  for (const json& row : vtrain_runs["rows"]) vtrain(row, out);
  return out;
}

json validation_json(const std::string& name) { return load(validation_file(name)); }

}  // namespace dtsim::validation
