#include "dtsim/plan/layer_steps.hpp"

#include <algorithm>
#include <cmath>

#include "dtsim/plan/lower.hpp"
#include "dtsim/plan/memory.hpp"
#include "dtsim/plan/deep_ep.hpp"
#include "dtsim/plan/moe_dispatch.hpp"
#include "dtsim/plan/op_recompute.hpp"

namespace dtsim::plan {

using core::Bytes;
using core::Flops;

namespace {
// Transformer Engine's compute streams for grouped GEMMs and casts
// (transformer_engine/common/util/multi_stream.cpp: num_compute_streams).
constexpr int kGroupedGemmStreams = 4;
}  // namespace

LayerSteps::LayerSteps(const model::Graph& graph, const ResolvedStrategy& strategy, std::vector<Kernel>& kernels)
    : graph_(graph),
      r_(strategy),
      kernels_(kernels),
      act_bytes_(hw::activation_bytes(strategy.s.dtype)),
      recomputed_(recomputed_layers(graph, strategy.s)) {
  cache_.resize(2 * graph.layers.size());
  recompute_count_.assign(graph.layers.size(), 0);
}

hw::OpWork LayerSteps::work(const model::Op& op, bool backward) const {
  const double mbs = r_.s.mbs;
  const bool sharded = op.split == model::TensorSplit::kSharded;
  // Context parallelism gives each rank seq_len/cp tokens, and its queries attend
  // to all keys, so every op's work divides by cp.
  const double split = (sharded || r_.s.sp ? r_.s.tp : 1) * r_.s.cp;
  hw::OpWork w;
  w.kind = op.kind;
  w.backward = backward;
  w.causal = op.causal;
  w.window = op.window;
  w.flops = (backward ? op.backward_flops : op.forward_flops) * (mbs / split);
  w.bytes_moved = bytes_moved(op, backward, mbs / split);
  w.eager_launches = eager_launches(op.pattern, backward);
  if (op.kind == model::OpKind::kAttention && r_.s.flash_attention) {
    // FlashAttention's backward recomputes the scores: 5 GEMMs against the
    // forward's 2, i.e. 2.5x the forward.
    w.fused = true;
    if (backward) w.flops = op.forward_flops * (2.5 * mbs / split);
  }
  w.gemm = op.gemm;
  const auto tp = static_cast<std::int64_t>(sharded ? r_.s.tp : 1);
  if (op.kind == model::OpKind::kAttention) {
    // Attention GEMMs are per sample and per head: the micro-batch and tp
    // change how many run (tp splits the heads), not their shape.
    w.gemm.batch = std::max<std::int64_t>(1, w.gemm.batch * r_.s.mbs / tp);
  } else if (op.expert && r_.expert_grid() && sharded) {
    // An expert split over etp ranks computes etp/tp of the tokens of a tp
    // split (the routed tokens gathered over etp), on 1/etp of the width,
    // of its context-parallel rank's seq_len/cp.
    w.gemm.m = std::max<std::int64_t>(1, w.gemm.m * r_.s.mbs * r_.s.etp / (std::int64_t{r_.s.tp} * r_.s.cp));
    w.gemm.n = std::max<std::int64_t>(1, w.gemm.n / r_.s.etp);
  } else {
    // A context-parallel rank runs its seq_len/cp tokens through each GEMM.
    w.gemm.m = std::max<std::int64_t>(1, w.gemm.m * r_.s.mbs / r_.s.cp);
    w.gemm.n = std::max<std::int64_t>(1, w.gemm.n / tp);
  }
  if (op.expert && op.kind == model::OpKind::kGemm && graph_.transformer && graph_.transformer->experts > 0) {
    // The rank's local experts run one GEMM each over the tokens routed to
    // it (balanced: the rank's tokens times top_k spread over its experts):
    // Megatron-Core's grouped MLP, which Transformer Engine launches one
    // cuBLAS call each over its 4 compute streams (cublaslt_gemm.cu
    // multi_stream_cublas_gemm, multi_stream.cpp); an eager model's loop
    // over its experts (Hugging Face's MoE blocks), one after another.
    const auto& t = *graph_.transformer;
    const std::int64_t local = std::max<std::int64_t>(1, t.experts / r_.s.ep);
    const double routed = static_cast<double>(w.gemm.m) * static_cast<double>(t.top_k) / static_cast<double>(local);
    w.gemm.m = std::max<std::int64_t>(1, std::llround(routed));
    w.gemm.batch = local;
    w.concurrent_kernels = r_.s.framework == Framework::kMegatron ? kGroupedGemmStreams : 1;
  }
  if (const double padding = vocab_padding(op); padding > 1.0) {
    w.flops = w.flops * padding;
    w.bytes_moved = w.bytes_moved * padding;
    if (op.kind == model::OpKind::kGemm) w.gemm.n = padded_vocab() / r_.s.tp;
  }
  if (op.expert && r_.s.capacity_factor > 0) {
    // Padded to capacity: every expert computes capacity_factor times its even share.
    const double cf = r_.s.capacity_factor;
    w.flops = w.flops * cf;
    w.bytes_moved = w.bytes_moved * cf;
    w.gemm.m = static_cast<std::int64_t>(std::llround(static_cast<double>(w.gemm.m) * cf));
  }
  return w;
}

// Megatron-LM pads the vocabulary to a multiple of 128 x tp
// (--make-vocab-size-divisible-by 128, _vocab_size_with_padding) so that
// each rank's slice of the output layer is a multiple of 128: its GEMMs stay
// aligned (a 50257-word vocabulary's data gradient runs 6x slower unpadded)
// at the cost of the padded columns. PyTorch models run the vocabulary as
// their config states it.
std::int64_t LayerSteps::padded_vocab() const {
  const std::int64_t vocab = graph_.transformer ? graph_.transformer->vocab : 0;
  if (r_.s.framework != Framework::kMegatron || vocab <= 0) return vocab;
  const std::int64_t multiple = std::int64_t{128} * r_.s.tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

// The share of work the padding adds to an op over the vocabulary (the
// output layer and its cross entropy); 1 for every other op.
double LayerSteps::vocab_padding(const model::Op& op) const {
  if (!graph_.transformer || op.name.rfind("head.", 0) != 0) return 1.0;
  const std::int64_t vocab = graph_.transformer->vocab;
  const bool over_vocab = (op.kind == model::OpKind::kGemm && op.gemm.n == vocab) || op.kind == model::OpKind::kLoss;
  return over_vocab && vocab > 0 ? static_cast<double>(padded_vocab()) / static_cast<double>(vocab) : 1.0;
}

// Bytes an op's kernels move on this rank; `samples` is the micro-batch over
// the op's split (tp, cp), by which every per-sample figure scales.
Bytes LayerSteps::bytes_moved(const model::Op& op, bool backward, double samples) const {
  if (op.kind == model::OpKind::kAttention && r_.s.flash_attention) {
    // FlashAttention reads Q, K, V and writes O once, and twice that backward.
    const double qkvo = 4.0 * static_cast<double>(op.gemm.m * op.gemm.k * op.gemm.batch / 2);
    return Bytes(qkvo * act_bytes_ * samples * (backward ? 2 : 1));
  }
  if (op.kind == model::OpKind::kAttention) {
    // Dropout keeps a mask of one byte a score (PyTorch's native_dropout
    // returns it as a bool tensor, the fused_dropout of 2020-2021 as uint8):
    // the forward writes it, the backward reads it, and the activation
    // memory holds it (model::SavedActivations::score_mask).
    const double mask_bytes = op.score_dropout ? 1.0 : 0.0;
    // Megatron's layout around it (megatron/model/transformer.py from 2021,
    // Megatron-Core's local DotProductAttention): the context goes from
    // [b·np, s, hn] to [s, b, h] through permute(2, 0, 1, 3).contiguous(), a
    // copy of the output; backward, the Q, K and V gradients join through
    // torch.split's backward, a cat that reads and writes all three.
    const bool megatron_layout = r_.s.framework == Framework::kMegatron && r_.s.fusions;
    const double layout_elements =
        !megatron_layout ? 0.0 : 2.0 * (backward ? op.saved.sharded_elements : op.saved.output_elements);
    return Bytes((op.score_elements * (score_passes(backward, op.score_dropout, op.causal) * act_bytes_ + mask_bytes) +
                  layout_elements * act_bytes_) *
                 samples);
  }
  if (op.kind == model::OpKind::kLoss && r_.s.fused_loss) {
    // Transformer Engine's Triton cross entropy (v2.9): the online softmax
    // reads the logits, the second kernel reads them again and writes the
    // gradient in their place; the backward scales it in place by the
    // per-token gradient (read, write). 3 and 2 elements a logit.
    return Bytes(op.forward_elements_moved * samples * act_bytes_ * (backward ? 2.0 : 3.0));
  }
  if (op.kind == model::OpKind::kLoss) {
    // fp32 cross entropy over the logits (the op's elements are its logits).
    // Forward: the upcast (read 2, write 4 bytes) in 16-bit training, the max
    // (read 4), subtracting it, exp and normalising in place (read and write
    // 4 each), the sum (read 4): 32 bytes a logit, 38 with the upcast.
    // Backward: the gradient scaled in place (8), cast back to 16 bits (6).
    const double upcast = act_bytes_ < 4 ? 6.0 : 0.0;
    return Bytes(op.forward_elements_moved * samples * ((backward ? 8.0 : 32.0) + upcast));
  }
  // Activations scale with the micro-batch; weights are read once per
  // micro-batch (and once more, with their gradient written, in the backward).
  const double activations = backward ? op.backward_elements_moved : op.forward_elements_moved;
  const bool sharded = op.split == model::TensorSplit::kSharded;
  double weights = op.weight_elements_moved * (backward ? 2.0 : 1.0) / (sharded ? r_.s.tp : 1);
  if (op.expert && graph_.transformer) {
    // A grouped GEMM reads the weights of every expert on the rank (experts
    // / ep of them), each split over etp ranks rather than tp.
    const double local_experts = static_cast<double>(graph_.transformer->experts) / r_.s.ep;
    weights *= local_experts * (sharded ? static_cast<double>(r_.s.tp) / r_.s.expert_tp() : 1.0);
  }
  const Bytes moved((activations * samples + weights) * act_bytes_ * eager_factor(op.pattern, backward));
  return op.kind == model::OpKind::kEmbedding && backward ? moved + embedding_gradient_bytes(op) : moved;
}

// An embedding's weight gradient is a dense table (F.embedding's backward,
// embedding_dense_backward: the rank's rows zeroed, then the micro-batch's
// tokens summed into theirs), whatever few rows the tokens touch: under
// autocast in fp32, as the table is (autocast does not cast embeddings),
// else in 16 bits. Megatron then adds it into the parameter's main gradient
// (its DDP hook, main_grad.add_: both read, the main gradient written), in
// the dtype gradients are reduced in.
Bytes LayerSteps::embedding_gradient_bytes(const model::Op& op) const {
  const double rows = op.params / (op.split == model::TensorSplit::kSharded ? r_.s.tp : 1);
  const double table = r_.s.autocast_weights() ? 4.0 : act_bytes_;
  const double main_grad = bytes_per_param(r_.s).reduce;
  const double added = r_.s.framework == Framework::kMegatron ? 2.0 * main_grad + table : 0.0;
  return Bytes(rows * (table + added));
}

// Element-wise passes over the s x s scores of unfused attention, besides the
// two GEMMs that write and read them. Megatron fuses scale, mask and softmax
// into one kernel (read, write) and runs dropout after it (read, write); its
// backward runs dropout's (read, write) and the fused softmax's (read the
// probabilities and the gradient, write). Without its fusions (Megatron-LM
// of 2020, megatron/model/transformer.py: the queries and keys scaled before
// their GEMM) the mask is a masked_fill_ of its own (read, write) and
// softmax a PyTorch kernel, forward and backward. PyTorch eager runs scale,
// mask, softmax and dropout as four kernels and their backwards as four more.
// Without attention dropout (Llama and most later decoders) its two passes
// each way are not run: PyTorch returns the input of a dropout of p = 0.
// Under a causal mask Megatron's fused kernel is the upper-triangular one
// (scaled_upper_triang_masked_softmax.h, 2020-2021): a row reads only its
// keys up to the diagonal and writes zeros past it, forward, and its backward
// reads the probabilities and the gradient up to the diagonal and writes the
// whole row. Half a pass less forward, one less backward.
double LayerSteps::score_passes(bool backward, bool dropout, bool causal) const {
  const bool megatron = r_.s.framework == Framework::kMegatron;
  const double forward = !megatron ? 8.0 : r_.s.fusions ? 4.0 : 6.0;
  const double triangle = causal && megatron && r_.s.fusions ? (backward ? 1.0 : 0.5) : 0.0;
  return forward + (backward ? 1.0 : 0.0) - (dropout ? 0.0 : 2.0) - triangle;
}

// A chain the framework runs as separate kernels instead of one fused
// kernel: its bytes as a multiple of the fused kernel's and the kernels the
// host launches, forward and backward; none where it runs the fused one.
//  - PyTorch eager's RMSNorm, as Hugging Face's LlamaRMSNorm and torchtitan's
//    default write it: x.float() (read 2, write 4 bytes an element), pow(2)
//    (4, 4), mean (4), x * rsqrt (4 + 4, 4), .to(bf16) (4, 2), * weight
//    (2, 2): 36 bytes where a fused kernel moves 4, and its autograd
//    backward the same again; 8 launches forward (float(), pow, mean, + eps,
//    rsqrt, *, .to(bf16), * weight), about 12 backward (two per product, the
//    weight's gradient summed over tokens, one per cast, rsqrt, mean, pow);
//  - PyTorch eager's rotary embedding (apply_rotary_pos_emb) for the queries
//    and the keys: rotate_half's negation and cat, x * cos, rotate_half(x) *
//    sin and their sum, about 10 element passes where a fused kernel makes
//    2, and 10 launches each way;
//  - Megatron-LM without its fusions: bias and GeLU as a bias add (read,
//    write) before the activation, twice the fused kernel's bytes; bias,
//    dropout and the residual add as three kernels (bias: read and write;
//    dropout: read and write; add: two reads and a write), 7/3 of the fused
//    kernel's three elements, 5/3 without a bias. Their backwards move what
//    the fused ones do (autograd passes the add's gradient through, and the
//    bias gradient is a reduction either way) in two kernels, the
//    activation's or dropout's gradient and the bias's reduction.
// Megatron-Core runs Transformer Engine's fused RMSNorm and rotary kernels.
std::optional<LayerSteps::EagerChain> LayerSteps::eager_chain(model::Op::Pattern pattern) const {
  using P = model::Op::Pattern;
  if (r_.s.framework == Framework::kMegatron) {
    if (r_.s.fusions) return std::nullopt;
    switch (pattern) {
      case P::kBiasActivation: return EagerChain{2.0, 1.0, 2, 2};
      case P::kBiasDropoutAdd: return EagerChain{7.0 / 3.0, 1.0, 3, 2};
      case P::kDropoutAdd: return EagerChain{5.0 / 3.0, 1.0, 2, 1};
      default: return std::nullopt;
    }
  }
  switch (pattern) {
    case P::kRmsNorm: return EagerChain{9.0, 9.0, 8, 12};
    case P::kRotary: return EagerChain{5.0, 5.0, 10, 10};
    default: return std::nullopt;
  }
}

double LayerSteps::eager_factor(model::Op::Pattern pattern, bool backward) const {
  const auto chain = eager_chain(pattern);
  return !chain ? 1.0 : backward ? chain->backward_bytes : chain->forward_bytes;
}

// 0: the op's own kernel calls, as a fused kernel runs.
int LayerSteps::eager_launches(model::Op::Pattern pattern, bool backward) const {
  const auto chain = eager_chain(pattern);
  return !chain ? 0 : backward ? chain->backward_launches : chain->forward_launches;
}

// Activation bytes of this rank's tokens at the given width per token.
Bytes LayerSteps::tokens_bytes(double width, std::int64_t tokens) const {
  const double per_sample = static_cast<double>(tokens > 0 ? tokens : graph_.seq_len);
  return Bytes(per_sample / r_.s.cp * width * act_bytes_ * r_.s.mbs);
}

void LayerSteps::append(std::vector<Step>& out, const model::Layer& layer, bool backward, bool recomputed) {
  const double hidden = graph_.transformer ? static_cast<double>(graph_.transformer->hidden) : 0;
  const Bytes tp_bytes = tokens_bytes(hidden);
  const bool tp = r_.s.tp > 1, sp = r_.s.sp, cp = r_.s.cp > 1, ep = r_.s.ep > 1;
  Kernel current{layer.name + (recomputed ? ".recompute" : backward ? ".bwd" : ".fwd"), {}, Flops(0), Flops(0)};
  auto flush = [&] {
    if (current.ops.empty()) return;
    kernels_.push_back(current);
    out.push_back({false, CommOp::kAllReduce, GroupKind::kTp, false, static_cast<int>(kernels_.size() - 1), Bytes(0)});
    current.ops.clear();
    current.model_flops = current.hardware_flops = Flops(0);
  };
  auto collective = [&](CommOp op, GroupKind group = GroupKind::kTp, Bytes bytes = Bytes(-1), bool overlapped = false) {
    // Megatron-Core's --tp-comm-overlap pipelines the tensor-parallel
    // collective with its neighbouring GEMM in chunks: the collective runs
    // beside the next compute step.
    if (group == GroupKind::kTp && r_.s.tp_overlap_mode() == TpOverlap::kOn) overlapped = true;
    flush();
    out.push_back({true, op, group, overlapped, -1, bytes.value() < 0 ? tp_bytes : bytes});
  };
  // Ring attention: cp blocks of 1/cp of this rank's attention each; before
  // block i < cp-1 starts, the K/V block it holds moves on to the next rank
  // (in the backward, with its gradient: twice the bytes).
  auto ring_attention = [&](const model::Op& op, bool op_backward) {
    const auto& t = *graph_.transformer;
    const double kv_width = 2.0 * static_cast<double>(t.kv_heads * t.head_dim) / r_.s.tp;
    const Bytes kv = tokens_bytes(kv_width) * (op_backward ? 2.0 : 1.0);
    hw::OpWork block = work(op, op_backward);
    block.flops = block.flops / r_.s.cp;
    block.bytes_moved = block.bytes_moved / r_.s.cp;
    const Flops model_block = (op_backward ? op.backward_flops : op.forward_flops) *
                              (static_cast<double>(r_.s.mbs) / (r_.s.tp * r_.s.cp * r_.s.cp));
    for (int i = 0; i < r_.s.cp; ++i) {
      if (i + 1 < r_.s.cp) collective(CommOp::kRingExchange, GroupKind::kCp, kv, true);
      flush();
      current.ops.push_back(block);
      current.hardware_flops += block.flops;
      if (!recomputed) current.model_flops += model_block;
    }
    flush();
  };
  // Dispatch and combine move each token to its top_k experts; padded to
  // capacity, capacity_factor times that. On an expert grid, each rank
  // dispatches its 1/tp of the tokens (sequence parallelism) over ep, and
  // the etp ranks of an expert gather what they received (Megatron-Core's
  // all-to-all dispatcher); the dense tp collectives around the experts go.
  const double padding = r_.s.capacity_factor > 0 ? r_.s.capacity_factor : 1.0;
  const bool grid = r_.expert_grid(), etp = grid && r_.s.etp > 1;
  const Bytes routed =
      tokens_bytes(hidden * (graph_.transformer ? static_cast<double>(graph_.transformer->top_k) : 0) * padding) /
      (grid ? r_.s.tp : 1);
  const Bytes gathered = routed * static_cast<double>(r_.s.etp);
  // The tokens' trip to their experts and back. The all-to-all dispatcher
  // sends `routed`, a copy per expert, in one all-to-all. DeepEP sends each
  // token across the network once per node holding one of its experts, then
  // over NVLink once per GPU there (deep_ep.hpp), in the activations'
  // dtype; deepep_fp8 sends the forward dispatch in FP8 with a float scale
  // per 128 elements. The combine runs the levels in reverse.
  auto expert_trip = [&](bool to_experts, bool fp8_data) {
    if (!ep) return;
    if (r_.s.dispatcher == Strategy::Dispatcher::kAllToAll) {
      collective(CommOp::kAllToAll, GroupKind::kEp, routed);
      return;
    }
    const DeepEpCopies copies = deep_ep_copies(*graph_.transformer, r_.s.ep, r_.ep_nodes);
    const double element = fp8_data ? (1.0 + 4.0 / 128.0) / act_bytes_ : 1.0;
    const Bytes tokens = routed / static_cast<double>(graph_.transformer->top_k) * element;
    const Bytes across = tokens * copies.remote_nodes, within = tokens * copies.nvlink_copies;
    // A level with one member a group moves nothing and is not issued.
    // DeepEP's kernel runs both levels at once, chunk by chunk: its RDMA
    // senders, its forwarders (RDMA in, NVLink out) and its NVLink receivers
    // are warps of one kernel (csrc/kernels/internode.cu, WarpRole), so a
    // trip takes its slower level plus a chunk, not their sum. The chunk (a
    // few hundred KB, microseconds) is not charged.
    const bool network = r_.ep_nodes > 1, nvlink = r_.ep_nodes < r_.s.ep;
    if (to_experts && network) collective(CommOp::kAllToAllAcrossNodes, GroupKind::kEp, across);
    if (nvlink) {
      collective(CommOp::kAllToAllInNode, GroupKind::kEp, within);
      out.back().beside_previous = to_experts && network;
    }
    if (!to_experts && network) {
      collective(CommOp::kAllToAllAcrossNodes, GroupKind::kEp, across);
      out.back().beside_previous = nvlink;
    }
  };
  const bool fp8_dispatch = r_.s.dispatcher == Strategy::Dispatcher::kDeepEpFp8;
  // The router's, the dispatcher's and the permutations' kernels around the
  // experts (moe_dispatch.hpp), in the order the block runs them.
  const bool moe = graph_.transformer && graph_.transformer->experts > 0;
  const MoeTokens moe_tokens{routed, gathered, moe ? static_cast<int>(graph_.transformer->top_k) : 1,
                             moe ? std::max<std::int64_t>(1, graph_.transformer->experts / r_.s.ep) : 1};
  auto moe_glue = [&](const model::Op& op, MoeStage stage, bool op_backward) {
    const bool at = stage == MoeStage::kBeforeDispatch || stage == MoeStage::kAfterDispatch ? op.tp_gather_before
                                                                                            : op.tp_reduce_after;
    if (!moe || !op.expert || !at) return;
    const hw::OpWork w = moe_dispatch_work(stage, op_backward, r_, moe_tokens);
    if (w.bytes_moved.value() > 0 || w.eager_launches > 0) current.ops.push_back(w);
  };
  auto dense_tp = [&](const model::Op& op) { return tp && !(grid && op.expert); };
  // A dense column-parallel GEMM whose backward Megatron splits around its
  // collectives (experts' collectives belong to the token dispatcher).
  auto async_column = [&](const model::Op& op) {
    return dense_tp(op) && !op.expert && op.tp_gather_before && op.kind == model::OpKind::kGemm &&
           op.split == model::TensorSplit::kSharded && r_.s.tp_overlap_mode() != TpOverlap::kOff;
  };
  // Autocast's weight copies: a linear layer's fp32 weight read and its
  // 16-bit copy written before the forward GEMM (6 bytes a parameter, again
  // in a recomputed forward), the 16-bit weight gradient read and its fp32
  // copy written after the backward ones (6).
  auto cast_weights = [&](const model::Op& op) {
    const double cast_params = autocast_params(op, r_.s);
    if (cast_params <= 0) return;
    hw::OpWork cast;
    cast.kind = model::OpKind::kElementwise;
    cast.bytes_moved = Bytes(6.0 * cast_params);
    current.ops.push_back(cast);
  };
  // Megatron-Core's partial CUDA graph of an MoE block holds its pre-MLP
  // norm and its router (TransformerLayer._get_submodules_under_cudagraphs);
  // the graph's launch is the routing's (moe_dispatch.cpp).
  const bool graphed_block = r_.s.moe_graph != MoeGraph::kOff &&
                             std::any_of(layer.ops.begin(), layer.ops.end(), [](const model::Op& op) { return op.expert; });
  auto in_moe_graph = [&](const model::Op& op) { return graphed_block && (op.name == "mlp.norm" || op.name == "moe.router"); };
  // The op's pass; of a backward GEMM, both gradient passes or one (half the work).
  auto add = [&](const model::Op& op, bool op_backward, hw::GradientPass pass = hw::GradientPass::kBoth) {
    hw::OpWork w = work(op, op_backward);
    w.graphed = in_moe_graph(op);
    const double share = pass == hw::GradientPass::kBoth ? 1.0 : 0.5;
    w.flops = w.flops * share;
    w.gradient_pass = pass;
    if (!op_backward) cast_weights(op);
    current.ops.push_back(w);
    if (op_backward && pass != hw::GradientPass::kData) cast_weights(op);
    current.hardware_flops += w.flops;
    // Model FLOPs count the algorithm's work once: never a recomputed forward,
    // nor the scores FlashAttention's backward recomputes.
    if (!recomputed) {
      current.model_flops += (op_backward ? op.backward_flops : op.forward_flops) *
                             (share * r_.s.mbs / ((op.split == model::TensorSplit::kSharded ? r_.s.tp : 1) * r_.s.cp));
    }
  };
  const bool selective = r_.s.recompute == Recompute::kSelective && !r_.s.flash_attention;
  // Megatron-Core's all-to-all dispatcher, dropless, reads the tokens per
  // expert on the host before it dispatches (token_dispatcher.py,
  // MoEAlltoAllTokenDispatcher.preprocess: cuda_sync_point
  // "before_ep_alltoall", or "before_finish" without ep and tp): the host
  // waits there for the router's kernels, in every forward and recomputed
  // forward. Padded to capacity, the sizes are known and it does not.
  const bool dispatcher_syncs = r_.s.framework == Framework::kMegatron && r_.s.capacity_factor <= 0;
  bool synced = false;
  auto sync_before_experts = [&](const model::Op& op) {
    if (!dispatcher_syncs || synced || !op.expert || !op.tp_gather_before) return;
    flush();
    if (!kernels_.empty()) kernels_.back().host_sync = true;
    synced = true;
  };
  // torchtitan's per-op policy reruns a block's forward but for what it
  // saved (op_recompute.hpp): its attention, half its matmuls and its
  // reduce-scatters, and nothing from the last linear layer on.
  const bool op_policy = recomputed && r_.s.recompute == Recompute::kOp;
  const std::vector<PolicyLinears> policy = op_policy ? op_policy_linears(layer) : std::vector<PolicyLinears>{};
  const std::size_t policy_stop = op_policy ? op_policy_stop(layer) : layer.ops.size();
  // Of a linear layer the policy reruns in part, each rerun linear as its
  // own GEMM, its weight cast again under autocast (whose cache the
  // forward's context cleared on exit), as a whole layer's rerun is.
  auto add_rerun_linears = [&](const model::Op& op, const PolicyLinears& linears) {
    const hw::OpWork whole = work(op, false);
    for (std::int64_t width : linears.rerun) {
      const double share = static_cast<double>(width) / static_cast<double>(op.gemm.n);
      if (const double cast_params = autocast_params(op, r_.s) * share; cast_params > 0) {
        hw::OpWork cast;
        cast.kind = model::OpKind::kElementwise;
        cast.bytes_moved = Bytes(6.0 * cast_params);
        current.ops.push_back(cast);
      }
      hw::OpWork w = whole;
      w.flops = whole.flops * share;
      w.bytes_moved = whole.bytes_moved * share;
      w.gemm.n = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(whole.gemm.n) * share));
      current.ops.push_back(w);
      current.hardware_flops += w.flops;
    }
  };
  if (!backward) {
    for (std::size_t index = 0; index < layer.ops.size(); ++index) {
      const model::Op& op = layer.ops[index];
      if (op_policy) {
        if (index >= policy_stop) break;
        if (op.kind == model::OpKind::kAttention) continue;
        if (op.kind == model::OpKind::kGemm) {
          if (policy[index].rerun.empty()) continue;
          if (dense_tp(op) && sp && op.tp_gather_before) collective(CommOp::kAllGather, GroupKind::kTp, tokens_bytes(hidden, op.tokens));
          add_rerun_linears(op, policy[index]);
          if (dense_tp(op) && op.tp_reduce_after && !sp) collective(CommOp::kAllReduce, GroupKind::kTp, tokens_bytes(hidden, op.tokens));
          continue;
        }
        add(op, false);
        continue;
      }
      moe_glue(op, MoeStage::kBeforeDispatch, false);  // what the sync waits for
      sync_before_experts(op);
      if (dense_tp(op) && sp && op.tp_gather_before) collective(CommOp::kAllGather, GroupKind::kTp, tokens_bytes(hidden, op.tokens));
      if (op.expert && op.tp_gather_before) expert_trip(true, fp8_dispatch);  // dispatch
      if (etp && op.expert && op.tp_gather_before) collective(CommOp::kAllGather, GroupKind::kExpertTp, gathered);
      moe_glue(op, MoeStage::kAfterDispatch, false);
      if (cp && op.kind == model::OpKind::kAttention) ring_attention(op, false);
      else add(op, false);
      moe_glue(op, MoeStage::kBeforeCombine, false);
      if (etp && op.expert && op.tp_reduce_after) collective(CommOp::kReduceScatter, GroupKind::kExpertTp, gathered);
      if (op.expert && op.tp_reduce_after) expert_trip(false, false);  // combine
      moe_glue(op, MoeStage::kAfterCombine, false);
      if (dense_tp(op) && op.tp_reduce_after) {
        collective(sp ? CommOp::kReduceScatter : CommOp::kAllReduce, GroupKind::kTp, tokens_bytes(hidden, op.tokens));
      }
    }
  } else {
    for (auto it = layer.ops.rbegin(); it != layer.ops.rend(); ++it) {
      if (dense_tp(*it) && sp && it->tp_reduce_after) collective(CommOp::kAllGather, GroupKind::kTp, tokens_bytes(hidden, it->tokens));
      moe_glue(*it, MoeStage::kAfterCombine, true);
      if (it->expert && it->tp_reduce_after) expert_trip(true, false);  // the combine's gradient to the experts
      if (etp && it->expert && it->tp_reduce_after) collective(CommOp::kAllGather, GroupKind::kExpertTp, gathered);
      moe_glue(*it, MoeStage::kBeforeCombine, true);
      if (cp && it->kind == model::OpKind::kAttention) {
        ring_attention(*it, true);
        continue;
      }
      if (selective && it->kind == model::OpKind::kAttention) {
        // Selective recomputation reruns the attention core's forward first.
        hw::OpWork again = work(*it, false);
        current.ops.push_back(again);
        current.hardware_flops += again.flops;
      }
      const Bytes input = tokens_bytes(hidden, it->tokens);
      const CommOp input_gradient = sp ? CommOp::kReduceScatter : CommOp::kAllReduce;
      if (async_column(*it)) {
        // Megatron's column-parallel linear layer: under sp its input, kept
        // sharded, is gathered again beside the data-gradient GEMM; the
        // input gradient is reduced beside the weight-gradient GEMM.
        if (sp) collective(CommOp::kAllGather, GroupKind::kTp, input, true);
        add(*it, true, hw::GradientPass::kData);
        collective(input_gradient, GroupKind::kTp, input, true);
        add(*it, true, hw::GradientPass::kWeight);
        flush();  // what follows needs the reduced gradient
        continue;
      }
      add(*it, true);
      moe_glue(*it, MoeStage::kAfterDispatch, true);
      if (etp && it->expert && it->tp_gather_before) collective(CommOp::kReduceScatter, GroupKind::kExpertTp, gathered);
      if (it->expert && it->tp_gather_before) expert_trip(false, false);  // the dispatch's gradient back
      moe_glue(*it, MoeStage::kBeforeDispatch, true);
      if (dense_tp(*it) && it->tp_gather_before) collective(input_gradient, GroupKind::kTp, input);
    }
  }
  flush();
}

const std::vector<Step>& LayerSteps::build(int layer, Pass pass) {
  const std::size_t slot = 2 * static_cast<std::size_t>(layer) + (pass == Pass::kBackward ? 1 : 0);
  std::vector<Step>& out = cache_[slot];
  if (!out.empty()) return out;
  const model::Layer& l = graph_.layers[static_cast<std::size_t>(layer)];
  if (pass == Pass::kForward) {
    append(out, l, false, false);
    return out;
  }
  if (recomputed(layer)) {
    append(out, l, false, true);
    recompute_count_[static_cast<std::size_t>(layer)] = out.size();
  }
  append(out, l, true, false);
  return out;
}

std::size_t LayerSteps::recompute_steps(int layer) {
  backward(layer);
  return recompute_count_[static_cast<std::size_t>(layer)];
}

}  // namespace dtsim::plan
