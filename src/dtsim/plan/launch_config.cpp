#include "dtsim/plan/launch_config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>

#include <fmt/format.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/core/json_reader.hpp"
#include "dtsim/plan/strategy.hpp"

namespace dtsim::plan {
namespace {

// Megatron-LM arguments whose value is a degree or a count, and the
// strategy key each one sets.
const std::map<std::string, std::string, std::less<>>& megatron_counts() {
  static const std::map<std::string, std::string, std::less<>> table = {
      {"--tensor-model-parallel-size", "tp"},
      {"--pipeline-model-parallel-size", "pp"},
      {"--context-parallel-size", "cp"},
      {"--expert-model-parallel-size", "ep"},
      {"--expert-tensor-parallel-size", "etp"},
      {"--virtual-pipeline-model-parallel-size", "vpp"},
      {"--micro-batch-size", "mbs"},
      {"--global-batch-size", "gbs"},
      {"--decoder-first-pipeline-num-layers", "first_stage_layers"},
      {"--decoder-last-pipeline-num-layers", "last_stage_layers"},
  };
  return table;
}

// Flags (no value) and what each sets.
const std::map<std::string, std::string, std::less<>>& megatron_flags() {
  static const std::map<std::string, std::string, std::less<>> table = {
      {"--sequence-parallel", "sp=on"},
      {"--use-distributed-optimizer", "zero=1"},
      {"--overlap-grad-reduce", "overlap=on"},
      {"--overlap-param-gather", "param_overlap=on"},
      {"--tp-comm-overlap", "tp_overlap=on"},
      {"--no-async-tensor-model-parallel-allreduce", "tp_overlap=off"},
      {"--no-scatter-gather-tensors-in-pipeline", "p2p_scatter=off"},
      {"--overlap-moe-expert-parallel-comm", "ep_overlap=on"},
      {"--bf16", "dtype=bf16"},
      {"--fp16", "dtype=fp16"},
      {"--accumulate-allreduce-grads-in-fp32", "grad_reduce=fp32"},
      {"--grad-reduce-in-bf16", "grad_reduce=bf16"},
      {"--recompute-activations", "recompute=selective"},
      {"--use-flash-attn", "attention=flash"},
      {"--account-for-embedding-in-pipeline-split", "pipeline_split=balanced"},
      {"--account-for-loss-in-pipeline-split", "pipeline_split=balanced"},
  };
  return table;
}

// Arguments that change a step in ways dtsim does not model.
const std::set<std::string, std::less<>>& megatron_not_modelled() {
  static const std::set<std::string, std::less<>> keys = {
      "--cpu-offloading",
      "--optimizer-cpu-offload", "--fp8-recipe", "--num-distributed-optimizer-instances", "--delay-wgrad-compute"};
  return keys;
}

// The model's shape: it comes from --model, not from the launch arguments.
const std::set<std::string, std::less<>>& megatron_model_keys() {
  static const std::set<std::string, std::less<>> keys = {
      "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--num-query-groups",
      "--group-query-attention", "--max-position-embeddings", "--position-embedding-type", "--swiglu",
      "--normalization", "--untie-embeddings-and-output-weights", "--num-experts", "--moe-router-topk",
      "--vocab-size", "--padded-vocab-size", "--kv-channels", "--make-vocab-size-divisible-by"};
  return keys;
}

int positive_int(std::string_view text, const std::string& file, const std::string& pointer, int min = 1) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min) {
    throw core::InputError(file, pointer,
                           fmt::format("expected an integer of at least {}, got \"{}\"", min, std::string(text)));
  }
  return value;
}

// Megatron-LM's --num-layers-per-virtual-pipeline-stage (before Core's
// --virtual-pipeline-model-parallel-size): the virtual stages are each
// stage's layers over it (megatron/arguments.py, 2021).
int virtual_stages(const std::map<std::string, std::string>& values, const std::string& per_stage,
                   const std::string& source) {
  const std::string pointer = "/num-layers-per-virtual-pipeline-stage";
  const int per_chunk = positive_int(per_stage, source, pointer);
  const auto layers = values.find("--num-layers");
  if (layers == values.end()) {
    throw core::InputError(source, pointer, "needs --num-layers beside it (its virtual stages are a stage's layers over it)");
  }
  const auto pp = values.find("--pipeline-model-parallel-size");
  const int stage_layers = positive_int(layers->second, source, "/num-layers") /
                           (pp == values.end() ? 1 : positive_int(pp->second, source, "/pipeline-model-parallel-size"));
  if (stage_layers % per_chunk != 0) {
    throw core::InputError(source, pointer,
                           fmt::format("expected a divisor of the {} layers a pipeline stage holds, got {}", stage_layers, per_chunk));
  }
  return stage_layers / per_chunk;
}

