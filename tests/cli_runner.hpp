#pragma once
// Runs the dtsim binary (path in $DTSIM_BIN, set by meson) and captures its output.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout, or stdout and stderr together when merged
};

// Runs a shell command line and captures its stdout (stderr too when it says 2>&1).
inline CliResult run_shell(const std::string& command) {
  CliResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  std::size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline CliResult run_dtsim(const std::string& args, bool merge_stderr = false) {
  const char* bin = std::getenv("DTSIM_BIN");
  return run_shell(std::string(bin ? bin : "dtsim") + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

// Reads Chrome traces with Chrome DevTools' trace engine through
// tests/trace_check.mjs (paths from tests/meson.build; scripts/bootstrap.sh
// installs node and the engine). Exit code 0 when every trace is kept whole.
inline CliResult check_traces_with_devtools(const std::string& paths) {
  const char* node = std::getenv("DTSIM_NODE");
  const char* script = std::getenv("DTSIM_TRACE_CHECK");
  const char* engine = std::getenv("DTSIM_TRACE_ENGINE");
  if (!node || !*node || !script || !engine) {
    return {-1, "node, tests/trace_check.mjs or the trace engine is not set up: run scripts/bootstrap.sh, then meson setup"};
  }
  return run_shell(std::string(node) + " " + script + " " + engine + " " + paths + " 2>&1");
}
