#include "dtsim/plan/strategy.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/model/transformer.hpp"

namespace dtsim::plan {
namespace {

constexpr const char* kFile = "--strategy";

[[noreturn]] void fail(std::string_view key, const std::string& message) {
  throw core::InputError(kFile, "/" + std::string(key), message);
}

int positive(std::string_view key, std::string_view value, int minimum, int maximum) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size() || v < minimum || v > maximum) {
    fail(key, fmt::format("expected an integer from {} to {}, got \"{}\"", minimum, maximum, value));
  }
  return static_cast<int>(v);
}
int degree(std::string_view key, std::string_view value) { return positive(key, value, 1, kMaxGpus); }

double capacity(std::string_view key, std::string_view value) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size() || !(v >= 1) || v > 64) {
    fail(key, fmt::format("expected a factor from 1 to 64 (1.25: a quarter of headroom per expert), got \"{}\"", value));
  }
  return v;
}

std::optional<bool> on_off_value(std::string_view value) {
  if (value == "on" || value == "true" || value == "1") return true;
  if (value == "off" || value == "false" || value == "0") return false;
  return std::nullopt;
}

bool on_off(std::string_view key, std::string_view value) {
  if (const auto on = on_off_value(value)) return *on;
  fail(key, fmt::format("expected on or off, got \"{}\"", value));
}

std::string supported_dtypes(const hw::Device& device) {
  std::string out;
  for (hw::Dtype d : hw::kAllDtypes) {
    if (device.peak_for(d).value() > 0) out += (out.empty() ? "" : ", ") + std::string(hw::to_string(d));
  }
  return out;
}

// Megatron's usual layout: tensor parallelism across the GPUs of a node (as
// many as divide the heads), pipeline stages across nodes (as many as divide
// the layers), data parallelism over what is left.
void megatron_layout(Strategy& s, const model::Graph& graph, const topo::Cluster& cluster) {
  if (!graph.transformer) fail("tp", fmt::format("the megatron preset needs a transformer; {} is a layer graph", graph.name));
  const auto& t = *graph.transformer;
  auto largest_divisor = [](std::int64_t of, int at_most) {
    int best = 1;
    for (int d = 1; d <= at_most; ++d) best = of % d == 0 ? d : best;
    return best;
  };
  if (s.tp == 1) s.tp = largest_divisor(t.heads, cluster.gpus_per_node());
  if (s.pp == 1) s.pp = largest_divisor(t.layers, cluster.nodes());
}

// "flash" becomes the fused kernel the framework runs on this device; a named
// kernel must be one the device's figures know. Devices without kernel
// figures cost fused attention with the roofline, whatever its name.
void resolve_attention_kernel(Strategy& s, const hw::Device& device) {
  if (!s.flash_attention || !device.kernel_figures) return;
  const hw::KernelFigures& f = *device.kernel_figures;
  if (s.attention_kernel == "flash") {
    s.attention_kernel = s.framework == Framework::kMegatron ? f.megatron_attention : f.pytorch_attention;
  }
  if (f.find_attention(s.attention_kernel)) return;
  fail("attention", fmt::format("the {} has no figures for {} ({}); it has {}, or standard", device.name,
                                s.attention_kernel, f.file, f.attention_names()));
}

