#include "dtsim/exec/cpu_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "dtsim/exec/blas.hpp"

namespace dtsim::exec {
namespace {

// The row length of the reduction kernel (a norm over a hidden dimension).
constexpr std::size_t kRow = 256;

}  // namespace

std::size_t stream_elements(hw::KernelFamily family, core::Bytes bytes) {
  const double floats = bytes.value() / sizeof(float);
  switch (family) {
    case hw::KernelFamily::kElementwise: return std::max<std::size_t>(1, static_cast<std::size_t>(floats / 3));
    case hw::KernelFamily::kCopy:
    case hw::KernelFamily::kReduction: return std::max<std::size_t>(kRow, static_cast<std::size_t>(floats / 2));
    case hw::KernelFamily::kGemm: break;
  }
  return 0;
}

void CpuKernels::grow(std::vector<float>& buffer, std::size_t elements, float value) {
  if (buffer.size() < elements) buffer.resize(elements, value);
}

void CpuKernels::reserve(const hw::KernelCall& call) {
  if (call.family == hw::KernelFamily::kGemm) {
    const auto m = static_cast<std::size_t>(call.gemm.m), n = static_cast<std::size_t>(call.gemm.n),
               k = static_cast<std::size_t>(call.gemm.k);
    grow(a_, m * k, 0.5f);
    grow(b_, k * n, 0.25f);
    grow(c_, m * n, 0.0f);
    return;
  }
  const std::size_t e = stream_elements(call.family, call.bytes);
  grow(a_, e, 0.5f);
  grow(b_, e, 0.25f);
  grow(c_, e, 0.0f);
}

void CpuKernels::gemm(const model::GemmShape& s) {
  const auto m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  blas().sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a_.data(), k, b_.data(), n, 0.0f, c_.data(), n);
}

void CpuKernels::stream(hw::KernelFamily family, core::Bytes bytes) {
  const std::size_t e = stream_elements(family, bytes);
  float* c = c_.data();
  const float* a = a_.data();
  const float* b = b_.data();
  switch (family) {
    case hw::KernelFamily::kCopy:
      std::memcpy(c, a, e * sizeof(float));
      break;
    case hw::KernelFamily::kElementwise:
      for (std::size_t i = 0; i < e; ++i) c[i] = a[i] + b[i];
      break;
    case hw::KernelFamily::kReduction:
      // RMS norm of rows: one read pass for the statistic (cached), one scaled write.
      for (std::size_t row = 0; row + kRow <= e; row += kRow) {
        float sum = 0;
        for (std::size_t i = 0; i < kRow; ++i) sum += a[row + i] * a[row + i];
        const float scale = 1.0f / std::sqrt(sum / kRow + 1e-6f);
        for (std::size_t i = 0; i < kRow; ++i) c[row + i] = a[row + i] * scale;
      }
      break;
    case hw::KernelFamily::kGemm: break;
  }
}

void CpuKernels::run(const hw::KernelCall& call) {
  if (call.family == hw::KernelFamily::kGemm) {
    for (std::int64_t i = 0; i < call.count; ++i) gemm(call.gemm);
    return;
  }
  for (std::int64_t i = 0; i < call.count; ++i) stream(call.family, call.bytes);
}

double CpuKernels::check_gemm(const model::GemmShape& s) const {
  double worst = 0;
  const std::int64_t rows[] = {0, s.m / 2, s.m - 1}, cols[] = {0, s.n / 2, s.n - 1};
  for (std::int64_t i : rows) {
    for (std::int64_t j : cols) {
      double expect = 0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        expect += static_cast<double>(a_[static_cast<std::size_t>(i * s.k + p)]) * b_[static_cast<std::size_t>(p * s.n + j)];
      }
      const double got = c_[static_cast<std::size_t>(i * s.n + j)];
      worst = std::max(worst, std::abs(got - expect) / std::max(1e-30, std::abs(expect)));
    }
  }
  return worst;
}

bool CpuKernels::check_stream(hw::KernelFamily family, core::Bytes bytes) const {
  const std::size_t last = stream_elements(family, bytes) - 1;
  switch (family) {
    case hw::KernelFamily::kCopy: return c_[last] == a_[last];
    case hw::KernelFamily::kElementwise: return c_[last] == a_[last] + b_[last];
    case hw::KernelFamily::kReduction: return std::abs(c_[0] - 1.0f) < 1e-3f;  // a constant row normalises to 1
    case hw::KernelFamily::kGemm: break;
  }
  return false;
}

core::Bytes CpuKernels::scratch_bytes() const {
  return core::Bytes(static_cast<double>((a_.capacity() + b_.capacity() + c_.capacity()) * sizeof(float)));
}

void use_one_blas_thread() { blas().set_num_threads(1); }

const char* blas_description() { return blas().get_config(); }

}  // namespace dtsim::exec
