#!/usr/bin/env bash
# The GPU validation, run on a machine with an NVIDIA GPU: calibrate the GPU
# (dtsim-calibrate --backend cuda), validate one-GPU plans from 125M to
# 7B-sized layers in bf16 and fp8, with and without recomputation (dtsim
# validate --backend cuda: each calibrates the plan's own GEMM calls, runs it
# and reports the error, the uncalibrated prediction's beside it), and run the
# GPU tests. Everything lands in OUT_DIR; tests/gpu/summarize.py makes the table.
#   tests/gpu/run_on_gpu.sh [BIN_DIR (dtsim, dtsim-calibrate, test_gpu_backend)] [OUT_DIR] [PLANS_FILE]
# With PLANS_FILE (lines of "model strategy name"), only those plans are validated.
set -uo pipefail
bin=${1:-build}
out=${2:-gpu-results}
plans_file=${3:-}
mkdir -p "$out"
export DTSIM_DATA_DIR=${DTSIM_DATA_DIR:-$PWD}
dtsim=$bin/dtsim
[ -x "$dtsim" ] || dtsim=$bin/src/cli/dtsim
calibrate=$bin/dtsim-calibrate
[ -x "$calibrate" ] || calibrate=$bin/calibrate/dtsim-calibrate
tests=$bin/test_gpu_backend
[ -x "$tests" ] || tests=$bin/tests/test_gpu_backend

nvidia-smi >"$out/nvidia-smi.txt" 2>&1
cluster=dgx-h100
grep -q "H200" "$out/nvidia-smi.txt" && cluster=hgx-h200
echo "cluster $cluster" | tee "$out/cluster.txt"

# The plans: model, strategy, a name for the files.
plans="tests/gpu/gpt-125m.json gpus=1,mbs=8,gbs=16,dtype=bf16 gpt125m-bf16
tests/gpu/gpt-125m.json gpus=1,mbs=8,gbs=16,dtype=bf16,recompute=full gpt125m-bf16-recompute
gpt3-1.3b gpus=1,mbs=4,gbs=8,dtype=bf16 gpt1.3b-bf16
gpt3-1.3b gpus=1,mbs=1,gbs=8,dtype=bf16 gpt1.3b-bf16-mbs1
gpt3-1.3b gpus=1,mbs=4,gbs=8,dtype=fp8 gpt1.3b-fp8
gpt3-1.3b gpus=1,mbs=4,gbs=8,dtype=bf16,recompute=full gpt1.3b-bf16-recompute
tests/gpu/llama2-7b-8layers.json gpus=1,mbs=1,gbs=2,dtype=bf16 llama7b8l-bf16
tests/gpu/llama2-7b-8layers.json gpus=1,mbs=1,gbs=2,dtype=fp8 llama7b8l-fp8
tests/gpu/llama2-7b-8layers.json gpus=1,mbs=2,gbs=4,dtype=bf16,recompute=full llama7b8l-bf16-recompute"
[ -n "$plans_file" ] && plans=$(cat "$plans_file")
while read -r model strategy name; do
  echo "== $name: $model $strategy"
  timeout 150 "$dtsim" validate --backend cuda -m "$model" -c "$cluster" -s "$strategy" --steps 5 --warmup 2 \
    --save-profile "$out/profile-$name.json" --trace "$out/trace-$name.json" --json >"$out/validate-$name.json" \
    2>"$out/validate-$name.err"
  echo "rc $?"
  cat "$out/validate-$name.err"
done <<<"$plans"

[ -n "$plans_file" ] && exit 0
echo "== dtsim-calibrate --backend cuda"
NCCL_DEBUG=WARN timeout 240 "$calibrate" --backend cuda -o "$out/profile.json" 2>&1 | tee "$out/calibrate.log"
echo "== GPU tests"
timeout 180 "$tests" 2>&1 | tee "$out/tests.log" | tail -25