// Blocks need not divide evenly over the (virtual) stages, as in
// Megatron-Core; every stage the split fills gets at least one (or, under
// pipeline_split=balanced, the embedding or the head in its place).
void check_stage_layers(const Strategy& s, std::int64_t blocks) {
  const std::int64_t stages = std::int64_t{s.pp} * s.vpp;
  const bool first = s.first_stage_layers >= 0, last = s.last_stage_layers >= 0;
  // The key an error names: the fixed end the user gave, else the degree that made too many stages.
  const char* key = first ? "first_stage_layers" : last ? "last_stage_layers" : s.vpp > 1 ? "vpp" : "pp";
  if ((first || last) && stages == 1) fail(key, "needs more than one pipeline stage (pp or vpp > 1)");
  const std::int64_t fixed = (first ? s.first_stage_layers : 0) + (last ? s.last_stage_layers : 0);
  const std::int64_t free_stages = stages - (first ? 1 : 0) - (last ? 1 : 0);
  if (fixed > blocks || (free_stages == 0 && fixed != blocks)) {
    fail(key, fmt::format("first and last stages hold {} of the model's {} blocks; the stages between hold the rest, "
                          "at least one each",
                          fixed, blocks));
  }
  // Under pipeline_split=balanced the embedding and the head count as a
  // block each where their stage is free, and such a stage may hold them
  // alone (Llama 3 405B: 126 blocks on 16 x 8 chunks, the first holding the
  // embedding only and the last the output layer only).
  const std::int64_t units = blocks - fixed + (s.balanced_split && !first ? 1 : 0) + (s.balanced_split && !last ? 1 : 0);
  if (units < free_stages) {
    fail(key, fmt::format("expected at most {} blocks' worth of stages: {} stages (pp*vpp = {}*{}) for {} blocks{}{}",
                          units + (stages - free_stages), stages, s.pp, s.vpp, blocks - fixed,
                          fixed > 0 ? " left by the first and last" : "",
                          units > blocks - fixed ? " and the embedding and head counted as blocks" : ""));
  }
}

}  // namespace

std::optional<MoeGraph> moe_graph_scope(std::string_view scope) {
  if (scope == "off") return MoeGraph::kOff;
  if (scope == "moe_router") return MoeGraph::kRouter;
  if (scope == "moe_router+moe_preprocess" || scope == "moe_preprocess+moe_router") return MoeGraph::kRouterPreprocess;
  return std::nullopt;
}

std::string_view strategy_keys() {
  return "dp, tp, pp, cp, ep, etp, gpus, mbs, gbs, dtype, grad_reduce, overlap, zero, bucket, attention, sp, schedule, vpp, "
         "recompute, recompute_layers, ps, sync, steps, p2p_overlap, p2p_scatter, collective, protocol, placement, framework, optimizer, loss, host_launch, tp_overlap, param_overlap, ep_overlap, dispatcher, autocast, fusions, prefetch, contention, first_stage_layers, last_stage_layers, pipeline_split, accumulation, capacity_factor, cuda_graph, fsdp_version, bf16_optimizer";
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"one_device", "gpus=1", "one GPU, no communication (tf.distribute.OneDeviceStrategy)"},
      {"mirrored", "overlap=on", "all GPUs of the first node, gradients all-reduced (tf.distribute.MirroredStrategy)"},
      {"multi_worker_mirrored", "overlap=on",
       "all GPUs of all nodes, gradients all-reduced across them (tf.distribute.MultiWorkerMirroredStrategy)"},
      {"ddp", "overlap=on,bucket=25 MiB", "PyTorch DistributedDataParallel: 25 MiB buckets overlapped with backward"},
      {"horovod", "overlap=on,bucket=64 MiB", "Horovod: 64 MiB tensor-fusion buffer (HOROVOD_FUSION_THRESHOLD)"},
      {"zero1", "zero=1", "ZeRO stage 1: optimizer states sharded over dp"},
      {"zero2", "zero=2", "ZeRO stage 2: optimizer states and gradients sharded over dp"},
      {"zero3", "zero=3", "ZeRO stage 3: optimizer states, gradients and parameters sharded over dp"},
      {"fsdp", "zero=3", "PyTorch FSDP (full shard): as ZeRO stage 3"},
      {"parameter_server", "sync=off",
       "asynchronous workers push gradients to and pull weights from one PS shard per node, on the hosts' CPUs "
       "(tf.distribute.experimental.ParameterServerStrategy)"},
      {"megatron", "framework=megatron,sp=on,recompute=selective",
       "Megatron-LM: tp over the GPUs of a node, pp over nodes, dp over the rest, sequence parallel, "
       "selective recomputation"},
      {"tpu", "overlap=on", "data parallelism on a TPU torus: gradients all-reduced around the torus rings"},
      {"central_storage", "sync=on",
       "one node; weights on the host CPU, gradients reduced to it over PCIe, weights sent back every step "
       "(tf.distribute.experimental.CentralStorageStrategy)"},
  };
  return table;
}

