#include "dtsim/plan/task_graph.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace dtsim::plan {

std::string_view to_string(Stream stream) {
  switch (stream) {
    case Stream::kCompute: return "compute";
    case Stream::kTpComm: return "tp-comm";
    case Stream::kCpComm: return "cp-comm";
    case Stream::kEpComm: return "ep-comm";
    case Stream::kDpComm: return "dp-comm";
    case Stream::kPointToPoint: return "pp-p2p";
    case Stream::kServer: return "ps-transfer";
    case Stream::kEpSecondLevel: return "ep-comm-2";
  }
  return "?";
}

std::string_view to_string(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp: return "tp";
    case GroupKind::kCp: return "cp";
    case GroupKind::kEp: return "ep";
    case GroupKind::kDp: return "dp";
    case GroupKind::kExpertDp: return "expert-dp";
    case GroupKind::kPp: return "pp";
    case GroupKind::kPs: return "ps";
    case GroupKind::kExpertTp: return "expert-tp";
  }
  return "?";
}

std::string_view to_string(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "all_reduce";
    case CommOp::kReduceScatter: return "reduce_scatter";
    case CommOp::kAllGather: return "all_gather";
    case CommOp::kSendRecv: return "send_recv";
    case CommOp::kRingExchange: return "ring_exchange";
    case CommOp::kAllToAll: return "all_to_all";
    case CommOp::kAllToAllAcrossNodes: return "all_to_all_across_nodes";
    case CommOp::kAllToAllInNode: return "all_to_all_in_node";
  }
  return "?";
}

void TaskGraph::set_activation_change(Task& t, core::Bytes alloc_at_start, core::Bytes free_at_end) {
  if (alloc_at_start.value() == 0 && free_at_end.value() == 0) {
    t.activation_change = Task::kNoActivationChange;
    return;
  }
  t.activation_change = static_cast<std::uint32_t>(activation_changes.size());
  activation_changes.push_back({alloc_at_start, free_at_end});
}

void TaskGraph::set_tag(Task& t, std::int64_t tag) {
  if (tag < 0 || tag > std::numeric_limits<std::int32_t>::max()) {
    throw std::length_error("dtsim: a collective tag past 2^31: the plan is too large to simulate");
  }
  t.tag = static_cast<std::int32_t>(tag);
}

int TaskGraph::simulated_index(int rank) const {
  auto it = std::find_if(simulated.begin(), simulated.end(), [rank](const RankInfo& r) { return r.rank == rank; });
  return it == simulated.end() ? -1 : static_cast<int>(it - simulated.begin());
}

}  // namespace dtsim::plan
