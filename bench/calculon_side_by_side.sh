#!/usr/bin/env bash
# One configuration answered by Calculon and by dtsim, side by side on this
# machine: GPT-3 175B on 1024 A100-80GB (tp 8, pp 8, dp 16, global batch
# 1536, micro-batch 1, full recomputation, fp16). Wall time of the whole
# process, median of N runs each, run alternately so load hits both alike.
# Usage: bench/calculon_side_by_side.sh CALCULON_CHECKOUT [N]
#   CALCULON_CHECKOUT: a checkout of github.com/calculon-ai/calculon (not
#   bundled); it needs python3 with numpy, psutil and pandas (Debian:
#   python3-numpy python3-psutil python3-pandas).
set -euo pipefail
calculon=$(cd "$1" && pwd)
runs=${2:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${DTSIM_BIN:-$root/build/src/cli/dtsim}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/execution.json" <<'JSON'
{"num_procs": 1024, "tensor_par": 8, "pipeline_par": 8, "data_par": 16,
 "tensor_par_net": 0, "pipeline_par_net": 1, "data_par_net": 1,
 "batch_size": 1536, "microbatch_size": 1, "datatype": "float16",
 "fused_activation": true, "attention_type": "multihead", "activation_recompute": "full",
 "pipeline_interleaving": 1, "optimizer_sharding": false, "tensor_par_comm_type": "ar",
 "tensor_par_overlap": "none", "seq_par_ag_redo": false, "data_par_overlap": true,
 "weight_offload": false, "activations_offload": false, "optimizer_offload": false, "training": true}
JSON
calculon_cmd=(env PYTHONPATH="$calculon" /usr/bin/python3 "$calculon/bin/calculon" llm
              "$calculon/models/gpt3-175B.json" "$work/execution.json" "$calculon/systems/a100_80g.json" "$work/calculon.json")
dtsim_cmd=(env DTSIM_DATA_DIR="$root" "$dtsim" simulate -m gpt3-175b -c superpod-a100 --nodes 128
           -s tp=8,pp=8,dp=16,gbs=1536,mbs=1,recompute=full,dtype=fp16 --json)
seconds() { local start end; start=$(date +%s.%N); "$@" > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }; end=$(date +%s.%N); echo "$end - $start" | bc -l; }
: > "$work/calculon.times"; : > "$work/dtsim.times"
for _ in $(seq "$runs"); do
  seconds "${calculon_cmd[@]}" >> "$work/calculon.times"
  seconds "${dtsim_cmd[@]}" >> "$work/dtsim.times"
done
"${dtsim_cmd[@]}" > "$work/dtsim.json"
python3 - "$work" "$runs" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
median = {t: statistics.median(float(x) for x in open(f"{work}/{t}.times")) for t in ("calculon", "dtsim")}
calculon_step = json.load(open(f"{work}/calculon.json"))["total_time"]
dtsim_step = json.load(open(f"{work}/dtsim.json"))["step_time_s"]
print(f"GPT-3 175B, 1024 A100s, tp 8 pp 8 dp 16, gbs 1536: whole process, median of {runs} runs each")
print(f"  Calculon llm   {median['calculon'] * 1e3:8.1f} ms   (predicts a {calculon_step:.2f} s step)")
print(f"  dtsim simulate {median['dtsim'] * 1e3:8.1f} ms   (predicts a {dtsim_step:.2f} s step)")
print(f"  dtsim takes {median['dtsim'] / median['calculon']:.2f}x Calculon's time")
PY
