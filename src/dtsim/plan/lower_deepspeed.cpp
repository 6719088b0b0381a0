// DeepSpeed's ZeRO-1/2 gradient path as DeepSpeed runs it since v0.12.4
// (deepspeed/runtime/zero/stage_1_and_2.py, read at 0.19 and after):
//
//  - contiguous_gradients (on by default): each parameter's backward hook
//    copies its 16-bit gradient into the bucket on the compute stream;
//  - a full bucket is reduced on the reduction stream (overlap_comm), and
//    before it is, the compute stream waits for that stream
//    (average_tensor: current_stream().wait_stream(reduction_stream)), so the
//    backward goes on only once the previous bucket's reduction is done;
//  - use_multi_rank_bucket_allreduce (on by default since v0.12.4, "Communication
//    Optimization for Large-Scale Training", #4695) all-reduces each bucket and
//    keeps this rank's slices, where the ranks' own reduce-scatter would move
//    half the bytes;
//  - after the backward (independent_gradient_partition_epilogue) the host
//    synchronizes the device under overlap_comm, so the step's kernels are
//    launched only once every reduction has ended;
//  - the step (step, scaled_global_norm) streams more than a fused Adam:
//    deepspeed_step_bytes_per_param.
// What runs on the reduction stream beside the all-reduce (the bucket's
// flatten copy, its division by the ranks, the copy of this rank's slices)
// moves HBM bytes beside the backward that dtsim does not charge.

#include "dtsim/plan/lowering.hpp"

namespace dtsim::plan::detail {

// The hooks copy each gradient of the layer (16-bit, as the model) into the
// bucket: read and written once.
void Lowering::copy_into_bucket(RankState& s, int layer, int mb) {
  const Bytes copied = 2.0 * unsharded_bytes(layer);
  if (copied.value() > 0) streaming(s, layer, mb, Phase::kBackward, Streaming::kBucketCopy, copied, std::nullopt);
}

// A bucket was just launched: the compute stream waits for the one launched
// before it (the reduction stream runs them in order).
void Lowering::wait_for_previous_reduction(RankState& s, std::uint32_t launched) {
  if (s.last_bucket_reduce) {
    std::vector<std::uint32_t> deps{*s.last_bucket_reduce};
    if (s.last_compute) deps.push_back(*s.last_compute);
    s.last_compute = marker(s, "deepspeed.wait_for_reduction", false, deps);
  }
  s.last_bucket_reduce = launched;
}

// The host waits for the backward and every reduction before it launches
// the step.
void Lowering::sync_after_backward(RankState& s) {
  std::vector<std::uint32_t> deps = s.grad_comms;
  if (s.last_compute) deps.push_back(*s.last_compute);
  s.last_compute = marker(s, "deepspeed.sync_after_backward", true, deps);
}

// Per parameter of this rank's partition, 16-bit training:
//  - the gradient norm, per gradient: g.double() (read 2, write 8) and its
//    norm (read 8): 18;
//  - the partition's gradients flattened (read and write 2) and cast to fp32
//    (read 2, write 4): 10;
//  - unscale_and_clip_grads, a multiply in place (read and write 4): 8;
//  - FusedAdam (read weights, gradient, m and v, write three of them): 28;
//  - the fp32 weights copied into the 16-bit partition (read 4, write 2): 6.
// 70 bytes, where a fused Adam over fp32 main gradients streams 38. fp16
// also checks the gradients for infinities (check_grad_overflow: x.float(),
// isnan, isinf, logical_or, .float(), max): 28 more.
double Lowering::deepspeed_step_bytes_per_param() const {
  return 18.0 + 10.0 + 8.0 + 28.0 + 6.0 + (r_.s.dtype == hw::Dtype::kFp16 ? 28.0 : 0.0);
}

std::uint32_t Lowering::marker(RankState& s, const std::string& name, bool host_sync,
                               const std::vector<std::uint32_t>& deps) {
  const auto [slot, made] = marker_kernels_.try_emplace(name, -1);
  if (made) {
    Kernel k{name, {}, Flops(0), Flops(0)};
    k.host_sync = host_sync;
    tg_.kernels.push_back(k);
    slot->second = static_cast<int>(tg_.kernels.size() - 1);
  }
  Task task;
  task.kind = TaskKind::kCompute;
  task.phase = Phase::kBackward;
  task.rank = s.rank;
  task.payload = slot->second;
  return add_task(task, deps);
}

}  // namespace dtsim::plan::detail
