#include "dtsim/core/data_dir.hpp"

#include <cstdlib>
#include <system_error>

namespace dtsim::core {
namespace {

// An installed binary finds its data beside it, <prefix>/<bindir>/dtsim next to
// <prefix>/<datadir>/dtsim, wherever the prefix was moved to (a --destdir
// staging folder, a tarball). A binary in the build tree has no such folder.
std::filesystem::path installed_data_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const std::filesystem::path prefix = DTSIM_INSTALL_PREFIX, bindir = DTSIM_INSTALL_BINDIR,
                              datadir = DTSIM_INSTALL_DATADIR;
  std::filesystem::path candidate;
  if (bindir.is_relative() && datadir.is_relative()) {
    std::filesystem::path moved_prefix = exe.parent_path();
    for (auto it = bindir.begin(); it != bindir.end(); ++it) moved_prefix = moved_prefix.parent_path();
    candidate = moved_prefix / datadir / "dtsim";
  } else {
    // Absolute folders cannot move: only a binary in the configured bindir is the installed one.
    if (exe.parent_path() != prefix / bindir) return {};
    candidate = prefix / datadir / "dtsim";
  }
  if (!std::filesystem::exists(candidate / "devices" / "datasheets.json", ec)) return {};
  return candidate;
}

}  // namespace

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("DTSIM_DATA_DIR"); env && *env) return env;
  if (std::filesystem::path installed = installed_data_dir(); !installed.empty()) return installed;
  return DTSIM_SOURCE_DIR;
}

}  // namespace dtsim::core
