#pragma once
/// Reads the `kernel_model` section of a profile (dtsim.profile/1) into
/// KernelFigures, checking every figure; errors name the file and the field.
#include "dtsim/core/json_reader.hpp"
#include "dtsim/hw/kernel_model.hpp"

namespace dtsim::hw {

KernelFigures read_kernel_figures(core::JsonReader section);

}  // namespace dtsim::hw
