// The bundled kernel model of a catalog device, for the kernel tests
// (test_kernel_model.cpp, test_gemm_tables.cpp).
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/hw/profile.hpp"

namespace dtsim::test_support {

inline hw::KernelModel model_of(const hw::DeviceCatalog& catalog, const std::string& name) {
  const hw::Device* found = catalog.find(name);
  EXPECT_NE(found, nullptr) << name;
  const hw::Device d = catalog.with_kernel_figures(*found);
  EXPECT_TRUE(d.kernel_figures) << name << " has no devices/" << name << ".json";
  return hw::KernelModel(d, d.kernel_figures);
}

}  // namespace dtsim::test_support
