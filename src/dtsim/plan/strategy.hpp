#pragma once
/// A parallel strategy in Megatron's terms, parsed from "key=value,..." and
/// validated against a model and a cluster before anything is lowered.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/graph.hpp"
#include "dtsim/plan/schedule.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::plan {

/// Activation recomputation: none; selective (the attention core, Korthikanti
/// et al.); full (each layer's forward again before its backward, keeping
/// only the layer's input).
/// kOp: torchtitan's per-op selective policy (selective_ac_option = "op").
enum class Recompute { kNone, kSelective, kFull, kOp };

/// The training framework whose kernels and habits the strategy runs:
///  - kMegatron: Megatron-Core with Transformer Engine: cuDNN fused attention
///    on Hopper and later, fused scale-mask-softmax when attention is
///    unfused, gradients accumulated and reduced in fp32 (main_grad), fp32
///    master weights (18 bytes of state per parameter);
///  - kPytorch: PyTorch eager (DDP, FSDP): scaled_dot_product_attention's
///    kernel, unfused softmax as separate element-wise kernels, DDP reduces
///    the fp32 gradients of autocast, FSDP reduces in 16 bits
///    (MixedPrecision), 16 bytes of state per parameter;
///  - kDeepspeed: DeepSpeed's engine around a PyTorch eager model (its kernels
///    are kPytorch's): under bf16 or fp16 the model itself is 16-bit, so the
///    weights and their gradients take 2 bytes, the fp32 master weights live
///    in the optimizer with Adam's moments (12), gradients are reduced in the
///    16-bit dtype (communication_data_type's default) and Adam is
///    DeepSpeed's FusedAdam.
enum class Framework { kMegatron, kPytorch, kDeepspeed };

/// What of an MoE block runs as a CUDA graph (Strategy::moe_graph).
enum class MoeGraph { kOff, kRouter, kRouterPreprocess };

/// How the optimizer step runs. kFused: one kernel per tensor group reads
/// and writes each state once (apex and Transformer Engine's FusedAdam,
/// DeepSpeed's, torch.optim.AdamW(fused=True)); kUnfused: Adam as eager
/// element-wise ops, each its own pass over the state (torch.optim.AdamW's
/// default foreach path, or a loop over the tensors such as Composer's
/// DecoupledAdamW). kAuto: the framework's (Megatron and DeepSpeed fused,
/// PyTorch unfused).
enum class Optimizer { kAuto, kFused, kUnfused };

/// How tensor-parallel collectives meet their GEMMs. kOff: each after its
/// op, which waits for it (Megatron-LM before September 2021). kAsync: in
/// the backward of a column-parallel linear layer the input gradient's
/// all-reduce (reduce-scatter under sp) runs beside the weight-gradient GEMM,
/// and under sp the input, kept sharded, is gathered again beside the
/// data-gradient GEMM (Megatron-LM's LinearWithGradAccumulationAndAsync-
/// Communication since 16c90445e7, Transformer Engine's Linear). kOn:
/// every collective pipelined with its GEMM (Megatron-Core --tp-comm-overlap).
/// kAuto: kAsync under Megatron, kOff otherwise.
enum class TpOverlap { kAuto, kOff, kAsync, kOn };

/// Limits on what a strategy string may ask for, stated in its errors: a
/// million GPUs per degree (and in all), a billion samples per batch.
inline constexpr int kMaxGpus = topo::kMaxGpus;
inline constexpr int kMaxBatch = 1 << 30;
inline constexpr int kMaxPsSteps = 100000;

