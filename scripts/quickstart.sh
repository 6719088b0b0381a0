#!/usr/bin/env bash
# The README's first command: install what is missing, build, and predict the
# default example (Llama-2-7B, data parallel with ZeRO-3/FSDP on one 8-GPU H100 node).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build src/cli/dtsim
exec build/src/cli/dtsim simulate --model llama2-7b --cluster dgx-h100 --strategy fsdp "$@"
