#!/usr/bin/env python3
"""Writes tests/validation/llm-foundry-mpt.json: every row of llm-foundry's MPT
training-benchmark tables (scripts/train/benchmarking/README.md at commit
061f2c7ce, October 2023: H100 80GB BF16 and FP8, A100 80GB, A100 40GB) that
../shared/validation/published-runs.json does not already hold, with each
model's shape from scripts/train/yamls/pretrain/mpt-<size>.yaml at the same
commit.

    tests/validation/llm_foundry_table.py LLM_FOUNDRY_GIT_DIR > tests/validation/llm-foundry-mpt.json

The figures are the source's; nothing is derived but the row's id.
"""
import json
import pathlib
import re
import subprocess
import sys

COMMIT = "061f2c7ce"
README = "scripts/train/benchmarking/README.md"
SHARED = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "validation" / "published-runs.json"


def show(repo, path, commit=COMMIT):
    return subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def shape(repo, size, commit=COMMIT):
    text = show(repo, f"scripts/train/yamls/pretrain/mpt-{size}.yaml", commit)
    field = lambda name: int(re.search(rf"^\s*{name}:\s*(\d+)", text, re.M).group(1))
    return {"layers": field("n_layers"), "hidden": field("d_model"), "heads": field("n_heads"),
            "ffn_hidden": field("d_model") * field("expansion_ratio"), "vocab": field("vocab_size")}


def readme_rows(repo, commit=COMMIT):
    """(table title, cells) for each data row of the benchmark README's tables."""
    table = None
    for line in show(repo, README, commit).splitlines():
        if line.startswith("## "):
            table = line[3:].strip()
        if line.startswith("|  ") and "Model" not in line and "---" not in line:
            yield table, [x.strip() for x in line.strip().strip("|").split("|")]


def by_size(sizes):
    """Model sizes (125m, 1b, ...) smallest first."""
    return sorted(sizes, key=lambda s: float(s[:-1]) * (1e-3 if s.endswith("m") else 1))


def main(repo):
    shared = {c["id"] for c in json.loads(SHARED.read_text())["cases"]}
    rows = []
    for table, c in readme_rows(repo):
        size, seq, gpus, gpu = c[0], int(c[1]), int(c[2]), c[3]
        row_id = f"mpt_{gpu}_{size}_seq{seq}_{gpus}gpu"
        precision = c[14]
        if precision.endswith("fp8"):
            row_id += "_fp8"
        elif row_id in shared:
            continue
        rows.append({"id": row_id, "table": table, "model": size, "seq_len": seq, "gpus": gpus, "gpu": gpu,
                     "microbatch": int(c[7]), "grad_accum": int(c[8]), "global_batch": int(c[9]),
                     "tokens_per_sec_per_gpu": float(c[12]), "precision": precision, "mp_mode": c[15],
                     "sharding": c[16], "activation_checkpointing": c[17] == "True"})
    # A table may run one shape twice with another micro-batch.
    seen = {}
    for r in rows:
        seen[r["id"]] = seen.get(r["id"], 0) + 1
    for r in rows:
        if seen[r["id"]] > 1:
            r["id"] += f"_mbs{r['microbatch']}"
    sizes = by_size({r["model"] for r in rows})
    json.dump({
        "about": "llm-foundry's MPT training benchmarks (PyTorch FSDP through Composer, attn_impl triton, ALiBi), "
                 "every row that ../shared/validation/published-runs.json does not hold; written by "
                 "tests/validation/llm_foundry_table.py from the source at the commit below",
        "source": {"repo": "mosaicml/llm-foundry", "commit": COMMIT, "file": README,
                   "models": "scripts/train/yamls/pretrain/mpt-<size>.yaml",
                   "software": "mosaicml/pytorch:2.1.0_cu121-nightly20230827 (the H100 rows' image), composer>=0.16.3,<0.17"},
        "models": {s: shape(repo, s) for s in sizes},
        "rows": rows,
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
