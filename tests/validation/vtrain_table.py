#!/usr/bin/env python3
"""Writes tests/validation/vtrain-runs.json: the 109 multi-node training runs
vTrain's authors measured on A100s to validate their simulator
(VIA-Research/vTrain, data/ground_truth_multi.csv at f8dda84, MIT licence),
with the all-reduce tables over 2, 4 and 8 GPUs the same repository measured
on one of its nodes (trace/a100/AR_GPU{2,4,8}_1M_1024M_LUT).

    tests/validation/vtrain_table.py VTRAIN_GIT_DIR > tests/validation/vtrain-runs.json

The runs are GPT models trained with Microsoft's Megatron-DeepSpeed
(data/README.md); every validation config of the repository sets
activation checkpointing, no gradient bucketing, the 1F1B schedule, 8 GPUs a
node, 800 Gb/s between nodes and 150 GB/s inside one
(config/validation/multi/*.json). The figures are the source's: nothing is
derived here.
"""
import collections
import csv
import io
import json
import subprocess
import sys

COMMIT = "f8dda8473a48b373b1d25f51f52d685bff5150c5"
RUNS = "data/ground_truth_multi.csv"
LUT = "trace/a100/AR_GPU{}_1M_1024M_LUT"


def show(git_dir, path):
    return subprocess.run(["git", "-C", git_dir, "show", f"{COMMIT}:{path}"], check=True, capture_output=True,
                          text=True).stdout.lstrip("\ufeff")


def runs(git_dir):
    """The rows in the file's order; a layout measured twice keeps both, the second as repeat 2."""
    out = []
    seen = collections.Counter()
    for r in csv.DictReader(io.StringIO(show(git_dir, RUNS))):
        out.append({"params_b": float(r["Parameters (billion)"]), "gpus": int(r["# GPUs"]),
                    "gbs": int(r["global batch"]), "mbs": int(r["micro batch"]), "hidden": int(r["hidden size"]),
                    "heads": int(r["attention heads"]), "layers": int(r["# layers"]),
                    "seq_len": int(r["sequence length"]), "tp": int(r["tensor parallelism"]),
                    "dp": int(r["data parallelism"]), "pp": int(r["pipeline parallelism"]),
                    "iteration_ms": float(r["iteration time (ms)"])})
        layout = tuple(out[-1][key] for key in ("params_b", "tp", "dp", "pp", "mbs", "gbs"))
        seen[layout] += 1
        if seen[layout] > 1:
            out[-1]["repeat"] = seen[layout]
    return out


def all_reduce(git_dir, gpus):
    """Every 64 MiB of the table's 1 MiB steps: size, out-of-place time and busbw."""
    rows = list(csv.reader(io.StringIO(show(git_dir, LUT.format(gpus)))))[1:]
    picked = [r for r in rows if int(r[0]) % (64 << 20) == 0 or int(r[0]) in (1 << 20, 8 << 20, 16 << 20, 32 << 20)]
    return [{"bytes": int(r[0]), "time_us": int(r[3]) / 1000, "busbw_GBps": float(r[4])} for r in picked]


def main():
    git_dir = sys.argv[1]
    print(json.dumps({
        "about": "vTrain's measured training runs on A100s (Bang et al., vTrain: A Simulation Framework for Evaluating "
                 "Cost-effective and Compute-optimal Large Language Model Training, MICRO 2024, arXiv:2312.12391): "
                 "GPT models on Microsoft's Megatron-DeepSpeed, iteration time in milliseconds at the row's layout. "
                 "Written by tests/validation/vtrain_table.py; nothing derived.",
        "source": {"repo": "VIA-Research/vTrain", "commit": COMMIT[:7], "file": RUNS,
                   "settings": "config/validation/multi/*.json: use_checkpoint true, use_gradient_bucket false, "
                               "pipeline_scheduling 1f1b, node_size 8, inter_node_bandwidth 800 (Gb/s), "
                               "intra_node_bandwidth 150 (GB/s); data/README.md: Megatron-DeepSpeed; "
                               "docker/Dockerfile: CUDA 11.8, PyTorch 2.0.1"},
        "all_reduce": {"file": LUT.format("{2,4,8}"),
                       "note": "nccl-tests-style table of float all-reduce inside one of the run's nodes; the "
                               "out-of-place columns",
                       "by_gpus": {str(g): all_reduce(git_dir, g) for g in (2, 4, 8)}},
        "rows": runs(git_dir)}, indent=1))


if __name__ == "__main__":
    main()
