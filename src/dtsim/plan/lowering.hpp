#pragma once

// The lowering's internals, shared by its two sources: lower.cpp (ranks,
// groups and calls, the order of a rank's passes, the optimizer) and
// lower_passes.cpp (one pass of a model chunk, layer by layer: its steps, the
// ZeRO-3 gathers and the gradient buckets). Not the plan module's interface:
// that is lower.hpp.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "dtsim/plan/layer_steps.hpp"
#include "dtsim/plan/lower.hpp"
#include "dtsim/plan/memory.hpp"
#include "dtsim/plan/rank_layout.hpp"

namespace dtsim::plan::detail {

using core::Bytes;
using core::Flops;
using TaskRef = std::optional<std::uint32_t>;

class Lowering {
 public:
  Lowering(const model::Graph& graph, const ResolvedStrategy& r, const LowerOptions& options,
           core::Bytes runtime_allowance, int gpus_per_node);
  TaskGraph run();

 private:
  // Parameters a rank of a stage holds: dense weights and its experts'.
  struct StageParams {
    double dense = 0, experts = 0;
  };

  struct RankState {
    int rank = 0;
    Coord x;
    int tp_group = -1, cp_group = -1, ep_group = -1, dp_group = -1, expert_dp_group = -1, expert_tp_group = -1;
    std::int64_t tp_calls = 0, cp_calls = 0, ep_calls = 0, dp_calls = 0, expert_tp_calls = 0;
    std::vector<int> pp_links;  // group of the link from virtual stage v to v + 1, once looked up
    TaskRef last_compute;
    TaskRef unfinished_send;  // with blocking transfers, the next compute waits for it
    std::vector<std::uint32_t> grad_comms;
    // overlap=off: buckets wait for the pipeline flush, every chunk's
    // (Megatron-LM 2021 reduced after the whole schedule, also when interleaved).
    struct Held {
      bool experts;
      Bytes bytes;
      int mb, layer;
    };
    std::vector<Held> held;
    std::vector<bool> gathered;  // param_overlap: layers whose weights this step has gathered
    // ZeRO-3: the last compute task of every layer run so far, in order; a
    // gather with a bounded prefetch waits for the one that frees its slot.
    std::vector<std::uint32_t> layers_done;
    // DeepSpeed ZeRO-1/2: the bucket reduction launched last, which the
    // compute stream waits for when it launches the next.
    TaskRef last_bucket_reduce;
  };

  // Ranks, groups and calls (lower.cpp).
  void add_spmd_ranks();
  std::optional<ExpertGrid::Span> expert_span(GroupKind kind) const;

  // Virtual stage of chunk c on stage p (Megatron: chunk c holds model chunk c*pp + p).
  int virtual_stage(int p, int chunk) const { return chunk * r_.s.pp + p; }
  const std::vector<int>& layers_of(int p, int chunk) const {
    return chunks_[static_cast<std::size_t>(virtual_stage(p, chunk))];
  }

  int group(GroupKind kind, std::vector<int> ranks);
  int pp_link(RankState& s, int v);
  std::int64_t p2p_tag(int micro_batch, int v, bool backward) const {
    return (static_cast<std::int64_t>(micro_batch) * virtual_stages_ + v) * 2 + (backward ? 1 : 0);
  }

  int call(CommOp op, int group_id, Bytes bytes);
  std::uint32_t add_task(Task task, std::initializer_list<TaskRef> deps);
  std::uint32_t add_task(Task task, const std::vector<std::uint32_t>& deps);
  std::uint32_t comm(RankState& s, Stream stream, CommOp op, int group_id, std::int64_t tag, Bytes bytes, Phase phase,
                     int mb, int layer, std::initializer_list<TaskRef> deps);

