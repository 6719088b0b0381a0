// One forward or backward pass of a model chunk, layer by layer: each layer's
// steps as tasks, the ZeRO-3 / FSDP weight gathers ahead of them, the
// gradient buckets and reduce-scatters behind them, and two passes taking
// turns at expert-parallel all-to-alls (ep_overlap).

#include "dtsim/plan/lowering.hpp"
#include "dtsim/plan/memory.hpp"

namespace dtsim::plan::detail {

// ZeRO-3 / FSDP: gather a layer's weights before it runs, in both passes.
// Gathers depend on nothing, so the dp stream runs them ahead of compute
// (FSDP's prefetch); the backward issues the next one before the current
// reduce-scatter, as FSDP's backward prefetch does.
TaskRef Lowering::gather(RankState& s, int layer, bool backward, int mb, int ahead) {
  if (overlapped_param_gather() && !backward && grad_bytes(layer).value() > 0) {
    // Megatron-Core --overlap-param-gather: the distributed optimizer's
    // all-gather of updated weights runs layer by layer ahead of the first
    // forward that needs them, instead of after the step.
    auto& done = s.gathered;
    if (done.empty()) done.assign(graph_.layers.size(), false);
    if (done[static_cast<std::size_t>(layer)]) return std::nullopt;
    done[static_cast<std::size_t>(layer)] = true;
    const std::uint32_t dense = comm(s, Stream::kDpComm, CommOp::kAllGather, s.dp_group, s.dp_calls++,
                                     weight_bytes(layer), Phase::kForward, mb, layer, {});
    return gather_experts(s, layer, Phase::kForward, mb, {}).value_or(dense);
  }
  if (!sharded_params() || grad_bytes(layer).value() <= 0) return std::nullopt;
  const Phase phase = backward ? Phase::kBackward : Phase::kForward;
  const std::uint32_t dense = comm(s, Stream::kDpComm, CommOp::kAllGather, s.dp_group, s.dp_calls++,
                                   weight_bytes(layer), phase, mb, layer, {slot_freed(s, ahead)});
  return gather_experts(s, layer, phase, mb, slot_freed(s, ahead)).value_or(dense);
}

// The layer's expert weights gathered over the ranks that hold the same
// experts, after its dense ones on the same stream (so the layer waits for
// this one alone); none without experts or expert replicas.
TaskRef Lowering::gather_experts(RankState& s, int layer, Phase phase, int mb, TaskRef after) {
  if (s.expert_dp_group < 0 || grad_bytes(layer, true).value() <= 0) return std::nullopt;
  return comm(s, Stream::kDpComm, CommOp::kAllGather, s.expert_dp_group, s.dp_calls++, weight_bytes(layer, true),
              phase, mb, layer, {after});
}

// The layer run whose end lets a gather start that many layers ahead of
// the next one to run (0: the gather is for the next layer itself): with
// prefetch p, at most p + 1 layers' gathered weights are held at once.
TaskRef Lowering::slot_freed(const RankState& s, int ahead) const {
  if (r_.s.prefetch < 0) return std::nullopt;
  const auto back = static_cast<std::int64_t>(r_.s.prefetch) - ahead;
  const auto index = static_cast<std::int64_t>(s.layers_done.size()) - 1 - back;
  if (index < 0 || index >= static_cast<std::int64_t>(s.layers_done.size())) return std::nullopt;
  return s.layers_done[static_cast<std::size_t>(index)];
}

Lowering::LayerCursor Lowering::start_layer(int layer, bool backward, int mb, TaskRef first_dep, TaskRef gathered) {
  const std::vector<Step>& steps = backward ? steps_.backward(layer) : steps_.forward(layer);
  LayerCursor c;
  c.steps = &steps;
  c.layer = layer;
  c.backward = backward;
  c.mb = mb;
  c.pending = first_dep;
  c.gathered = gathered;
  c.last_compute_index = steps.size();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].is_comm) c.last_compute_index = i;
  }
  return c;
}

