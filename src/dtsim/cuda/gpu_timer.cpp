#include "dtsim/cuda/gpu_timer.hpp"

#include <algorithm>
#include <cmath>

#include "dtsim/cuda/check.hpp"

namespace dtsim::cuda {

double GpuSeries::median() const {
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  if (n == 0) return 0;
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

EventPair::EventPair() {
  check(cudaEventCreate(&start_));
  check(cudaEventCreate(&stop_));
}

EventPair::~EventPair() {
  cudaEventDestroy(stop_);
  cudaEventDestroy(start_);
}

void EventPair::start(cudaStream_t stream) { check(cudaEventRecord(start_, stream)); }
void EventPair::stop(cudaStream_t stream) { check(cudaEventRecord(stop_, stream)); }

double EventPair::seconds() {
  check(cudaEventSynchronize(stop_));
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start_, stop_));
  return ms * 1e-3;
}

GpuSeries time_on_stream(cudaStream_t stream, const std::function<void()>& body, int warmup, int repeats) {
  EventPair events;
  events.start(stream);
  for (int i = 0; i < std::max(1, warmup); ++i) body();
  events.stop(stream);
  const double one = events.seconds() / std::max(1, warmup);
  constexpr double kRepeatSeconds = 2e-4;
  const int calls = std::clamp(static_cast<int>(std::ceil(kRepeatSeconds / std::max(one, 1e-7))), 1, 200);
  GpuSeries out;
  for (int r = 0; r < repeats; ++r) {
    events.start(stream);
    for (int i = 0; i < calls; ++i) body();
    events.stop(stream);
    out.seconds.push_back(events.seconds() / calls);
  }
  return out;
}

}  // namespace dtsim::cuda
