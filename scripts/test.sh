#!/usr/bin/env bash
# The README's second command, and what CI runs: install what is missing,
# build and run every test, then build the tests again with AddressSanitizer
# and UndefinedBehaviorSanitizer and run them once more. The sanitizer half
# runs even when the plain half failed, and the last lines say how each went.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
# The CUDA backend (libdtsim_cuda.so) is built where the toolkit is: meson finds nvcc on PATH.
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
[ -f build/build.ninja ] || meson setup build
plain=passed
meson test -C build --print-errorlogs || plain=failed
# -Og -g1, not the plain build's -O2 -g: with both sanitizers GCC 12 took 197 s
# over src/cli/plan_command.cpp at -O2 -g and 27 s at -Og -g1, and the whole
# sanitized build 64 of a CI run's 90 minutes on 2 cores (2026-12-03). -g1
# keeps the line tables a sanitizer's stack trace names.
[ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbench=disabled \
  -Doptimization=g -Ddebug=false -Dcpp_args=-g1 \
  -Dcuda=disabled -Dwerror=false  # nvcc takes no sanitizer flags; GCC 12 reports false -Wuninitialized inside Boost.Graph headers under ASan
sanitized=passed
# Both suites left out ran above: the notebooks test no C++ of their own, and
# the loop times real kernels, which sanitizers slow tenfold.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs --no-suite notebooks --no-suite loop || sanitized=failed
echo "scripts/test.sh: plain build ${plain}; ASan+UBSan build ${sanitized}"
[ "$plain" = passed ] && [ "$sanitized" = passed ]
