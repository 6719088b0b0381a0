#pragma once
/// Static memory per rank (parameters, gradients, optimizer states after
/// sharding, buffers) and the bytes a layer keeps for its backward pass.
#include "dtsim/core/units.hpp"
#include "dtsim/model/graph.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/plan/task_graph.hpp"

namespace dtsim::plan {

/// Allowance for the CUDA context, cuBLAS/NCCL workspaces and allocator slack
/// that every rank holds whatever the model: about 0.5 GiB of context on
/// Hopper plus workspaces, rounded up to 1 GiB.
inline constexpr double kContextAllowanceBytes = 1073741824.0;

/// Bytes per parameter of weights, gradients and optimizer state for the
/// dtype, before sharding. Mixed precision with Adam (Rajbhandari et al.,
/// ZeRO): 2 + 2 + 12 = 16 bytes; fp32 with Adam: 4 + 4 + 8.
struct BytesPerParam {
  double params;
  double grads;
  double optimizer;
};
// StaticMemory::other = kContextAllowanceBytes + the communication buffers
// the lowering adds (plan/lower.cpp, communication_buffers).
BytesPerParam bytes_per_param(hw::Dtype dtype);

/// Parameters a rank holds of one op: sharded ops divide by tp, experts by ep.
double params_on_rank(const model::Op& op, const Strategy& s);

/// `runtime_allowance` is the device's (hw::Device::runtime_allowance).
StaticMemory static_memory(double params_on_rank, const ResolvedStrategy& strategy,
                           core::Bytes runtime_allowance = core::Bytes(kContextAllowanceBytes));

/// Activation bytes one layer keeps per micro-batch on one rank (without full
/// recomputation; selective recomputation drops the attention scores).
core::Bytes saved_activation_bytes(const model::Layer& layer, const ResolvedStrategy& strategy);

/// The input of a layer, all that full recomputation keeps of it.
core::Bytes layer_input_bytes(std::int64_t tokens, std::int64_t hidden, const ResolvedStrategy& strategy);

}  // namespace dtsim::plan