  bool sharded_params() const { return r_.s.zero >= 3 && replicas() > 1; }
  bool overlapped_param_gather() const { return r_.s.param_overlap && r_.s.zero >= 1 && r_.s.zero < 3 && replicas() > 1; }
  int replicas() const { return r_.dense_replicas(); }
  // Gradient and weight bytes of a layer's dense weights, or of its experts.
  Bytes grad_bytes(int layer, bool experts = false) const {
    return Bytes(layer_params_[static_cast<std::size_t>(layer)][experts ? 1 : 0] * per_param_.reduce);
  }
  Bytes weight_bytes(int layer, bool experts = false) const {
    return Bytes(layer_params_[static_cast<std::size_t>(layer)][experts ? 1 : 0] * per_param_.gather);
  }
  // A layer's whole 16-bit weights (dense and experts): what FSDP gathers.
  Bytes unsharded_bytes(int layer) const { return weight_bytes(layer) + weight_bytes(layer, true); }
  // What crosses from virtual stage v to v + 1 (an activation) and back (its gradient).
  Bytes boundary_bytes(int v) const;
  double graph_boundary_elements(int v) const;
  // The largest of them that touches stage p's chunks.
  Bytes largest_boundary_bytes(int p) const;

  // One pass of a model chunk, layer by layer (lower_passes.cpp).
  TaskRef gather(RankState& s, int layer, bool backward, int mb, int ahead = 0);
  TaskRef gather_experts(RankState& s, int layer, Phase phase, int mb, TaskRef after);
  TaskRef slot_freed(const RankState& s, int ahead) const;

  // One layer's steps, lowered a run at a time so that two passes can take
  // turns (ep_overlap); it holds what a layer's lowering carries from one
  // step to the next.
  struct LayerCursor {
    const std::vector<Step>* steps = nullptr;  // the layer's forward or backward steps
    int layer = 0;
    bool backward = false;
    int mb = 0;
    std::size_t next = 0;                // the next step to lower
    [[nodiscard]] bool done() const { return next == steps->size(); }
    std::size_t last_compute_index = 0;  // the layer's last compute step
    TaskRef pending;                     // what the next compute waits for
    TaskRef overlapped;  // a transfer running alongside the current compute step, awaited by the next one
    TaskRef gathered;
    // The collective issued since the last compute step: a collective right
    // after it works on its output (the combine's all-to-all, then the tp
    // reduction of what it brought back), so it waits for it.
    TaskRef chained;
    TaskRef chained_before;  // `chained` as the last collective found it: what one beside it waits for
    TaskRef beside;  // a collective issued beside the last one (Step::beside_previous), awaited by the next compute
    bool first_compute = true;
  };

  LayerCursor start_layer(int layer, bool backward, int mb, TaskRef first_dep, TaskRef gathered);
  bool run_steps(RankState& s, LayerCursor& c, bool pause_after_ep);

  struct Channel {
    Stream stream;
    int group;
    std::int64_t* calls;
  };
  Channel channel(RankState& s, GroupKind kind);

  // Gradients of dense weights reduce over every replica (cp, ep and dp
  // ranks), those of experts over the cp and dp ranks that hold the same experts.
  struct Bucket {
    bool experts = false;
    Bytes bytes;
  };

  void fill(RankState& s, Bucket& b, int layer, int mb, bool last_layer);
  std::uint32_t reduce(RankState& s, bool experts, Bytes bytes, int mb, int layer);

  // DeepSpeed's ZeRO-1/2 gradient path, stage_1_and_2.py (lower_deepspeed.cpp).
  bool deepspeed_buckets() const {
    return r_.s.framework == Framework::kDeepspeed && (r_.s.zero == 1 || r_.s.zero == 2) && replicas() > 1;
  }
  void copy_into_bucket(RankState& s, int layer, int mb);
  void wait_for_previous_reduction(RankState& s, std::uint32_t launched);
  void sync_after_backward(RankState& s);
  double deepspeed_step_bytes_per_param() const;
  // A kernel that runs nothing: a wait of the compute stream, or the host's
  // wait for the device (host_sync). Made once per name.
  std::uint32_t marker(RankState& s, const std::string& name, bool host_sync, const std::vector<std::uint32_t>& deps);

