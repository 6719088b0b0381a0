#include "dtsim/cuda/gpu_executor.hpp"

#include <algorithm>
#include <deque>
#include <numeric>

#include <fmt/format.h>

#include "dtsim/cuda/check.hpp"
#include "dtsim/cuda/lt_gemm.hpp"
#include "dtsim/cuda/stream_kernels.hpp"

namespace dtsim::cuda {
namespace {

struct Call {
  hw::KernelCall call;
  hw::Dtype dtype;
};

// Activations as the plan counts them (bytes, released oldest first, as
// exec::ActivationMemory does on the CPU), each allocation a block of the pool.
class PoolActivations {
 public:
  explicit PoolActivations(cudaStream_t stream) : stream_(stream) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location = {cudaMemLocationTypeDevice, 0};
    check(cudaMemPoolCreate(&pool_, &props));
    // Keep freed blocks: a framework's caching allocator never returns them mid-training.
    std::uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  PoolActivations(const PoolActivations&) = delete;
  PoolActivations& operator=(const PoolActivations&) = delete;
  ~PoolActivations() {
    for (Block& b : live_) cudaFreeAsync(b.data, stream_);
    cudaStreamSynchronize(stream_);
    cudaMemPoolDestroy(pool_);
  }
  void allocate(core::Bytes bytes) {
    if (bytes.value() <= 0) return;
    const auto size = static_cast<std::size_t>(bytes.value());
    Block b{nullptr, size};
    check(cudaMallocFromPoolAsync(&b.data, size, pool_, stream_));
    live_.push_back(b);
  }
  void release(core::Bytes bytes) {
    auto left = static_cast<std::size_t>(std::max(0.0, bytes.value()));
    while (left > 0 && !live_.empty()) {
      Block& oldest = live_.front();
      const std::size_t take = std::min(left, oldest.counted);
      oldest.counted -= take;
      left -= take;
      if (oldest.counted == 0) {
        check(cudaFreeAsync(oldest.data, stream_));
        live_.pop_front();
      }
    }
  }
  void reset_peak() {
    std::uint64_t zero = 0;
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
  }
  [[nodiscard]] std::size_t peak() const {
    std::uint64_t high = 0;
    check(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &high));
    return high;
  }

 private:
  struct Block {
    void* data;
    std::size_t counted;
  };
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
  std::deque<Block> live_;
};

}  // namespace