// Lowers the layer's steps until it is done or, with pause_after_ep, until
// it has issued an expert-parallel all-to-all; true when it paused there.
// Activations: a layer that is not recomputed (LayerSteps::recomputed) keeps its
// saved tensors from forward to backward; one that is, only its input, and
// the recomputed forward holds the rest for the length of its backward.
bool Lowering::run_steps(RankState& s, LayerCursor& c, bool pause_after_ep) {
  const std::vector<Step>& steps = *c.steps;
  const HeldActivations& held = held_[static_cast<std::size_t>(c.layer)];
  const Phase phase = c.backward ? Phase::kBackward : Phase::kForward;
  while (c.next < steps.size()) {
    const std::size_t i = c.next++;
    const Step& step = steps[i];
    if (step.is_comm) {
      auto [stream, group_id, calls] = channel(s, step.group);
      if (step.beside_previous) {
        // Starts where the collective before it started; the next compute
        // waits for both.
        c.beside = comm(s, Stream::kEpSecondLevel, step.op, group_id, (*calls)++, step.bytes, phase, c.mb, c.layer,
                        {s.last_compute, c.chained_before});
      } else {
        c.chained_before = c.chained;
        std::uint32_t id =
            comm(s, stream, step.op, group_id, (*calls)++, step.bytes, phase, c.mb, c.layer, {s.last_compute, c.chained, c.beside});
        (step.overlapped ? c.overlapped : c.pending) = id;
        if (!step.overlapped) c.chained = id;
      }
      // A trip's levels (DeepEP's across nodes, then in the node) go out
      // together; the pass pauses after the last of them.
      const bool more_ep = c.next < steps.size() && steps[c.next].is_comm && steps[c.next].group == GroupKind::kEp;
      if (pause_after_ep && step.group == GroupKind::kEp && !more_ep) return true;
      continue;
    }
    Task task;
    task.kind = TaskKind::kCompute;
    task.phase = phase;
    task.rank = s.rank;
    task.payload = step.kernel;
    task.micro_batch = c.mb;
    task.layer = c.layer;
    tg_.set_activation_change(task, c.first_compute ? (c.backward ? held.recomputed : held.kept) : Bytes(0),
                              c.backward && i == c.last_compute_index ? held.kept + held.recomputed : Bytes(0));
    s.last_compute = add_task(task, {c.pending, c.gathered, c.beside, s.unfinished_send});
    s.unfinished_send.reset();
    c.beside.reset();
    c.pending = c.overlapped;
    c.overlapped.reset();
    c.gathered.reset();
    c.chained.reset();
    c.first_compute = false;
  }
  return false;
}

Lowering::Channel Lowering::channel(RankState& s, GroupKind kind) {
  switch (kind) {
    case GroupKind::kCp: return {Stream::kCpComm, s.cp_group, &s.cp_calls};
    case GroupKind::kEp: return {Stream::kEpComm, s.ep_group, &s.ep_calls};
    case GroupKind::kExpertTp: return {Stream::kEpComm, s.expert_tp_group, &s.expert_tp_calls};
    default: return {Stream::kTpComm, s.tp_group, &s.tp_calls};
  }
}

void Lowering::fill(RankState& s, Bucket& b, int layer, int mb, bool last_layer) {
  b.bytes += grad_bytes(layer, b.experts);
  if (b.bytes.value() <= 0 || (b.bytes < r_.s.bucket && !last_layer)) return;
  if (r_.s.overlap) {
    s.grad_comms.push_back(reduce(s, b.experts, b.bytes, mb, layer));
    if (deepspeed_buckets()) wait_for_previous_reduction(s, s.grad_comms.back());
  } else {
    s.held.push_back({b.experts, b.bytes, mb, layer});
  }
  b.bytes = Bytes(0);
}

std::uint32_t Lowering::reduce(RankState& s, bool experts, Bytes bytes, int mb, int layer) {
  // DeepSpeed's ZeRO-1/2 all-reduce each bucket (lower_deepspeed.cpp).
  const CommOp op = r_.s.zero >= 1 && !deepspeed_buckets() ? CommOp::kReduceScatter : CommOp::kAllReduce;
  if (r_.s.framework == Framework::kMegatron) {
    // Megatron averages in place before it sums: the bucket's gradients
    // times 1/dp on the compute stream, read and written (start_grad_sync's
    // grad_data *= gradient_scaling_factor, Megatron-Core from r0.8 to today
    // without --average-in-collective; 2020-2021's local DDP divided its
    // buffer likewise).
    streaming(s, layer, mb, Phase::kBackward, experts ? Streaming::kExpertBucketScale : Streaming::kBucketScale,
              2.0 * bytes, std::nullopt);
  }
  return comm(s, Stream::kDpComm, op, experts ? s.expert_dp_group : s.dp_group, s.dp_calls++, bytes, Phase::kBackward,
              mb, layer, {s.last_compute});
}

