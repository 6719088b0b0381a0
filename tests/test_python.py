"""`import dtsim`: each function returns what `dtsim <command> --json` prints,
raises ValueError with the command line's one line on bad input, and leaves
Python's Ctrl-C alone. Run by `meson test python` (pytest-3, with the built
module on PYTHONPATH)."""
import json
import os
import signal
import subprocess

import pytest

import dtsim

DTSIM = os.environ.get("DTSIM_BIN", "dtsim")


def cli_json(*args):
    out = subprocess.run([DTSIM, *args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("model,cluster,strategy,extra", [
    ("llama2-7b", "dgx-h100", "fsdp", {}),
    ("gpt3-1.3b", "dgx-a100", "tp=2,pp=4,gbs=32", {"nodes": 2}),
    ("mixtral-8x7b", "superpod-h100", "tp=2,cp=2,ep=4,pp=2,gbs=32,zero=1,recompute=full", {"nodes": 4}),
    ("resnet50", "dgx-a100", "parameter_server,mbs=128,dtype=fp16", {"nodes": 2}),
    ("llama2-7b", "dgx-h100", "tp=2,gbs=16", {"seq_len": 2048, "explain": True}),
])
def test_simulate_returns_the_report_the_command_prints(model, cluster, strategy, extra):
    args = ["simulate", "-m", model, "-c", cluster, "-s", strategy]
    if "nodes" in extra:
        args += ["--nodes", str(extra["nodes"])]
    if "seq_len" in extra:
        args += ["--seq-len", str(extra["seq_len"])]
    if extra.get("explain"):
        args += ["--explain"]
    assert dtsim.simulate(model, cluster, strategy, **extra) == cli_json(*args)


def test_kernel_collective_and_plan_return_what_the_commands_print():
    assert dtsim.kernel("gemm", device="H100-SXM", m=4096, n=4096, k=4096) == cli_json(
        "kernel", "gemm", "--device", "H100-SXM", "--m", "4096", "--n", "4096", "--k", "4096")
    assert dtsim.kernel("attention", device="H100-SXM", batch=2, seq=4096, heads=32, causal=True) == cli_json(
        "kernel", "attention", "--device", "H100-SXM", "--batch", "2", "--seq", "4096", "--heads", "32", "--causal")
    assert dtsim.collective("superpod-h100", "all_to_all", nodes=2) == cli_json(
        "collective", "-c", "superpod-h100", "--op", "all_to_all", "--nodes", "2")
    assert dtsim.plan("llama2-7b", 2e12, gpus="64,256", devices="H100-SXM") == cli_json(
        "plan", "-m", "llama2-7b", "--tokens", "2e12", "--gpus", "64,256", "--devices", "H100-SXM")


def test_search_returns_the_candidates_the_command_prints():
    ours = dtsim.search("gpt3-1.3b", "dgx-a100", 64, top=5)
    theirs = cli_json("search", "-m", "gpt3-1.3b", "-c", "dgx-a100", "--gbs", "64", "--top", "5")
    ours.pop("seconds"), theirs.pop("seconds")  # wall time
    assert ours == theirs
    assert ours["schema"] == "dtsim.search/1" and ours["fitting"] > 0


def test_bad_input_raises_value_error_with_the_command_lines_message():
    line = subprocess.run([DTSIM, "simulate", "-m", "no-such-model", "-c", "dgx-h100", "-s", "fsdp"],
                          capture_output=True, text=True).stderr.strip()
    assert line.startswith("dtsim: ")
    with pytest.raises(ValueError) as error:
        dtsim.simulate("no-such-model", "dgx-h100", "fsdp")
    assert "dtsim: " + str(error.value) == line
    with pytest.raises(ValueError, match="--strategy"):
        dtsim.simulate("llama2-7b", "dgx-h100", "tp=3")
    with pytest.raises(ValueError):
        dtsim.kernel("gemm", device="H100-SXM")  # no shape


def test_ctrl_c_raises_keyboard_interrupt_again_after_a_search():
    dtsim.search("gpt3-1.3b", "dgx-a100", 64, top=1)  # installs dtsim's own SIGINT handler while it runs
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # Python runs its handler between bytecodes
            pass


def test_the_module_says_its_version_and_where_its_data_is():
    assert dtsim.__version__ == subprocess.run([DTSIM, "--version"], capture_output=True, text=True).stdout.split()[-1]
    assert (dtsim.data_dir() / "workloads" / "llama2-7b.json").exists()