struct Strategy {
  /// Data-parallel ranks: 0 for what the GPUs left over by tp, cp and pp
  /// allow. As in Megatron-Core, ep is carved out of them (ep divides dp);
  /// after resolve_strategy, dp counts the expert layers' replicas, dp / ep.
  int dp = 0;
  int tp = 1;
  int pp = 1;
  int cp = 1;    ///< context parallelism: the sequence split over cp ranks (ring attention)
  int ep = 1;    ///< expert parallelism: MoE experts sharded over ep ranks
  /// Expert tensor parallelism (Megatron-Core --expert-tensor-parallel-size):
  /// each expert's weights split over etp ranks; 0: as tp. With etp other
  /// than tp the expert layers regroup each stage's tp*cp*dp ranks as
  /// etp x ep x expert-dp (etp innermost), so an ep group may span tp ranks.
  int etp = 0;
  /// etp as it applies (resolve sets etp; a strategy built by hand may not).
  [[nodiscard]] int expert_tp() const { return etp > 0 ? etp : tp; }
  /// MoE capacity factor (Megatron-Core --moe-expert-capacity-factor with
  /// padding to capacity): each expert computes capacity_factor times its
  /// even share of the routed tokens, dropping the excess; 0: dropless and
  /// perfectly balanced.
  double capacity_factor = 0;
  int gpus = 0;  ///< GPUs to use; 0: all of the cluster's when dp is 0, else dp*tp*pp
  int mbs = 1;   ///< micro-batch size, samples
  int gbs = 0;   ///< global batch, samples; 0: dp*mbs*accumulation
  int accumulation = 0;  ///< micro-batches per step (DeepSpeed's gradient_accumulation_steps); 0: from gbs
  hw::Dtype dtype = hw::Dtype::kBf16;
  /// The dtype gradients are accumulated in and reduced in over dp; unset:
  /// the framework's default (plan::bytes_per_param says which). Megatron's
  /// main_grad buffer takes it (--accumulate-allreduce-grads-in-fp32,
  /// Megatron-Bridge's grad_reduce_in_fp32), FSDP its MixedPrecision
  /// reduce_dtype, DeepSpeed its communication_data_type.
  std::optional<hw::Dtype> grad_reduce;
  bool overlap = true;  ///< overlap gradient communication with the backward pass
  /// Pipeline sends overlap the sender's next compute (off: the sender waits
  /// until its peer has received, as Megatron-LM's 2021 blocking transfers did).
  bool p2p_overlap = true;
  /// On (the default): each tensor-parallel rank sends 1/tp of a stage's
  /// activation and its gradient, and the receiving stage all-gathers it
  /// over its tensor-parallel group (Lowering::gather_received): Megatron-LM's scatter-gather of 2021, and
  /// DeepSpeed's PipelineEngine, which partitions the first output over the
  /// tensor-parallel group before it sends (is_pipe_partitioned and
  /// is_grad_partitioned, on with model parallelism since the engine's first
  /// version). Off: every tensor-parallel rank sends the whole activation,
  /// as Megatron-LM's --no-scatter-gather-tensors-in-pipeline and DeepSpeed's
  /// "pipeline": {"pipe_partitioned": false} (since November 2023) run it.
  bool p2p_scatter = true;
  /// DeepSpeed's BF16_Optimizer (bf16 with ZeRO stage 0, as Megatron-DeepSpeed
  /// runs it): after each micro-batch's backward every 16-bit gradient of the
  /// stage is cast to fp32 and added into its fp32 gradient (update_hp_grads).
  bool bf16_optimizer = false;
  int zero = 0;         ///< ZeRO stage 0..3
  bool sp = false;      ///< Megatron sequence parallelism (needs tp > 1)
  Schedule schedule = Schedule::kOneFOneB;
  int vpp = 1;          ///< model chunks per pipeline stage (interleaved 1F1B)
  /// Transformer blocks on the first and the last (virtual) pipeline stage
  /// (Megatron-Core --decoder-first/last-pipeline-num-layers); -1: spread.
  int first_stage_layers = -1;
  int last_stage_layers = -1;
  /// Count the embedding and the head as one block each when spreading
  /// blocks over stages (Megatron-Core --account-for-embedding-in-pipeline-split
  /// and --account-for-loss-in-pipeline-split): Llama-3.1-405B's 126 blocks
  /// on 16 stages become 7, 8 x 14, 7.
  bool balanced_split = false;
  Recompute recompute = Recompute::kNone;
  /// Under recompute=full, the blocks recomputed in each model chunk of a
  /// pipeline stage: its first recompute_layers (Megatron's --recompute-method
  /// block --recompute-num-layers N); the chunk's other blocks keep their
  /// activations. 0: every block.
  int recompute_layers = 0;
  core::Bytes bucket = core::Bytes(25.0 * 1048576.0);  ///< gradient bucket (PyTorch DDP's 25 MiB)
  /// Fused attention (FlashAttention) keeps no s x s scores and recomputes
  /// them in the backward pass; "standard" materialises them (Megatron 2021).
  bool flash_attention = true;
  /// The fused kernel: "flash" (the framework's on this device), or one named
  /// (flash1, flash2, flash3, flash4, cudnn, ck, triton); "standard" when unfused.
  std::string attention_kernel = "flash";
  Framework framework = Framework::kPytorch;
  Optimizer optimizer = Optimizer::kAuto;
  /// Cross entropy as Transformer Engine's fused Triton kernels run it
  /// (Megatron-Core --cross-entropy-loss-fusion --cross-entropy-fusion-impl
  /// te): the 16-bit logits read twice, the gradient written in their place
  /// and scaled there in the backward. Off: the fp32 cross entropy of
  /// Megatron's vocab_parallel_cross_entropy(logits.float()) and Hugging Face.
  bool fused_loss = false;
  /// PyTorch autocast over fp32 weights (DDP, and ZeRO 1-2 as the pytorch
  /// framework keeps them): each micro-batch casts every linear layer's
  /// weight to the 16-bit dtype and keeps that copy for its backward, whose
  /// 16-bit weight gradient is cast back to fp32 (ToCopyBackward) and summed
  /// into .grad after the first micro-batch (AccumulateGrad). FSDP gathers
  /// 16-bit weights (MixedPrecision); DeepSpeed and Megatron keep 16-bit
  /// models and accumulate in their own buffers. FP8 is not modelled here.
  /// `autocast=off` leaves these costs out of a pytorch plan.
  bool autocast = true;
  /// Megatron-LM's fused kernels (on since 2021): the scaled masked softmax,
  /// bias with GeLU, and bias with dropout and the residual add. `false`:
  /// each a chain of PyTorch kernels, as Megatron-LM ran them in 2020 and as
  /// --no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion
  /// run them. Other frameworks: no effect.
  bool fusions = true;
  [[nodiscard]] bool autocast_weights() const {
    return autocast && framework == Framework::kPytorch && zero < 3 &&
           (dtype == hw::Dtype::kBf16 || dtype == hw::Dtype::kFp16);
  }
  /// Whether a pipeline send carries 1/tp of the activation: p2p_scatter, or
  /// sequence parallelism, under which every rank holds 1/tp of it anyway.
  [[nodiscard]] bool splits_pipeline_sends() const { return sp || p2p_scatter; }
  /// 16-bit or FP8 compute over fp32 master weights (not fp32 or TF32 training).
  [[nodiscard]] bool mixed_precision() const { return dtype != hw::Dtype::kFp32 && dtype != hw::Dtype::kTf32; }
  [[nodiscard]] bool fused_optimizer() const {
    return optimizer == Optimizer::kAuto ? framework != Framework::kPytorch : optimizer == Optimizer::kFused;
  }
  /// What the host takes to issue one kernel or collective: a GPU kernel
  /// cannot start before the host has launched it. The host runs ahead of the
  /// GPU from the step's start and waits for it only at a sync (Megatron-Core's
  /// MoE dispatcher: plan::Kernel::host_sync), so this shows only where
  /// kernels are shorter than their launches: small models, small
  /// micro-batches, small experts. Unset: the cluster's host's figure
  /// (topo::Cluster::host, devices/hosts.json: what an eager PyTorch step
  /// spends on that CPU per kernel); 0 is a CUDA graph, whose replay
  /// launches the step at once.
  std::optional<core::Seconds> host_launch;
  /// Megatron-Core --overlap-moe-expert-parallel-comm: in the steady state a
  /// forward and a backward pass run as one, taking turns at each
  /// expert-parallel all-to-all so that one's all-to-all runs beside the
  /// other's compute (needs ep > 1).
  bool ep_overlap = false;
  /// How an MoE layer's tokens reach their experts over ep. kAllToAll:
  /// Megatron-Core's all-to-all dispatcher, a copy of each token for each of
  /// its top_k experts through NCCL's all-to-all. kDeepEp: DeepSeek's
  /// dispatch (DeepEP's normal kernels; Megatron-Core's flex dispatcher
  /// with --moe-enable-deepep): a token crosses the network once per
  /// destination node, to the GPU of its own rail there, which forwards it
  /// over NVLink once per GPU holding one of its experts, in the
  /// activations' dtype as Megatron-Core passes them (fused_a2a.py).
  /// kDeepEpFp8: the same with the dispatch in FP8 and a float scale per 128
  /// elements, as DeepSeek-V3 trains (the combine stays 16-bit).
  enum class Dispatcher { kAllToAll, kDeepEp, kDeepEpFp8 } dispatcher = Dispatcher::kAllToAll;
  /// Megatron-Core's partial CUDA graphs of an MoE block
  /// (--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router
  /// [moe_preprocess]): the pre-MLP norm, the router's GEMM and routing, and
  /// with kRouterPreprocess the dispatcher's counts and the permutation, each
  /// pass replayed as one graph launch instead of their kernels' launches.
  MoeGraph moe_graph = MoeGraph::kOff;
  /// How tensor-parallel collectives meet their GEMMs (TpOverlap); kAuto
  /// resolves by framework in tp_overlap_mode().
  TpOverlap tp_overlap = TpOverlap::kAuto;
  [[nodiscard]] TpOverlap tp_overlap_mode() const {
    if (tp_overlap != TpOverlap::kAuto) return tp_overlap;
    return framework == Framework::kMegatron ? TpOverlap::kAsync : TpOverlap::kOff;
  }
  /// The ZeRO-1/2 parameter all-gather split per layer and overlapped with the
  /// forward (Megatron-Core --overlap-param-gather) instead of after the step.
  bool param_overlap = false;
  /// ZeRO-3/FSDP: layers whose weights may be gathered ahead of the one
  /// computing. 1: PyTorch FSDP's limit_all_gathers (the default since
  /// PyTorch 2.0: the next layer's all-gather waits until the one before the
  /// current layer has freed its weights); 0: blocking gathers, each layer
  /// gathers when it starts (DeepSpeed ZeRO-3 without prefetching, as 2021
  /// runs had it); -1: unbounded, an ideal that overlaps as far as the
  /// stream allows.
  int prefetch = 1;
  /// ZeRO-3 under framework=pytorch: which FSDP. 1: FullyShardedDataParallel
  /// (FlatParameter: a layer's weights gather straight into the flat buffer
  /// its parameters view; Composer, llm-foundry). 2: fully_shard
  /// (per-parameter sharding: after each all-gather the compute stream
  /// copies the gathered buffer out into the parameters, and before each
  /// reduce-scatter it waits for the gradients' copy into the reduce buffer
  /// in the reduce dtype; torchtitan). _fsdp_collectives.py:
  /// foreach_all_gather_copy_out (split_with_sizes_copy on the current
  /// stream) and foreach_reduce_scatter_copy_in (torch.cat, then
  /// current_stream.wait_event(copy_in_event)).
  int fsdp_version = 1;
  /// Communication in flight takes SMs (one per NCCL channel) and memory
  /// bandwidth from the kernels beside it (sim::contention_slowdown); off
  /// shows the ideal of communication that costs compute nothing.
  bool contention = true;
  bool one_node = false;  ///< use the first node's GPUs only (the `mirrored` preset)
  /// Parameter-server training: shards on the hosts' CPUs (0: off; -1: one per node used).
  int ps = 0;
  bool sync = false;  ///< with ps: workers wait for each other every step (else asynchronous)
  int steps = 8;      ///< with ps: steps each worker runs, to see staleness settle
  std::string collective = "auto";  ///< collective algorithm (net::parse_algorithm's names)
  std::string protocol = "auto";    ///< NCCL protocol: auto, simple, ll, ll128
  std::string placement = "packed"; ///< ranks on GPUs: packed, spread, random (topo::Placement)
  bool megatron_layout = false;  ///< the `megatron` preset: tp and pp chosen from the cluster's shape
  bool torus_only = false;       ///< the `tpu` preset: only on a torus cluster
};

