#!/usr/bin/env python3
"""Fit the share of the GEMM model's rate that unfused attention's batched
GEMMs reach on the A100 (devices/A100-SXM-*.json,
kernel_model.attention.unfused.gemm_efficiency), and print it.

    tests/validation/fit_unfused_attention.py build/src/cli/dtsim
    tests/validation/fit_unfused_attention.py build/src/cli/dtsim --check

--check also fits the same efficiency, alone, to FlashAttention-2's timing
of PyTorch's attention on an A100 80GB (tests/validation/flash-attention-2-pytorch.json,
the kernels KernelModel.UnfusedAttentionAgainstFlashAttention2sPyTorchAttention
costs: q, k and v copied, baddbmm, torch.softmax, bmm; backward four GEMMs,
the softmax's backward, the gradients copied), per head size, without the
causal mask (whose extra add is PyTorch's own pass), at 1k tokens and more:
what the bundled figure does not come from.

The measurement is FlashAttention's paper timing Megatron-LM's attention on
an A100 40GB (tests/validation/flash-attention-1-megatron.json). The kernels
are Megatron's CoreAttention of 2022 (megatron/model/transformer.py):
forward, baddbmm of q and k into the scores, the fused softmax (one read, one
write), dropout (read, write, its one-byte mask written), bmm with v, the
context's permute(...).contiguous() (a copy); backward, that copy's, the
four batched GEMMs (the probabilities' and v's gradients through bmm, q's
and k's through baddbmm), dropout's backward (read the gradient and the
mask, write) and the softmax's (read the probabilities and the gradient,
write). The streaming kernels run at dtsim's streaming rate; the GEMMs at
dtsim's GEMM model (`dtsim kernel gemm`, burst clocks, as a benchmark loop
runs) over the efficiency fitted here. Why the GEMMs and not the softmax
carry the gap: PyTorch's attention, another softmax kernel around the same
torch.baddbmm and torch.bmm, takes the same time at every size (the same
tables), and dropout's two passes add what the streaming rate gives (Table
15 less Table 18 at 2k tokens: 2.28 ms for 2.7 GB, 1.18 TB/s).
The fit minimises the mean |log(predicted / measured)|; standard library only.
"""
import json
import math
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEVICE = "A100-SXM-40GB"