std::vector<std::string> split_args(std::string_view args) {
  std::vector<std::string> out;
  std::string token;
  auto flush = [&] {
    if (!token.empty() && token != "\\") out.push_back(token);
    token.clear();
  };
  for (char c : args) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      flush();
    } else if (c != '"' && c != '\'') {
      token += c;
    }
  }
  flush();
  return out;
}

void add(LaunchStrategy& out, const std::string& key_value) {
  out.strategy += (out.strategy.empty() ? "" : ",") + key_value;
}

}  // namespace

LaunchStrategy from_megatron_args(std::string_view args, const std::string& source) {
  LaunchStrategy out;
  add(out, "framework=megatron");
  out.mapped.push_back("(Megatron-LM) -> framework=megatron");
  const std::vector<std::string> tokens = split_args(args);
  bool seen_argument = false, overlap = false, fp8 = false;
  std::map<std::string, std::string> values;  // the last of each, as argparse keeps it
  std::vector<std::string> order;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.rfind("--", 0) != 0) continue;  // torchrun, the script, or a value taken below
    seen_argument = true;
    std::string key = t, value;
    bool has_value = false;
    if (auto eq = t.find('='); eq != std::string::npos) {
      key = t.substr(0, eq);
      value = t.substr(eq + 1);
      has_value = true;
    } else if (i + 1 < tokens.size() && tokens[i + 1].rfind("--", 0) != 0) {
      value = tokens[++i];
      has_value = true;
      // A list (nargs='+'): its names joined by '+'.
      while (key == "--cuda-graph-scope" && i + 1 < tokens.size() && tokens[i + 1].rfind("--", 0) != 0) {
        value += "+" + tokens[++i];
      }
    }
    if (!values.count(key)) order.push_back(key);
    values[key] = has_value ? value : "";
  }
  if (!seen_argument) throw core::InputError(source, "", "expected Megatron-LM arguments (--tensor-model-parallel-size ...), found none");
  for (const std::string& key : order) {
    const std::string& value = values[key];
    if (auto it = megatron_counts().find(key); it != megatron_counts().end()) {
      const int n = positive_int(value, source, "/" + key.substr(2),
                                 it->second == "first_stage_layers" || it->second == "last_stage_layers" ? 0 : 1);
      add(out, fmt::format("{}={}", it->second, n));
      out.mapped.push_back(fmt::format("{} {} -> {}={}", key, value, it->second, n));
    } else if (auto flag = megatron_flags().find(key); flag != megatron_flags().end()) {
      if (flag->second == "overlap=on") overlap = true;
      add(out, flag->second);
      out.mapped.push_back(fmt::format("{} -> {}", key, flag->second));
    } else if (key == "--recompute-granularity") {
      if (value != "full" && value != "selective") {
        throw core::InputError(source, "/recompute-granularity", fmt::format("expected full or selective, got \"{}\"", value));
      }
      // Megatron-Core's TransformerConfig refuses full without a method (the
      // legacy model raises "Invalid activation recompute method." in its
      // first forward): which blocks it would rerun is not stated.
      if (value == "full" && !values.count("--recompute-method")) {
        throw core::InputError(source, "/recompute-granularity",
                               "full needs --recompute-method block or uniform beside it (as Megatron-Core does)");
      }
      add(out, "recompute=" + value);
      out.mapped.push_back(fmt::format("{} {} -> recompute={}", key, value, value));
    } else if (key == "--num-layers-per-virtual-pipeline-stage") {
      const int vpp = virtual_stages(values, value, source);
      add(out, fmt::format("vpp={}", vpp));
      out.mapped.push_back(fmt::format("{} {} -> vpp={}", key, value, vpp));
    } else if (key == "--checkpoint-activations" || key == "--activations-checkpoint-method") {
      // Megatron-LM before Core (2021): checkpointing is on with either; its
      // uniform method recomputes every layer, its block method the first
      // --activations-checkpoint-num-layers (1 by default) of each stage's chunk.
      if (key == "--activations-checkpoint-method" && value != "uniform" && value != "block") {
        throw core::InputError(source, "/activations-checkpoint-method", fmt::format("expected uniform or block, got \"{}\"", value));
      }
      add(out, "recompute=full");
      if (value == "block") {
        const auto n = values.find("--activations-checkpoint-num-layers");
        const int layers = n == values.end() ? 1 : positive_int(n->second, source, "/activations-checkpoint-num-layers");
        add(out, fmt::format("recompute_layers={}", layers));
        out.mapped.push_back(fmt::format("{} block -> recompute=full,recompute_layers={}", key, layers));
      } else {
        out.mapped.push_back(fmt::format("{}{} -> recompute=full", key, value.empty() ? "" : " " + value));
      }
    } else if (key == "--recompute-method") {
      // Megatron-Core: block recomputes the first --recompute-num-layers
      // blocks of each model chunk; uniform all of them, that many at a time.
      if (value != "uniform" && value != "block") {
        throw core::InputError(source, "/recompute-method", fmt::format("expected uniform or block, got \"{}\"", value));
      }
      const auto granularity = values.find("--recompute-granularity");
      if (granularity == values.end() || granularity->second != "full") {
        throw core::InputError(source, "/recompute-method", "needs --recompute-granularity full beside it (as Megatron-Core does)");
      }
      const auto n = values.find("--recompute-num-layers");
      if (n == values.end()) {
        throw core::InputError(source, "/recompute-method", "needs --recompute-num-layers beside it (as Megatron-Core does)");
      }
      const int layers = positive_int(n->second, source, "/recompute-num-layers");
      if (value == "block") {
        add(out, fmt::format("recompute_layers={}", layers));
        out.mapped.push_back(fmt::format("{} block --recompute-num-layers {} -> recompute_layers={}", key, layers, layers));
      } else if (layers == 1) {
        out.mapped.push_back(fmt::format("{} uniform --recompute-num-layers 1 -> recompute=full (each block)", key));
      } else {
        out.not_modelled.push_back(fmt::format("{} uniform --recompute-num-layers {} (the activation memory of checkpoints "
                                               "every {} blocks: modelled as every block's input kept)",
                                               key, layers, layers));
      }
    } else if (key == "--recompute-num-layers") {
      if (!values.count("--recompute-method")) out.ignored.push_back(key + " (without --recompute-method)");
    } else if (key == "--DDP-impl") {
      // Megatron-LM before Core: torch is PyTorch's DistributedDataParallel,
      // which all-reduces 25 MiB buckets during the backward; local (the
      // default) all-reduces every gradient after it.
      if (value != "torch" && value != "local") {
        throw core::InputError(source, "/DDP-impl", fmt::format("expected local or torch, got \"{}\"", value));
      }
      if (value == "torch") {
        overlap = true;
        add(out, "overlap=on");
        out.mapped.push_back(fmt::format("{} torch -> overlap=on (PyTorch DDP's 25 MiB buckets)", key));
      } else {
        out.mapped.push_back(fmt::format("{} local -> overlap=off", key));
      }
    } else if (key == "--no-masked-softmax-fusion" || key == "--no-bias-gelu-fusion" ||
               key == "--no-bias-dropout-fusion") {
      // dtsim turns Megatron-LM's three fusions off together (fusions=off).
      const bool all = values.count("--no-masked-softmax-fusion") && values.count("--no-bias-gelu-fusion") &&
                       values.count("--no-bias-dropout-fusion");
      if (!all) {
        out.not_modelled.push_back(key + " (alone: dtsim turns the three fusions off together, fusions=off)");
      } else if (key == "--no-masked-softmax-fusion") {
        add(out, "fusions=off");
        out.mapped.push_back("--no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion -> fusions=off");
      }
    } else if (key == "--activations-checkpoint-num-layers") {
      // Under the block method it counts the layers recomputed (above); under
      // uniform, checkpointing every n layers recomputes the same layers and
      // only what is kept differs.
      const auto method = values.find("--activations-checkpoint-method");
      if (method != values.end() && method->second == "block") continue;
      if (value == "1") out.ignored.push_back(key + " 1 (the default)");
      else out.not_modelled.push_back(key + " (activation memory of checkpoints every " + value + " layers)");
    } else if (key == "--fp8-format") {
      fp8 = true;  // added last, so that it wins over --bf16 / --fp16 (the model's dtype under FP8 GEMMs)
      out.mapped.push_back(fmt::format("{} {} -> dtype=fp8", key, value));
    } else if (key == "--moe-expert-capacity-factor") {
      // Megatron-Core drops or pads to capacity only with a factor (1.25).
      double factor = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), factor);
      if (ec != std::errc() || end != value.data() + value.size() || !(factor >= 1) || factor > 64) {
        throw core::InputError(source, "/moe-expert-capacity-factor",
                               fmt::format("expected a factor from 1 to 64, got \"{}\"", value));
      }
      add(out, "capacity_factor=" + value);
      out.mapped.push_back(fmt::format("{} {} -> capacity_factor={}", key, value, value));
    } else if (key == "--cross-entropy-loss-fusion") {
      // Megatron-Core's own fused kernels (impl native, the default) keep the
      // fp32 passes dtsim models unfused; Transformer Engine's are loss=fused.
      const auto impl = values.find("--cross-entropy-fusion-impl");
      if (impl != values.end() && impl->second == "te") {
        add(out, "loss=fused");
        out.mapped.push_back(fmt::format("{} --cross-entropy-fusion-impl te -> loss=fused", key));
      } else {
        out.not_modelled.push_back(key + " (impl native: modelled as the unfused fp32 cross entropy)");
      }
    } else if (key == "--cross-entropy-fusion-impl") {
      if (value != "te" && value != "native") {
        throw core::InputError(source, "/cross-entropy-fusion-impl", fmt::format("expected native or te, got \"{}\"", value));
      }
      if (!values.count("--cross-entropy-loss-fusion")) out.ignored.push_back(key + " (without --cross-entropy-loss-fusion)");
    } else if (key == "--cuda-graph-scope") {
      // Transformer Engine's graphs of an MoE block's router (and its
      // dispatcher's preprocessing) are modelled; other scopes are not.
      const auto impl = values.find("--cuda-graph-impl");
      const bool te = impl != values.end() && impl->second == "transformer_engine";
      const auto graph = moe_graph_scope(value);
      if (te && graph && *graph != MoeGraph::kOff) {
        add(out, "cuda_graph=" + value);
        out.mapped.push_back(fmt::format("{} {} -> cuda_graph={}", key, value, value));
      } else {
        out.not_modelled.push_back(key + " " + value + (te ? "" : " (without --cuda-graph-impl transformer_engine)"));
      }
    } else if (key == "--cuda-graph-impl") {
      if (!values.count("--cuda-graph-scope")) out.not_modelled.push_back(key + " " + value + " (the whole layer's graphs)");
    } else if (key == "--seq-length") {
      out.seq_len = positive_int(value, source, "/seq-length");
      out.mapped.push_back(fmt::format("{} {} -> --seq-len {}", key, value, *out.seq_len));
    } else if (megatron_not_modelled().count(key)) {
      out.not_modelled.push_back(key);
    } else if (megatron_model_keys().count(key)) {
      out.ignored.push_back(key + " (the model comes from --model)");
    } else {
      out.ignored.push_back(key);
    }
  }
  // Megatron overlaps nothing unless asked; gradients are reduced after the backward.
  if (!overlap) {
    add(out, "overlap=off");
    out.mapped.push_back("(no --overlap-grad-reduce) -> overlap=off");
  }
  if (fp8) add(out, "dtype=fp8");
  // Settings given twice (--recompute-activations and --recompute-granularity,
  // the two pipeline-split flags, --bf16 under --fp8-format): the last wins.
  out.strategy = merge_strategies(out.strategy, "");
  return out;
}

