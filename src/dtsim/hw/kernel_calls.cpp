#include "dtsim/hw/kernel_calls.hpp"

#include <algorithm>
#include <cmath>

namespace dtsim::hw {

std::string_view to_string(KernelFamily family) {
  switch (family) {
    case KernelFamily::kGemm: return "gemm";
    case KernelFamily::kCopy: return "copy";
    case KernelFamily::kElementwise: return "elementwise";
    case KernelFamily::kReduction: return "reduction";
  }
  return "?";
}

namespace {

// Pass 0 is the forward GEMM; passes 1 and 2 are the data and weight
// gradients, which transpose the roles of the three dimensions.
model::GemmShape oriented(const model::GemmShape& s, int pass) {
  switch (pass % 3) {
    case 1: return {s.m, s.k, s.n, 1};
    case 2: return {s.k, s.n, s.m, 1};
    default: return {s.m, s.n, s.k, 1};
  }
}

void add_gemm_passes(std::vector<KernelCall>& calls, const OpWork& work) {
  const model::GemmShape s{std::max<std::int64_t>(1, work.gemm.m), std::max<std::int64_t>(1, work.gemm.n),
                           std::max<std::int64_t>(1, work.gemm.k), std::max<std::int64_t>(1, work.gemm.batch)};
  const double per_pass = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) *
                          static_cast<double>(s.batch);
  if (work.flops.value() <= 0) return;
  const auto passes = std::max<long long>(1, std::llround(work.flops.value() / per_pass));
  // Separate kernels on a few streams run in groups of that many, each
  // group as one batch.
  const std::int64_t group =
      work.concurrent_kernels > 0 ? std::min<std::int64_t>(work.concurrent_kernels, s.batch) : s.batch;
  for (long long p = 0; p < passes; ++p) {
    // One pass is a forward, or the gradient pass the work names; several
    // start at the gradients (a backward, or a recomputed forward plus backward).
    const int pass = passes > 1                                             ? static_cast<int>(p + 1)
                     : work.gradient_pass == GradientPass::kData   ? 1
                     : work.gradient_pass == GradientPass::kWeight ? 2
                                                                   : 0;
    for (std::int64_t done = 0; done < s.batch; done += group) {
      calls.push_back({KernelFamily::kGemm, oriented(s, pass), std::min(group, s.batch - done), core::Bytes(0)});
    }
  }
}

}  // namespace

std::vector<KernelCall> kernel_calls(const OpWork& work) {
  std::vector<KernelCall> calls;
  auto stream = [&](KernelFamily family) {
    if (work.bytes_moved.value() > 0) calls.push_back({family, {}, 1, work.bytes_moved});
  };
  switch (work.kind) {
    case model::OpKind::kGemm:
      add_gemm_passes(calls, work);
      break;
    case model::OpKind::kAttention:
      add_gemm_passes(calls, work);
      if (!work.fused) stream(KernelFamily::kReduction);
      break;
    case model::OpKind::kEmbedding: stream(KernelFamily::kCopy); break;
    case model::OpKind::kNorm:
    case model::OpKind::kLoss: stream(KernelFamily::kReduction); break;
    case model::OpKind::kElementwise: stream(KernelFamily::kElementwise); break;
  }
  return calls;
}

int host_launches(const OpWork& work) {
  if (work.graphed) return 0;
  if (work.eager_launches > 0) return work.eager_launches;
  if (work.concurrent_kernels > 0 && work.kind == model::OpKind::kGemm) {
    // One launch per GEMM of the batch, whatever runs beside it.
    int launches = 0;
    for (const KernelCall& call : kernel_calls(work)) {
      launches += static_cast<int>(call.family == KernelFamily::kGemm ? call.count : 1);
    }
    return std::max(1, launches);
  }
  return std::max(1, static_cast<int>(kernel_calls(work).size()));
}

Dtype gemm_dtype(const OpWork& work, Dtype plan) {
  return work.kind == model::OpKind::kAttention && (plan == Dtype::kFp8 || plan == Dtype::kFp4) ? Dtype::kBf16 : plan;
}

}  // namespace dtsim::hw
