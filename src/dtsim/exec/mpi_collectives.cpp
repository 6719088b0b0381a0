#include "dtsim/exec/mpi_collectives.hpp"

#include <algorithm>
#include <stdexcept>

#include "dtsim/core/input_error.hpp"

namespace dtsim::exec {
namespace {

// MPI guarantees tags up to 32767; matching is in order per source and tag.
int mpi_tag(std::int64_t tag) { return static_cast<int>(tag % 32767); }

}  // namespace

std::int64_t elements_per_rank(plan::CommOp op, core::Bytes bytes, int ranks) {
  const auto floats = static_cast<std::int64_t>(bytes.value() / sizeof(float));
  switch (op) {
    case plan::CommOp::kReduceScatter:
    case plan::CommOp::kAllGather:
    case plan::CommOp::kAllToAll: return std::max<std::int64_t>(1, floats / ranks);
    default: return std::max<std::int64_t>(1, floats);
  }
}

MpiCollectives::MpiCollectives(const plan::TaskGraph& graph, MPI_Comm world) : graph_(graph), world_(world) {
  MPI_Comm_rank(world, &world_rank_);
  for (const plan::CommGroup& g : graph.groups) {
    const bool member = std::find(g.ranks.begin(), g.ranks.end(), world_rank_) != g.ranks.end();
    const auto position = std::find(g.ranks.begin(), g.ranks.end(), world_rank_) - g.ranks.begin();
    MPI_Comm comm = MPI_COMM_NULL;
    // Colour 0 for members, in ring order by key; everyone calls, in the same group order.
    MPI_Comm_split(world, member ? 0 : MPI_UNDEFINED, static_cast<int>(position), &comm);
    comms_.push_back(comm);
  }
  std::size_t largest = 1;
  for (const plan::CommCall& c : graph.calls) {
    const int n = static_cast<int>(graph.groups[static_cast<std::size_t>(c.group)].ranks.size());
    const auto per_rank = static_cast<std::size_t>(elements_per_rank(c.op, c.bytes, n));
    const std::size_t total = c.op == plan::CommOp::kAllReduce || c.op == plan::CommOp::kSendRecv ||
                                      c.op == plan::CommOp::kRingExchange
                                  ? per_rank
                                  : per_rank * static_cast<std::size_t>(n);
    largest = std::max(largest, total);
  }
  send_.assign(largest, 1.0f);
  receive_.assign(largest, 0.0f);
}

MpiCollectives::~MpiCollectives() {
  complete_sends();
  for (MPI_Comm& c : comms_) {
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }
}

void MpiCollectives::complete_sends() {
  for (Pending& p : pending_) {
    MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    spare_.push_back(std::move(p.data));
  }
  pending_.clear();
}

void MpiCollectives::run(const plan::Task& task) {
  const plan::CommCall& call = graph_.calls[static_cast<std::size_t>(task.payload)];
  const std::int64_t tag = task.tag;
  const plan::CommGroup& group = graph_.groups[static_cast<std::size_t>(call.group)];
  MPI_Comm comm = comms_[static_cast<std::size_t>(call.group)];
  if (comm == MPI_COMM_NULL) throw std::logic_error("a rank ran a collective of a group it is not in");
  const int n = static_cast<int>(group.ranks.size());
  const std::int64_t count = elements_per_rank(call.op, call.bytes, n);
  const int c = static_cast<int>(count);
  int me = 0;
  MPI_Comm_rank(comm, &me);
  switch (call.op) {
    case plan::CommOp::kAllReduce:
      MPI_Allreduce(send_.data(), receive_.data(), c, MPI_FLOAT, MPI_SUM, comm);
      break;
    case plan::CommOp::kReduceScatter:
      MPI_Reduce_scatter_block(send_.data(), receive_.data(), c, MPI_FLOAT, MPI_SUM, comm);
      break;
    case plan::CommOp::kAllGather:
      MPI_Allgather(send_.data(), c, MPI_FLOAT, receive_.data(), c, MPI_FLOAT, comm);
      break;
    case plan::CommOp::kAllToAll:
      MPI_Alltoall(send_.data(), c, MPI_FLOAT, receive_.data(), c, MPI_FLOAT, comm);
      break;
    case plan::CommOp::kAllToAllAcrossNodes:
    case plan::CommOp::kAllToAllInNode:
      throw core::InputError("--strategy", "/dispatcher",
                             "deepep's two-level dispatch is simulated, not run: expected dispatcher=alltoall to run a plan");
    case plan::CommOp::kRingExchange:
      MPI_Sendrecv(send_.data(), c, MPI_FLOAT, (me + 1) % n, mpi_tag(tag), receive_.data(), c, MPI_FLOAT,
                   (me + n - 1) % n, mpi_tag(tag), comm, MPI_STATUS_IGNORE);
      break;
    case plan::CommOp::kSendRecv:
      if (me == plan::sender_index(task)) {
        std::vector<float> data;
        if (!spare_.empty()) {
          data = std::move(spare_.back());
          spare_.pop_back();
        }
        data.resize(static_cast<std::size_t>(count), 1.0f);
        Pending p{MPI_REQUEST_NULL, std::move(data)};
        pending_.push_back(std::move(p));
        MPI_Isend(pending_.back().data.data(), c, MPI_FLOAT, 1 - me, mpi_tag(tag), comm, &pending_.back().request);
      } else {
        MPI_Recv(receive_.data(), c, MPI_FLOAT, 1 - me, mpi_tag(tag), comm, MPI_STATUS_IGNORE);
      }
      break;
  }
}

core::Bytes MpiCollectives::buffer_bytes() const {
  std::size_t floats = send_.capacity() + receive_.capacity();
  for (const auto& s : spare_) floats += s.capacity();
  for (const auto& p : pending_) floats += p.data.capacity();
  return core::Bytes(static_cast<double>(floats * sizeof(float)));
}

}  // namespace dtsim::exec
