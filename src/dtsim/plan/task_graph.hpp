#pragma once
/// The TaskGraph: the one intermediate form between the planner and both
/// executors (the simulator replays it, the real executor runs it). Tasks are
/// per rank; compute tasks point at a Kernel (ops costed together), collective
/// tasks at a CommCall on a CommGroup. Kernels and calls are shared by every
/// micro-batch that runs them, so each is costed once.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/hw/cost_model.hpp"
#include "dtsim/hw/device.hpp"

namespace dtsim::plan {

enum class TaskKind : std::uint8_t { kCompute, kComm };

/// A rank's streams. Tasks on one stream run in program order, one at a
/// time; point-to-point transfers are unordered: NCCL batches them, and a
/// pipeline schedule would deadlock if sends and receives were serialised.
/// kServer transfers queue at their parameter-server shard (the call's
/// group's last member) and are served one at a time in arrival order.
/// kEpSecondLevel carries the second level of a two-level expert-parallel
/// trip (DeepEP's), which runs beside the first on kEpComm.
enum class Stream : std::uint8_t { kCompute, kTpComm, kCpComm, kEpComm, kDpComm, kPointToPoint, kServer, kEpSecondLevel };
inline constexpr int kStreamCount = 8;
std::string_view to_string(Stream stream);

/// kDp reduces gradients of weights replicated over cp, ep and dp ranks;
/// kExpertDp those of MoE experts, replicated over cp and dp ranks only (or
/// over the expert grid's expert-dp ranks); kExpertTp gathers and scatters
/// the routed tokens among the ranks that split each expert (etp).
enum class GroupKind : std::uint8_t { kTp, kCp, kEp, kDp, kExpertDp, kPp, kPs, kExpertTp };
std::string_view to_string(GroupKind kind);

enum class Phase : std::uint8_t { kForward, kBackward, kOptimizer, kPush, kPull };

/// kRingExchange: every member sends `bytes` to the next one at once (one
/// step of ring attention); kAllToAll: every member sends bytes/n to each other.
/// The two levels of DeepEP's dispatch and combine over an ep group, `bytes`
/// what each member sends in all: kAllToAllAcrossNodes evenly to the members
/// of its rail (the same place in its node) on the group's other nodes,
/// kAllToAllInNode evenly to the other members of its node.
enum class CommOp : std::uint8_t {
  kAllReduce, kReduceScatter, kAllGather, kSendRecv, kRingExchange, kAllToAll, kAllToAllAcrossNodes, kAllToAllInNode
};
std::string_view to_string(CommOp op);

struct Kernel {
  std::string name;
  std::vector<hw::OpWork> ops;
  core::Flops model_flops;     ///< what the step must compute
  core::Flops hardware_flops;  ///< what the GPU computes, recomputation included
  /// The host waits for this kernel to end before it launches anything
  /// after it (a device-to-host copy it must read: Megatron-Core's all-to-all
  /// dispatcher reads the tokens per expert before its all-to-all).
  bool host_sync = false;
};

struct CommGroup {
  GroupKind kind = GroupKind::kDp;
  std::vector<int> ranks;  ///< in ring order
  /// When only one rank per stage is simulated: the same group translated to
  /// the ranks that are not, which run the same collectives at the same time
  /// (SPMD). A flow-level network puts their traffic on the links too.
  std::vector<std::vector<int>> copies{};
};

struct CommCall {
  CommOp op = CommOp::kAllReduce;
  int group = 0;
  core::Bytes bytes;
};

/// Activations a task keeps for the backward pass and releases when it
/// ends. Only a layer's first and last kernels have any, so tasks point
/// into a table of these rather than each carrying two sizes.
struct ActivationChange {
  core::Bytes alloc_at_start;
  core::Bytes free_at_end;
};

/// 36 bytes: `--full` on 1024 GPUs holds 18 million of them (issue 16).
struct Task {
  static constexpr std::uint32_t kNoActivationChange = 0xffffffffu;

