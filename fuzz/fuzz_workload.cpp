// Model files: transformer JSON, layer graphs and Hugging Face config.json.
#include "dtsim/core/json_reader.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dtsim::fuzz::expect_only_input_errors([&] {
    const nlohmann::json doc = dtsim::core::parse_json_text(dtsim::fuzz::as_text(data, size), "model.json");
    (void)dtsim::model::load_workload_json(doc, "model.json");
  });
  return 0;
}
