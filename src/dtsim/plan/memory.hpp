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

/// Bytes per parameter of weights, gradients and optimizer state before
/// sharding, and what the collectives move per parameter. With Adam:
///  - fp32: 4 + 4 + 8, reduced and gathered in fp32;
///  - bf16 and fp8, Megatron: 16-bit weights, fp32 main gradients
///    (gradients accumulate and all-reduce in fp32), fp32 master weights and
///    moments: 2 + 4 + 12 = 18, reduced in fp32, gathered in 16 bits; fp16,
///    Megatron: 16-bit gradients, 2 + 2 + 12 = 16, reduced in 16 bits;
///  - 16-bit, PyTorch: autocast keeps the weights and gradients in fp32
///    (4 + 4 + 8 = 16); DDP reduces the fp32 gradients, FSDP's
///    MixedPrecision gathers and reduces in 16 bits.
/// Strategy::grad_reduce overrides the reduced dtype (and Megatron's
/// main_grad with it).
struct BytesPerParam {
  double params;
  double grads;
  double optimizer;
  double reduce;  ///< per parameter in a gradient all-reduce or reduce-scatter
  double gather;  ///< per parameter in a weight all-gather
};
// StaticMemory::other = kContextAllowanceBytes + the communication buffers
// the lowering adds (plan/lower.cpp, communication_buffers).
BytesPerParam bytes_per_param(const Strategy& strategy);

/// Parameters a rank holds of one op: sharded ops divide by tp (experts by
/// etp), experts by ep.
double params_on_rank(const model::Op& op, const Strategy& s);

/// Parameters of an op that autocast casts to 16 bits every micro-batch on
/// this rank (a linear layer's weight; Strategy::autocast_weights), else 0.
double autocast_params(const model::Op& op, const Strategy& s);

/// `runtime_allowance` is the device's (hw::Device::runtime_allowance).
/// ZeRO shards dense parameters over the dense replicas and experts' over
/// the expert replicas (ResolvedStrategy).
StaticMemory static_memory(double dense_params_on_rank, double expert_params_on_rank, const ResolvedStrategy& strategy,
                           core::Bytes runtime_allowance = core::Bytes(kContextAllowanceBytes));
/// A rank with dense parameters only.
StaticMemory static_memory(double params_on_rank, const ResolvedStrategy& strategy,
                           core::Bytes runtime_allowance = core::Bytes(kContextAllowanceBytes));

/// Activation bytes one layer keeps per micro-batch on one rank (without full
/// recomputation; selective recomputation drops the attention scores).
core::Bytes saved_activation_bytes(const model::Layer& layer, const ResolvedStrategy& strategy);

/// The input of a layer, all that full recomputation keeps of it.
core::Bytes layer_input_bytes(std::int64_t tokens, std::int64_t hidden, const ResolvedStrategy& strategy);

/// What a layer holds from its forward to its backward (`kept`) and what its
/// recomputed forward holds for the length of its backward (`recomputed`).
/// A layer that full recomputation reruns keeps only its input (a
/// transformer's tokens x hidden; a layer graph's first op's input); under torchtitan's per-op
/// policy (recompute=op) what the policy saves (op_recompute.hpp).
struct HeldActivations {
  core::Bytes kept;
  core::Bytes recomputed;
};
HeldActivations held_activations(const model::Graph& graph, const model::Layer& layer, core::Bytes saved,
                                 bool recomputed, const ResolvedStrategy& strategy);

}  // namespace dtsim::plan