// Lowers the pass until it is done (true) or, with pause_after_ep, until it
// has issued an expert-parallel all-to-all (false).
bool Lowering::advance(RankState& s, PassCursor& p, bool pause_after_ep) {
  const int v = virtual_stage(s.x.p, p.chunk);
  // Backward prefetch (PyTorch FSDP's BACKWARD_PRE): the next layer's
  // gather is issued before this layer's gradients are computed, one layer
  // ahead; without prefetch each layer gathers when it starts.
  const bool ahead = p.backward && r_.s.prefetch != 0;
  if (!p.layers) {
    p.layers = &layers_of(s.x.p, p.chunk);
    if (!p.backward && v > 0) {
      p.recv = gather_received(s, comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_link(s, v - 1),
                                       p2p_tag(p.mb, v - 1, false), boundary_bytes(v - 1), Phase::kForward, p.mb, -1, {}),
                               Phase::kForward, p.mb, v - 1);
    }
    if (p.backward && v < virtual_stages_ - 1) {
      p.recv = gather_received(s, comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_link(s, v),
                                       p2p_tag(p.mb, v, true), boundary_bytes(v), Phase::kBackward, p.mb, -1, {}),
                               Phase::kBackward, p.mb, v);
    }
    if (ahead && !p.layers->empty()) p.next_gather = gather(s, p.layers->back(), true, p.mb);
  }
  const std::size_t count = p.layers->size();
  // The pass's i-th layer: first to last forward, last to first backward.
  auto nth = [&](std::size_t i) { return (*p.layers)[p.backward ? count - 1 - i : i]; };
  while (p.next_layer < count) {
    const int layer = nth(p.next_layer);
    const bool last_layer = p.next_layer + 1 == count;
    if (!p.layer) {
      TaskRef gathered;
      if (!p.backward) {
        gathered = gather(s, layer, false, p.mb);
      } else {
        gathered = ahead ? p.next_gather : gather(s, layer, true, p.mb);
        p.next_gather = ahead && !last_layer ? gather(s, nth(p.next_layer + 1), true, p.mb, 1) : std::nullopt;
      }
      if (gathered && r_.s.fsdp_version == 2) {
        // fully_shard copies the gathered buffer out into the parameters on
        // the compute stream: read and written once.
        gathered = streaming(s, layer, p.mb, p.backward ? Phase::kBackward : Phase::kForward, Streaming::kFsdpCopyOut,
                             2.0 * unsharded_bytes(layer), gathered);
      }
      p.layer = start_layer(layer, p.backward, p.mb, p.recv, gathered);
    }
    const bool paused = run_steps(s, *p.layer, pause_after_ep);
    if (!p.layer->done()) return false;
    p.layer.reset();
    ++p.next_layer;
    finish_layer(s, p, layer, last_layer);
    if (paused && !last_layer) return false;
  }
  if (!p.backward && v < virtual_stages_ - 1) {
    TaskRef send = comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_link(s, v), p2p_tag(p.mb, v, false),
                        boundary_bytes(v), Phase::kForward, p.mb, -1, {s.last_compute});
    if (!r_.s.p2p_overlap) s.unfinished_send = send;
  }
  if (p.backward && r_.s.bf16_optimizer) add_into_fp32_grads(s, p);
  if (p.backward && v > 0) {
    TaskRef send = comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_link(s, v - 1), p2p_tag(p.mb, v - 1, true),
                        boundary_bytes(v - 1), Phase::kBackward, p.mb, -1, {s.last_compute});
    if (!r_.s.p2p_overlap) s.unfinished_send = send;
  }
  return true;
}

// A stage that received 1/tp of an activation or its gradient (p2p_scatter
// without sequence parallelism) all-gathers it over its tensor-parallel
// group before it computes on it: Megatron-LM's scatter-gather
// (p2p_communication.py, gather_split_1d_tensor after each receive, on the
// compute stream, from 2021) and DeepSpeed's partitioned pipes
// (PipelineEngine._exec_recv_activations and _exec_recv_grads:
// PartitionedTensor.full(), an all-gather over the model-parallel group).
// Under sequence parallelism the activation is the rank's part of the
// sequence already, and nothing is gathered.
TaskRef Lowering::gather_received(RankState& s, std::uint32_t recv, Phase phase, int mb, int boundary) {
  if (!r_.s.p2p_scatter || r_.s.sp || s.tp_group < 0) return recv;
  return comm(s, Stream::kTpComm, CommOp::kAllGather, s.tp_group, s.tp_calls++, boundary_bytes(boundary) * r_.s.tp, phase, mb,
              -1, {recv});
}

