// The HTML report rendered in headless Chromium: the screenshot is not a
// blank page and the browser logged no console errors. Skips with the reason
// when Chromium is missing (scripts/bootstrap.sh installs it).
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "scratch_dir.hpp"

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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

  const std::filesystem::path chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) GTEST_SKIP() << "chromium is not installed (scripts/bootstrap.sh installs it)";
  const auto png = dir / "report.png", log = dir / "chromium.log";
  // Flags from this workplace's notes: no sandbox as root, no background networking on a closed network.
  const std::string command = chromium.string() +
                              " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
                              " --disable-background-networking --disable-component-update --disable-sync"
                              " --enable-logging=stderr --v=0 --window-size=1200,1400 --user-data-dir=" +
                              (dir / "profile").string() + " --screenshot=" + png.string() + " file://" + html.string() +
                              " > " + log.string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read(log);
  // A blank 1200x1400 page compresses to a few kilobytes; this one has charts and tables.
  ASSERT_TRUE(std::filesystem::exists(png));
  EXPECT_GT(std::filesystem::file_size(png), 40000u);
  const std::string messages = read(log);
  EXPECT_EQ(messages.find("CONSOLE"), std::string::npos) << messages;
  EXPECT_EQ(messages.find("Uncaught"), std::string::npos) << messages;
  std::filesystem::remove_all(dir);
}

}  // namespace
