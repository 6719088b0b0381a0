"""The JSON Schemas in schemas/ against what they describe: every bundled
input file, the files dtsim refuses (which the schemas must refuse too), and
real outputs of the dtsim binary, one per output format.

Run by `meson test schemas` (python3 -m pytest; Debian's python3-pytest and
python3-jsonschema, installed by scripts/bootstrap.sh)."""
import glob
import json
import os
import pathlib
import subprocess

import jsonschema
import pytest

ROOT = pathlib.Path(os.environ.get("DTSIM_DATA_DIR", pathlib.Path(__file__).resolve().parent.parent))
DTSIM = os.environ.get("DTSIM_BIN", "dtsim")
SCHEMAS = ROOT / "schemas"


def validator(name):
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    # report.schema.json is referred to by search, sweep-result: resolve by file name.
    store = {p.name: json.loads(p.read_text()) for p in SCHEMAS.glob("*.schema.json")}
    resolver = jsonschema.RefResolver(base_uri="", referrer=schema, store=store)
    return jsonschema.Draft202012Validator(schema, resolver=resolver,
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def errors(name, instance):
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator(name).iter_errors(instance)]


def dtsim(*args, tmp=None):
    env = dict(os.environ)
    if args and args[0] in ("run", "validate"):
        # Open MPI keeps allocations until exit; under scripts/test.sh's
        # LeakSanitizer half they would end each rank with exit code 23.
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    out = subprocess.run([DTSIM, *args], capture_output=True, text=True, cwd=tmp, check=False, env=env)
    assert out.returncode == 0, f"dtsim {' '.join(args)}: {out.stdout}{out.stderr}"
    return out.stdout


def test_every_schema_is_a_valid_draft_2020_12_schema():
    names = sorted(p.name for p in SCHEMAS.glob("*.schema.json"))
    assert len(names) == 16, names
    for path in SCHEMAS.glob("*.schema.json"):
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


BUNDLED = (
    [("workload", p) for p in sorted(glob.glob(str(ROOT / "workloads/*.json")))]
    + [("cluster", p) for p in sorted(glob.glob(str(ROOT / "topologies/*.json")))]
    + [("profile", p) for p in sorted(glob.glob(str(ROOT / "devices/*.json"))) if not p.endswith(("datasheets.json", "hosts.json"))]
    + [("profile", str(ROOT / "tests/inputs/h100_profile.json")),
       ("profile", str(ROOT / "tests/fuzz/profile/cpu-2-ranks.json")),
       ("profile", str(ROOT / "calibrate/profiles/h100-sxm/profile.json")),
       ("datasheets", str(ROOT / "devices/datasheets.json")),
       ("hosts", str(ROOT / "devices/hosts.json"))]
)


@pytest.mark.parametrize("schema,path", BUNDLED, ids=[pathlib.Path(p).name for _, p in BUNDLED])
def test_bundled_input_files_follow_their_schema(schema, path):
    assert errors(schema, json.loads(pathlib.Path(path).read_text())) == []


@pytest.mark.parametrize("schema,path", [("workload", "tests/inputs/unknown_key.json"),
                                         ("cluster", "tests/inputs/wrong_unit.json"),
                                         ("cluster", "tests/inputs/missing_field.json")])
def test_files_dtsim_refuses_are_refused_by_the_schema_too(schema, path):
    assert errors(schema, json.loads((ROOT / path).read_text())) != []


def test_the_schemas_refuse_a_wrong_type_a_missing_unit_and_an_unknown_key():
    report = json.loads(dtsim("simulate", "-m", "llama2-7b", "-c", "dgx-h100", "-s", "fsdp", "--json"))
    report["step_time_s"] = "fast"
    assert any("step_time_s" in e for e in errors("report", report))
    cluster = json.loads((ROOT / "topologies/dgx-h100.json").read_text())
    cluster["intra_node"]["bandwidth"] = 450
    assert errors("cluster", cluster) != []
    cluster = json.loads((ROOT / "topologies/dgx-h100.json").read_text())
    cluster["gpu_per_node"] = 8
    assert errors("cluster", cluster) != []


