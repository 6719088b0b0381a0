#!/usr/bin/env bash
# The README's first command: install what is missing, build, and predict the
# default example (Llama-2-7B, data parallel with ZeRO-3/FSDP on one 8-GPU H100 node).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
[ -f build/build.ninja ] || meson setup build
# Every program the README uses after this one: dtsim, dtsim-calibrate and the benchmark.
ninja -C build src/cli/dtsim calibrate/dtsim-calibrate bench/bench_simulate
exec build/src/cli/dtsim simulate --model llama2-7b --cluster dgx-h100 --strategy fsdp "$@"