def dtsim_seconds(binary, *args, device=DEVICE):
    out = subprocess.run([binary, "kernel", *args, "--device", device, "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["time_s"]


def kernels(binary, seq, shape, backward, dropout):
    """(GEMM seconds as modelled, launch included; streaming seconds) of one point."""
    bh, d = shape["batch"] * shape["heads"], shape["head_dim"]
    scores = bh * seq * seq
    context = bh * seq * d  # the output's elements (or its gradient's)

    def gemm(m, n, k):
        return dtsim_seconds(binary, "gemm", "--batch", str(bh), "--m", str(m), "--n", str(n), "--k", str(k), "--dtype",
                             "fp16")

    def stream(nbytes):
        return dtsim_seconds(binary, "memory", "--bytes", f"{int(nbytes)} B")

    if not backward:
        gemms = [gemm(seq, seq, d), gemm(seq, d, seq)]
        streams = stream(2 * 2 * scores) + (stream(5 * scores) if dropout else 0.0) + stream(2 * 2 * context)
    else:
        gemms = [gemm(seq, seq, d)] + [gemm(seq, d, seq)] * 3
        streams = stream(2 * 2 * context) + (stream(5 * scores) if dropout else 0.0) + stream(3 * 2 * scores)
    return gemms, streams


def launch_seconds(device):
    """The device's GEMM launch ("4 us"), which the efficiency does not stretch."""
    figures = json.loads((ROOT / f"devices/{device}.json").read_text())["kernel_model"]
    return float(figures["gemm"]["launch"].split()[0]) * 1e-6


def predicted(gemms, streams, efficiency, launch_s):
    return sum(launch_s + (g - launch_s) / efficiency for g in gemms) + streams


def best_efficiency(points, launch_s):
    """(efficiency, mean |log error| at it, at 1.0) over (gemms, streams, measured seconds) points."""

    def cost(efficiency):
        return sum(abs(math.log(predicted(g, st, efficiency, launch_s) / m)) for g, st, m in points) / len(points)

    loss, efficiency = min((cost(e / 1000), e / 1000) for e in range(200, 1001))
    return efficiency, loss, cost(1.0)


def fit(binary):
    """(efficiency, mean |log error| at it, at 1.0, the printed points)."""
    data = json.loads((ROOT / "tests/validation/flash-attention-1-megatron.json").read_text())
    launch_s = launch_seconds(DEVICE)
    names, points = [], []
    for s in data["series"]:
        if s["kernel"] != "megatron":
            continue
        for seq, ms in zip(data["sequence_lengths"], s["ms"]):
            if seq < 1024:
                continue
            gemms, streams = kernels(binary, seq, data["shape"], s["pass"] == "bwd", s["dropout"])
            names.append(f"table {s['table']} {s['pass']} {seq}")
            points.append((gemms, streams, ms * 1e-3))
    efficiency, loss, unfitted = best_efficiency(points, launch_s)
    lines = []
    for name, (gemms, streams, measured) in zip(names, points):
        at_one = predicted(gemms, streams, 1.0, launch_s)
        fitted = predicted(gemms, streams, efficiency, launch_s)
        lines.append(f"  {name:<22} measured {measured * 1e3:6.2f} ms  at 1.0 {at_one * 1e3:6.2f}"
                     f"  at {efficiency:.3f} {fitted * 1e3:6.2f} ms ({fitted / measured - 1:+.1%})")
    return efficiency, loss, unfitted, lines


def fit_pytorch_on_80gb(binary, head_dim):
    """((efficiency, mean |log error|), points) fitted to FlashAttention-2's PyTorch points of one head size."""
    data = json.loads((ROOT / "tests/validation/flash-attention-2-pytorch.json").read_text())
    device = "A100-SXM-80GB"
    tensor_bytes = 16384 * 2048 * 2  # q, k, v or a gradient, fp16

    def stream(nbytes):
        return dtsim_seconds(binary, "memory", "--bytes", f"{int(nbytes)} B", device=device)

    points = []
    for s in data["series"]:
        if s["head_dim"] != head_dim or s["causal"]:
            continue
        for seq, tflops in zip(data["sequence_lengths"], s["tflops"]):
            if tflops is None or seq < 1024:
                continue
            heads = (2048 // head_dim) * (16384 // seq)
            scores = heads * seq * seq

            def gemm(m, n, k):
                return dtsim_seconds(binary, "gemm", "--batch", str(heads), "--m", str(m), "--n", str(n), "--k", str(k),
                                     "--dtype", "fp16", device=device)

            if s["pass"] == "fwd":
                gemms = [gemm(seq, seq, head_dim), gemm(seq, head_dim, seq)]
                streams = stream(6 * tensor_bytes) + stream(4 * scores)
            else:
                gemms = [gemm(seq, seq, head_dim)] + [gemm(seq, head_dim, seq)] * 3
                streams = stream(6 * scores) + stream(6 * tensor_bytes)
            flops = 4.0 * seq * seq * head_dim * heads * (2.5 if s["pass"] == "bwd" else 1.0)
            points.append((gemms, streams, flops / (tflops * 1e12)))
    efficiency, loss, _ = best_efficiency(points, launch_seconds(device))
    return (efficiency, loss), len(points)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else str(ROOT / "build/src/cli/dtsim")
    efficiency, loss, unfitted, lines = fit(binary)
    print("\n".join(lines))
    print(f"gemm_efficiency {efficiency:.3f}: mean |log error| {loss:.3f} (at 1.0: {unfitted:.3f})")
    if "--check" in sys.argv:
        for head_dim in (64, 128):
            (e, loss), n = fit_pytorch_on_80gb(binary, head_dim)
            print(f"  FlashAttention-2's PyTorch attention, A100 80GB, head size {head_dim}, {n} points: "
                  f"alone it gives {e:.3f} (mean |log error| {loss:.3f})")


if __name__ == "__main__":
    main()
