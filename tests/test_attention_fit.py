"""The Hopper attention figures in devices/ are what tests/validation/fit_attention.py
fits to their kernel measurements: rerunning the fit must give the bundled
numbers, so a figure edited by hand, or measurements changed without a refit,
fail here. The H200, H800 and GH200 carry the H100's figures; Triton's are
FlashAttention-2's with the utilizations over 1.8. The A100s' FlashAttention
(version 1) figures are what tests/validation/fit_flash1.py fits to the
kernel's bars in FlashAttention-2's own benchmark image.

Run by `meson test attention_fit` (Debian's pytest-3)."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "validation"))
import fit_attention  # noqa: E402
import fit_flash1  # noqa: E402

HOPPER = ["H100-SXM", "H200-SXM", "H800-SXM", "GH200"]


def bundled(device, kernel):
    figures = json.loads((ROOT / "devices" / f"{device}.json").read_text())
    return next(k for k in figures["kernel_model"]["attention"]["kernels"] if k["name"] == kernel)


@pytest.fixture(scope="module")
def fits():
    out = {}
    for kernel in ("flash2", "cudnn", "flash3"):
        figures, loss, _ = fit_attention.fit_kernel(kernel)
        assert loss < 0.04, (kernel, loss)  # mean |log error| of the fit itself
        out[kernel] = figures
    return out


@pytest.mark.parametrize("device", HOPPER)
@pytest.mark.parametrize("kernel", ["flash2", "cudnn", "flash3"])
def test_the_bundled_figures_are_the_fit(fits, device, kernel):
    figures = bundled(device, kernel)
    for name, value in fits[kernel].items():
        assert figures[name] == pytest.approx(value, abs=1e-9), (device, kernel, name)


@pytest.mark.parametrize("device", HOPPER)
def test_triton_is_flashattention2_over_1_8(fits, device):
    triton = bundled(device, "triton")
    for name, value in fits["flash2"].items():
        expected = round(value / 1.8, 3) if name.endswith("utilization") else value
        assert triton[name] == pytest.approx(expected, abs=1e-9), (device, name)


@pytest.mark.parametrize("device", ["A100-SXM-80GB", "A100-SXM-40GB"])
def test_the_a100s_flash1_figures_are_the_fit(device):
    figures, loss, count = fit_flash1.fit()
    assert count == 24
    assert loss < 0.10, loss  # the head sizes the knee cannot tell apart are most of it
    flash1 = bundled(device, "flash1")
    for name, value in figures.items():
        assert flash1[name] == pytest.approx(value, abs=1e-9), (device, name)
    # A backward without shape figures of its own takes the forward's.
    assert "backward_ramp_tokens" not in flash1 and "backward_head_dim_knee" not in flash1
