#!/usr/bin/env python3
"""Fit one fused-attention kernel's figures (devices/<device>.json,
kernel_model.attention.kernels[]) to kernel measurements, and print them.

    tests/validation/fit_attention.py cudnn   # calibrate/profiles/h100-sxm/attention-sdpa.json
    tests/validation/fit_attention.py flash2  # the same file
    tests/validation/fit_attention.py flash3  # tests/validation/flash-attention-3-figures.json

How the H100's figures were set (devices/H100-SXM.json names this script).
The model is dtsim's (hw::KernelModel::attention): a pass runs at
utilization x head(d) x keys / (keys + ramp) x (causal efficiency) of the
16-bit dense peak, head(d) = (d / (d + knee)) / (128 / (128 + knee)), keys
the keys a query sees (seq, or seq / 2 under a causal mask), plus a 4 us
launch. The fit minimises the mean |log(predicted / measured)| by coordinate
descent; standard library only.
"""
import json
import math
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PEAK_TFLOPS = 989.4  # H100 SXM dense BF16 (devices/datasheets.json)
LAUNCH_S = 4e-6
NAMES = ["forward_utilization", "backward_utilization", "ramp_tokens", "backward_ramp_tokens", "head_dim_knee",
         "backward_head_dim_knee", "causal_efficiency"]


def rate_tflops(k, seq, head_dim, causal, backward, sequences_x_heads, peak_tflops=PEAK_TFLOPS):
    """TFLOP/s as the FlashAttention papers count them (the causal half only), at
    `peak_tflops` of 16-bit dense peak (the H100's unless told)."""
    keys = seq / 2 if causal else seq
    flops = 4.0 * sequences_x_heads * seq * keys * head_dim * (2.5 if backward else 1.0)
    knee = k["backward_head_dim_knee" if backward else "head_dim_knee"]
    ramp = k["backward_ramp_tokens" if backward else "ramp_tokens"]
    head = (head_dim / (head_dim + knee)) / (128 / (128 + knee))
    u = k["backward_utilization" if backward else "forward_utilization"] * head * keys / (keys + ramp)
    u *= k["causal_efficiency"] if causal else 1.0
    return flops / (LAUNCH_S + flops / (peak_tflops * 1e12 * u)) / 1e12


def measured_points(kernel):
    """(seq, head_dim, causal, backward, sequences x heads, TFLOP/s) of one kernel."""
    if kernel in ("flash2", "cudnn"):  # PyTorch SDPA's backends, measured on an H100
        rows = json.loads((ROOT / "calibrate/profiles/h100-sxm/attention-sdpa.json").read_text())["rows"]
        for r in rows:
            if r["kernel"] == kernel:
                tokens_x_hidden = r["batch"] * r["seq"] * r["heads"] * r["head_dim"]
                flops = 4.0 * r["batch"] * r["heads"] * r["seq"] ** 2 * r["head_dim"] / (2 if r["causal"] else 1)
                # The script's q, k and v are leaves whose .grad persists, so its
                # backward also adds each new gradient into the old one (read 2,
                # write 1 bf16 tensor, three times) which a training step does not:
                # taken off at the H100's streaming rate (3.35 TB/s x 0.9, 2 us a launch).
                accumulate_us = 3 * (3 * 2 * tokens_x_hidden / (3.35e12 * 0.9) * 1e6 + 2)
                backward_tflops = 2.5 * flops / (r["backward_us"] - accumulate_us) / 1e6
                yield (r["seq"], r["head_dim"], r["causal"], False, r["batch"] * r["heads"], r["forward_tflops"])
                yield (r["seq"], r["head_dim"], r["causal"], True, r["batch"] * r["heads"], backward_tflops)
        return
    figures = json.loads((ROOT / "tests/validation/flash-attention-3-figures.json").read_text())
    for s in figures["series"]:
        if s["kernel"] == kernel:
            for seq, tflops in zip(figures["sequence_lengths"], s["tflops"]):
                yield (seq, s["head_dim"], s["causal"], s["pass"] == "bwd", (2048 // s["head_dim"]) * (16384 // seq),
                       tflops)


def coordinate_descent(loss, x, steps, frozen=()):
    """The x (and its loss) that coordinate descent reaches from x: each free
    coordinate stepped both ways while the loss falls, the steps halved when no
    step helps, down to 1e-4."""
    best = loss(x)
    while max(steps) > 1e-4:
        improved = False
        for i in range(len(x)):
            if i in frozen:
                continue
            for d in (steps[i], -steps[i]):
                y = list(x)
                y[i] += d
                if (f := loss(y)) < best:
                    x, best, improved = y, f, True
        if not improved:
            steps = [s / 2 for s in steps]
    return x, best


def fit(points, fixed):
    def loss(x):
        k = dict(zip(NAMES, x), **fixed)
        if min(k.values()) < 0 or max(k["forward_utilization"], k["backward_utilization"], k["causal_efficiency"]) > 1:
            return math.inf
        return sum(abs(math.log(rate_tflops(k, *p[:5]) / p[5])) for p in points) / len(points)

    frozen = {i for i, name in enumerate(NAMES) if name in fixed}
    x, best = coordinate_descent(loss, [0.6, 0.5, 256, 512, 56, 56, 0.95], [0.05, 0.05, 64, 64, 16, 16, 0.02], frozen)
    return dict(zip(NAMES, x), **fixed), best


def fit_kernel(kernel):
    """The figures devices/ carries for `kernel` (ramps and knees in whole
    tokens, the rest to three places), the fit's mean |log error| and its
    number of points."""
    points = list(measured_points(kernel))
    # FlashAttention-3's forward at head sizes 64 and 256 (published-runs.json)
    # keeps the knee its source set; Figure 5 has only head size 128.
    fixed = {"head_dim_knee": 56} if kernel == "flash3" else {}
    k, loss = fit(points, fixed)
    figures = {name: (round(v) if "ramp" in name or "knee" in name else round(v, 3)) for name, v in k.items()}
    return figures, loss, len(points)


def main():
    kernel = sys.argv[1] if len(sys.argv) > 1 else "cudnn"
    figures, loss, count = fit_kernel(kernel)
    print(f"{kernel}: {count} points, mean |log error| {loss:.3f}")
    for name in NAMES:
        print(f'  "{name}": {figures[name]}')


if __name__ == "__main__":
    main()