  TaskKind kind = TaskKind::kCompute;
  Stream stream = Stream::kCompute;
  Phase phase = Phase::kForward;
  int rank = 0;
  int payload = 0;  ///< kernel index (compute) or call index (comm)
  /// Matches the members' tasks of one collective: equal (group, tag)
  /// rendezvous. It counts a rank's calls on one group (or its pipeline
  /// transfers), fewer than the plan's tasks (TaskGraph::set_tag checks).
  std::int32_t tag = 0;
  int micro_batch = 0;
  int layer = -1;
  std::uint32_t deps_begin = 0;
  std::uint32_t deps_end = 0;
  std::uint32_t activation_change = kNoActivationChange;  ///< into TaskGraph::activation_changes
};
static_assert(sizeof(Task) == 36, "Task grew: --full holds one per rank, micro-batch and kernel");

/// Memory a rank holds for the whole step.
struct StaticMemory {
  core::Bytes params;
  core::Bytes grads;
  core::Bytes optimizer;
  core::Bytes other;  ///< communication buffers and the CUDA context allowance
  [[nodiscard]] core::Bytes total() const { return params + grads + optimizer + other; }
};

struct RankInfo {
  int rank = 0;
  int stage = 0;
  StaticMemory memory;
};

/// `simulate --full` without every rank's tasks in memory (issue 16): a rank
/// that runs the program of a simulated rank of its stage, on its own copy
/// of each of that rank's groups (SPMD: the lowering is the same for every
/// rank of a stage but for the groups).
struct SpmdRank {
  int rank = 0;
  int simulated = 0;  ///< index into TaskGraph::simulated of the rank whose tasks it runs
};

struct TaskGraph {
  int world = 1;
  hw::Dtype dtype = hw::Dtype::kBf16;
  /// Tensor-parallel collectives run as Transformer Engine's comm-GEMM
  /// overlap (tp_overlap): the GEMM beside one is launched on the SMs it
  /// leaves, where an NCCL collective's SMs are unknown to the kernels beside it.
  bool tp_comm_overlap = false;
  std::vector<RankInfo> simulated;  ///< the ranks that have tasks
  std::vector<Task> tasks;          ///< each rank's tasks in program order
  std::vector<std::uint32_t> deps;  ///< task ids, sliced by Task::deps_begin/end
  std::vector<Kernel> kernels;
  std::vector<CommCall> calls;
  std::vector<CommGroup> groups;
  /// Route endpoint of each rank: a GPU, or a host (topo::Cluster::host_endpoint) for PS shards.
  std::vector<int> gpu_of_rank;
  /// Parameter-server mode: shards are ranks world..world+ps_shards-1, and
  /// each worker ran `iterations` steps of `samples_per_iteration` samples.
  int ps_shards = 0;
  int iterations = 1;
  std::vector<ActivationChange> activation_changes;
  /// Empty: the simulated ranks alone run. Otherwise every rank of the world
  /// in the order the replay runs them (the simulated ones among them), and
  /// for each, per call of the graph's simulated ranks, the call it makes
  /// instead (`spmd_calls[k * spmd_template_calls + call]`; kNoCall where the
  /// call is another stage's). The groups' `copies` are then groups of their own.
  std::vector<SpmdRank> spmd_ranks;
  std::vector<std::uint32_t> spmd_calls;
  std::size_t spmd_template_calls = 0;
  static constexpr std::uint32_t kNoCall = 0xffffffffu;
  /// The calls spmd rank k makes, indexed by the simulated rank's call (nullptr when the graph has none).
  [[nodiscard]] const std::uint32_t* spmd_calls_of(std::size_t k) const {
    return spmd_template_calls > 0 ? spmd_calls.data() + k * spmd_template_calls : nullptr;
  }

  [[nodiscard]] int simulated_index(int rank) const;

  [[nodiscard]] core::Bytes alloc_at_start(const Task& t) const {
    return t.activation_change == Task::kNoActivationChange ? core::Bytes(0)
                                                            : activation_changes[t.activation_change].alloc_at_start;
  }
  [[nodiscard]] core::Bytes free_at_end(const Task& t) const {
    return t.activation_change == Task::kNoActivationChange ? core::Bytes(0)
                                                            : activation_changes[t.activation_change].free_at_end;
  }
  /// Gives `t` these activation changes (nothing when both are zero).
  void set_activation_change(Task& t, core::Bytes alloc_at_start, core::Bytes free_at_end);
  /// Sets `t.tag`, refusing one past 32 bits (a plan far beyond any memory).
  static void set_tag(Task& t, std::int64_t tag);
};

/// A pipeline kSendRecv's group is (stage v, stage v + 1): forward tasks
/// carry activations from member 0 to member 1, backward tasks gradients
/// from member 1 to member 0. The index of the member that sends.
inline int sender_index(const Task& task) { return task.phase == Phase::kBackward ? 1 : 0; }

}  // namespace dtsim::plan
