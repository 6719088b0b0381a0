// The HTML report rendered in headless Chromium: the screenshot is not a
// blank page, the browser logged no console errors, and at scale the
// screenshot's timeline is in the colour of the kind that dominates it. Skips with the reason
// when Chromium is missing (scripts/bootstrap.sh installs it).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "scratch_dir.hpp"

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::filesystem::path kChromium = "/usr/bin/chromium";

// Renders `html` in headless Chromium to `png`; returns Chromium's log.
std::string screenshot(const std::filesystem::path& html, const std::filesystem::path& png, int height) {
  const auto dir = png.parent_path();
  const auto log = dir / "chromium.log";
  // Flags from this workplace's notes: no sandbox as root, no background networking on a closed network.
  const std::string command = kChromium.string() +
                              " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
                              " --disable-background-networking --disable-component-update --disable-sync"
                              " --enable-logging=stderr --v=0 --window-size=1200," + std::to_string(height) +
                              " --user-data-dir=" + (dir / "profile").string() + " --screenshot=" + png.string() +
                              " file://" + html.string() + " > " + log.string() + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << read(log);
  return read(log);
}

TEST(HtmlReport, IsSelfContainedAndHasTheTimelineAndMemory) {
  const ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  const auto html = dir / "report.html";
  CliResult r = run_dtsim("simulate --model gpt3-1.3b --cluster dgx-a100 --nodes 2 --strategy tp=2,pp=4,gbs=32 --explain --report " +
                          html.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string page = read(html);
  EXPECT_NE(page.find("aria-label=\"timeline\""), std::string::npos);
  EXPECT_NE(page.find("aria-label=\"memory\""), std::string::npos);
  EXPECT_NE(page.find("Verdict."), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);  // nothing to run, nothing to fetch
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);

  if (!std::filesystem::exists(kChromium)) GTEST_SKIP() << "chromium is not installed (scripts/bootstrap.sh installs it)";
  const auto png = dir / "report.png";
  const std::string messages = screenshot(html, png, 1400);
  // A blank 1200x1400 page compresses to a few kilobytes; this one has charts and tables.
  ASSERT_TRUE(std::filesystem::exists(png));
  EXPECT_GT(std::filesystem::file_size(png), 40000u);
  EXPECT_EQ(messages.find("CONSOLE"), std::string::npos) << messages;
  EXPECT_EQ(messages.find("Uncaught"), std::string::npos) << messages;
  std::filesystem::remove_all(dir);
}

// The drawn width of each kind in the compute lanes (the first of each
// rank's two) and in the communication lanes, read from the timeline's rects.
std::map<std::string, double> lane_widths(const std::string& page, int lane) {
  const auto start = page.find("aria-label=\"timeline\"");
  const std::string timeline = page.substr(start, page.find("</svg>", start) - start);
  const std::regex rect(R"re(<rect x="[0-9.]+" y="([0-9]+)" width="([0-9.]+)" height="12" fill="[^"]+"><title>([^<]+)</title>)re");
  std::map<std::string, double> widths;
  for (auto it = std::sregex_iterator(timeline.begin(), timeline.end(), rect); it != std::sregex_iterator(); ++it) {
    const int y = std::stoi((*it)[1]);
    if ((y - 1) % 36 / 14 == lane) widths[(*it)[3]] += std::stod((*it)[2]);
  }
  return widths;
}

TEST(HtmlReport, AtScaleEachPixelShowsTheKindThatDominatesIt) {
  // GPT-3 175B on 1024 A100s: thousands of kernels a pixel. The verdict says
  // GEMM-bound, so the compute lanes must read as GEMMs, not in the colour of
  // the norms and element-wise kernels between them.
  const ScratchDir scratch;
  const auto html = scratch.path() / "large.html";
  CliResult r = run_dtsim("simulate -m gpt3-175b -c superpod-a100 --nodes 128 -s tp=8,pp=8,gbs=1536,recompute=full --explain "
                          "--report " + html.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string page = read(html);
  ASSERT_NE(page.find("Bound by GEMM kernels"), std::string::npos);
  const auto compute = lane_widths(page, 0);
  double total = 0;
  for (const auto& [kind, width] : compute) total += width;
  ASSERT_GT(total, 0);
  EXPECT_GT(compute.at("compute (matmul)") / total, 0.9) << "compute lanes drawn as GEMMs";
  EXPECT_LT(compute.count("compute (memory-bound)") ? compute.at("compute (memory-bound)") / total : 0.0, 0.05);
  EXPECT_GT(lane_widths(page, 1).count("comm: tp"), 0u);
  // The key lists the kinds drawn and no other; the memory chart has its axis and a key.
  const std::string key = page.substr(page.find("<h2>Timeline</h2>"), page.find("<svg", page.find("<h2>Timeline</h2>")) -
                                                                           page.find("<h2>Timeline</h2>"));
  EXPECT_NE(key.find("compute (matmul)"), std::string::npos);
  EXPECT_NE(key.find("comm: pp"), std::string::npos);
  for (const char* absent : {"comm: cp", "comm: ep", "comm: ps", "comm: expert-dp"}) {
    EXPECT_EQ(key.find(absent), std::string::npos) << absent << " is in the key but not in the timeline";
  }
  const auto memory = page.find("<h2>Memory over time</h2>");
  ASSERT_NE(memory, std::string::npos);
  EXPECT_NE(page.find("<p class=\"key\"><span style=\"background:hsl(", memory), std::string::npos);
  EXPECT_NE(page.find(" GiB</text>", memory), std::string::npos);
  EXPECT_NE(page.find("(memory in use per rank)", memory), std::string::npos);

  // What a reader sees: the screenshot's pixels in the GEMM colour against
  // those in the memory-bound colour (the key's swatch is 168 of them).
  if (!std::filesystem::exists(kChromium)) GTEST_SKIP() << "chromium is not installed (scripts/bootstrap.sh installs it)";
  const auto png = scratch.path() / "large.png";
  screenshot(html, png, 2400);
  const CliResult counted = run_shell(
      "/usr/bin/python3 -c 'import sys; from collections import Counter; from PIL import Image; "
      "c = Counter(Image.open(sys.argv[1]).convert(\"RGB\").getdata()); "
      "print(c[(0x4c, 0x78, 0xa8)], c[(0x72, 0xb7, 0xb2)])' " + png.string() + " 2>&1");
  ASSERT_EQ(counted.exit_code, 0) << counted.out;
  ASSERT_NE(page.find("background:#4c78a8\"></span>compute (matmul)"), std::string::npos) << "the GEMM colour changed";
  ASSERT_NE(page.find("background:#72b7b2\"></span>compute (memory-bound)"), std::string::npos);
  long long gemm = 0, memory_bound = 0;
  std::istringstream(counted.out) >> gemm >> memory_bound;
  // 8 compute lanes of 12 px by about 1,000 px, mostly GEMM.
  EXPECT_GT(gemm, 50000) << counted.out;
  EXPECT_LT(memory_bound, gemm / 20) << counted.out;
}

}  // namespace
