#!/usr/bin/env python3
"""The GPU validation table from tests/gpu/run_on_gpu.sh's output.

    tests/gpu/summarize.py RESULTS_DIR [--dtsim build/src/cli/dtsim] > table.md

For every plan: the step predicted from the profile its validate run
calibrated (the plan's own GEMM calls measured whole), the measured median
step and the error; the prediction from the machine-wide profile
(RESULTS_DIR/profile.json: GEMM grids only, interpolated) when --dtsim is
given; the uncalibrated prediction (the bundled kernel model: this dtsim's
with --dtsim, else the one the run recorded); and the
predicted and measured peak memory (weights, state and activations)."""
import argparse
import json
import pathlib
import subprocess
import sys

MODELS = {"gpt-125m": "tests/gpu/gpt-125m.json", "llama2-7b-8layers": "tests/gpu/llama2-7b-8layers.json"}


def model_argument(name):
    return MODELS.get(name, name)


def ran_strategy(result):
    """The strategy the run executed: runs recorded before the optimizer key
    ran plans that streamed the fused step's bytes."""
    strategy = result["strategy"]
    return strategy if "optimizer=" in strategy else strategy + ",optimizer=fused"


def prediction(dtsim, result, profile=None):
    command = [dtsim, "simulate", "-m", model_argument(result["model"]), "-c", result["cluster"], "-s",
               ran_strategy(result), "--json"]
    if profile:
        command += ["--profile", str(profile)]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["step_time_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=pathlib.Path)
    parser.add_argument("--dtsim", help="the dtsim program, for the machine-wide profile's predictions")
    args = parser.parse_args()
    rows = []
    for path in sorted(args.results.glob("**/validate-*.json")):
        r = json.loads(path.read_text())
        measured = r["step"]["measured_s"]
        grid = prediction(args.dtsim, r, args.results / "profile.json") if args.dtsim else None
        bundled = prediction(args.dtsim, r) if args.dtsim else r["uncalibrated"]["predicted_s"]
        rows.append((r, measured, grid, bundled))
    if not rows:
        sys.exit(f"{args.results}: no validate-*.json")
    gpu = rows[0][0]["gpu"]
    print(f"{gpu['gpu']}, driver {gpu.get('driver', '?')}, CUDA {gpu['cuda_runtime']}, cuBLASLt {gpu['cublaslt']}, "
          f"{gpu['date'][:10]}; median of {len(rows[0][0]['step_times_s'])} steps after 2 warm-up steps.\n")
    header = "| model | strategy | measured | calibrated | error |"
    header += " grid profile | error |" if args.dtsim else ""
    header += " uncalibrated | error | peak memory predicted / measured |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    errors = {"calibrated": [], "grid": [], "uncalibrated": []}
    for r, measured, grid, bundled in rows:
        strategy = r["strategy"].replace("gpus=1,", "")
        line = (f"| {r['model']} | {strategy} | {measured * 1e3:.1f} ms | {r['step']['predicted_s'] * 1e3:.1f} ms | "
                f"{100 * r['step']['error']:+.1f}% |")
        errors["calibrated"].append(r["step"]["error"])
        if grid is not None:
            line += f" {grid * 1e3:.1f} ms | {100 * (grid / measured - 1):+.1f}% |"
            errors["grid"].append(grid / measured - 1)
        errors["uncalibrated"].append(bundled / measured - 1)
        line += (f" {bundled * 1e3:.1f} ms | {100 * (bundled / measured - 1):+.1f}% | "
                 f"{r['peak_memory']['predicted_bytes'] / 2**30:.2f} / {r['peak_memory']['measured_bytes'] / 2**30:.2f} GiB |")
        print(line)
    print()
    for name, values in errors.items():
        if values:
            mean = sum(abs(v) for v in values) / len(values)
            print(f"- {name}: mean |error| {100 * mean:.1f}%, largest {100 * max(values, key=abs):+.1f}%")


if __name__ == "__main__":
    main()