LaunchStrategy from_deepspeed_config(const nlohmann::json& config, const std::string& file) {
  if (!config.is_object()) throw core::InputError(file, "", "expected a DeepSpeed config object");
  LaunchStrategy out;
  add(out, "framework=deepspeed");
  out.mapped.push_back("(DeepSpeed) -> framework=deepspeed");
  auto count = [&](const nlohmann::json& v, const std::string& pointer, int min = 1) {
    if (v.is_string() && v.get<std::string>() == "auto") {
      throw core::InputError(file, pointer, "is \"auto\" (set by the HF Trainer at launch): give the number it becomes");
    }
    if (!core::integer_in(v, min, 1 << 30)) {
      throw core::InputError(file, pointer, fmt::format("expected an integer of at least {}, got {}", min, v.dump()));
    }
    return v.get<int>();
  };
  // DeepSpeed overlaps the gradient reduction only where the config says so,
  // or by default under ZeRO-3 (zero/config.py, overlap_comm_valid).
  int stage = 0;
  bool overlap_given = false;
  for (const auto& [key, value] : config.items()) {
    const std::string pointer = "/" + key;
    if (key == "train_micro_batch_size_per_gpu") {
      add(out, fmt::format("mbs={}", count(value, pointer)));
      out.mapped.push_back(fmt::format("{} -> mbs", key));
    } else if (key == "train_batch_size") {
      add(out, fmt::format("gbs={}", count(value, pointer)));
      out.mapped.push_back(fmt::format("{} -> gbs", key));
    } else if (key == "gradient_accumulation_steps") {
      add(out, fmt::format("accumulation={}", count(value, pointer)));
      out.mapped.push_back(fmt::format("{} -> accumulation", key));
    } else if (key == "bf16" || key == "fp16") {
      if (!value.is_object()) throw core::InputError(file, pointer, "expected an object like {\"enabled\": true}");
      const auto enabled = value.find("enabled");
      if (enabled != value.end() && !enabled->is_boolean() && !(enabled->is_string() && *enabled == "auto")) {
        throw core::InputError(file, pointer + "/enabled", fmt::format("expected true or false, got {}", enabled->dump()));
      }
      if (enabled != value.end() && enabled->is_string()) {
        throw core::InputError(file, pointer + "/enabled", "is \"auto\" (set by the HF Trainer at launch): give true or false");
      }
      if (enabled != value.end() && enabled->get<bool>()) {
        add(out, "dtype=" + key);
        out.mapped.push_back(fmt::format("{}.enabled -> dtype={}", key, key));
      }
    } else if (key == "communication_data_type") {
      // The dtype DeepSpeed reduces gradients in; null: its default.
      if (value.is_null()) {
        out.ignored.push_back(key + " (null)");
        continue;
      }
      const std::string name = value.is_string() ? value.get<std::string>() : "";
      if (name != "fp32" && name != "bf16" && name != "fp16") {
        throw core::InputError(file, pointer, fmt::format("expected \"fp32\", \"bf16\" or \"fp16\", got {}", value.dump()));
      }
      add(out, "grad_reduce=" + name);
      out.mapped.push_back(fmt::format("{} {} -> grad_reduce={}", key, name, name));
    } else if (key == "zero_optimization") {
      if (!value.is_object()) throw core::InputError(file, pointer, "expected an object");
      for (const auto& [zkey, zvalue] : value.items()) {
        const std::string zpointer = pointer + "/" + zkey;
        if (zkey == "stage") {
          stage = count(zvalue, zpointer, 0);
          if (stage > 3) throw core::InputError(file, zpointer, fmt::format("expected 0 to 3, got {}", stage));
          add(out, fmt::format("zero={}", stage));
          out.mapped.push_back(fmt::format("zero_optimization.stage -> zero={}", stage));
        } else if (zkey == "overlap_comm") {
          if (!zvalue.is_boolean()) throw core::InputError(file, zpointer, fmt::format("expected true or false, got {}", zvalue.dump()));
          const bool on = zvalue.get<bool>();
          overlap_given = true;
          add(out, on ? "overlap=on" : "overlap=off");
          out.mapped.push_back(fmt::format("zero_optimization.overlap_comm -> overlap={}", on ? "on" : "off"));
        } else if (zkey == "reduce_bucket_size") {
          if (!zvalue.is_number() || !(zvalue.get<double>() > 0)) {
            throw core::InputError(file, zpointer, fmt::format("expected a positive number of elements, got {}", zvalue.dump()));
          }
          // DeepSpeed counts elements; the bucket is that many 16-bit gradients.
          add(out, fmt::format("bucket={:.0f} B", zvalue.get<double>() * 2));
          out.mapped.push_back("zero_optimization.reduce_bucket_size -> bucket (x 2 bytes)");
        } else if (zkey == "offload_optimizer" || zkey == "offload_param") {
          const auto device = zvalue.is_object() ? zvalue.find("device") : zvalue.end();
          const bool off = zvalue.is_object() && (device == zvalue.end() || (device->is_string() && *device == "none"));
          (off ? out.ignored : out.not_modelled).push_back("zero_optimization." + zkey + (off ? " (device none)" : ""));
        } else if ((zkey == "contiguous_gradients" || zkey == "use_multi_rank_bucket_allreduce") && zvalue == false) {
          // dtsim runs DeepSpeed's defaults: gradients copied into the bucket,
          // each bucket all-reduced (lower_deepspeed.cpp).
          out.not_modelled.push_back("zero_optimization." + zkey + " false");
        } else {
          out.ignored.push_back("zero_optimization." + zkey);
        }
      }
    } else if (key == "optimizer") {
      // DeepSpeed builds its own FusedAdam / FusedLamb for these types unless
      // told to use PyTorch's ("torch_adam": true).
      const auto type = value.is_object() ? value.find("type") : value.end();
      if (type == value.end() || !type->is_string()) {
        throw core::InputError(file, pointer + "/type", "expected the optimizer's name, like \"AdamW\"");
      }
      std::string name = type->get<std::string>();
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      bool torch = false;
      const auto params = value.find("params");
      if (params != value.end() && params->is_object() && params->contains("torch_adam")) {
        const nlohmann::json& flag = params->at("torch_adam");
        if (!flag.is_boolean()) {
          throw core::InputError(file, pointer + "/params/torch_adam", fmt::format("expected true or false, got {}", flag.dump()));
        }
        torch = flag.get<bool>();
      }
      if (name == "adam" || name == "adamw" || name == "lamb") {
        add(out, torch ? "optimizer=unfused" : "optimizer=fused");
        out.mapped.push_back(fmt::format("optimizer.type {} -> optimizer={}", type->get<std::string>(),
                                         torch ? "unfused (params.torch_adam)" : "fused (DeepSpeed's)"));
      } else {
        out.not_modelled.push_back("optimizer.type " + type->get<std::string>());
      }
    } else if (key == "pipeline" && value.is_object() && value.contains("pipe_partitioned")) {
      // The PipelineEngine partitions each stage's output over the
      // tensor-parallel group before it sends it (engine.py,
      // is_pipe_partitioned); false sends every rank's whole copy.
      const nlohmann::json& flag = value.at("pipe_partitioned");
      if (!flag.is_boolean()) {
        throw core::InputError(file, pointer + "/pipe_partitioned", fmt::format("expected true or false, got {}", flag.dump()));
      }
      add(out, flag.get<bool>() ? "p2p_scatter=on" : "p2p_scatter=off");
      out.mapped.push_back(fmt::format("pipeline.pipe_partitioned {} -> p2p_scatter={}", flag.dump(), flag.get<bool>() ? "on" : "off"));
      for (const auto& [sub, unused] : value.items()) {
        if (sub != "pipe_partitioned") out.not_modelled.push_back("pipeline." + sub);
      }
    } else if (key == "activation_checkpointing" || key == "pipeline" || key == "tensor_parallel" ||
               key == "sequence_parallel_size" || key == "comms_logger" || key == "data_efficiency") {
      out.not_modelled.push_back(key);
    } else {
      out.ignored.push_back(key);
    }
  }
  if (!overlap_given) {
    add(out, stage == 3 ? "overlap=on" : "overlap=off");
    out.mapped.push_back(fmt::format("(no zero_optimization.overlap_comm) -> overlap={} (DeepSpeed's default at stage {})",
                                     stage == 3 ? "on" : "off", stage));
  }
  return out;
}

std::string merge_strategies(const std::string& base, const std::string& overrides) {
  std::vector<std::pair<std::string, std::string>> items;
  // The later of two settings of one key wins.
  auto put = [&](std::string_view text) {
    while (!text.empty()) {
      const auto comma = text.find(',');
      std::string item(text.substr(0, comma));
      text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
      if (item.empty()) continue;
      const std::string key = item.substr(0, item.find('='));
      auto it = std::find_if(items.begin(), items.end(), [&](const auto& kv) { return kv.first == key; });
      if (it == items.end()) items.emplace_back(key, item);
      else it->second = item;
    }
  };
  put(base);
  put(overrides);
  std::string out;
  for (const auto& [key, item] : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

}  // namespace dtsim::plan
