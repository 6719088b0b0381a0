#!/usr/bin/env python3
"""Writes tests/validation/llm-foundry-mpt-large-scale.json: llm-foundry's
"H100 80GB BF16 (Large Scale, >= 128 GPUs)" table (scripts/train/benchmarking/
README.md at commit 5e85bd62d, January 2024: MPT 1B to 70B on 128, 256 and
512 H100s), each row with what the same commit's sweep.py ran it with (the
attention implementation, sharding, micro-batch and checkpointing per model;
one micro-batch a step) and each model's shape from
scripts/train/yamls/pretrain/mpt-<size>.yaml.

    tests/validation/llm_foundry_large_scale.py LLM_FOUNDRY_GIT_DIR > tests/validation/llm-foundry-mpt-large-scale.json

The figures are the source's; nothing is derived but the row's id.
"""
import ast
import json
import sys

from llm_foundry_table import README, by_size, readme_rows, shape, show

COMMIT = "5e85bd62d"
SWEEP = "scripts/train/benchmarking/sweep.py"
TABLE = "H100 80GB BF16 (Large Scale, >= 128 GPUs)"


def sweep_settings(repo):
    """sweep.py's model_args_list: {size: {flag: value}} for each model yaml."""
    tree = ast.parse(show(repo, SWEEP, COMMIT))
    settings = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "model_args_list":
            for args in ast.literal_eval(node.value):
                flags = dict(a.split(" ", 1) for a in args)
                settings[flags["--model_yamls"].removesuffix(".yaml")] = flags
    return settings


def main(repo):
    settings = sweep_settings(repo)
    rows = []
    for table, c in readme_rows(repo, COMMIT):
        if table != TABLE:
            continue
        size, seq, gpus, gpu = c[0], int(c[1]), int(c[2]), c[3]
        flags = settings[size]
        row = {"id": f"mpt_{gpu}_{size}_seq{seq}_{gpus}gpu_large_scale", "model": size, "seq_len": seq, "gpus": gpus,
               "gpu": gpu, "microbatch": int(c[7]), "grad_accum": int(c[8]), "global_batch": int(c[9]),
               "tokens_per_sec_per_gpu": float(c[12]), "precision": c[14], "mp_mode": c[15], "sharding": c[16],
               "activation_checkpointing": c[17] == "True", "attn_impl": flags["--attn_impl"]}
        # The table is what ran: sweep.py's own flags must agree with it.
        assert row["sharding"] == flags["--fsdp_config_shard_strategy"], row
        assert row["microbatch"] == int(flags["--microbatch_size"]), row
        assert row["activation_checkpointing"] == (flags["--fsdp_config_activation_checkpointing"] == "true"), row
        rows.append(row)
    sizes = by_size({r["model"] for r in rows})
    json.dump({
        "about": "llm-foundry's MPT training benchmarks at 128 to 512 H100s (PyTorch FSDP through Composer, ALiBi), "
                 "with the attention, sharding and checkpointing its sweep.py ran each model with; written by "
                 "tests/validation/llm_foundry_large_scale.py from the source at the commit below",
        "source": {"repo": "mosaicml/llm-foundry", "commit": COMMIT, "file": README, "table": TABLE,
                   "settings": SWEEP + " (model_args_list, base_args: --accum 1, limit_all_gathers, forward_prefetch, "
                   "BACKWARD_PRE; its --fsdp_config_mixed_precision PURE never reaches the run: submit_benchmarks.py "
                   "does not pass it on, and the table's MP Mode reads DEFAULT)",
                   "models": "scripts/train/yamls/pretrain/mpt-<size>.yaml",
                   "software": "sweep.py names no image (sweep.sh at the commit: mosaicml/pytorch:2.1.0_cu121); "
                               "llm-foundry main with its gpu-flash2 extra (flash-attn 2); Composer 0.17, whose "
                               "DEFAULT mixed precision reduces gradients in fp32 (composer#2628)"},
        "models": {s: shape(repo, s, COMMIT) for s in sizes},
        "rows": rows,
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