Strategy parse_strategy(std::string_view text) {
  Strategy s;
  std::map<std::string, bool> seen;
  std::string expanded;
  if (std::string_view first = text.substr(0, text.find(',')); !first.empty() && first.find('=') == std::string_view::npos) {
    const auto& table = presets();
    auto it = std::find_if(table.begin(), table.end(), [&](const Preset& p) { return first == p.name; });
    if (it == table.end()) {
      std::string names;
      for (const Preset& p : table) names += (names.empty() ? "" : ", ") + std::string(p.name);
      throw core::InputError(kFile, "", fmt::format("unknown preset \"{}\"; presets: {}", first, names));
    }
    s.one_node = first == "mirrored" || first == "central_storage";
    expanded = std::string(it->expansion);
    std::string_view rest = text.size() > first.size() ? text.substr(first.size() + 1) : std::string_view();
    // Keys after the preset override it, so parse the preset's own keys apart.
    Strategy base = parse_strategy(expanded);
    base.one_node = s.one_node;
    if (first == "parameter_server") base.ps = -1;
    if (first == "central_storage") base.ps = 1;
    base.megatron_layout = first == "megatron";
    base.torus_only = first == "tpu";
    s = base;
    text = rest;
  }
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw core::InputError(kFile, "", fmt::format("expected key=value, got \"{}\"", item));
    }
    std::string key(item.substr(0, eq));
    std::string_view value = item.substr(eq + 1);
    if (seen[key]) fail(key, "given twice");
    seen[key] = true;
    if (key == "dp") s.dp = degree(key, value);
    else if (key == "tp") s.tp = degree(key, value);
    else if (key == "pp") s.pp = degree(key, value);
    else if (key == "cp") s.cp = degree(key, value);
    else if (key == "ep") s.ep = degree(key, value);
    else if (key == "etp") s.etp = degree(key, value);
    else if (key == "ps") s.ps = degree(key, value);
    else if (key == "sync") s.sync = on_off(key, value);
    else if (key == "steps") s.steps = positive(key, value, 1, kMaxPsSteps);
    else if (key == "gpus") s.gpus = degree(key, value);
    else if (key == "mbs") s.mbs = positive(key, value, 1, kMaxBatch);
    else if (key == "gbs") s.gbs = positive(key, value, 1, kMaxBatch);
    else if (key == "accumulation") s.accumulation = positive(key, value, 1, kMaxBatch);
    else if (key == "zero") s.zero = positive(key, value, 0, 3);
    else if (key == "overlap") s.overlap = on_off(key, value);
    else if (key == "p2p_overlap") s.p2p_overlap = on_off(key, value);
    else if (key == "p2p_scatter") s.p2p_scatter = on_off(key, value);
    else if (key == "bf16_optimizer") s.bf16_optimizer = on_off(key, value);
    else if (key == "contention") s.contention = on_off(key, value);
    else if (key == "capacity_factor") s.capacity_factor = capacity(key, value);
    else if (key == "dtype") {
      auto d = hw::parse_dtype(value);
      if (!d) fail(key, fmt::format("expected one of fp32, tf32, fp16, bf16, fp8, fp4, got \"{}\"", value));
      s.dtype = *d;
    } else if (key == "grad_reduce") {
      auto d = hw::parse_dtype(value);
      if (!d || (*d != hw::Dtype::kFp32 && *d != hw::Dtype::kBf16 && *d != hw::Dtype::kFp16)) {
        fail(key, fmt::format("expected fp32, bf16 or fp16, got \"{}\"", value));
      }
      s.grad_reduce = *d;
    } else if (key == "sp") {
      s.sp = on_off(key, value);
    } else if (key == "vpp") {
      s.vpp = positive(key, value, 1, kMaxGpus);
    } else if (key == "recompute_layers") {
      s.recompute_layers = positive(key, value, 0, static_cast<int>(model::kMaxLayers));
    } else if (key == "first_stage_layers") {
      s.first_stage_layers = positive(key, value, 0, static_cast<int>(model::kMaxLayers));
    } else if (key == "last_stage_layers") {
      s.last_stage_layers = positive(key, value, 0, static_cast<int>(model::kMaxLayers));
    } else if (key == "pipeline_split") {
      if (value == "even") s.balanced_split = false;
      else if (value == "balanced") s.balanced_split = true;
      else fail(key, fmt::format("expected even or balanced, got \"{}\"", value));
    } else if (key == "schedule") {
      if (value == "gpipe") s.schedule = Schedule::kGpipe;
      else if (value == "1f1b") s.schedule = Schedule::kOneFOneB;
      else if (value == "interleaved") s.schedule = Schedule::kInterleaved;
      else fail(key, fmt::format("expected gpipe, 1f1b or interleaved, got \"{}\"", value));
    } else if (key == "recompute") {
      if (value == "none") s.recompute = Recompute::kNone;
      else if (value == "selective") s.recompute = Recompute::kSelective;
      else if (value == "full") s.recompute = Recompute::kFull;
      else if (value == "op") s.recompute = Recompute::kOp;
      else fail(key, fmt::format("expected none, selective, full or op, got \"{}\"", value));
    } else if (key == "collective") {
      const std::set<std::string_view> valid{"auto", "ring", "tree", "halving_doubling", "direct",
                                             "nvls", "sharp", "ps", "reduce_broadcast"};
      if (!valid.count(value)) {
        fail(key, fmt::format("expected auto, ring, tree, halving_doubling, direct, nvls, sharp, ps or "
                              "reduce_broadcast, got \"{}\"", value));
      }
      s.collective = std::string(value);
    } else if (key == "placement") {
      if (value != "packed" && value != "spread" && value != "random") {
        fail(key, fmt::format("expected packed, spread or random, got \"{}\"", value));
      }
      s.placement = std::string(value);
    } else if (key == "protocol") {
      if (value != "auto" && value != "simple" && value != "ll" && value != "ll128") {
        fail(key, fmt::format("expected auto, simple, ll or ll128, got \"{}\"", value));
      }
      s.protocol = std::string(value);
    } else if (key == "attention") {
      const std::set<std::string_view> valid{"flash",  "standard", "flash1", "flash2", "flash3",
                                             "flash4", "cudnn",    "ck",     "triton"};
      if (!valid.count(value)) {
        fail(key, fmt::format("expected flash, standard, flash1, flash2, flash3, flash4, cudnn, ck or triton, got \"{}\"", value));
      }
      s.flash_attention = value != "standard";
      s.attention_kernel = std::string(value);
    } else if (key == "framework") {
      if (value == "megatron") s.framework = Framework::kMegatron;
      else if (value == "pytorch") s.framework = Framework::kPytorch;
      else if (value == "deepspeed") s.framework = Framework::kDeepspeed;
      else fail(key, fmt::format("expected megatron, pytorch or deepspeed, got \"{}\"", value));
    } else if (key == "optimizer") {
      if (value == "fused") s.optimizer = Optimizer::kFused;
      else if (value == "unfused") s.optimizer = Optimizer::kUnfused;
      else fail(key, fmt::format("expected fused or unfused, got \"{}\"", value));
    } else if (key == "loss") {
      if (value == "fused") s.fused_loss = true;
      else if (value == "unfused") s.fused_loss = false;
      else fail(key, fmt::format("expected fused or unfused, got \"{}\"", value));
    } else if (key == "host_launch") {
      try {
        s.host_launch = value == "0" ? core::Seconds(0) : core::parse_duration(value);
      } catch (const std::invalid_argument& e) {
        fail(key, e.what());
      }
      // A millisecond per launch is already a slow interpreter; past it a step would be the host's alone.
      if (s.host_launch->value() > 1e-3) fail(key, fmt::format("expected at most 1 ms per launch, got \"{}\"", value));
    } else if (key == "tp_overlap") {
      const auto on = on_off_value(value);
      if (value == "async") s.tp_overlap = TpOverlap::kAsync;
      else if (on) s.tp_overlap = *on ? TpOverlap::kOn : TpOverlap::kOff;
      else fail(key, fmt::format("expected on, async or off, got \"{}\"", value));
    } else if (key == "param_overlap") {
      s.param_overlap = on_off(key, value);
    } else if (key == "ep_overlap") {
      s.ep_overlap = on_off(key, value);
    } else if (key == "dispatcher") {
      if (value == "alltoall") s.dispatcher = Strategy::Dispatcher::kAllToAll;
      else if (value == "deepep") s.dispatcher = Strategy::Dispatcher::kDeepEp;
      else if (value == "deepep_fp8") s.dispatcher = Strategy::Dispatcher::kDeepEpFp8;
      else fail(key, fmt::format("expected alltoall, deepep or deepep_fp8, got \"{}\"", value));
    } else if (key == "cuda_graph") {
      if (const auto graph = moe_graph_scope(value)) s.moe_graph = *graph;
      else if (value == "moe_preprocess") fail(key, "moe_preprocess needs moe_router in the scope too (Megatron-Core refuses it alone)");
      else fail(key, fmt::format("expected off, moe_router or moe_router+moe_preprocess, got \"{}\"", value));
    } else if (key == "autocast") {
      s.autocast = on_off(key, value);
    } else if (key == "fusions") {
      s.fusions = on_off(key, value);
    } else if (key == "fsdp_version") {
      if (value == "1") s.fsdp_version = 1;
      else if (value == "2") s.fsdp_version = 2;
      else fail(key, fmt::format("expected 1 (FullyShardedDataParallel) or 2 (fully_shard), got \"{}\"", value));
    } else if (key == "prefetch") {
      if (value == "unbounded") s.prefetch = -1;
      else s.prefetch = positive(key, value, 0, 64);
    } else if (key == "bucket") {
      try {
        s.bucket = core::parse_bytes(value);
      } catch (const std::invalid_argument& e) {
        fail(key, e.what());
      }
      if (s.bucket.value() <= 0) fail(key, "expected a positive size like \"25 MiB\"");
    } else {
      fail(key, fmt::format("unknown key; valid keys: {}", strategy_keys()));
    }
  }
  if (s.zero > 3) fail("zero", fmt::format("expected a ZeRO stage 0 to 3, got {}", s.zero));
  if (s.vpp > 1 && seen["schedule"] && s.schedule != Schedule::kInterleaved) {
    fail("vpp", fmt::format("virtual stages need schedule=interleaved, got schedule={}", to_string(s.schedule)));
  }
  if (s.vpp > 1) s.schedule = Schedule::kInterleaved;
  return s;
}

