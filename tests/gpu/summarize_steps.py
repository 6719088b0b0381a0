#!/usr/bin/env python3
"""Eager PyTorch steps (tests/gpu/pytorch_steps.py) beside dtsim's prediction.

    tests/gpu/summarize_steps.py calibrate/profiles/h100-sxm/framework-checks/pytorch-steps.json [--dtsim build/src/cli/dtsim]

Prints, per model, the measured step, dtsim's `one_device` prediction on a
dgx-h100 (framework=pytorch: autocast, unfused AdamW, fp32 cross entropy),
the error, and the measured GPU time by kernel class.
"""
import argparse
import json
import os
import subprocess


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("steps", nargs="+")
    parser.add_argument("--dtsim", default="build/src/cli/dtsim")
    args = parser.parse_args()
    env = dict(os.environ, DTSIM_DATA_DIR=os.environ.get("DTSIM_DATA_DIR", "."))
    print(f"{'model':36} {'mbs':>3} {'measured ms':>11} {'dtsim ms':>9} {'error':>7}  measured GPU ms by class")
    for path in args.steps:
        with open(path) as f:
            data = json.load(f)
        for run in data["runs"]:
            if "error" in run:
                print(f"{run['model']:36} {run['mbs']:>3} failed: {run['error']}")
                continue
            mbs = run["mbs"]
            out = subprocess.run([args.dtsim, "simulate", "-m", run["model"], "-c", "dgx-h100", "-s",
                                  f"one_device,mbs={mbs},gbs={mbs}", "--json"],
                                 capture_output=True, text=True, check=True, env=env).stdout
            predicted = json.loads(out)["step_time_s"] * 1e3
            classes = ", ".join(f"{k} {v:.1f}" for k, v in sorted(run["by_class_ms"].items(), key=lambda kv: -kv[1]))
            print(f"{run['model']:36} {mbs:>3} {run['step_ms']:>11.1f} {predicted:>9.1f} "
                  f"{(predicted / run['step_ms'] - 1) * 100:>+6.1f}%  {classes}")


if __name__ == "__main__":
    main()
