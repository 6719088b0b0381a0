#include "dtsim/cuda/check.hpp"

#include <filesystem>

#include <fmt/format.h>

namespace dtsim::cuda {

void fail(const std::string& library, const std::string& message, const std::source_location& where) {
  throw std::runtime_error(fmt::format("{} error: {} (in {}, {}:{})", library, message, where.function_name(),
                                       std::filesystem::path(where.file_name()).filename().string(), where.line()));
}

}  // namespace dtsim::cuda
