#!/usr/bin/env python3
"""Prints, for each FSDP row of llm-foundry's MPT tables and torchtitan's
A100 runs, the step time dtsim misses against the time dtsim has FSDP's
collectives in flight while it hides them behind compute (rank 0's `comm`
events of --trace, less the exposed dp time and the compute slowdown that
--json already charges), and the mean error per table if those collectives
were charged in full. A diagnostic of the README's "torchtitan" paragraph,
not a model: nothing here changes a prediction.

    tests/validation/fsdp_hidden_comm.py [DTSIM_BINARY]   (default build/src/cli/dtsim)
"""
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "validation" / "published-runs.json"


def rows():
    table = json.loads((ROOT / "tests/validation/llm-foundry-mpt.json").read_text())
    for r in table["rows"]:
        m = table["models"][r["model"]]
        yield dict(id=r["id"], gpu=r["gpu"], m=m, seq=r["seq_len"], gpus=r["gpus"], mb=r["microbatch"],
                   gbs=r["global_batch"], dtype="fp8" if "fp8" in r["precision"] else "bf16",
                   recompute="full" if r["activation_checkpointing"] else "none", grad="bf16", attention="triton",
                   positions="alibi", measured=r["tokens_per_sec_per_gpu"])
    if SHARED.exists():
        for c in json.loads(SHARED.read_text())["cases"]:
            if c["id"].startswith("mpt"):
                p, m = c["parallel"], c["model"]
                yield dict(id=c["id"], gpu=c["hardware"]["gpu"], m=m, seq=m["seq_len"], gpus=c["hardware"]["num_gpus"],
                           mb=p["microbatch"], gbs=p["global_batch"], dtype="bf16",
                           recompute="full" if "full" in p["recompute"] else "none", grad="bf16", attention="triton",
                           positions="alibi", measured=c["measured"]["tokens_per_sec_per_gpu"])
    for c in json.loads((ROOT / "tests/validation/outside-shared.json").read_text())["cases"]:
        if c["id"].startswith("torchtitan_"):
            yield dict(id=c["id"], gpu="a100_80gb", m=c["model"], seq=c["seq_len"], gpus=c["gpus"], mb=c["local_batch"],
                       gbs=c["gpus"] * c["local_batch"], dtype="bf16", recompute=c["recompute"], grad="fp32",
                       attention="flash", positions="rope", measured=c["wps_per_gpu"], fsdp_version=2)


def cluster(gpu):
    gpu = gpu.lower()
    return "dgx-h100" if "h100" in gpu else "dgx-a100-40gb" if "40gb" in gpu else "dgx-a100"


def main(binary):
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        model_path, trace_path = pathlib.Path(tmp) / "model.json", pathlib.Path(tmp) / "trace.json"
        for r in rows():
            m = r["m"]
            model = dict(name=r["id"], kind="transformer", layers=m["layers"], hidden=m["hidden"], heads=m["heads"],
                         ffn_hidden=m["ffn_hidden"], vocab=m["vocab"], seq_len=r["seq"], positions=r["positions"])
            if r["positions"] == "rope":
                model.update(kv_heads=m["kv_heads"], mlp="swiglu", norm="rmsnorm", tied_embeddings=False,
                             attention_dropout=0.0)
            model_path.write_text(json.dumps(model))
            strategy = (f"framework=pytorch,dp={r['gpus']},zero=3,mbs={r['mb']},gbs={r['gbs']},dtype={r['dtype']},"
                        f"grad_reduce={r['grad']},attention={r['attention']},recompute={r['recompute']},optimizer=unfused,"
                        f"fsdp_version={r.get('fsdp_version', 1)}")
            run = subprocess.run([binary, "simulate", "-m", str(model_path), "-c", cluster(r["gpu"]), "--nodes",
                                  str(max(1, r["gpus"] // 8)), "-s", strategy, "--json", "--trace", str(trace_path)],
                                 capture_output=True, text=True, check=True)
            report = json.loads(run.stdout)
            events = json.loads(trace_path.read_text())
            events = events["traceEvents"] if isinstance(events, dict) else events
            comm_s = sum(e["dur"] for e in events if e.get("ph") == "X" and e.get("pid") == 0 and e.get("cat") == "comm") / 1e6
            hidden_s = comm_s - report["breakdown"]["exposed_comm_s"]["dp"] - report["breakdown"]["compute_slowed_s"]
            measured_s = r["gbs"] * r["seq"] / (r["measured"] * r["gpus"])
            out.append((r["id"], cluster(r["gpu"]), measured_s, report["step_time_s"], hidden_s))
    print(f"{'row':44s} {'measured':>9s} {'dtsim':>9s} {'missing':>9s} {'hidden':>9s}")
    for row_id, _, measured_s, predicted_s, hidden_s in out:
        print(f"{row_id:44s} {measured_s:9.3f} {predicted_s:9.3f} {measured_s - predicted_s:9.3f} {hidden_s:9.3f}")
    print(f"\n{'table':28s} {'rows':>5s} {'mean |e| today':>15s} {'collectives charged':>20s}")
    tables = {}
    for row_id, name, measured_s, predicted_s, hidden_s in out:
        key = "torchtitan" if row_id.startswith("torchtitan") else f"llm-foundry {name}"
        tables.setdefault(key, []).append((measured_s, predicted_s, hidden_s))
    for key, values in sorted(tables.items()):
        today = sum(abs(m / p - 1) for m, p, _ in values) / len(values)
        charged = sum(abs(m / (p + max(0.0, h)) - 1) for m, p, h in values) / len(values)
        print(f"{key:28s} {len(values):5d} {100 * today:14.1f}% {100 * charged:19.1f}%")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build/src/cli/dtsim"))
