#!/usr/bin/env bash
# Long runs: the same plans validated after tens of seconds of warm-up steps,
# with the GPU at the clocks its power limit holds; once against the
# machine-wide profile (measured hot, after the GEMM grids) and once against
# a fresh short calibration of the plan.
#   tests/gpu/long_runs.sh BIN_DIR OUT_DIR PROFILE
set -uo pipefail
bin=$1 out=$2 profile=$3
mkdir -p "$out"
while read -r model strategy name warmup; do
  for source in machine own; do
    extra=(--profile "$profile")
    [ "$source" = own ] && extra=()
    echo "== $name against the $source profile, $warmup warm-up steps"
    timeout 120 "$bin/dtsim" validate --backend cuda -m "$model" -c dgx-h100 -s "$strategy" --steps 10 --warmup "$warmup" \
      "${extra[@]}" --json >"$out/long-$name-$source.json" 2>"$out/long-$name-$source.err"
    echo "rc $?"
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
  done
done <<'PLANS'
gpt3-1.3b gpus=1,mbs=4,gbs=8,dtype=bf16 gpt1.3b-bf16 60
tests/gpu/llama2-7b-8layers.json gpus=1,mbs=1,gbs=2,dtype=bf16 llama7b8l-bf16 80
PLANS