  // One forward or backward pass of a model chunk, lowered a run at a time.
  struct PassCursor {
    bool backward = false;
    int mb = 0, chunk = 0;
    bool last_of_chunk = false;  ///< backward: the chunk's last micro-batch, whose gradients reduce
    bool accumulates = false;    ///< backward: not the chunk's first micro-batch, whose gradients start .grad
    const std::vector<int>* layers = nullptr;  ///< the chunk's, first to last; null until the pass starts
    std::size_t next_layer = 0;                ///< of those the pass has run (a backward runs them last to first)
    std::optional<LayerCursor> layer{};  ///< the layer under way
    TaskRef recv{}, next_gather{};
    std::array<Bucket, 2> buckets{Bucket{false, Bytes(0)}, Bucket{true, Bytes(0)}};
    TaskRef last_compute{};  ///< the pass's own, while two take turns
  };

  bool advance(RankState& s, PassCursor& p, bool pause_after_ep);
  TaskRef gather_received(RankState& s, std::uint32_t recv, Phase phase, int mb, int boundary);
  void finish_layer(RankState& s, PassCursor& p, int layer, bool last_layer);
  void accumulate_gradients(RankState& s, int layer, int mb);
  bool adds_into_main_grad() const;
  void add_into_main_grad(RankState& s, int layer, int mb);
  void add_into_fp32_grads(RankState& s, const PassCursor& p);
  // A streaming kernel of a layer's weights or gradients on the compute
  // stream, after the rank's last compute and `after` (autocast's gradient
  // sum, FSDP2's copies): it becomes the rank's last compute.
  enum class Streaming {
    kGradientSum, kMainGradAdd, kHpGradAdd, kFsdpCopyOut, kFsdpCopyIn, kBucketCopy, kBucketScale, kExpertBucketScale
  };
  static const char* suffix(Streaming kind);  ///< of the streaming kernel's name, after its layer's
  std::uint32_t streaming(RankState& s, int layer, int mb, Phase phase, Streaming kind, Bytes bytes, TaskRef after);
  void run_merged(RankState& s, PassCursor forward_pass, PassCursor backward_pass);

  // A rank's step and its optimizer (lower.cpp).
  double optimizer_bytes_per_param() const;
  double megatron_step_bytes_per_param() const;
  double megatron_buffer_zeroing_bytes_per_param() const;
  void optimizer(RankState& s, const StageParams& params);
  StageParams stage_params(int p) const;
  Bytes communication_buffers(int p) const;
  void lower_rank(const Coord& x);

  core::Bytes runtime_allowance_;
  bool full_;
  bool spmd_ranks_;
  const model::Graph& graph_;
  const ResolvedStrategy& r_;
  RankLayout layout_;
  std::optional<ExpertGrid> experts_;  ///< with an expert grid only
  int virtual_stages_;
  std::vector<std::vector<int>> chunks_;
  TaskGraph tg_;
  LayerSteps steps_;
  std::vector<Coord> ranks_;
  /// Per layer, what it holds from forward to backward and through its
  /// backward: fixed by the strategy, so worked out once (a strategy search
  /// asked 2% of its time for the saved bytes alone).
  std::vector<HeldActivations> held_;
  BytesPerParam per_param_;
  std::vector<std::array<double, 2>> layer_params_;  ///< per layer: the dense and expert parameters this rank holds
  std::vector<double> main_grad_added_params_;       ///< per layer: those a main_grad.add_ hook adds (not the embedding's)
  std::map<std::pair<int, Streaming>, int> streaming_kernels_;  ///< per layer and kind, once made
  std::map<std::string, int> marker_kernels_;                   ///< per name, once made
  std::map<std::pair<GroupKind, std::vector<int>>, int> group_ids_;
  struct CallKeyHash {
    std::size_t operator()(const std::tuple<CommOp, int, double>& k) const {
      const auto [op, group, bytes] = k;
      return std::hash<double>{}(bytes) ^ (static_cast<std::size_t>(group) << 8) ^ static_cast<std::size_t>(op);
    }
  };
  std::unordered_map<std::tuple<CommOp, int, double>, int, CallKeyHash> call_ids_;
};

}  // namespace dtsim::plan::detail
