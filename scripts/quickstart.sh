#!/usr/bin/env bash
# The README's first command: install what is missing, build, and predict the
# default example (Llama-2-7B, data parallel with ZeRO-3/FSDP on one 8-GPU H100 node).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
# The CUDA backend (libdtsim_cuda.so) is built where the toolkit is: meson finds nvcc on PATH.
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
[ -f build/build.ninja ] || meson setup build
# Every program the README uses after this one: dtsim, dtsim-calibrate and the benchmark.
ninja -C build src/cli/dtsim calibrate/dtsim-calibrate bench/bench_simulate
exec build/src/cli/dtsim simulate --model llama2-7b --cluster dgx-h100 --strategy fsdp "$@"
