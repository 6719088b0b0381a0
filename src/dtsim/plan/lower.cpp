#include "dtsim/plan/lower.hpp"

#include <algorithm>

#include "dtsim/plan/lowering.hpp"
#include "dtsim/plan/memory.hpp"

namespace dtsim::plan {
namespace detail {

Lowering::Lowering(const model::Graph& graph, const ResolvedStrategy& r, const LowerOptions& options,
                   core::Bytes runtime_allowance, int gpus_per_node)
    : runtime_allowance_(runtime_allowance),
      full_(options.full),
      spmd_ranks_(options.spmd_ranks && !options.full),
      graph_(graph),
      r_(r),
      layout_(r),
      virtual_stages_(r.s.pp * r.s.vpp),
      chunks_(stage_layers(graph, r.s)),
      steps_(graph, r, tg_.kernels),
      per_param_(bytes_per_param(r.s)) {
  tg_.world = r.world;
  if (r.expert_grid()) experts_.emplace(r);
  // Per-layer sizes every micro-batch of every rank asks for, worked out once.
  for (std::size_t i = 0; i < graph.layers.size(); ++i) {
    const model::Layer& l = graph.layers[i];
    held_.push_back(held_activations(graph, l, saved_activation_bytes(l, r), steps_.recomputed(static_cast<int>(i)), r));
    std::array<double, 2>& params = layer_params_.emplace_back();  // dense, experts
    double added = 0;  // what a main_grad.add_ hook adds: the embedding's table adds inside its own backward
    for (const model::Op& op : l.ops) {
      params[op.expert ? 1 : 0] += params_on_rank(op, r.s);
      if (op.kind != model::OpKind::kEmbedding) added += params_on_rank(op, r.s);
    }
    main_grad_added_params_.push_back(added);
  }
  tg_.dtype = r.s.dtype;
  tg_.tp_comm_overlap = r.s.tp_overlap_mode() == TpOverlap::kOn;
  if (r.s.placement == "spread") {
    tg_.gpu_of_rank = topo::Placement::spread(r.world, gpus_per_node).gpu_of_rank;
  } else if (r.s.placement == "random") {
    tg_.gpu_of_rank = topo::Placement::random(r.world).gpu_of_rank;
  } else {
    tg_.gpu_of_rank = topo::Placement::packed(r.world).gpu_of_rank;
  }
  const int all = RankLayout::kT | RankLayout::kC | RankLayout::kE | RankLayout::kD;
  for (int p = 0; p < r.s.pp; ++p) {
    Coord first{0, 0, 0, 0, p};
    if (!options.full) {
      ranks_.push_back(first);
      continue;
    }
    for (int rank : layout_.group(first, all)) ranks_.push_back(layout_.coord(rank));
  }
}

TaskGraph Lowering::run() {
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    lower_rank(ranks_[i]);
    // Every rank lowers to about as many tasks as the first: reserve them
    // all once it has shown how many, rather than copying a graph of
    // millions of tasks at each doubling (issue 16: 11% of a search).
    if (i == 0 && ranks_.size() > 1) {
      const std::size_t ranks = ranks_.size();
      tg_.tasks.reserve(tg_.tasks.size() * ranks + tg_.tasks.size() / 8 + 64);
      tg_.deps.reserve(tg_.deps.size() * ranks + tg_.deps.size() / 8 + 64);
    }
  }
  if (!full_) {
    for (CommGroup& g : tg_.groups) {
      const std::optional<ExpertGrid::Span> span = expert_span(g.kind);
      g.copies = span ? experts_->copies(g.ranks, *span) : layout_.copies(g.ranks);
    }
    if (spmd_ranks_) add_spmd_ranks();
  }
  return std::move(tg_);
}

// Every rank of each stage runs its simulated rank's tasks: each copy of
// a group becomes a group of its own, each call one per copy, and each
// rank learns, per call, which one it makes (TaskGraph::spmd_ranks).
void Lowering::add_spmd_ranks() {
  const std::size_t groups = tg_.groups.size(), calls = tg_.calls.size();
  const auto world = static_cast<std::size_t>(tg_.world);
  std::vector<std::vector<int>> concrete(groups);      // per group: itself, then each copy's group
  std::vector<std::vector<int>> copy_of_rank(groups);  // per group and rank: which of them it is in (-1: none)
  for (std::size_t gi = 0; gi < groups; ++gi) {
    const GroupKind kind = tg_.groups[gi].kind;
    std::vector<std::vector<int>> copies = std::move(tg_.groups[gi].copies);
    tg_.groups[gi].copies.clear();
    copy_of_rank[gi].assign(world, -1);
    for (int r : tg_.groups[gi].ranks) copy_of_rank[gi][static_cast<std::size_t>(r)] = 0;
    concrete[gi].push_back(static_cast<int>(gi));
    for (std::vector<int>& ranks : copies) {
      for (int r : ranks) copy_of_rank[gi][static_cast<std::size_t>(r)] = static_cast<int>(concrete[gi].size());
      concrete[gi].push_back(group(kind, std::move(ranks)));
    }
  }
  std::vector<std::vector<int>> concrete_calls(calls);  // per call: the same call on each of its group's copies
  for (std::size_t c = 0; c < calls; ++c) {
    const CommCall call_c = tg_.calls[c];
    for (int g : concrete[static_cast<std::size_t>(call_c.group)]) concrete_calls[c].push_back(call(call_c.op, g, call_c.bytes));
  }
  tg_.spmd_template_calls = calls;
  const int all = RankLayout::kT | RankLayout::kC | RankLayout::kE | RankLayout::kD;
  for (std::size_t s = 0; s < tg_.simulated.size(); ++s) {
    // The order --full lowers them in, so both replays break ties alike.
    for (int rank : layout_.group(Coord{0, 0, 0, 0, tg_.simulated[s].stage}, all)) {
      tg_.spmd_ranks.push_back({rank, static_cast<int>(s)});
      for (std::size_t c = 0; c < calls; ++c) {
        const int j = copy_of_rank[static_cast<std::size_t>(tg_.calls[c].group)][static_cast<std::size_t>(rank)];
        tg_.spmd_calls.push_back(j < 0 ? TaskGraph::kNoCall : static_cast<std::uint32_t>(concrete_calls[c][static_cast<std::size_t>(j)]));
      }
    }
  }
}

// Groups the expert grid forms (when the experts have one), by what they span.
std::optional<ExpertGrid::Span> Lowering::expert_span(GroupKind kind) const {
  if (!experts_) return std::nullopt;
  switch (kind) {
    case GroupKind::kEp: return ExpertGrid::Span::kExpert;
    case GroupKind::kExpertTp: return ExpertGrid::Span::kExpertTp;
    case GroupKind::kExpertDp: return ExpertGrid::Span::kExpertDp;
    default: return std::nullopt;
  }
}

int Lowering::group(GroupKind kind, std::vector<int> ranks) {
  auto key = std::pair{kind, ranks};
  auto it = group_ids_.find(key);
  if (it != group_ids_.end()) return it->second;
  tg_.groups.push_back({kind, std::move(ranks)});
  return group_ids_[key] = static_cast<int>(tg_.groups.size() - 1);
}

// The link from virtual stage v to v + 1, between the ranks that hold them.
int Lowering::pp_link(RankState& s, int v) {
  // Every micro-batch crosses the same links: look each up once per rank.
  if (s.pp_links.empty()) s.pp_links.assign(static_cast<std::size_t>(virtual_stages_), -1);
  int& id = s.pp_links[static_cast<std::size_t>(v)];
  if (id >= 0) return id;
  Coord from = s.x, to = s.x;
  from.p = v % r_.s.pp;
  to.p = (v + 1) % r_.s.pp;
  return id = group(GroupKind::kPp, {layout_.rank(from), layout_.rank(to)});
}

int Lowering::call(CommOp op, int group_id, Bytes bytes) {
  auto key = std::tuple{op, group_id, bytes.value()};
  auto it = call_ids_.find(key);
  if (it != call_ids_.end()) return it->second;
  tg_.calls.push_back({op, group_id, bytes});
  return call_ids_[key] = static_cast<int>(tg_.calls.size() - 1);
}

std::uint32_t Lowering::add_task(Task task, std::initializer_list<TaskRef> deps) {
  task.deps_begin = static_cast<std::uint32_t>(tg_.deps.size());
  for (const TaskRef& d : deps) {
    if (d) tg_.deps.push_back(*d);
  }
  task.deps_end = static_cast<std::uint32_t>(tg_.deps.size());
  tg_.tasks.push_back(task);
  return static_cast<std::uint32_t>(tg_.tasks.size() - 1);
}

std::uint32_t Lowering::add_task(Task task, const std::vector<std::uint32_t>& deps) {
  task.deps_begin = static_cast<std::uint32_t>(tg_.deps.size());
  tg_.deps.insert(tg_.deps.end(), deps.begin(), deps.end());
  task.deps_end = static_cast<std::uint32_t>(tg_.deps.size());
  tg_.tasks.push_back(task);
  return static_cast<std::uint32_t>(tg_.tasks.size() - 1);
}

std::uint32_t Lowering::comm(RankState& s, Stream stream, CommOp op, int group_id, std::int64_t tag, Bytes bytes,
                             Phase phase, int mb, int layer, std::initializer_list<TaskRef> deps) {
  Task task;
  task.kind = TaskKind::kComm;
  task.stream = stream;
  task.phase = phase;
  task.rank = s.rank;
  task.payload = call(op, group_id, bytes);
  TaskGraph::set_tag(task, tag);
  task.micro_batch = mb;
  task.layer = layer;
  return add_task(task, deps);
}

// Elements per sample a layer graph's virtual stage v sends on: its last
// layer's output, or, for a stage left without layers (first_stage_layers=0),
// what the stage before it passed on, the model's input before any.
double Lowering::graph_boundary_elements(int v) const {
  for (int u = v; u >= 0; --u) {
    const std::vector<int>& layers = chunks_[static_cast<std::size_t>(u)];
    if (!layers.empty()) return graph_.layers[static_cast<std::size_t>(layers.back())].output_elements;
  }
  return graph_.layers.front().input_elements;
}

Bytes Lowering::boundary_bytes(int v) const {
  // A transformer's layers all output seq_len x hidden.
  const double per_sample = graph_.transformer
                                ? static_cast<double>(graph_.seq_len) * static_cast<double>(graph_.transformer->hidden)
                                : graph_boundary_elements(v);
  // Megatron-LM and DeepSpeed's PipelineEngine send 1/tp of the activation
  // and all-gather it over NVLink (scatter-gather, partitioned pipes);
  // p2p_scatter=off sends each rank's whole copy.
  const int split = r_.s.splits_pipeline_sends() ? r_.s.tp : 1;
  return Bytes(per_sample * hw::activation_bytes(r_.s.dtype) * r_.s.mbs / (split * r_.s.cp));
}

Bytes Lowering::largest_boundary_bytes(int p) const {
  Bytes largest;
  for (int chunk = 0; chunk < r_.s.vpp; ++chunk) {
    const int v = virtual_stage(p, chunk);
    if (v > 0) largest = std::max(largest, boundary_bytes(v - 1));
    if (v < virtual_stages_ - 1) largest = std::max(largest, boundary_bytes(v));
  }
  return largest;
}

// Bytes per parameter the step streams through HBM.
//  - Fused (apex's or DeepSpeed's FusedAdam in a PyTorch loop; Megatron's
//    own step is megatron_step_bytes_per_param): the fp32 gradient
//    read for its global norm (clipping); Adam reading master weights, m,
//    v and gradient (16) and writing the first three back (12) with, in
//    mixed precision, the 16-bit weights (2); the gradients zeroed for the
//    next step (4); with fp16 loss scaling, one more read to unscale and
//    check for infinities (4).
//  - Unfused (torch.optim.AdamW's default foreach path, _multi_tensor_adamw
//    in PyTorch 2.x; a per-tensor loop such as Composer's DecoupledAdamW
//    makes the same passes): clip_grad_norm_ reads the gradients and scales
//    them in place (4 + 8); then weight decay on the weights (8), m lerped
//    toward the gradient (12), v scaled (8) and given grad² (12), sqrt(v)
//    into a new tensor (8), divided (8) and given eps (8), the weights
//    updated from m and that (16): 80; zero_grad sets the gradients to
//    None; GradScaler's unscale with fp16 (8).
double Lowering::optimizer_bytes_per_param() const {
  const bool fp16 = r_.s.dtype == hw::Dtype::kFp16;
  const bool sixteen_bit = fp16 || r_.s.dtype == hw::Dtype::kBf16;
  if (deepspeed_buckets() && sixteen_bit && r_.s.fused_optimizer()) return deepspeed_step_bytes_per_param();
  if (r_.s.framework == Framework::kMegatron && r_.s.fused_optimizer()) return megatron_step_bytes_per_param();
  if (!r_.s.fused_optimizer()) return 12.0 + 80.0 + (fp16 ? 8.0 : 0.0);
  return 4.0 + 16.0 + 12.0 + (r_.s.mixed_precision() ? 2.0 : 0.0) + 4.0 + (fp16 ? 4.0 : 0.0);
}

// Megatron-LM's step (megatron/optimizer/optimizer.py, MixedPrecisionOptimizer
// and Float16OptimizerWithFloat16Params.step from 2021 on; Megatron-Core's
// DistributedOptimizer makes the same passes over its shard), a kernel or a
// multi-tensor launch each:
//  - the main gradients made fp32 (main_grad.float(): a copy, read 2 and
//    write 4, where the main_grad buffer is 16-bit, as fp16 runs keep it;
//    none where it is fp32 already);
//  - under fp16 loss scaling, unscaled and checked for infinities in place
//    (torch._amp_foreach_non_finite_check_and_unscale_: read 4, write 4);
//  - their norm for clipping (apex's multi_tensor_l2norm: read 4); scaling
//    them when the norm exceeds clip_grad depends on the data: not costed;
//  - apex's FusedAdam: weights, gradient, m and v read (16), weights, m and
//    v written (12);
//  - the fp32 main weights copied into the 16-bit model weights
//    (_copy_main_params_to_model_params, a multi_tensor_scale by 1.0: read
//    4, write 2).
// fp32 training has no main copy: norm and Adam.
double Lowering::megatron_step_bytes_per_param() const {
  if (!r_.s.mixed_precision()) return 4.0 + 16.0 + 12.0;
  const bool sixteen_bit_buffer = per_param_.grads < 4.0;
  const bool fp16 = r_.s.dtype == hw::Dtype::kFp16;
  return (sixteen_bit_buffer ? 6.0 : 0.0) + (fp16 ? 8.0 : 0.0) + 4.0 + 16.0 + 12.0 + 6.0;
}

// Megatron zeroes its whole main_grad buffer before each step's first
// micro-batch (zero_grad_buffer, on by default since the contiguous buffers
// of 2022; Megatron-Core's DistributedDataParallel.zero_grad_buffer): the
// buffer holds every weight of the stage, not the distributed optimizer's
// shard. Every other framework's fused step zeroes the gradients it updates
// (4 bytes in optimizer_bytes_per_param).
double Lowering::megatron_buffer_zeroing_bytes_per_param() const {
  if (r_.s.framework != Framework::kMegatron || !r_.s.fused_optimizer()) return 0.0;
  return per_param_.grads;
}

void Lowering::optimizer(RankState& s, const StageParams& params) {
  for (const RankState::Held& h : s.held) s.grad_comms.push_back(reduce(s, h.experts, h.bytes, h.mb, h.layer));
  if (deepspeed_buckets() && r_.s.overlap && !s.grad_comms.empty()) sync_after_backward(s);
  const bool sharded = r_.s.zero >= 1;
  const double updated = params.dense / (sharded ? r_.dense_replicas() : 1) +
                         params.experts / (sharded ? r_.expert_replicas() : 1);
  Kernel k{"optimizer.adam", {}, Flops(0), Flops(0)};
  hw::OpWork update;
  update.kind = model::OpKind::kElementwise;
  update.bytes_moved = Bytes(optimizer_bytes_per_param() * updated +
                             megatron_buffer_zeroing_bytes_per_param() * (params.dense + params.experts));
  k.ops.push_back(update);
  tg_.kernels.push_back(k);
  Task task;
  task.kind = TaskKind::kCompute;
  task.phase = Phase::kOptimizer;
  task.rank = s.rank;
  task.payload = static_cast<int>(tg_.kernels.size() - 1);
  s.last_compute = add_task(task, s.grad_comms);
  if (r_.s.zero >= 1 && r_.s.zero < 3 && s.dp_group >= 0 && !overlapped_param_gather()) {
    // The updated shards come back to every replica: dense weights over
    // the data-parallel group, experts over their expert-dp group.
    Bytes weights(params.dense * per_param_.gather);
    comm(s, Stream::kDpComm, CommOp::kAllGather, s.dp_group, s.dp_calls++, weights, Phase::kOptimizer, 0, -1,
         {s.last_compute});
    if (s.expert_dp_group >= 0 && params.experts > 0) {
      comm(s, Stream::kDpComm, CommOp::kAllGather, s.expert_dp_group, s.dp_calls++,
           Bytes(params.experts * per_param_.gather), Phase::kOptimizer, 0, -1, {s.last_compute});
    }
  }
}

Lowering::StageParams Lowering::stage_params(int p) const {
  StageParams params;
  for (int chunk = 0; chunk < r_.s.vpp; ++chunk) {
    for (int layer : layers_of(p, chunk)) {
      for (const model::Op& op : graph_.layers[static_cast<std::size_t>(layer)].ops) {
        (op.expert ? params.experts : params.dense) += params_on_rank(op, r_.s);
      }
    }
  }
  return params;
}

// Buffers the communication libraries hold beside the model: FSDP's gathered
// weights of the running and the prefetched layer, the fusion buffer of an
// all-reduce over buckets, and a send and a receive buffer per pipeline link.
Bytes Lowering::communication_buffers(int p) const {
  Bytes buffers;
  if (sharded_params()) {
    Bytes largest;
    for (int chunk = 0; chunk < r_.s.vpp; ++chunk) {
      for (int layer : layers_of(p, chunk)) largest = std::max(largest, weight_bytes(layer) + weight_bytes(layer, true));
    }
    // The running layer's weights and those gathered ahead of it (the
    // unbounded ideal is held to one ahead, as it was before `prefetch`).
    buffers += largest * (r_.s.prefetch < 0 ? 2.0 : 1.0 + r_.s.prefetch);
  } else if (replicas() > 1) {
    buffers += r_.s.bucket;
  }
  if (r_.s.pp > 1) buffers += largest_boundary_bytes(p) * 4.0;  // send and receive, activations and gradients
  return buffers;
}

void Lowering::lower_rank(const Coord& x) {
  RankState s;
  s.rank = layout_.rank(x);
  s.x = x;
  using L = RankLayout;
  if (r_.s.tp > 1) s.tp_group = group(GroupKind::kTp, layout_.group(x, L::kT));
  if (r_.s.cp > 1) s.cp_group = group(GroupKind::kCp, layout_.group(x, L::kC));
  if (r_.s.ep > 1 && !experts_) s.ep_group = group(GroupKind::kEp, layout_.group(x, L::kE));
  if (replicas() > 1) s.dp_group = group(GroupKind::kDp, layout_.group(x, L::kC | L::kE | L::kD));
  const bool moe = graph_.transformer && graph_.transformer->experts > 0;
  if (experts_) {
    using S = ExpertGrid::Span;
    if (r_.s.ep > 1) s.ep_group = group(GroupKind::kEp, experts_->group(s.rank, S::kExpert));
    if (r_.s.etp > 1) s.expert_tp_group = group(GroupKind::kExpertTp, experts_->group(s.rank, S::kExpertTp));
    if (r_.expert_replicas() > 1) s.expert_dp_group = group(GroupKind::kExpertDp, experts_->group(s.rank, S::kExpertDp));
  } else if (r_.expert_replicas() > 1 && moe) {
    s.expert_dp_group = group(GroupKind::kExpertDp, layout_.group(x, L::kC | L::kD));
  }
  const int p = x.p;
  const StageParams params = stage_params(p);
  StaticMemory memory = static_memory(params.dense, params.experts, r_, runtime_allowance_);
  memory.other += communication_buffers(p);
  tg_.simulated.push_back({s.rank, p, memory});
  const int m = r_.micro_batches;
  std::vector<int> backwards_left(static_cast<std::size_t>(r_.s.vpp), m);
  auto pass = [&](const PassStep& step) {
    int& left = backwards_left[static_cast<std::size_t>(step.chunk)];
    const bool first = step.backward && left == m;
    const bool last = step.backward && --left == 0;
    return PassCursor{.backward = step.backward,
                      .mb = step.micro_batch,
                      .chunk = step.chunk,
                      .last_of_chunk = last,
                      .accumulates = step.backward && !first};
  };
  const std::vector<PassStep> order = stage_order(r_.s.schedule, p, r_.s.pp, m, r_.s.vpp, r_.s.ep_overlap ? 1 : 0);
  for (std::size_t i = 0; i < order.size(); ++i) {
    // ep_overlap: a forward and a backward next to each other (the steady
    // state) run as one.
    if (r_.s.ep_overlap && s.ep_group >= 0 && i + 1 < order.size() && order[i].backward != order[i + 1].backward) {
      PassCursor first = pass(order[i]), second = pass(order[i + 1]);
      if (first.backward) std::swap(first, second);
      run_merged(s, std::move(first), std::move(second));
      ++i;
      continue;
    }
    PassCursor one = pass(order[i]);
    advance(s, one, false);
  }
  optimizer(s, params);
}

}  // namespace detail

TaskGraph lower(const model::Graph& graph, const ResolvedStrategy& strategy, const topo::Cluster& cluster,
                const LowerOptions& options) {
  return detail::Lowering(graph, strategy, options, cluster.device().runtime_allowance, cluster.gpus_per_node()).run();
}

}  // namespace dtsim::plan
