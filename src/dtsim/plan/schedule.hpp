#pragma once
/// Pipeline schedules as the order in which one stage runs its forward and
/// backward passes: GPipe (all forwards, then all backwards), 1F1B
/// (PipeDream-Flush: stage p runs pp-p-1 warm-up forwards, then alternates),
/// and Megatron-LM's interleaved 1F1B over `vpp` model chunks per stage.
#include <string_view>
#include <vector>

namespace dtsim::plan {

enum class Schedule { kGpipe, kOneFOneB, kInterleaved };
std::string_view to_string(Schedule schedule);

struct PassStep {
  int micro_batch = 0;
  int chunk = 0;  ///< model chunk (virtual stage) on this stage, 0 unless interleaved
  bool backward = false;
};

/// The passes stage `stage` of `stages` runs for `micro_batches` micro-batches
/// and `chunks` model chunks per stage. Interleaving needs micro_batches to be
/// a multiple of stages (Megatron's rule); the strategy checks that.
/// `extra_warmup` forwards run before the 1F1B steady state besides the
/// schedule's own: Megatron-Core adds one under
/// overlap_moe_expert_parallel_comm (schedules.py, get_pp_rank_microbatches)
/// so that each steady step's forward and backward are of different
/// micro-batches.
std::vector<PassStep> stage_order(Schedule schedule, int stage, int stages, int micro_batches, int chunks,
                                  int extra_warmup = 0);

}  // namespace dtsim::plan
