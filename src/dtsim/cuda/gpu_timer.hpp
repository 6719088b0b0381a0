#pragma once
// Timing on the GPU with CUDA events, as nccl-tests and cuBLAS's own
// benchmarks do: warm-up calls, then repeats of back-to-back calls between
// two events (enough calls that a repeat lasts ~0.2 ms, so event resolution
// does not count), the per-call time of each repeat kept; callers report
// the median. Back-to-back launches also time launch overhead where a kernel
// is shorter than its launch, as a training step's stream of kernels does.
#include <functional>
#include <vector>

#include <cuda_runtime.h>

namespace dtsim::cuda {

struct GpuSeries {
  std::vector<double> seconds;  ///< per call, one entry per repeat
  [[nodiscard]] double median() const;
};

GpuSeries time_on_stream(cudaStream_t stream, const std::function<void()>& body, int warmup, int repeats);

/// Start and stop events that release themselves.
class EventPair {
 public:
  EventPair();
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair();
  void start(cudaStream_t stream);
  void stop(cudaStream_t stream);
  /// Waits for the stop event; seconds between the two.
  double seconds();

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace dtsim::cuda
