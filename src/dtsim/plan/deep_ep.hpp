#pragma once
/// What DeepEP's dispatch sends per token (DeepSeek-V3's all-to-all kernels;
/// Megatron-Core's flex dispatcher with --moe-enable-deepep). A token crosses
/// the network once per node that holds one of its top_k experts, to the GPU
/// of its own rail there (DeepEP's SourceMeta carries one token per RDMA
/// rank with a bitmask of the NVLink ranks that need it), and that GPU
/// forwards it over NVLink once per other GPU of the node that holds one.
/// With balanced routing every expert is as likely, so the expected copies
/// follow from the hypergeometric odds that a node's (a GPU's) experts hold
/// none of a token's top_k; group-limited routing (DeepSeek's n_group,
/// topk_group) draws them from group_top_k whole groups.
#include "dtsim/model/graph.hpp"

namespace dtsim::plan {

struct DeepEpCopies {
  double remote_nodes = 0;   ///< network copies per token: other nodes holding one of its experts
  double nvlink_copies = 0;  ///< NVLink copies per token: GPUs holding one, but not the one it lands on
};

/// An expert-parallel group of `ep` ranks over `nodes` nodes, experts in rank
/// order (each rank experts / ep consecutive ones).
DeepEpCopies deep_ep_copies(const model::TransformerShape& t, int ep, int nodes);

}  // namespace dtsim::plan
