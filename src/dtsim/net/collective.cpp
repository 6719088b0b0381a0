#include "dtsim/net/collective.hpp"

namespace dtsim::net {

std::string_view to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kReduce: return "reduce";
    case CollectiveOp::kAllToAll: return "all_to_all";
    case CollectiveOp::kSendRecv: return "send_recv";
    case CollectiveOp::kRingExchange: return "ring_exchange";
    case CollectiveOp::kAllToAllAcrossNodes: return "all_to_all_across_nodes";
    case CollectiveOp::kAllToAllInNode: return "all_to_all_in_node";
  }
  return "?";
}

std::optional<CollectiveOp> parse_collective_op(std::string_view text) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather,
                          CollectiveOp::kBroadcast, CollectiveOp::kReduce, CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    if (text == to_string(op)) return op;
  }
  return std::nullopt;
}

core::Seconds CalibratedCollective::time(core::Bytes bytes, double latency_scale, double bandwidth_scale) const {
  const core::Seconds scaled = fit.latency * latency_scale + bytes / (fit.bandwidth * bandwidth_scale);
  if (medians.empty()) return scaled;
  // The fit says how much a what-if changes the time; the medians, what it is.
  return medians.time(bytes) * (scaled / fit.time(bytes));
}

}  // namespace dtsim::net
