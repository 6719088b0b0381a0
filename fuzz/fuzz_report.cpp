// Saved reports for `dtsim compare`: any JSON against a real report, both ways.
#include <fstream>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/report/compare.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const nlohmann::json baseline =
      dtsim::core::load_json_file(dtsim::fuzz::source_dir() + "/tests/fuzz/report/gpt3-1.3b-ddp.json");
  dtsim::fuzz::expect_only_input_errors([&] {
    const nlohmann::json doc = dtsim::core::parse_json_text(dtsim::fuzz::as_text(data, size), "report.json");
    (void)dtsim::report::compare_reports(baseline, doc, 0.05);
    (void)dtsim::report::compare_reports(doc, baseline, 0.05);
  });
  return 0;
}