// What follows a layer's last step: ZeRO-3's bookkeeping and its
// gradients' reduce-scatter, or the gradient buckets it fills.
void Lowering::finish_layer(RankState& s, PassCursor& p, int layer, bool last_layer) {
  if (sharded_params() && s.last_compute) s.layers_done.push_back(*s.last_compute);
  p.recv.reset();
  if (!p.backward) return;
  if (p.accumulates && r_.s.autocast_weights()) accumulate_gradients(s, layer, p.mb);
  if (adds_into_main_grad()) add_into_main_grad(s, layer, p.mb);
  if (sharded_params()) {
    if (r_.s.fsdp_version == 2) {
      // fully_shard copies the 16-bit gradients into the reduce-scatter's
      // buffer in the reduce dtype, and the compute stream waits for it.
      streaming(s, layer, p.mb, Phase::kBackward, Streaming::kFsdpCopyIn,
                unsharded_bytes(layer) + grad_bytes(layer) + grad_bytes(layer, true), std::nullopt);
    }
    // Sharded gradients cannot wait for the last micro-batch: reduce-scatter each one.
    if (grad_bytes(layer).value() > 0) {
      s.grad_comms.push_back(comm(s, Stream::kDpComm, CommOp::kReduceScatter, s.dp_group, s.dp_calls++,
                                  grad_bytes(layer), Phase::kBackward, p.mb, layer, {s.last_compute}));
    }
    if (s.expert_dp_group >= 0 && grad_bytes(layer, true).value() > 0) {
      s.grad_comms.push_back(comm(s, Stream::kDpComm, CommOp::kReduceScatter, s.expert_dp_group, s.dp_calls++,
                                  grad_bytes(layer, true), Phase::kBackward, p.mb, layer, {s.last_compute}));
    }
    return;
  }
  const bool replicated = s.dp_group >= 0 || s.expert_dp_group >= 0;
  // DeepSpeed's ZeRO-2 reduces every backward's gradients to their owners
  // (stage_1_and_2.py: partition_gradients) so as to keep only its
  // partition; ZeRO-1 and DDP accumulate until the step's last micro-batch.
  const bool every_backward = r_.s.framework == Framework::kDeepspeed && r_.s.zero == 2;
  if (!(p.last_of_chunk || every_backward) || !replicated) return;
  if (deepspeed_buckets()) copy_into_bucket(s, layer, p.mb);
  for (Bucket& b : p.buckets) {
    if ((b.experts ? s.expert_dp_group : s.dp_group) >= 0) fill(s, b, layer, p.mb, last_layer);
  }
}

// Megatron-Core's --overlap-moe-expert-parallel-comm: a backward and a
// forward pass of the steady state run as one, taking turns at every
// expert-parallel all-to-all, so that each one's all-to-all runs beside
// the other's compute (model_chunk_schedule_plan.py: the backward's
// combine, the forward's attention, the backward's experts and the
// forward's dispatch, ...). The backward starts.
void Lowering::run_merged(RankState& s, PassCursor forward_pass, PassCursor backward_pass) {
  std::array<PassCursor*, 2> turns{&backward_pass, &forward_pass};
  std::array<bool, 2> done{false, false};
  forward_pass.last_compute = backward_pass.last_compute = s.last_compute;
  for (std::size_t t = 0; !done[0] || !done[1]; t = 1 - t) {
    if (done[t]) continue;
    PassCursor& p = *turns[t];
    // Each pass's collectives follow its own compute, not the other's.
    s.last_compute = p.last_compute;
    done[t] = advance(s, p, true);
    p.last_compute = s.last_compute;
  }
  // The later of the two in program order is the rank's last compute.
  const TaskRef a = forward_pass.last_compute, b = backward_pass.last_compute;
  s.last_compute = !a ? b : !b ? a : std::max(*a, *b);
}

