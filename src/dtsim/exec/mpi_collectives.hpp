#pragma once
/// The CPU backend's communication: each CommGroup of the plan as an MPI
/// communicator, and each CommCall as the matching MPI call on fp32 buffers.
/// Byte conventions follow net::Network: all-reduce and reduce-scatter take
/// the full buffer, all-gather produces it, all-to-all sends it in n shares,
/// a send and a ring-exchange step move it whole.
#include <cstdint>
#include <vector>

#include <mpi.h>

#include "dtsim/core/units.hpp"
#include "dtsim/plan/task_graph.hpp"

namespace dtsim::exec {

class MpiCollectives {
 public:
  /// Collective over `world`: every rank creates the communicators of all
  /// groups in one order (those it is not in come back as MPI_COMM_NULL).
  MpiCollectives(const plan::TaskGraph& graph, MPI_Comm world);
  ~MpiCollectives();
  MpiCollectives(const MpiCollectives&) = delete;
  MpiCollectives& operator=(const MpiCollectives&) = delete;

  /// Runs a communication task's call as this rank's part. Sends are
  /// non-blocking (like NCCL's batched point-to-point) and complete in
  /// complete_sends().
  void run(const plan::Task& task);
  void complete_sends();

  /// The payload's first element after the last call; tests check sums with it.
  [[nodiscard]] float first_received() const { return receive_.empty() ? 0.0f : receive_[0]; }
  [[nodiscard]] core::Bytes buffer_bytes() const;

 private:
  struct Pending {
    MPI_Request request;
    std::vector<float> data;
  };
  const plan::TaskGraph& graph_;
  int world_rank_ = 0;
  MPI_Comm world_;
  std::vector<MPI_Comm> comms_;
  std::vector<float> send_, receive_;
  std::vector<Pending> pending_;
  std::vector<std::vector<float>> spare_;  // send buffers whose sends completed, reused
};

/// Elements of fp32 each rank contributes for `bytes` of the op over n ranks.
std::int64_t elements_per_rank(plan::CommOp op, core::Bytes bytes, int ranks);

}  // namespace dtsim::exec
