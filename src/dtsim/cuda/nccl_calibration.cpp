#include "dtsim/cuda/nccl_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <functional>

#include <nccl.h>

#include "dtsim/cuda/check.hpp"

namespace dtsim::cuda {
namespace {

struct Rank {
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* receive = nullptr;
};

// Back-to-back calls, timed by the host from the first launch to the last stream's end.
GpuSeries time_all(std::vector<Rank>& ranks, const std::function<void()>& body, int warmup, int repeats) {
  auto sync = [&] {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      check(cudaSetDevice(static_cast<int>(i)));
      check(cudaStreamSynchronize(ranks[i].stream));
    }
  };
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  for (int i = 0; i < std::max(1, warmup); ++i) body();
  sync();
  const double one = std::chrono::duration<double>(Clock::now() - t0).count() / std::max(1, warmup);
  const int calls = std::clamp(static_cast<int>(1e-3 / std::max(one, 1e-7)), 1, 100);
  GpuSeries out;
  for (int r = 0; r < repeats; ++r) {
    t0 = Clock::now();
    for (int i = 0; i < calls; ++i) body();
    sync();
    out.seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / calls);
  }
  return out;
}

}  // namespace

double bus_bandwidth_factor(const std::string& op, int n) {
  const double r = n;
  if (op == "all_reduce") return n > 1 ? 2 * (r - 1) / r : 1;
  if (op == "send_recv") return 1;
  return n > 1 ? (r - 1) / r : 1;
}

std::vector<CollectiveSeries> measure_nccl(int gpus, const std::vector<core::Bytes>& sizes, int warmup, int repeats) {
  std::vector<CollectiveSeries> out;
  if (gpus < 1 || sizes.empty()) return out;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(gpus));
  check(ncclCommInitAll(comms.data(), gpus, nullptr));
  std::vector<Rank> ranks(static_cast<std::size_t>(gpus));
  const auto largest = static_cast<std::size_t>(std::max_element(sizes.begin(), sizes.end())->value());
  for (int i = 0; i < gpus; ++i) {
    check(cudaSetDevice(i));
    Rank& r = ranks[static_cast<std::size_t>(i)];
    check(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    check(cudaMalloc(&r.send, largest));
    check(cudaMalloc(&r.receive, largest));
    check(cudaMemset(r.send, 0, largest));
  }
  const std::vector<std::string> ops = gpus > 1
      ? std::vector<std::string>{"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv"}
      : std::vector<std::string>{"all_reduce", "reduce_scatter", "all_gather"};
  for (const std::string& op : ops) {
    CollectiveSeries series{op, gpus, {}};
    for (core::Bytes bytes : sizes) {
      const auto elements = static_cast<std::size_t>(bytes.value() / 2);  // bf16, as gradients and activations
      const std::size_t chunk = std::max<std::size_t>(1, elements / static_cast<std::size_t>(gpus));
      auto body = [&] {
        check(ncclGroupStart());
        for (int i = 0; i < gpus; ++i) {
          Rank& r = ranks[static_cast<std::size_t>(i)];
          ncclComm_t c = comms[static_cast<std::size_t>(i)];
          if (op == "all_reduce") {
            check(ncclAllReduce(r.send, r.receive, elements, ncclBfloat16, ncclSum, c, r.stream));
          } else if (op == "reduce_scatter") {
            check(ncclReduceScatter(r.send, r.receive, chunk, ncclBfloat16, ncclSum, c, r.stream));
          } else if (op == "all_gather") {
            check(ncclAllGather(r.send, r.receive, chunk, ncclBfloat16, c, r.stream));
          } else if (op == "all_to_all") {
            for (int peer = 0; peer < gpus; ++peer) {
              const std::size_t offset = static_cast<std::size_t>(peer) * chunk * 2;
              check(ncclSend(static_cast<char*>(r.send) + offset, chunk, ncclBfloat16, peer, c, r.stream));
              check(ncclRecv(static_cast<char*>(r.receive) + offset, chunk, ncclBfloat16, peer, c, r.stream));
            }
          } else {  // send_recv: a ring of pairs, as pipeline stages exchange
            check(ncclSend(r.send, elements, ncclBfloat16, (i + 1) % gpus, c, r.stream));
            check(ncclRecv(r.receive, elements, ncclBfloat16, (i + gpus - 1) % gpus, c, r.stream));
          }
        }
        check(ncclGroupEnd());
      };
      series.points.emplace_back(bytes, time_all(ranks, body, warmup, repeats));
    }
    out.push_back(std::move(series));
  }
  for (int i = 0; i < gpus; ++i) {
    check(cudaSetDevice(i));
    Rank& r = ranks[static_cast<std::size_t>(i)];
    cudaFree(r.receive);
    cudaFree(r.send);
    cudaStreamDestroy(r.stream);
    ncclCommDestroy(comms[static_cast<std::size_t>(i)]);
  }
  check(cudaSetDevice(0));
  return out;
}

}  // namespace dtsim::cuda
