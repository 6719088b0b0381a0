#!/usr/bin/env python3
"""Fit the A100's FlashAttention (version 1) figures to the kernel's bars in
FlashAttention-2's own benchmark image, and print them.

    tests/validation/fit_flash1.py   # tests/validation/flash-attention-2-figures.json

How devices/A100-SXM-80GB.json and A100-SXM-40GB.json set `flash1`. The
bars are forward+backward (the repository has no image of the passes apart),
so they fix the sum of the two passes' time and not the split: the backward
keeps the FlashAttention-2 figures' backward-to-forward ratio on the same
device. The model is dtsim's (fit_attention.rate_tflops) at the A100's 16-bit
dense peak; the fit minimises the mean |log(predicted / measured)| by
coordinate descent, the head-size knee held at 0 or more. Standard library only.
"""
import json
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import fit_attention  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEVICE = "A100-SXM-80GB"
FREE = ["forward_utilization", "ramp_tokens", "head_dim_knee", "causal_efficiency"]


def peak_tflops():
    sheets = json.loads((ROOT / "devices/datasheets.json").read_text())["devices"]
    return next(d for d in sheets if d["name"] == DEVICE)["peak_tflops"]["fp16"]


def flash2_backward_ratio():
    figures = json.loads((ROOT / f"devices/{DEVICE}.json").read_text())["kernel_model"]["attention"]["kernels"]
    flash2 = next(k for k in figures if k["name"] == "flash2")
    return flash2["backward_utilization"] / flash2["forward_utilization"]


def points():
    """(seq, head_dim, causal, sequences x heads, forward+backward TFLOP/s) of the FlashAttention bars."""
    figures = json.loads((ROOT / "tests/validation/flash-attention-2-figures.json").read_text())
    for s in figures["series"]:
        if s["device"] == DEVICE and s["kernel"] == "flash1":
            for seq, tflops in zip(figures["sequence_lengths"], s["tflops"]):
                if tflops is not None:
                    yield seq, s["head_dim"], s["causal"], (2048 // s["head_dim"]) * (16384 // seq), tflops


def forward_backward_tflops(k, peak, seq, head_dim, causal, sequences_x_heads):
    """3.5 forward FLOPs over the two passes' time, as the image counts them."""
    keys = seq / 2 if causal else seq
    forward_flops = 4.0 * sequences_x_heads * seq * keys * head_dim
    time = sum(forward_flops * (2.5 if backward else 1.0) /
               fit_attention.rate_tflops(k, seq, head_dim, causal, backward, sequences_x_heads, peak)
               for backward in (False, True))
    return 3.5 * forward_flops / time


def figures_of(x, ratio):
    k = dict(zip(FREE, x))
    k["backward_utilization"] = k["forward_utilization"] * ratio
    k["backward_ramp_tokens"] = k["ramp_tokens"]
    k["backward_head_dim_knee"] = k["head_dim_knee"]
    return k


def fit():
    """The figures devices/ carries (ramp and knee in whole tokens, the rest to
    three places), the fit's mean |log error| and its number of points."""
    peak, ratio, measured = peak_tflops(), flash2_backward_ratio(), list(points())

    def loss(x):
        k = figures_of(x, ratio)
        if min(x) < 0 or k["causal_efficiency"] > 1 or k["backward_utilization"] > 1:
            return math.inf
        return sum(abs(math.log(forward_backward_tflops(k, peak, *p[:4]) / p[4])) for p in measured) / len(measured)

    x, best = fit_attention.coordinate_descent(loss, [0.36, 256, 16, 0.95], [0.02, 32, 8, 0.02])
    k = figures_of(x, ratio)
    figures = {
        "forward_utilization": round(k["forward_utilization"], 3),
        "backward_utilization": round(k["backward_utilization"], 3),
        "ramp_tokens": round(k["ramp_tokens"]),
        "head_dim_knee": round(k["head_dim_knee"]),
        "causal_efficiency": round(k["causal_efficiency"], 3),
    }
    return figures, best, len(measured)


def main():
    figures, loss, count = fit()
    print(f"flash1 on the {DEVICE}: {count} points, mean |log error| {loss:.3f}")
    for name, value in figures.items():
        print(f'  "{name}": {value}')


if __name__ == "__main__":
    main()
