#!/usr/bin/env python3
"""Writes notebooks/*.ipynb (nbformat 4) from the cells below. Run from the
repo root after editing; CI executes every notebook (scripts/run_notebooks.sh)."""
import json

SETUP = '''import os, sys
# dtsim's Python module: installed (meson install), or the one built in ../build.
sys.path.insert(0, os.environ.get("DTSIM_PYTHONPATH", os.path.join("..", "build", "src", "python")))
import dtsim
import matplotlib.pyplot as plt
%matplotlib inline'''

NOTEBOOKS = {
  "01_data_parallel_and_allreduce": [
    ("md", "# Data parallelism and all-reduce\n\nEvery data-parallel rank holds the model and computes gradients on its own samples; "
           "the gradients are then averaged with an **all-reduce**. How long that takes depends on the algorithm and on the "
           "fabric. This notebook uses `dtsim collective` (nccl-tests-style costs) and `dtsim simulate`."),
    ("code", SETUP),
    ("md", "## Ring, tree and halving-doubling across nodes\n\nOne GPU per node of an H100 SuperPOD, 1 GiB and 8 KiB buffers. "
           "The ring moves the least data but pays 2(n-1) latencies; tree and halving-doubling pay about 2·log2(n)."),
    ("code", '''groups = [2, 4, 8, 16, 32, 64, 128]
algorithms = ["ring", "tree", "halving_doubling"]
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for algorithm in algorithms:
    big, small = [], []
    for n in groups:
        rows = dtsim.collective("superpod-h100", "all_reduce", group=8 * n, sizes="8KiB:1GiB",
                                algorithm=algorithm)["rows"]
        small.append(rows[0]["time_s"] * 1e6)
        big.append(rows[-1]["busbw_GBps"])
    axes[0].plot([8 * n for n in groups], big, marker="o", label=algorithm)
    axes[1].plot([8 * n for n in groups], small, marker="o", label=algorithm)
axes[0].set(xscale="log", xlabel="GPUs", ylabel="bus bandwidth, 1 GiB (GB/s)", title="bandwidth-bound")
axes[1].set(xscale="log", xlabel="GPUs", ylabel="time, 8 KiB (us)", title="latency-bound")
axes[0].legend(); plt.tight_layout(); plt.show()'''),
    ("md", "## Synchronous all-reduce against asynchronous parameter servers\n\nFour GPUs, one of them slower. "
           "Synchronous training (DDP, or a PS that waits) runs at the pace of the slowest worker; asynchronous workers "
           "do not wait, at the price of stale gradients."),
    ("code", '''speeds = [1.0, 0.75, 0.5, 0.25]
results = {"ddp": [], "parameter_server,sync=on": [], "parameter_server": []}
for s in speeds:
    for strategy in results:
        layout = ",ps=4,gpus=4,mbs=256,dtype=fp16" if "parameter" in strategy else ",gpus=4,mbs=256,dtype=fp16"
        r = dtsim.simulate("resnet50", "dgx-a100", strategy + layout, worker_speed=[1, 1, 1, s])
        results[strategy].append(r["samples_per_s"])
for strategy, values in results.items():
    plt.plot(speeds, values, marker="o", label=strategy)
plt.xlabel("speed of the slowest GPU"); plt.ylabel("samples/s"); plt.legend(); plt.show()
stale = dtsim.simulate("resnet50", "dgx-a100", "parameter_server,ps=4,gpus=4,mbs=256,dtype=fp16")
print("staleness histogram (updates stale : pushes):", stale["parameter_server"]["staleness"]["histogram"])'''),
    ("md", "## Exercises\n\n1. At which buffer size does the tree stop beating the ring on 128 nodes? Use `--sizes 1KiB:1GiB`.\n"
           "2. Halve the inter-node bandwidth (copy `topologies/superpod-h100.json`, set `nic_bandwidth`) and redo the first plot.\n"
           "3. With 16 asynchronous workers, how does the staleness histogram change? What would that do to convergence?"),
  ],
  "02_tensor_parallelism": [
    ("md", "# Tensor parallelism and where it stops paying\n\nMegatron splits every layer over `tp` GPUs and all-reduces "
           "activations four times per layer and micro-batch. Inside an NVSwitch node that is cheap; across nodes it is not."),
    ("code", SETUP),
    ("code", '''tps = [1, 2, 4, 8, 16]
step, tp_share, memory = [], [], []
for tp in tps:
    r = dtsim.simulate("llama2-7b", "dgx-h100",
                       f"tp={tp},gpus=16,gbs=32" + (",zero=1" if 16 // tp > 1 else "") + (",sp=on" if tp > 1 else ""),
                       nodes=2)
    step.append(r["step_time_s"]); memory.append(r["memory"]["peak_bytes"] / 2**30)
    tp_share.append(r["breakdown"]["exposed_comm_s"]["tp"] / r["step_time_s"])
fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].plot(tps, step, marker="o"); axes[0].set(xlabel="tp", ylabel="step time (s)")
axes[1].plot(tps, [100 * s for s in tp_share], marker="o"); axes[1].set(xlabel="tp", ylabel="exposed tp comm (% of step)")
axes[2].plot(tps, memory, marker="o"); axes[2].set(xlabel="tp", ylabel="peak memory per GPU (GiB)")
plt.tight_layout(); plt.show()
print("tp=16 spans two nodes: its all-reduces leave NVLink for InfiniBand.")'''),
    ("md", "## Exercises\n\n1. Turn sequence parallelism off (`sp=off`): what changes in memory, and in time?\n"
           "2. Repeat with `gpt3-175b` on 64 GPUs: which tp is fastest once the model needs it to fit?\n"
           "3. Use `--explain`: what would doubling NVLink bandwidth buy at tp=8?"),
  ],
  "03_pipeline_bubbles": [
    ("md", "# Pipeline bubbles: GPipe, 1F1B and interleaved\n\nWith p stages and m micro-batches, GPipe and 1F1B idle "
           "a fraction (p-1)/(m+p-1) of the step; the interleaved schedule with v chunks per stage cuts it to "
           "(p-1)/(v·m+p-1). 1F1B holds fewer activations than GPipe."),
    ("code", SETUP),
    ("code", '''p = 4
ms = [4, 8, 16, 32]
runs = {}
for label, extra in [("gpipe", ",schedule=gpipe"), ("1f1b", ""), ("interleaved v=2", ",vpp=2")]:
    runs[label] = [dtsim.simulate("gpt3-1.3b", "dgx-a100", f"gpus={p},pp={p},gbs={m}{extra}") for m in ms]
    plt.plot(ms, [r["breakdown"]["bubble_s"] / r["step_time_s"] for r in runs[label]], marker="o", label=label)
plt.plot(ms, [(p - 1) / (m + p - 1) for m in ms], "k--", label="(p-1)/(m+p-1)")
plt.plot(ms, [(p - 1) / (2 * m + p - 1) for m in ms], "k:", label="(p-1)/(2m+p-1)")
plt.xlabel("micro-batches m"); plt.ylabel("idle share of the step"); plt.legend(); plt.show()'''),
    ("md", "## Why the simulated bubble sits below the closed form\n\n"
           "The closed form assumes p equal stages. Here the last stage also runs the head and the loss over a "
           "50,257-token vocabulary, so it is the slowest, and the breakdown reports it (`breakdown.rank`). On the "
           "slowest stage the bubble is the time the *other* stages need to fill and drain the pipeline, B, and it does "
           "not depend on m; its own work is m·T with T its time per micro-batch. So the idle share is B / (m·T + B), "
           "which is (p-1)/(m+p-1) only when B = (p-1)·T. The cell takes B and T from the m = 4 run alone and "
           "predicts the other runs with that form."),
    ("code", '''first = runs["1f1b"][0]
B = first["breakdown"]["bubble_s"]
T = first["breakdown"]["compute_s"] / ms[0]
print(f"B = {B * 1e3:.1f} ms, T = {T * 1e3:.1f} ms: B/T = {B / T:.2f} where equal stages give p-1 = {p - 1}")
for m, r in zip(ms, runs["1f1b"]):
    simulated = r["breakdown"]["bubble_s"] / r["step_time_s"]
    predicted = B / (m * T + B)
    print(f"m={m:2}: simulated {simulated:.4f}, B/(mT+B) {predicted:.4f}, (p-1)/(m+p-1) {(p - 1) / (m + p - 1):.4f}")
    # The rest of the step (the optimizer, pipeline transfers) is what is left between the two.
    assert abs(simulated - predicted) < 0.01, (m, simulated, predicted)
v2 = runs["interleaved v=2"][0]["breakdown"]["bubble_s"]
print(f"interleaving with v=2 takes the bubble from {B * 1e3:.1f} ms to {v2 * 1e3:.1f} ms ({v2 / B:.2f}x; 1/v = 0.5)")'''),
    ("code", '''for schedule in ["gpipe", "1f1b"]:
    r = dtsim.simulate("gpt3-1.3b", "dgx-a100", f"gpus=4,pp=4,gbs=16,schedule={schedule}")
    print(schedule, [round(s["activations_bytes"] / 2**30, 2) for s in r["memory"]["per_stage"]], "GiB of activations per stage")'''),
    ("md", "## Exercises\n\n1. Which ops of the last stage make B/T fall short of p-1? Look at its lane in "
           "`dtsim.simulate(..., report=\"out.html\")`, and estimate the head's share from its FLOPs.\n"
           "2. Try `vpp=4`. What does interleaving cost in point-to-point transfers?\n"
           "3. Why does stage i of 1F1B hold p-i micro-batches?"),
  ],
  "04_memory_zero_recompute": [
    ("md", "# Memory: ZeRO stages, recomputation, and what fits\n\nWeights, gradients and Adam's state cost 2 + 2 + 12 bytes "
           "per parameter in mixed precision; ZeRO shards them over data-parallel ranks; recomputation trades FLOPs for "
           "activation memory."),
    ("code", SETUP),
    ("code", '''zeros = [0, 1, 2, 3]
recomputes = ["none", "full"]
width = 0.38
for i, recompute in enumerate(recomputes):
    peaks = []
    for z in zeros:
        r = dtsim.simulate("llama2-7b", "dgx-h100", f"zero={z},mbs=2,gbs=16,recompute={recompute}")
        peaks.append(r["memory"]["peak_bytes"] / 2**30)
        capacity = r["memory"]["capacity_bytes"] / 2**30
    plt.bar([z + (i - 0.5) * width for z in zeros], peaks, width, label=f"recompute={recompute}")
plt.axhline(capacity, color="red", linestyle="--", label="H100 80 GB")
plt.xticks(zeros, [f"ZeRO-{z}" for z in zeros]); plt.ylabel("peak memory per GPU (GiB)"); plt.legend()
plt.show()'''),
    ("md", "## Exercises\n\n1. Which is the cheapest (fastest) configuration that fits? Compare `step_time_s`.\n"
           "2. Switch to `attention=standard`: how much do the s×s attention scores weigh at seq_len 4096?\n"
           "3. Use `dtsim search --model llama2-7b --cluster dgx-h100 --gbs 16` and compare with your answer."),
  ],
  "05_capacity_planning": [
    ("md", "# Capacity planning for a model of your choice\n\nSet `MODEL` to any bundled workload (see `dtsim list`) or "
           "a Hugging Face `config.json`, and `TOKENS` to your training budget. dtsim finds the fastest fitting strategy "
           "for each GPU type and count. Prices are examples: pass your own with `--price`."),
    ("code", SETUP),
    ("code", '''MODEL = "llama3-8b"
TOKENS = 1e12
plan = dtsim.plan(MODEL, TOKENS, gbs=512, devices="A100-SXM-80GB,H100-SXM,B200", gpus="64,256")
for device in sorted({r["device"] for r in plan["rows"]}):
    rows = [r for r in plan["rows"] if r["device"] == device and r["fits"]]
    plt.plot([r["gpus"] for r in rows], [r["days"] for r in rows], marker="o", label=device)
plt.xscale("log"); plt.xlabel("GPUs"); plt.ylabel("days to train"); plt.legend(); plt.show()
for r in plan["rows"]:
    print(f'{r["device"]:15} {r["gpus"]:5}  {r["days"]:7.1f} days  {r["gpu_hours"]:10.0f} GPU-h  ${r["cost_usd"] or 0:,.0f}')'''),
    ("md", "## Exercises\n\n1. Which option is cheapest, and which is fastest? When would you pick each?\n"
           "2. Put in the prices you can actually get (`--price H100-SXM=...`).\n"
           "3. The plan is uncalibrated and optimistic (see the README's Llama-2 check). How would you correct for that?"),
  ],
}


def cell(kind, text):
    lines = text.split("\n")
    source = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    if kind == "md":
        return {"cell_type": "markdown", "metadata": {}, "source": source}
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


for name, cells in NOTEBOOKS.items():
    doc = {"cells": [cell(k, t) for k, t in cells],
           "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                        "language_info": {"name": "python"}},
           "nbformat": 4, "nbformat_minor": 5}
    with open(f"notebooks/{name}.ipynb", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
print(f"wrote {len(NOTEBOOKS)} notebooks")
