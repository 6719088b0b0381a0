#pragma once
/// Calibration profiles (`schema: dtsim.profile/1`): what was measured on which
/// machine, and the efficiencies fitted from it, which replace the defaults.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "dtsim/hw/cost_model.hpp"

namespace dtsim::hw {

struct Profile {
  std::string device;  ///< catalog name of the device it was measured on
  nlohmann::json provenance;
  Efficiency efficiency;
};

Profile load_profile(const std::filesystem::path& path);
Profile parse_profile(const nlohmann::json& document, const std::string& file);

}  // namespace dtsim::hw
