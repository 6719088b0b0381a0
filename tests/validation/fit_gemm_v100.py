#!/usr/bin/env python3
"""Fit the V100's GEMM shape figures (devices/V100-SXM2-32GB.json,
kernel_model.gemm: the 128x128, 128x64 and 64x64 tiles' efficiencies and
pipeline_k) to the cuBLAS GEMMs of Baidu DeepBench's V100 table
(tests/validation/deepbench-v100.json), and print them.

    tests/validation/fit_gemm_v100.py          # fit, print the figures and the error
    tests/validation/fit_gemm_v100.py --check  # the error of the committed figures

The model is dtsim's (hw::KernelModel::gemm_at), as tests/validation/fit_gemm.py
writes it for the H100, without stream-K (Volta's cuBLAS has none): waves of
tiles over the 80 SMs at (k + pipeline_k) per tile and the tile's efficiency,
anchored on the table's fastest GEMM (the device file's anchor), never faster
than its rate, HBM-bound when the operands' bytes take longer. The table's
times are kernel calls averaged over 400 back-to-back runs, so the 4 us
launch is part of what they measured. It minimises the mean
|log(predicted / measured)| over the rows of training size (2 GFLOP or more,
both output sides 128 or more; all transposes, which the model does not
tell apart) by coordinate descent from the estimates the figures had before
(0.9, 0.75, 0.55, 128); standard library only (tests/validation/gemm_model.py).
"""
import json
import math
import sys

import gemm_model

ROOT = gemm_model.ROOT
DEVICE = gemm_model.Device("V100-SXM2-32GB")
ESTIMATES = {"efficiency_128x128": 0.9, "efficiency_128x64": 0.75, "efficiency_64x64": 0.55, "pipeline_k": 128}


def rows():
    table = json.loads((ROOT / "tests/validation/deepbench-v100.json").read_text())["rows"]
    return [(r["m"], r["n"], r["k"], r["ms"] * 1e-3) for r in table
            if 2.0 * r["m"] * r["n"] * r["k"] >= 2e9 and min(r["m"], r["n"]) >= 128]


def tiles(p):
    return [(256, 128, 1.0), (128, 128, p["efficiency_128x128"]), (128, 64, p["efficiency_128x64"]),
            (64, 64, p["efficiency_64x64"])]


def model_seconds(p, m, n, k):
    return gemm_model.seconds(tiles(p), DEVICE.sms, p["pipeline_k"], 0.0, DEVICE.anchor("fp16"), DEVICE.hbm_bytes_per_s,
                              m, n, k)


def errors(p):
    return gemm_model.log_errors(lambda m, n, k: model_seconds(p, m, n, k), rows())


def loss(p):
    e = errors(p)
    return sum(abs(x) for x in e) / len(e)


def fit():
    bounds = {"efficiency_128x128": (0.5, 1.0), "efficiency_128x64": (0.3, 1.0), "efficiency_64x64": (0.2, 1.0),
              "pipeline_k": (0, 2048)}
    step = {"efficiency_128x128": 0.05, "efficiency_128x64": 0.05, "efficiency_64x64": 0.05, "pipeline_k": 64}
    return gemm_model.descend(loss, ESTIMATES, bounds, step, rounds=60)


def committed():
    by_shape = {(t["m"], t["n"]): t["efficiency"] for t in DEVICE.gemm["tiles"]}
    return {"efficiency_128x128": by_shape[(128, 128)], "efficiency_128x64": by_shape[(128, 64)],
            "efficiency_64x64": by_shape[(64, 64)], "pipeline_k": DEVICE.gemm["pipeline_k"]}


def report(p):
    e = errors(p)
    signed = sum(e) / len(e)
    print(json.dumps(p))
    print(f"{len(e)} GEMMs: mean |error| {100 * loss(p):.1f}% (signed {100 * (math.exp(signed) - 1):+.1f}%, + slow), "
          f"worst {100 * max(abs(x) for x in e):.1f}%")


if __name__ == "__main__":
    report(committed() if "--check" in sys.argv else fit())
