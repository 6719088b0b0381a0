#include "dtsim/hw/profile.hpp"

#include "dtsim/core/json_reader.hpp"

namespace dtsim::hw {

Profile parse_profile(const nlohmann::json& document, const std::string& file) {
  core::JsonReader r(document, file);
  r.choice("schema", {"dtsim.profile/1"});
  Profile profile;
  profile.device = r.string("device");
  if (r.has("provenance")) {
    profile.provenance = r.object("provenance").raw();
  }
  core::JsonReader e = r.object("efficiency");
  Efficiency defaults;
  profile.efficiency.gemm_fraction = e.number_or("gemm_fraction", defaults.gemm_fraction);
  profile.efficiency.attention_fraction = e.number_or("attention_fraction", defaults.attention_fraction);
  profile.efficiency.memory_fraction = e.number_or("memory_fraction", defaults.memory_fraction);
  profile.efficiency.gemm_overhead = e.duration_or("gemm_overhead", defaults.gemm_overhead);
  profile.efficiency.memory_overhead = e.duration_or("memory_overhead", defaults.memory_overhead);
  for (const char* key : {"gemm_fraction", "attention_fraction", "memory_fraction"}) {
    double v = e.raw().value(key, 0.5);
    if (!(v > 0 && v <= 1)) e.fail(key, "expected a fraction in (0, 1], got " + std::to_string(v));
  }
  e.finish();
  r.finish();
  return profile;
}

Profile load_profile(const std::filesystem::path& path) {
  return parse_profile(core::load_json_file(path), path.string());
}

}  // namespace dtsim::hw
