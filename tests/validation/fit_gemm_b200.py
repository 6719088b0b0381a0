#!/usr/bin/env python3
"""Fit the B200's GEMM shape figures (devices/B200.json, kernel_model.gemm:
the 128x256 and 256x128, 128x128 and 64x128 tiles' efficiencies,
pipeline_k and stream_k_efficiency) to OpenXLA's matmul table for sm_100
(tests/validation/xla-sm100-gemm.json: bf16 GEMMs of m, n, k in 1024..4096,
median CUPTI kernel times), and print them.

    tests/validation/fit_gemm_b200.py          # fit, print the figures and the error
    tests/validation/fit_gemm_b200.py --check  # the error of the committed figures

The model is dtsim's (hw::KernelModel::gemm_at), as tests/validation/fit_gemm.py
writes it for the H100: waves of tiles over the 148 SMs at (k + pipeline_k)
per tile and the tile's efficiency, or stream-K's even split at
stream_k_efficiency; never faster than its anchor; HBM-bound when the
operands' bytes take longer; plus its 4 us launch. XLA's CUPTI kernel times
and the calls dtsim-calibrate timed on an H100 agree (1024^3: 8.7 and 8.2 us;
4096^3: 174.9 and 177.9 us), and the sm_90 half of the table agrees with
dtsim's H100 figures within 3.5% on average over ten shapes
(tests/validation/xla-sm90-gemm.json), so the
sm_100 half can set the B200's. As fit_gemm.py does for a grid measured on
another GPU than the published anchor's, the fit anchors on the table's own
fastest point (4096^3, 1416.9 TFLOP/s) and fits how far the other shapes
fall below it; the device file keeps the published anchor (1745 TFLOP/s at
1792 x 16128 x 3072) for the level. Against that level the table's GEMMs run
7% slower than the model: the two sources' GPUs (or their kernels) differ by
that much, which no shape figure can take. It minimises the mean
|log(predicted / measured)| by coordinate descent; standard library only.
--check also reports the table's FP8 GEMMs, which the fit does not see,
with FP8 tiles paying the 16-bit tile's fixed part in time (twice the k
iterations: gemm_model.Device.pipeline_k, as hw::KernelModel counts it).
"""
import json
import math
import sys

import gemm_model

ROOT = gemm_model.ROOT
DEVICE = gemm_model.Device("B200")
ESTIMATES = {"efficiency_128x256": 0.95, "efficiency_128x128": 0.85, "efficiency_64x128": 0.65, "pipeline_k": 128,
             "stream_k_efficiency": 0.9}


def rows(dtype="bf16"):
    table = json.loads((ROOT / "tests/validation/xla-sm100-gemm.json").read_text())["rows"]
    key = "bf16_tflops" if dtype == "bf16" else "fp8_e4m3_tflops"
    return [(r["m"], r["n"], r["k"], 2.0 * r["m"] * r["n"] * r["k"] / (r[key] * 1e12)) for r in table]


def tiles(p):
    return [(256, 256, 1.0), (128, 256, p["efficiency_128x256"]), (256, 128, p["efficiency_128x256"]),
            (128, 128, p["efficiency_128x128"]), (64, 128, p["efficiency_64x128"])]


def published_anchor(dtype="bf16"):
    """The device file's anchor: (m, n, k, FLOP/s)."""
    return DEVICE.anchor(dtype)


def model_seconds(p, m, n, k, dtype="bf16", anchor=None):
    """The model's time, launch included, on the table's fastest point unless an anchor is given."""
    return gemm_model.seconds(tiles(p), DEVICE.sms, DEVICE.pipeline_k(p["pipeline_k"], dtype), p["stream_k_efficiency"],
                              anchor or gemm_model.fastest(rows(dtype)), DEVICE.hbm_bytes_per_s, m, n, k,
                              operand_bytes=2 if dtype == "bf16" else 1)


def errors(p, dtype="bf16", anchor=None):
    return gemm_model.log_errors(lambda m, n, k: model_seconds(p, m, n, k, dtype, anchor), rows(dtype))


def loss(p):
    e = errors(p)
    return sum(abs(x) for x in e) / len(e)


def fit():
    bounds = {"efficiency_128x256": (0.5, 1.0), "efficiency_128x128": (0.3, 1.0), "efficiency_64x128": (0.2, 1.0),
              "pipeline_k": (0, 4096), "stream_k_efficiency": (0.3, 1.0)}
    step = {"efficiency_128x256": 0.05, "efficiency_128x128": 0.05, "efficiency_64x128": 0.05, "pipeline_k": 128,
            "stream_k_efficiency": 0.05}
    return gemm_model.descend(loss, ESTIMATES, bounds, step, rounds=80)


def committed(device="B200"):
    """The figures devices/<device>.json holds, by the fit's names."""
    gemm = gemm_model.Device(device).gemm
    by_shape = {(t["m"], t["n"]): t["efficiency"] for t in gemm["tiles"]}
    return {"efficiency_128x256": by_shape[(128, 256)], "efficiency_128x128": by_shape[(128, 128)],
            "efficiency_64x128": by_shape[(64, 128)], "pipeline_k": gemm["pipeline_k"],
            "stream_k_efficiency": gemm["stream_k_efficiency"]}


def report(p):
    print(json.dumps(p))
    for dtype in ("bf16", "fp8"):
        for name, anchor in (("on the table's fastest point", None),
                             ("on the device file's anchor", published_anchor(dtype))):
            e = errors(p, dtype, anchor)
            signed = sum(e) / len(e)
            print(f"{dtype}, {name}: {len(e)} GEMMs, mean |error| {100 * sum(abs(x) for x in e) / len(e):.1f}% "
                  f"(signed {100 * (math.exp(signed) - 1):+.1f}%, + slow), worst {100 * max(abs(x) for x in e):.1f}%")


if __name__ == "__main__":
    report(committed() if "--check" in sys.argv else fit())