exec::Execution execute_on_gpu(const plan::TaskGraph& graph, const plan::Timeline& order,
                               const exec::GpuExecuteOptions& options) {
  if (graph.world != 1 || graph.simulated.size() != 1 || graph.ps_shards != 0) {
    throw std::invalid_argument(fmt::format("the CUDA backend runs a plan of one GPU (gpus=1); this one has {}; several "
                                            "GPUs (one process each, NCCL through MPI) are not built yet",
                                            graph.world));
  }
  const exec::ExecuteOptions& steps = options.steps;
  if (steps.steps < 1 || steps.warmup_steps < 0) throw std::invalid_argument("execute: steps must be positive");
  std::vector<std::uint32_t> mine(graph.tasks.size());
  std::iota(mine.begin(), mine.end(), 0u);
  for (std::uint32_t id : mine) {
    if (graph.tasks[id].kind != plan::TaskKind::kCompute) {
      throw std::invalid_argument("the CUDA backend's one-GPU plan has a communication task; it runs none");
    }
  }
  std::stable_sort(mine.begin(), mine.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return order.spans[a].start < order.spans[b].start; });

  check(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  exec::Execution out;
  {
    LtGemm gemm(stream);
    StreamKernels memory(stream);
    std::vector<std::vector<Call>> calls_of_kernel(graph.kernels.size());
    for (std::size_t k = 0; k < graph.kernels.size(); ++k) {
      for (const hw::OpWork& w : graph.kernels[k].ops) {
        for (const hw::KernelCall& c : hw::kernel_calls(w)) {
          hw::Dtype dtype = hw::gemm_dtype(w, options.dtype);
          if (c.family == hw::KernelFamily::kGemm) {
            dtype = gemm.runnable(c.gemm, c.count, dtype);
            gemm.reserve(c.gemm, c.count, dtype);
          } else {
            memory.reserve(c.family, c.bytes);
          }
          calls_of_kernel[k].push_back({c, dtype});
        }
      }
    }
    const plan::RankInfo& info = graph.simulated.front();
    const auto static_bytes =
        static_cast<std::size_t>((info.memory.params + info.memory.grads + info.memory.optimizer).value());
    void* weights_and_state = nullptr;
    if (static_bytes > 0) {
      check(cudaMalloc(&weights_and_state, static_bytes));
      check(cudaMemsetAsync(weights_and_state, 0, static_bytes, stream));
    }
    PoolActivations activations(stream);
    std::vector<cudaEvent_t> marks(mine.size() + 1);
    for (cudaEvent_t& e : marks) check(cudaEventCreate(&e));
    check(cudaStreamSynchronize(stream));

    const int total = steps.warmup_steps + steps.steps;
    std::vector<std::vector<plan::TaskSpan>> spans;
    std::vector<double> makespans;
    std::size_t peak_activations = 0, device_in_use = 0;
    for (int step = 0; step < total; ++step) {
      activations.reset_peak();
      for (std::size_t i = 0; i < mine.size(); ++i) {
        const plan::Task& task = graph.tasks[mine[i]];
        check(cudaEventRecord(marks[i], stream));
        activations.allocate(graph.alloc_at_start(task));
        for (const Call& c : calls_of_kernel[static_cast<std::size_t>(task.payload)]) {
          if (c.call.family == hw::KernelFamily::kGemm) gemm.run(c.call.gemm, c.call.count, c.dtype);
          else memory.run(c.call.family, c.call.bytes);
        }
        activations.release(graph.free_at_end(task));
      }
      check(cudaEventRecord(marks.back(), stream));
      check(cudaEventSynchronize(marks.back()));
      if (step < steps.warmup_steps) continue;
      std::vector<plan::TaskSpan> step_spans(mine.size());
      std::vector<std::int64_t> at(marks.size());
      for (std::size_t i = 0; i < marks.size(); ++i) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, marks[0], marks[i]));
        at[i] = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
      }
      for (std::size_t i = 0; i < mine.size(); ++i) step_spans[i] = {{at[i]}, {at[i + 1]}};
      spans.push_back(std::move(step_spans));
      makespans.push_back(static_cast<double>(at.back()) * 1e-9);
      peak_activations = std::max(peak_activations, activations.peak());
      std::size_t free = 0, capacity = 0;
      check(cudaMemGetInfo(&free, &capacity));
      device_in_use = std::max(device_in_use, capacity - free);
    }
    for (cudaEvent_t e : marks) cudaEventDestroy(e);

    std::vector<std::size_t> by_time(makespans.size());
    std::iota(by_time.begin(), by_time.end(), 0);
    std::sort(by_time.begin(), by_time.end(), [&](std::size_t a, std::size_t b) { return makespans[a] < makespans[b]; });
    const std::size_t median = by_time[by_time.size() / 2];
    for (double t : makespans) out.step_times.emplace_back(t);
    out.timeline.makespan = {static_cast<std::int64_t>(makespans[median] * 1e9)};
    out.timeline.spans.assign(graph.tasks.size(), {});
    for (std::size_t i = 0; i < mine.size(); ++i) out.timeline.spans[mine[i]] = spans[median][i];
    out.timeline.memory.assign(1, {});
    // What the plan holds: weights and state, the activations' high-water
    // mark and cuBLASLt's workspace. The kernels' operand buffers are
    // scratch standing in for tensors the activations already count (a
    // GEMM's output is an activation), so they are reported apart.
    out.timeline.peak_memory.emplace_back(static_cast<double>(static_bytes + peak_activations + gemm.workspace_bytes()));
    out.scratch_bytes = core::Bytes(static_cast<double>(gemm.device_bytes() - gemm.workspace_bytes() + memory.device_bytes()));
    out.max_rss.emplace_back(static_cast<double>(device_in_use));  // the device's memory in use, context included
    if (weights_and_state) check(cudaFree(weights_and_state));
  }
  check(cudaStreamDestroy(stream));
  return out;
}

}  // namespace dtsim::cuda
