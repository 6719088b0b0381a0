// `meson install` into a staging folder (--destdir), then the installed dtsim
// run from elsewhere with DTSIM_DATA_DIR unset: it must find the workloads,
// topologies and devices under <prefix>/share/dtsim, not in the source tree it
// was built from, and the man pages must render.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// A folder meson names relative to the prefix, or absolute; placed under the staging folder.
fs::path staged(const fs::path& destdir, const std::string& folder) {
  fs::path full = fs::path(folder).is_absolute() ? fs::path(folder) : fs::path(env_or_empty("DTSIM_INSTALL_PREFIX")) / folder;
  return destdir / full.relative_path();
}

class Install : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string build_root = env_or_empty("DTSIM_BUILD_ROOT");
    if (build_root.empty()) GTEST_SKIP() << "DTSIM_BUILD_ROOT is not set (meson test sets it)";
    const CliResult install = run_shell("meson install -C '" + build_root + "' --no-rebuild --quiet --destdir '" +
                                        scratch_.path().string() + "' 2>&1");
    ASSERT_EQ(install.exit_code, 0) << install.out;
    bin_ = staged(scratch_.path(), env_or_empty("DTSIM_INSTALL_BINDIR"));
    data_ = staged(scratch_.path(), env_or_empty("DTSIM_INSTALL_DATADIR")) / "dtsim";
    man_ = staged(scratch_.path(), env_or_empty("DTSIM_INSTALL_MANDIR")) / "man1";
  }

  // The installed binary, from the staging folder, with no hint of where its data is.
  CliResult installed_dtsim(const std::string& args) const {
    return run_shell("cd '" + scratch_.path().string() + "' && env -u DTSIM_DATA_DIR '" + (bin_ / "dtsim").string() +
                     "' " + args + " 2>&1");
  }

  ScratchDir scratch_;
  fs::path bin_, data_, man_;
};

TEST_F(Install, PutsTheProgramsDataAndManPagesInThePrefix) {
  for (const fs::path& file : {bin_ / "dtsim", bin_ / "dtsim-calibrate", data_ / "workloads" / "llama2-7b.json",
                               data_ / "topologies" / "dgx-h100.json", data_ / "devices" / "datasheets.json",
                               data_ / "devices" / "H100-SXM.json", man_ / "dtsim.1", man_ / "dtsim-calibrate.1"}) {
    EXPECT_TRUE(fs::exists(file)) << file << " was not installed";
  }
  // Every bundled input, not a chosen few.
  for (const char* folder : {"workloads", "topologies", "devices", "schemas"}) {
    for (const auto& entry : fs::directory_iterator(fs::path(DTSIM_SOURCE_DIR) / folder)) {
      EXPECT_TRUE(fs::exists(data_ / folder / entry.path().filename())) << entry.path() << " was not installed";
    }
  }
}

// The installed dtsim opens the installed CUDA plugin (here, with no GPU, it
// says so instead of saying it was built without one).
TEST_F(Install, TheInstalledBinaryFindsItsCudaBackend) {
  if (env_or_empty("DTSIM_CUDA_BUILT").empty()) GTEST_SKIP() << "built without the CUDA backend (no nvcc found)";
  const CliResult run = installed_dtsim("run --backend cuda -m gpt3-1.3b -c dgx-h100 -s gpus=1,mbs=1,gbs=1 --profile none.json");
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_EQ(run.out.find("built without"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("--backend: cuda"), std::string::npos) << run.out;
}

TEST_F(Install, TheInstalledBinaryFindsItsDataInThePrefix) {
  const CliResult version = installed_dtsim("--version");
  EXPECT_EQ(version.exit_code, 0) << version.out;
  EXPECT_NE(version.out.find("dtsim "), std::string::npos) << version.out;

  const CliResult step = installed_dtsim("simulate --model llama2-7b --cluster dgx-h100 --strategy fsdp");
  ASSERT_EQ(step.exit_code, 0) << step.out;
  EXPECT_NE(step.out.find("step time"), std::string::npos) << step.out;

  // A model that exists only in the installed folder proves the source tree is not read.
  fs::copy_file(data_ / "workloads" / "tiny-gpt.json", data_ / "workloads" / "only-in-the-prefix.json");
  const CliResult listed = installed_dtsim("list");
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  EXPECT_NE(listed.out.find("only-in-the-prefix"), std::string::npos) << listed.out;
  const CliResult simulated = installed_dtsim("simulate -m only-in-the-prefix -c dgx-h100 -s ddp");
  EXPECT_EQ(simulated.exit_code, 0) << simulated.out;

  // And DTSIM_DATA_DIR still wins over the prefix.
  const CliResult overridden =
      run_shell("DTSIM_DATA_DIR='" + std::string(DTSIM_SOURCE_DIR) + "' '" + (bin_ / "dtsim").string() + "' list 2>&1");
  EXPECT_EQ(overridden.out.find("only-in-the-prefix"), std::string::npos) << overridden.out;
}

TEST_F(Install, TheInstalledPythonModuleFindsItsDataInThePrefix) {
  const std::string module_dir = env_or_empty("DTSIM_PYTHON_INSTALL_DIR");
  if (module_dir.empty()) GTEST_SKIP() << "the Python module is not built here (a sanitizer build, or no pybind11-dev)";
  const fs::path site = staged(scratch_.path(), module_dir);
  const CliResult imported =
      run_shell("cd '" + scratch_.path().string() + "' && env -u DTSIM_DATA_DIR PYTHONPATH='" + site.string() + "' " +
                env_or_empty("DTSIM_PYTHON") +
                " -c 'import dtsim; print(dtsim.__file__); print(dtsim.data_dir()); "
                "print(dtsim.simulate(\"llama2-7b\", \"dgx-h100\", \"fsdp\")[\"schema\"])' 2>&1");
  ASSERT_EQ(imported.exit_code, 0) << imported.out;
  EXPECT_NE(imported.out.find(site.string()), std::string::npos) << imported.out;
  EXPECT_NE(imported.out.find(data_.string() + "\n"), std::string::npos) << imported.out;
  EXPECT_NE(imported.out.find("dtsim.report/1"), std::string::npos) << imported.out;
}

TEST_F(Install, TheManPagesRenderWithoutWarnings) {
  if (run_shell("command -v groff >/dev/null").exit_code != 0) GTEST_SKIP() << "groff is not installed";
  for (const char* page : {"dtsim.1", "dtsim-calibrate.1"}) {
    const CliResult rendered = run_shell("groff -man -ww -Tutf8 '" + (man_ / page).string() + "' 2>&1 >/dev/null");
    EXPECT_EQ(rendered.exit_code, 0) << page;
    EXPECT_EQ(rendered.out, "") << page << " has groff warnings";
    const CliResult text = run_shell("groff -man -Tascii -P-cbou '" + (man_ / page).string() + "' 2>/dev/null");
    EXPECT_NE(text.out.find("EXIT STATUS"), std::string::npos) << text.out;
  }
}

}  // namespace
