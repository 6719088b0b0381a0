#pragma once
/// Data parallelism through parameter servers (TensorFlow's PS strategy,
/// and central storage as its one-shard synchronous case). Each worker runs
/// `steps` iterations: pull the weights from every shard, run its
/// micro-batches forward and backward, push the gradients to every shard.
/// Shard j lives on the host CPU of node j; transfers to a shard queue there
/// (Stream::kServer), so many workers pushing at once wait for each other.
/// Asynchronous workers start their next pull as soon as their own pushes are
/// done; synchronous ones wait for every worker's pushes.
#include "dtsim/model/graph.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::plan {

/// Every worker is simulated (they may run at different speeds).
TaskGraph lower_parameter_server(const model::Graph& graph, const ResolvedStrategy& strategy,
                                 const topo::Cluster& cluster);

}  // namespace dtsim::plan