// Autocast: after a chunk's first micro-batch, autograd sums each new fp32
// weight gradient into .grad in place (AccumulateGrad: read both, write
// one, 12 bytes a parameter), after the layer's backward.
void Lowering::accumulate_gradients(RankState& s, int layer, int mb) {
  const auto [dense, experts] = layer_params_[static_cast<std::size_t>(layer)];
  const double params = dense + experts;
  if (params <= 0) return;
  streaming(s, layer, mb, Phase::kBackward, Streaming::kGradientSum, Bytes(12.0 * params), std::nullopt);
}

// Megatron-LM accumulates a linear layer's weight gradient inside its GEMM
// only into an fp32 main gradient (gradient_accumulation_fusion, which its
// arguments.py turns off without --accumulate-allreduce-grads-in-fp32, 2022).
// Its fp16 runs keep 16-bit main gradients: each weight's gradient lands in
// .grad and the DDP hook adds it into the buffer (megatron/model/distributed.py,
// _make_param_hook: main_grad.add_(grad): read 2 and 2, write 2), every
// micro-batch, on the compute stream. (SC'21's code of 2021, without the
// contiguous buffer, let autograd sum into .grad from the second
// micro-batch: one pass a step less.) The embedding's gradient has its own
// add (LayerSteps::embedding_gradient_bytes). Megatron-Core's Transformer
// Engine layers accumulate inside the GEMM whatever the buffer.
bool Lowering::adds_into_main_grad() const {
  return r_.s.framework == Framework::kMegatron && r_.s.dtype == hw::Dtype::kFp16 && per_param_.grads < 4.0;
}

void Lowering::add_into_main_grad(RankState& s, int layer, int mb) {
  const double params = main_grad_added_params_[static_cast<std::size_t>(layer)];
  if (params <= 0) return;
  streaming(s, layer, mb, Phase::kBackward, Streaming::kMainGradAdd, Bytes(6.0 * params), std::nullopt);
}

// DeepSpeed's BF16_Optimizer (deepspeed/runtime/bf16_optimizer.py,
// update_hp_grads, from April 2022; the pipeline engine calls it after each
// micro-batch's backward, _exec_backward_pass): for every parameter of the
// stage, lp.grad.to(fp32) (read 2, write 4) and hp_grad.add_ of it (read 4
// and 4, write 4), 18 bytes a parameter, after the chunk's whole backward
// and before its gradient goes upstream. The fp32 gradients are all of the
// stage's, not a shard.
void Lowering::add_into_fp32_grads(RankState& s, const PassCursor& p) {
  double params = 0;
  for (int layer : *p.layers) {
    const auto [dense, experts] = layer_params_[static_cast<std::size_t>(layer)];
    params += dense + experts;
  }
  if (params <= 0 || p.layers->empty()) return;
  streaming(s, p.layers->front(), p.mb, Phase::kBackward, Streaming::kHpGradAdd, Bytes(18.0 * params), std::nullopt);
}

const char* Lowering::suffix(Streaming kind) {
  switch (kind) {
    case Streaming::kGradientSum: return ".grad_accumulate";
    case Streaming::kMainGradAdd: return ".main_grad_add";
    case Streaming::kHpGradAdd: return ".hp_grads_add";
    case Streaming::kFsdpCopyOut: return ".fsdp_copy_out";
    case Streaming::kFsdpCopyIn: return ".fsdp_copy_in";
    case Streaming::kBucketCopy: return ".grad_to_bucket";
    case Streaming::kBucketScale: return ".grad_scale";
    case Streaming::kExpertBucketScale: return ".expert_grad_scale";
  }
  return "";
}

std::uint32_t Lowering::streaming(RankState& s, int layer, int mb, Phase phase, Streaming kind, Bytes bytes, TaskRef after) {
  const auto [slot, made] = streaming_kernels_.try_emplace({layer, kind}, -1);
  if (made) {
    Kernel k{graph_.layers[static_cast<std::size_t>(layer)].name + suffix(kind), {}, Flops(0), Flops(0)};
    hw::OpWork copy;
    copy.kind = model::OpKind::kElementwise;
    copy.bytes_moved = bytes;
    k.ops.push_back(copy);
    tg_.kernels.push_back(k);
    slot->second = static_cast<int>(tg_.kernels.size() - 1);
  }
  Task task;
  task.kind = TaskKind::kCompute;
  task.phase = phase;
  task.rank = s.rank;
  task.payload = slot->second;
  task.micro_batch = mb;
  task.layer = layer;
  s.last_compute = add_task(task, {s.last_compute, after});
  return *s.last_compute;
}

}  // namespace dtsim::plan::detail
