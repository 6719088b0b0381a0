#pragma once
// A progress bar with the time left, on stderr: redrawn in place on a
// terminal, every 10% as its own line otherwise (a log keeps it readable).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

namespace dtsim::cli {

class ProgressBar {
 public:
  /// `what` names the units counted: "configurations", "clusters planned".
  explicit ProgressBar(std::string what = "configurations")
      : start_(std::chrono::steady_clock::now()), tty_(isatty(STDERR_FILENO) != 0), what_(std::move(what)) {}
  void operator()(std::size_t done, std::size_t total) {
    const int percent = static_cast<int>(100 * done / std::max<std::size_t>(total, 1));
    if (percent == last_percent_ || (!tty_ && percent % 10 != 0)) return;
    last_percent_ = percent;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = done > 0 ? elapsed * static_cast<double>(total - done) / static_cast<double>(done) : 0;
    const int filled = percent / 4;
    std::fprintf(stderr, "%s[%s%s] %3d%%  %zu/%zu %s, %.1f s left%s", tty_ ? "\r" : "",
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(25 - filled), '.').c_str(), percent, done, total, what_.c_str(), left,
                 tty_ && done < total ? "" : "\n");
  }

 private:
  std::chrono::steady_clock::time_point start_;
  bool tty_;
  std::string what_;
  int last_percent_ = -1;
};

}  // namespace dtsim::cli
