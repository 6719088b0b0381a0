#include "dtsim/cuda/stream_kernels.hpp"

#include <algorithm>

#include "dtsim/cuda/device_kernels.hpp"

namespace dtsim::cuda {

std::size_t stream_elements(hw::KernelFamily family, core::Bytes bytes) {
  const double halves = bytes.value() / 2;
  const auto arrays = family == hw::KernelFamily::kElementwise ? 3.0 : 2.0;
  const auto e = static_cast<std::size_t>(halves / arrays);
  // Whole 16-byte chunks, and whole rows for the reduction.
  const std::size_t unit = family == hw::KernelFamily::kReduction ? kReductionRow : 8;
  return std::max<std::size_t>(unit, (e + unit - 1) / unit * unit);
}

void StreamKernels::reserve(hw::KernelFamily family, core::Bytes bytes) {
  const std::size_t b = std::min(stream_elements(family, bytes), kMaxStreamElements) * 2;
  a_.reserve(b, Element::kBf16, 11, stream_);
  b_.reserve(b, Element::kBf16, 12, stream_);
  c_.reserve(b, Element::kBf16, 13, stream_);
}

void StreamKernels::run(hw::KernelFamily family, core::Bytes bytes) {
  for (std::size_t left = stream_elements(family, bytes); left > 0;) {
    const std::size_t e = std::min(left, kMaxStreamElements);
    left -= e;
    launch(family, e);
  }
}

void StreamKernels::launch(hw::KernelFamily family, std::size_t e) {
  switch (family) {
    case hw::KernelFamily::kCopy: copy(a_.data(), c_.data(), e, stream_); break;
    case hw::KernelFamily::kElementwise: add(a_.data(), b_.data(), c_.data(), e, stream_); break;
    case hw::KernelFamily::kReduction: rms_norm(a_.data(), c_.data(), e / kReductionRow, stream_); break;
    case hw::KernelFamily::kGemm: break;
  }
}

}  // namespace dtsim::cuda
