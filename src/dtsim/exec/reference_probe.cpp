#include "dtsim/exec/reference_probe.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "dtsim/exec/cpu_kernels.hpp"

namespace dtsim::exec {

core::Seconds time_reference_probe(MPI_Comm world, int repeats) {
  // 256^3 keeps the operands (768 KiB) in a core's L2; 32 MiB copies stream
  // past the last-level cache of a 2-core slice. Both sides of a step's time.
  const model::GemmShape gemm{256, 256, 256, 1};
  const core::Bytes copy(64.0 * 1048576);  // read 32 MiB, write 32 MiB
  CpuKernels kernels;
  kernels.reserve({hw::KernelFamily::kGemm, gemm, 1, {}});
  kernels.reserve({hw::KernelFamily::kCopy, {}, 1, copy});
  auto pass = [&] {
    for (int i = 0; i < 8; ++i) kernels.gemm(gemm);
    kernels.stream(hw::KernelFamily::kCopy, copy);
  };
  pass();  // untimed: faults the pages in
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(world);
    const auto t0 = std::chrono::steady_clock::now();
    pass();
    double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, world);
    times.push_back(slowest);
  }
  std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
  return core::Seconds(times[times.size() / 2]);
}

double probe_drift(core::Seconds then, core::Seconds now) {
  return then.value() > 0 ? now.value() / then.value() - 1.0 : 0.0;
}

}  // namespace dtsim::exec
