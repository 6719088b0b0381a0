#!/usr/bin/env bash
# The one-GPU checks of what frameworks do beside dtsim's own kernels, in one
# batch for a GPU session (each writes its JSON as soon as it ends):
#   tests/gpu/framework_checks.sh OUT_DIR
# - gemm_beside_blocks.py: a cuBLAS GEMM beside a kernel that holds c SMs;
# - host_launch.py: PyTorch eager's host time per launch, a launch-bound step;
# - pytorch_steps.py: eager PyTorch training steps of dtsim model files, with
#   their kernels (tests/gpu/summarize_steps.py puts dtsim's prediction beside them);
# - unfused_attention.py: unfused attention's kernels one by one (batched GEMMs in
#   two layouts, softmax, mask, dropout, copies; tests/gpu/summarize_unfused.py
#   puts dtsim's kernel model beside each).
set -uo pipefail
out=${1:-gpu-framework}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
echo "== pytorch_steps"
timeout 240 python3 tests/gpu/pytorch_steps.py tests/gpu/gpt-125m.json:8 workloads/gpt3-1.3b.json:4 \
  tests/gpu/llama2-7b-8layers.json:1 >"$out/pytorch-steps.json"
echo "rc $?"
echo "== host_launch"
timeout 90 python3 tests/gpu/host_launch.py >"$out/host-launch.json"
echo "rc $?"
echo "== gemm_beside_blocks"
timeout 120 python3 tests/gpu/gemm_beside_blocks.py >"$out/gemm-beside-blocks.json"
echo "rc $?"
echo "== unfused_attention"
timeout 180 python3 tests/gpu/unfused_attention.py >"$out/unfused-attention.json"
echo "rc $?"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >>"$out/nvidia-smi.txt" 2>&1
