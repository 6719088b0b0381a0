// Hugging Face config.json files (llama, mistral, qwen2, mixtral, gpt2, gpt_neox, ...).
#include "dtsim/core/json_reader.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dtsim::fuzz::expect_only_input_errors([&] {
    const nlohmann::json doc = dtsim::core::parse_json_text(dtsim::fuzz::as_text(data, size), "config.json");
    (void)dtsim::model::load_hf_config(doc, "config.json", {});
  });
  return 0;
}