ResolvedStrategy resolve(const Strategy& strategy, const model::Graph& graph, const topo::Cluster& cluster) {
  ResolvedStrategy r{strategy, 1, 1};
  Strategy& s = r.s;
  if (cluster.device().peak_for(s.dtype).value() <= 0) {
    fail("dtype", fmt::format("the {} has no {} units; it supports {}", cluster.device().name, hw::to_string(s.dtype),
                              supported_dtypes(cluster.device())));
  }
  if (s.torus_only && !cluster.torus()) {
    fail("tpu", fmt::format("the tpu preset needs a torus cluster (intra_node kind \"torus\"); {} is not one", cluster.name()));
  }
  if (s.megatron_layout) megatron_layout(s, graph, cluster);
  resolve_attention_kernel(s, cluster.device());
  if (s.param_overlap && s.zero != 1 && s.zero != 2) {
    fail("param_overlap", fmt::format("overlaps the ZeRO-1/2 parameter all-gather: expected zero=1 or 2, got zero={}", s.zero));
  }
  const int available = s.one_node ? cluster.gpus_per_node() : cluster.gpu_count();
  // Each degree is at most kMaxGpus (2^20), so products are taken in 64 bits
  // and checked against the cluster before anything narrows them again.
  // Expert parallelism is carved out of data parallelism, as Megatron-Core
  // does: world = tp*cp*pp*dp, and ep divides dp (the expert layers' ranks
  // are tp*cp*pp*ep*expert-dp, the same GPUs grouped differently).
  const std::int64_t model_parallel = std::int64_t{s.tp} * s.cp * s.pp;
  if (model_parallel > available) {
    fail("tp", fmt::format("tp*cp*pp = {} needs more GPUs than the cluster's {}", model_parallel, available));
  }

  if (graph.transformer) {
    const auto& t = *graph.transformer;
    if (t.heads % s.tp != 0) fail("tp", fmt::format("expected a divisor of the model's {} attention heads, got {}", t.heads, s.tp));
    // Megatron's T5 pipelines split encoder and decoder stages and send the
    // encoder's output along with the decoder's; dtsim models neither.
    if (t.decoder_layers > 0 && (s.pp > 1 || s.cp > 1)) {
      fail(s.pp > 1 ? "pp" : "cp", fmt::format("{} is an encoder-decoder: its pipeline and context parallelism are not "
                                                "modelled; expected 1, got {}", graph.name, s.pp > 1 ? s.pp : s.cp));
    }
    check_stage_layers(s, t.layers);
    if (graph.seq_len % s.cp != 0) {
      fail("cp", fmt::format("expected a divisor of the sequence length {}, got {}", graph.seq_len, s.cp));
    }
    if (s.ep > 1 && t.experts == 0) fail("ep", fmt::format("expert parallelism needs an MoE model; {} is dense", graph.name));
    if (s.capacity_factor > 0 && t.experts == 0) {
      fail("capacity_factor", fmt::format("a capacity factor sizes MoE experts; {} is dense", graph.name));
    }
    if (s.ep > 1 && t.experts % s.ep != 0) {
      fail("ep", fmt::format("expected a divisor of the model's {} experts, got {}", t.experts, s.ep));
    }
    if (s.etp > 0 && t.experts == 0) {
      fail("etp", fmt::format("expert tensor parallelism needs an MoE model; {} is dense", graph.name));
    }
    if (s.etp > 0 && t.ffn_hidden % s.etp != 0) {
      fail("etp", fmt::format("expected a divisor of the experts' {} hidden units, got {}", t.ffn_hidden, s.etp));
    }
  } else if (s.tp > 1 || s.cp > 1 || s.ep > 1 || s.etp > 0) {
    const char* key = s.tp > 1 ? "tp" : s.cp > 1 ? "cp" : s.ep > 1 ? "ep" : "etp";
    fail(key, fmt::format("{} parallelism needs a transformer; {} is a layer graph",
                          s.tp > 1 ? "tensor" : s.cp > 1 ? "context" : "expert", graph.name));
  } else if (s.pp > 1 && static_cast<std::int64_t>(graph.layers.size()) < s.pp) {
    fail("pp", fmt::format("expected at most {} stages, one layer each, got {}", graph.layers.size(), s.pp));
  }

  const std::int64_t gpus = s.gpus > 0 ? s.gpus : (s.dp > 0 ? s.dp * model_parallel : available);
  if (gpus > available) {
    fail(s.gpus > 0 ? "gpus" : "dp", fmt::format("needs {} GPUs, the cluster has {}", gpus, available));
  }
  if (s.dp == 0) {
    if (gpus % model_parallel != 0) {
      fail("tp", fmt::format("expected tp*cp*pp to divide the {} GPUs, got {}", gpus, model_parallel));
    }
    s.dp = static_cast<int>(gpus / model_parallel);
  } else if (s.dp * model_parallel != gpus) {
    fail("dp", fmt::format("expected a divisor of the {} GPUs that leaves tp*cp*pp = {}, got {}", gpus, model_parallel, s.dp));
  }
  if (s.etp == 0) s.etp = s.tp;
  if (r.expert_grid()) {
    // Megatron-Core's expert grid regroups a stage's ranks as etp x ep x
    // expert-dp: etp*ep must divide them, whatever tp and dp are.
    const std::int64_t stage = std::int64_t{s.tp} * s.cp * s.dp;
    if (stage % (std::int64_t{s.etp} * s.ep) != 0) {
      fail("etp", fmt::format("expected etp*ep to divide the tp*cp*dp = {} ranks of a pipeline stage (Megatron-Core's "
                              "expert grid), got etp*ep = {}*{}",
                              stage, s.etp, s.ep));
    }
    // The MoE layer takes its tokens split over the tp ranks (Megatron-Core
    // asserts --sequence-parallel for MoE with tp > 1).
    if (s.tp > 1 && !s.sp) {
      fail("sp", fmt::format("expected sp=on: with tp = {} and etp = {}, the experts take the tokens sequence "
                             "parallelism splits over the tp ranks, as Megatron-Core requires",
                             s.tp, s.etp));
    }
  } else if (s.dp % s.ep != 0) {
    fail("ep", fmt::format("expected a divisor of the {} data-parallel ranks (expert parallelism is carved out of "
                           "data parallelism, as in Megatron-Core), got {}",
                           s.dp, s.ep));
  }
  s.gpus = static_cast<int>(gpus);  // at most `available`
  r.world = s.gpus;

  const std::int64_t per_step = std::int64_t{s.dp} * s.mbs;
  if (per_step > kMaxBatch) fail("mbs", fmt::format("dp*mbs = {} samples per step is more than {}", per_step, kMaxBatch));
  if (s.accumulation > 0) {
    const std::int64_t implied = per_step * s.accumulation;
    if (implied > kMaxBatch) fail("accumulation", fmt::format("dp*mbs*accumulation = {} is more than {}", implied, kMaxBatch));
    if (s.gbs != 0 && s.gbs != implied) {
      fail("gbs", fmt::format("expected dp*mbs*accumulation = {}*{}*{} = {}, got {}", s.dp, s.mbs, s.accumulation, implied, s.gbs));
    }
    s.gbs = static_cast<int>(implied);
  }
  if (s.gbs == 0) s.gbs = static_cast<int>(per_step);
  if (s.gbs % per_step != 0) fail("gbs", fmt::format("expected a multiple of dp*mbs = {}, got {}", per_step, s.gbs));
  // From here on, without an expert grid, s.dp counts the replicas of the
  // expert layers: the planner's rank layout is tp x cp x ep x dp x pp.
  if (!r.expert_grid()) s.dp /= s.ep;
  r.micro_batches = static_cast<int>(s.gbs / per_step);
  if (s.sp && s.tp == 1) fail("sp", "sequence parallelism splits along tensor-parallel ranks; it needs tp > 1");
  if (s.moe_graph != MoeGraph::kOff) {
    if (!graph.transformer || graph.transformer->experts == 0) {
      fail("cuda_graph", fmt::format("the moe_router and moe_preprocess scopes graph an MoE block's router; {} is dense", graph.name));
    }
    if (s.framework != Framework::kMegatron) {
      fail("cuda_graph", "Megatron-Core's partial CUDA graphs of an MoE block; expected framework=megatron");
    }
  }
  if (s.ep_overlap) {
    // Megatron-Core's own conditions (TransformerConfig.__post_init__).
    if (s.ep == 1) fail("ep_overlap", "overlaps expert-parallel all-to-alls; it needs ep > 1");
    if (s.pp > 1 && s.vpp == 1) fail("ep_overlap", "with pp > 1 it needs the interleaved schedule (vpp > 1), as Megatron-Core does");
    if (s.recompute == Recompute::kFull) fail("ep_overlap", "cannot run with full recomputation (Megatron-Core refuses it)");
  }
  if (s.dispatcher == Strategy::Dispatcher::kDeepEpFp8 && s.dtype != hw::Dtype::kFp8) {
    fail("dispatcher", "deepep_fp8 dispatches in FP8 as FP8 training does; expected dtype=fp8");
  }
  if (s.dispatcher != Strategy::Dispatcher::kAllToAll) {
    if (!graph.transformer || graph.transformer->experts == 0) {
      fail("dispatcher", fmt::format("deepep dispatches an MoE layer's tokens; {} is dense", graph.name));
    }
    if (s.ep == 1) fail("dispatcher", "deepep dispatches over expert-parallel ranks; it needs ep > 1");
    if (s.expert_tp() > 1) fail("dispatcher", "deepep runs experts whole (expert tensor parallelism 1); expected etp=1");
    if (s.placement != "packed") fail("dispatcher", "deepep's nodes are counted with ranks placed in order; expected placement=packed");
    // An expert group's ranks lie ep apart by its inner degrees, in order
    // (Megatron's: tp, cp inside ep; on an expert grid etp, here 1).
    const std::int64_t stride = r.expert_grid() ? 1 : std::int64_t{s.tp} * s.cp;
    const std::int64_t span = stride * s.ep;
    const int per_node = cluster.gpus_per_node();
    if (span > per_node) {
      if (span % per_node != 0 || s.ep % (span / per_node) != 0) {
        fail("dispatcher", fmt::format("deepep needs an expert group that fills whole nodes of {} GPUs; its ranks span {}",
                                       per_node, span));
      }
      r.ep_nodes = static_cast<int>(span / per_node);
    }
  }
  if (s.bf16_optimizer && s.dtype != hw::Dtype::kBf16) {
    fail("bf16_optimizer", "is DeepSpeed's optimizer for bf16 training; expected dtype=bf16");
  }
  if (s.bf16_optimizer && s.zero > 1) {
    fail("bf16_optimizer", "runs with ZeRO stage 0 and shards only the optimizer's state (zero=1 here); expected zero=0 or 1");
  }
  if (s.fsdp_version == 2 && (s.zero != 3 || s.framework != Framework::kPytorch)) {
    fail("fsdp_version", "is PyTorch FSDP's; it needs zero=3 and framework=pytorch");
  }
  if (s.recompute == Recompute::kOp) {
    // torchtitan's policy counts a block's matmuls (aten.mm) and saves every
    // other one's output; Megatron has no such policy, and MoE experts run
    // grouped matmuls the count does not see.
    if (s.framework == Framework::kMegatron) {
      fail("recompute", "op is torchtitan's per-op policy (PyTorch); Megatron's own are selective and full");
    }
    if (!graph.transformer) fail("recompute", fmt::format("op recomputes a transformer's blocks; {} is a layer graph", graph.name));
    if (graph.transformer->experts > 0) fail("recompute", "op is not modelled for MoE blocks; expected none, selective or full");
  }
  if (s.recompute_layers > 0 && s.recompute != Recompute::kFull) {
    fail("recompute_layers", "counts the blocks full recomputation reruns; it needs recompute=full");
  }
  if (s.schedule == Schedule::kInterleaved) {
    if (s.pp == 1) fail("schedule", "the interleaved schedule needs pp > 1");
    if (r.micro_batches % s.pp != 0) {
      fail("gbs", fmt::format("expected micro-batches per step ({}) to be a multiple of pp = {} for the interleaved schedule",
                              r.micro_batches, s.pp));
    }
  }
  if (s.ps != 0) {
    if (s.tp * s.pp * s.cp * s.ep > 1) {
      fail("ps", "parameter servers serve data-parallel workers; tp, pp, cp and ep must be 1");
    }
    if (s.zero > 0) fail("zero", "ZeRO shards over all-reduce peers; parameter servers hold the optimizer state instead");
    if (s.ps < 0) s.ps = (gpus + cluster.gpus_per_node() - 1) / cluster.gpus_per_node();
  }
  if (s.zero > 0 && r.dense_replicas() == 1) fail("zero", "ZeRO shards over data-parallel ranks; it needs dp > 1");
  return r;
}

}  // namespace dtsim::plan
