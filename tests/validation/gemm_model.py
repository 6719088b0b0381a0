"""dtsim's GEMM time model (hw::KernelModel::gemm_at) and the coordinate
descent that fits a device's shape figures to a measured GEMM table: what
fit_gemm.py (H100), fit_gemm_v100.py and fit_gemm_b200.py share. Standard
library only.

A device is its tiles [(m, n, efficiency)], its SM count and its stream-K
efficiency (0: none; the first tile pads the split). A GEMM's time is the
launch plus the longer of its compute and its HBM traffic; compute is the
best tiling's waves at (k + pipeline_k) per tile, or stream-K's even split,
scaled so that the anchor shape (m, n, k, FLOP/s, launch included) takes its
measured time, and never faster than the anchor's rate.
"""
import json
import math
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCH_S = 4e-6  # a kernel's launch and ramp, as dtsim's roofline assumes; not fitted


class Device:
    """A bundled device's GEMM figures (devices/<name>.json) and the HBM rate
    its streaming kernels reach (the datasheet's, devices/datasheets.json,
    times the file's memory fraction)."""

    def __init__(self, name):
        figures = json.loads((ROOT / "devices" / f"{name}.json").read_text())["kernel_model"]
        sheet = next(d for d in json.loads((ROOT / "devices/datasheets.json").read_text())["devices"]
                     if d["name"] == name)
        value, unit = sheet["hbm_bandwidth"].split()
        assert unit == "GB/s", sheet["hbm_bandwidth"]
        self.gemm = figures["gemm"]
        self.sms = figures["sms"]
        self.hbm_bytes_per_s = float(value) * 1e9 * figures["memory"]["fraction"]
        self.peak_tflops = sheet["peak_tflops"]

    def pipeline_k(self, pipeline_k, dtype):
        """A tile's fixed part in `dtype`'s k iterations, as hw::KernelModel
        counts it: it moves bytes, not math, so FP8 and FP4 tiles, whose k
        loop runs faster by the datasheet's rate ratio over 16 bits, pay the
        same time as that many more iterations."""
        if dtype not in ("fp8", "fp4"):
            return pipeline_k
        sixteen = self.peak_tflops.get("bf16") or self.peak_tflops.get("fp16") or 0
        narrow = self.peak_tflops.get(dtype) or 0
        return pipeline_k * narrow / sixteen if sixteen and narrow > sixteen else pipeline_k

    def anchor(self, dtype):
        """The file's anchor for a dtype: (m, n, k, FLOP/s)."""
        a = next(a for a in self.gemm["anchors"] if a["dtype"] == dtype)
        return a["m"], a["n"], a["k"], float(a["rate"].split()[0]) * 1e12


def tile_work(tiles, sms, pipeline_k, stream_k_efficiency, m, n, k):
    """The work of a GEMM over the SMs, in the anchor's units."""
    best = math.inf
    for tm, tn, eff in tiles:
        waves = math.ceil(math.ceil(m / tm) * math.ceil(n / tn) / sms)
        best = min(best, waves * 2.0 * tm * tn * (k + pipeline_k) / eff * sms)
    if stream_k_efficiency > 0:
        tm, tn, eff = tiles[0]
        padded = math.ceil(m / tm) * tm * math.ceil(n / tn) * tn
        best = min(best, 2.0 * padded * (k + pipeline_k) / (eff * stream_k_efficiency))
    return best


def seconds(tiles, sms, pipeline_k, stream_k_efficiency, anchor, hbm_bytes_per_s, m, n, k, operand_bytes=2):
    """The model's time of one GEMM, launch included."""
    am, an, ak, rate = anchor
    work = lambda mm, nn, kk: tile_work(tiles, sms, pipeline_k, stream_k_efficiency, mm, nn, kk)
    busy = 2.0 * am * an * ak / rate - LAUNCH_S
    core = work(am, an, ak) / busy
    ceiling = 2.0 * am * an * ak / busy
    compute = max(work(m, n, k) / core, 2.0 * m * n * k / ceiling)
    memory = ((m * k + k * n) * operand_bytes + m * n * 2) / hbm_bytes_per_s
    return LAUNCH_S + max(compute, memory)


def fastest(rows):
    """The fastest (m, n, k, seconds) row as an anchor: (m, n, k, FLOP/s)."""
    m, n, k, t = max(rows, key=lambda r: r[0] * r[1] * r[2] / r[3])
    return m, n, k, 2.0 * m * n * k / t


def log_errors(predict, rows):
    """log(predicted / measured) per (m, n, k, seconds) row."""
    return [math.log(predict(m, n, k) / t) for m, n, k, t in rows]


def descend(loss, start, bounds, step, rounds=80):
    """Coordinate descent on `loss` over the named figures, halving the steps
    when no move helps, until pipeline_k's step is below one; rounded as
    devices/ holds them (efficiencies to 0.01, pipeline_k to a whole k)."""
    p, best = dict(start), loss(start)
    step = dict(step)
    for _ in range(rounds):
        improved = False
        for name in start:
            for sign in (1, -1):
                trial = dict(p)
                lo, hi = bounds[name]
                trial[name] = min(hi, max(lo, p[name] + sign * step[name]))
                value = loss(trial)
                if value < best - 1e-9:
                    p, best, improved = trial, value, True
        if not improved:
            step = {k: v / 2 for k, v in step.items()}
            if step["pipeline_k"] < 1:
                break
    return {k: (round(v) if k == "pipeline_k" else round(v, 2)) for k, v in p.items()}
