#!/usr/bin/env python3
"""dtsim's kernel model beside each kernel tests/gpu/unfused_attention.py timed:

    python3 tests/gpu/summarize_unfused.py unfused-attention.json [DTSIM]

GEMMs as `dtsim kernel gemm` costs them (m, n, k over batch x heads), streaming kernels
as `dtsim kernel memory` costs their bytes, on the catalog device of the GPU the file
names; a ratio above 1 is a kernel slower than dtsim's rate for it."""
import json
import subprocess
import sys

DEVICES = {"H100": "H100-SXM", "H200": "H200-SXM", "A100": "A100-SXM-80GB", "B200": "B200"}


def main():
    results = json.load(open(sys.argv[1]))
    dtsim = sys.argv[2] if len(sys.argv) > 2 else "build/src/cli/dtsim"
    device = next((v for k, v in DEVICES.items() if k in results["gpu"]), None)
    if device is None:
        sys.exit(f"{sys.argv[1]}: gpu: expected one of {', '.join(DEVICES)}, got {results['gpu']}")

    def model_us(args):
        out = subprocess.run([dtsim, "kernel", "--device", device, "--json"] + args, check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out)["time_s"] * 1e6

    print(f"# {results['gpu']} (torch {results['torch']}, CUDA {results['cuda']}) against dtsim's {device}")
    print(f"{'kernel':<28} {'dtype':<9} {'head':>4} {'seq':>5} {'measured us':>12} {'dtsim us':>10} {'ratio':>6}")
    for r in results["rows"]:
        if r.get("kernel") == "megatron_core_forward" and "forward_us" in r:
            # dtsim's Megatron core forward: the two batched GEMMs, then the score
            # passes at the streaming rate (the fused causal softmax's 1.5 passes,
            # dropout's 2 and its 1-byte mask) and the context's permute copy.
            bh, seq, d = r["batch_heads"], r["seq"], r["head_dim"]
            gemm = lambda m, n, k: model_us(["gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--batch", str(bh),
                                             "--dtype", "fp16"])
            score_bytes = bh * seq * seq * (3.5 * 2 + 1) + 2 * 2 * bh * seq * d
            us = gemm(seq, seq, d) + gemm(seq, d, seq) + model_us(["memory", "--bytes", f"{score_bytes} B"])
            print(f"{'megatron core ' + r['shape']:<28} {r['dtype']:<9} {d:>4} {seq:>5} {r['forward_us']:>12.1f} "
                  f"{us:>10.1f} {r['forward_us'] / us:>6.2f}  (softmax: {r['softmax']}, {r['softmax_us']:.1f} us)")
            continue
        if "us" not in r:
            continue
        dtype = "fp16" if r["dtype"] == "float16" else "bf16"
        if "m" in r:
            us = model_us(["gemm", "--m", str(r["m"]), "--n", str(r["n"]), "--k", str(r["k"]),
                           "--batch", str(r["batch_heads"]), "--dtype", dtype])
        else:
            us = model_us(["memory", "--bytes", f"{r['bytes']} B"])
        print(f"{r['kernel']:<28} {r['dtype']:<9} {r['head_dim']:>4} {r['seq']:>5} {r['us']:>12.1f} {us:>10.1f} "
              f"{r['us'] / us:>6.2f}")


if __name__ == "__main__":
    main()