/// A named classic strategy and what it expands to.
struct Preset {
  const char* name;
  const char* expansion;
  const char* description;
};
const std::vector<Preset>& presets();

/// Keys the parser knows, for messages and `dtsim list`.
std::string_view strategy_keys();

/// Megatron-Core's CUDA graph scope names joined by '+' ("moe_router",
/// "moe_router+moe_preprocess", either order) as the MoE graph they model;
/// "off" is kOff; nullopt for any other scope.
std::optional<MoeGraph> moe_graph_scope(std::string_view scope);

/// "key=value,..." or "preset,key=value,...": a leading preset name expands
/// first and later keys override it. Throws InputError with file
/// "--strategy" and pointer "/key" for unknown keys and malformed values.
Strategy parse_strategy(std::string_view text);

/// A strategy whose every figure is set and checked.
struct ResolvedStrategy {
  Strategy s;
  int world = 1;          ///< ranks = tp * cp * ep * dp * pp
  int micro_batches = 1;  ///< per data-parallel rank and step
  /// The expert layers have their own grid (etp differs from tp): the
  /// dense layout is tp x cp x dp x pp (s.dp all data-parallel ranks) and
  /// experts group each stage's ranks as etp x ep x expert-dp. Otherwise the
  /// one layout tp x cp x ep x dp x pp serves both (s.dp = data-parallel / ep).
  [[nodiscard]] bool expert_grid() const { return s.expert_tp() != s.tp; }

  /// The ep dimension of the dense rank layout.
  [[nodiscard]] int layout_ep() const { return expert_grid() ? 1 : s.ep; }
  /// Ranks holding the same shard of a dense weight: its gradient reduces,
  /// and ZeRO shards it, over them (cp included, as Megatron-Core does).
  [[nodiscard]] int dense_replicas() const { return s.dp * s.cp * layout_ep(); }
  /// Ranks holding the same shard of an expert.
  /// Nodes one expert-parallel group spans, ranks placed in order (packed):
  /// what dispatcher=deepep's dispatch crosses the network between.
  int ep_nodes = 1;
  [[nodiscard]] int expert_replicas() const {
    return expert_grid() ? s.tp * s.cp * s.dp / (s.etp * s.ep) : s.dp * s.cp;
  }
};

/// Checks the strategy against the model and cluster: degrees dividing the
/// GPUs, tp dividing the heads, layers divisible by pp, batch divisibility,
/// enough GPUs. Throws InputError naming the key.
ResolvedStrategy resolve(const Strategy& strategy, const model::Graph& graph, const topo::Cluster& cluster);

}  // namespace dtsim::plan
