#pragma once
// Bringing each MPI rank's text to rank 0, for the commands that spread their
// work over ranks (sweep, search) and print on one.
#include <string>
#include <vector>

namespace dtsim::cli {

/// Every rank's `mine`, in rank order, on rank 0; empty on the others.
/// Collective over MPI_COMM_WORLD.
std::vector<std::string> gather_texts(const std::string& mine);

/// The sum over the ranks, on every rank. Collective over MPI_COMM_WORLD.
long long sum_over_ranks(long long mine);

}  // namespace dtsim::cli
