#include "dtsim/cuda/lt_gemm.hpp"

#include <fmt/format.h>

#include "dtsim/cuda/check.hpp"

namespace dtsim::cuda {
namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;

cudaDataType_t cuda_type(Element e) {
  switch (e) {
    case Element::kFp32: return CUDA_R_32F;
    case Element::kBf16: return CUDA_R_16BF;
    case Element::kFp16: return CUDA_R_16F;
    case Element::kFp8E4M3: return CUDA_R_8F_E4M3;
  }
  return CUDA_R_32F;
}

}  // namespace

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

void DeviceBuffer::release() {
  if (data_) check(cudaFree(data_));
  data_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::reserve(std::size_t bytes, Element fill, std::uint32_t seed, cudaStream_t stream) {
  if (bytes <= bytes_) return;
  if (data_) {
    check(cudaStreamSynchronize(stream));
    check(cudaFree(data_));
    data_ = nullptr;
    bytes_ = 0;
  }
  check(cudaMalloc(&data_, bytes));
  bytes_ = bytes;
  fill_random(data_, bytes / element_size(fill), fill, seed, stream);
}

GemmTypes gemm_types(hw::Dtype dtype) {
  switch (dtype) {
    case hw::Dtype::kFp32:
    case hw::Dtype::kTf32: return {Element::kFp32, Element::kFp32};
    case hw::Dtype::kBf16: return {Element::kBf16, Element::kBf16};
    case hw::Dtype::kFp16: return {Element::kFp16, Element::kFp16};
    case hw::Dtype::kFp8: return {Element::kFp8E4M3, Element::kBf16};  // Transformer Engine's bf16 output
    case hw::Dtype::kFp4: break;
  }
  throw std::invalid_argument(fmt::format("the CUDA backend has no {} GEMM", hw::to_string(dtype)));
}

struct LtGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  GemmTypes types{};
  std::size_t a_bytes = 0, b_bytes = 0, d_bytes = 0;
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

LtGemm::LtGemm(cudaStream_t stream) : stream_(stream) {
  check(cublasLtCreate(&handle_));
  workspace_.reserve(kWorkspaceBytes, Element::kFp32, 0, stream_);
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

const LtGemm::Plan* LtGemm::plan(const model::GemmShape& s, std::int64_t count, hw::Dtype dtype) {
  const std::string key = fmt::format("{}x{}x{}x{}:{}", s.m, s.n, s.k, count, hw::to_string(dtype));
  if (auto found = plans_.find(key); found != plans_.end()) return found->second.get();
  auto p = std::make_unique<Plan>();
  p->types = gemm_types(dtype);
  const cublasComputeType_t compute = dtype == hw::Dtype::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&p->op, compute, CUDA_R_32F));
  const cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof transposed));
  check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain));
  // Column-major: A is k x m (read transposed), B is k x n, D is m x n.
  const auto m = static_cast<std::uint64_t>(s.m), n = static_cast<std::uint64_t>(s.n), k = static_cast<std::uint64_t>(s.k);
  check(cublasLtMatrixLayoutCreate(&p->a, cuda_type(p->types.inputs), k, m, static_cast<std::int64_t>(k)));
  check(cublasLtMatrixLayoutCreate(&p->b, cuda_type(p->types.inputs), k, n, static_cast<std::int64_t>(k)));
  check(cublasLtMatrixLayoutCreate(&p->d, cuda_type(p->types.output), m, n, static_cast<std::int64_t>(m)));
  if (count > 1) {
    const auto batch = static_cast<std::int32_t>(count);
    const std::int64_t strides[3] = {static_cast<std::int64_t>(k * m), static_cast<std::int64_t>(k * n),
                                     static_cast<std::int64_t>(m * n)};
    cublasLtMatrixLayout_t layouts[3] = {p->a, p->b, p->d};
    for (int i = 0; i < 3; ++i) {
      check(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
      check(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                             sizeof strides[i]));
    }
  }
  const auto in = element_size(p->types.inputs), out = element_size(p->types.output);
  const auto c = static_cast<std::size_t>(count);
  p->a_bytes = k * m * c * in;
  p->b_bytes = k * n * c * in;
  p->d_bytes = m * n * c * out;

  cublasLtMatmulPreference_t preference = nullptr;
  check(cublasLtMatmulPreferenceCreate(&preference));
  const std::uint64_t workspace = kWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, p->op, p->a, p->b, p->d, p->d, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    plans_[key] = nullptr;
    return nullptr;
  }
  p->algo = result.algo;
  return (plans_[key] = std::move(p)).get();
}

bool LtGemm::supported(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype) {
  return plan(shape, count, dtype) != nullptr;
}

hw::Dtype LtGemm::runnable(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype) {
  if (dtype == hw::Dtype::kFp8 && !supported(shape, count, dtype)) return hw::Dtype::kBf16;
  return dtype;
}

std::size_t LtGemm::operand_bytes(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype) {
  const Plan* p = plan(shape, count, dtype);
  return p ? p->a_bytes + p->b_bytes + p->d_bytes : 0;
}

void LtGemm::release_operands() {
  check(cudaStreamSynchronize(stream_));
  for (auto& [type, buffer] : a_) buffer.release();
  for (auto& [type, buffer] : b_) buffer.release();
  d_.release();
}

void LtGemm::reserve(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype) {
  const Plan* p = plan(shape, count, dtype);
  if (!p) {
    throw std::runtime_error(fmt::format("cuBLASLt has no {} algorithm for {} GEMMs of {}x{}x{} on this GPU",
                                         hw::to_string(dtype), count, shape.m, shape.n, shape.k));
  }
  a_[p->types.inputs].reserve(p->a_bytes, p->types.inputs, 1, stream_);
  b_[p->types.inputs].reserve(p->b_bytes, p->types.inputs, 2, stream_);
  d_.reserve(p->d_bytes, Element::kFp32, 3, stream_);
}

void LtGemm::run(const model::GemmShape& shape, std::int64_t count, hw::Dtype dtype) {
  const Plan* p = plan(shape, count, dtype);
  const float alpha = 1.0f, beta = 0.0f;
  check(cublasLtMatmul(handle_, p->op, &alpha, a_.at(p->types.inputs).data(), p->a, b_.at(p->types.inputs).data(), p->b,
                       &beta, d_.data(), p->d, d_.data(), p->d, &p->algo, workspace_.data(), kWorkspaceBytes, stream_));
}

std::size_t LtGemm::device_bytes() const {
  std::size_t total = workspace_.bytes() + d_.bytes();
  for (const auto& [type, buffer] : a_) total += buffer.bytes();
  for (const auto& [type, buffer] : b_) total += buffer.bytes();
  return total;
}

}  // namespace dtsim::cuda
