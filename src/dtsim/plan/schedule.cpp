#include "dtsim/plan/schedule.hpp"

#include <algorithm>

namespace dtsim::plan {

std::string_view to_string(Schedule schedule) {
  switch (schedule) {
    case Schedule::kGpipe: return "gpipe";
    case Schedule::kOneFOneB: return "1f1b";
    case Schedule::kInterleaved: return "interleaved";
  }
  return "?";
}

namespace {

// Megatron-LM (schedules.py, forward_backward_pipelining_with_interleaving):
// the k-th forward of a stage is micro-batch (k / (pp*v))*pp + k % pp of
// chunk (k / pp) % v; backwards walk the chunks in reverse.
PassStep interleaved_pass(int k, int stages, int chunks, bool backward) {
  const int group = stages * chunks;
  int chunk = (k / stages) % chunks;
  if (backward) chunk = chunks - 1 - chunk;
  return {(k / group) * stages + k % stages, chunk, backward};
}

}  // namespace

std::vector<PassStep> stage_order(Schedule schedule, int stage, int stages, int micro_batches, int chunks,
                                  int extra_warmup) {
  std::vector<PassStep> order;
  const int m = micro_batches;
  if (schedule == Schedule::kGpipe) {
    for (int mb = 0; mb < m; ++mb) order.push_back({mb, 0, false});
    for (int mb = 0; mb < m; ++mb) order.push_back({mb, 0, true});
    return order;
  }
  const int v = schedule == Schedule::kInterleaved ? chunks : 1;
  const int total = m * v;
  int warmup = schedule == Schedule::kInterleaved ? (stages - stage - 1) * 2 + (v - 1) * stages : stages - stage - 1;
  warmup = std::min(warmup + extra_warmup, total);
  auto pass = [&](int k, bool backward) {
    return v > 1 ? interleaved_pass(k, stages, v, backward) : PassStep{k, 0, backward};
  };
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) order.push_back(pass(forwards, false));
  while (backwards < total) {
    if (forwards < total) order.push_back(pass(forwards++, false));
    order.push_back(pass(backwards++, true));
  }
  return order;
}

}  // namespace dtsim::plan
