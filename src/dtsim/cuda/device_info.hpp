#pragma once
// Where a GPU measurement was taken: the GPU, its clocks and power limit,
// and the driver and library versions, for a profile's provenance.
#include <string>

#include <nlohmann/json.hpp>

namespace dtsim::cuda {

/// The catalog name of a GPU from the name CUDA reports ("NVIDIA H100 80GB
/// HBM3" is H100-SXM), or "" when the catalog has no such device.
std::string catalog_device(const std::string& cuda_name, double memory_gib);

/// Device 0's name, SMs, memory, L2, compute capability, clocks (what CUDA
/// reports, and nvidia-smi's current and maximum SM clocks and power limit
/// when nvidia-smi is there), driver, CUDA runtime, cuBLASLt, cuDNN and NCCL
/// versions, the host and the UTC date.
nlohmann::json describe_gpu();

/// nvidia-smi's current SM clock and power draw, or null without nvidia-smi.
nlohmann::json read_clocks();

}  // namespace dtsim::cuda
