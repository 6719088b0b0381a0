#!/usr/bin/env bash
# Long fuzzing runs with libFuzzer (clang from Debian) under ASan+UBSan:
#   scripts/fuzz.sh [seconds per harness, default 300] [harness names...]
# Builds build-fuzz/ with -Dfuzz=enabled, then runs each harness on a copy of
# its seeds (the bundled files and tests/fuzz/<name>/). A crash leaves its
# input as build-fuzz/findings/<name>/crash-*: fix it, then add the input to
# tests/fuzz/<name>/ so the test suite replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
seconds="${1:-300}"
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(workload hf_config cluster strategy quantity profile report launch_config)
[ -f build-fuzz/build.ninja ] || CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=enabled -Dtests=disabled \
  -Dbench=disabled -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false
meson compile -C build-fuzz $(printf 'fuzz_%s ' "${harnesses[@]}")
seeds_of() {
  case "$1" in
    workload) echo workloads tests/fuzz/workload ;;
    cluster) echo topologies tests/fuzz/cluster ;;
    profile) echo devices tests/fuzz/profile ;;
    *) echo "tests/fuzz/$1" ;;
  esac
}
status=0
for h in "${harnesses[@]}"; do
  work="build-fuzz/corpus/$h" findings="build-fuzz/findings/$h"
  mkdir -p "$work" "$findings"
  for d in $(seeds_of "$h"); do cp -n "$d"/* "$work"/ 2>/dev/null || true; done
  echo "fuzz.sh: fuzz_$h for ${seconds} s"
  DTSIM_DATA_DIR="$PWD" UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "build-fuzz/fuzz/fuzz_$h" "$work" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
      -artifact_prefix="$findings/" -print_final_stats=1 2>&1 | tail -n 12 || status=1
done
exit $status
