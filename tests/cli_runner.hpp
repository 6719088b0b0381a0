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