OUTPUTS = {
    "simulate_fsdp": ("report", ["simulate", "-m", "llama2-7b", "-c", "dgx-h100", "-s", "fsdp", "--json"]),
    "simulate_megatron_explain": ("report", ["simulate", "-m", "gpt3-175b", "-c", "superpod-a100", "--nodes", "16", "-s",
                                             "tp=8,pp=16,gbs=64,recompute=full", "--json", "--explain"]),
    "simulate_moe": ("report", ["simulate", "-m", "mixtral-8x7b", "-c", "superpod-h100", "--nodes", "4", "-s",
                                "tp=2,cp=2,ep=4,pp=2,gbs=32,zero=1,recompute=full", "--json"]),
    "simulate_parameter_server": ("report", ["simulate", "-m", "resnet50", "-c", "dgx-a100", "--nodes", "2", "-s",
                                             "parameter_server,mbs=128,dtype=fp16", "--json"]),
    "simulate_t5_config_json": ("report", ["simulate", "-m", str(ROOT / "tests/inputs/hf/t5-base/config.json"), "-c",
                                           "dgx-h100", "-s", "ddp,gbs=64", "--json"]),
    "simulate_deepseek_v3_config_json": ("report", ["simulate", "-m", str(ROOT / "tests/inputs/hf/DeepSeek-V3/config.json"),
                                                    "-c", "superpod-h100", "--nodes", "128", "-s",
                                                    "tp=2,pp=16,ep=32,gbs=1024,zero=1,recompute=full", "--json"]),
    "search": ("search", ["search", "-m", "gpt3-1.3b", "-c", "dgx-a100", "--gbs", "64", "--json", "--threads", "1"]),
    "plan": ("plan", ["plan", "-m", "llama2-7b", "--tokens", "2e12", "--gpus", "64", "--devices", "H100-SXM", "--json"]),
    "collective": ("collective", ["collective", "-c", "superpod-h100", "--nodes", "2", "--json"]),
    "kernel_gemm": ("kernel", ["kernel", "gemm", "--device", "H100-SXM", "--m", "4096", "--n", "4096", "--k", "4096",
                               "--dtype", "bf16", "--json"]),
    "kernel_attention": ("kernel", ["kernel", "attention", "--device", "H100-SXM", "--batch", "2", "--seq", "4096",
                                    "--heads", "32", "--head-dim", "128", "--causal", "--json"]),
    "kernel_memory": ("kernel", ["kernel", "memory", "--device", "H100-SXM", "--bytes", "1 GiB", "--json"]),
    "kernel_measured": ("kernel", ["kernel", "gemm", "--device", "H100-SXM", "--m", "4096", "--n", "4096", "--k", "4096",
                                   "--dtype", "fp8", "--profile", str(ROOT / "calibrate/profiles/h100-sxm/profile.json"),
                                   "--json"]),
    "run": ("run", ["run", "--profile", str(ROOT / "tests/fuzz/profile/cpu-2-ranks.json"), "-m", "tiny-gpt", "-c",
                    "localhost-cpu", "-s", "dp=2,gbs=4,mbs=2,dtype=fp32", "--steps", "1", "--warmup", "0", "--json"]),
    "validate": ("validate", ["validate", "--profile", str(ROOT / "tests/fuzz/profile/cpu-2-ranks.json"), "-m",
                              "tiny-gpt", "-c", "localhost-cpu", "-s", "dp=2,gbs=4,mbs=2,dtype=fp32", "--steps", "1",
                              "--warmup", "0", "--json"]),
}


@pytest.mark.parametrize("case", sorted(OUTPUTS))
def test_real_outputs_follow_their_schema(case):
    schema, args = OUTPUTS[case]
    assert errors(schema, json.loads(dtsim(*args))) == []


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "calibrate/profiles/*/validation/*.json"))),
                         ids=lambda p: pathlib.Path(p).stem)
def test_the_committed_gpu_validation_follows_its_schemas(path):
    # What `dtsim validate --backend cuda --json` wrote on a GPU, and the profile it calibrated.
    name = pathlib.Path(path).name
    assert errors("validate" if name.startswith("validate-") else "profile", json.loads(pathlib.Path(path).read_text())) == []


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "tests/golden/*.json"))),
                         ids=lambda p: pathlib.Path(p).stem)
def test_every_committed_golden_report_follows_the_report_schema(path):
    assert errors("report", json.loads(pathlib.Path(path).read_text())["report"]) == []


def test_compare_sweep_and_trace_outputs_follow_their_schema(tmp_path):
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(dtsim("simulate", "-m", "llama2-7b", "-c", "dgx-h100", "-s", "fsdp", "--json"))
    after.write_text(dtsim("simulate", "-m", "llama2-7b", "-c", "dgx-h100", "-s", "fsdp,gbs=16", "--json"))
    out = subprocess.run([DTSIM, "compare", str(before), str(after), "--json"], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr  # 1: a regression, which is what this pair is
    assert errors("compare", json.loads(out.stdout)) == []

    requests = tmp_path / "requests.jsonl"
    lines = [{"id": "a", "model": "llama2-7b", "cluster": "dgx-h100", "strategy": "fsdp"},
             {"id": "b", "model": "gpt3-1.3b", "cluster": "dgx-a100", "strategy": "ddp", "nodes": 2}]
    for line in lines:
        assert errors("sweep-request", line) == []
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for line in dtsim("sweep", str(requests)).splitlines():
        assert errors("sweep-result", json.loads(line)) == []

    trace = tmp_path / "trace.json"
    dtsim("simulate", "-m", "gpt3-1.3b", "-c", "dgx-a100", "--nodes", "2", "-s", "tp=2,pp=4,gbs=32", "--trace", str(trace))
    assert errors("trace", json.loads(trace.read_text())) == []
