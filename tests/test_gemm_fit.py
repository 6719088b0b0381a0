"""The Hopper GEMM shape figures in devices/ (the smaller tiles' efficiencies,
pipeline_k, stream_k_efficiency) are what tests/validation/fit_gemm.py fits
to the cuBLASLt grid measured on an H100: rerunning the fit must give the
bundled numbers, the fit must stay within its error, and dtsim's C++ model
must be the one the script fits (`dtsim kernel` at a few shapes).

Run by `meson test gemm_fit` (Debian's pytest-3)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "validation"))
import fit_gemm  # noqa: E402

HOPPER = ["H100-SXM", "H200-SXM", "H800-SXM", "GH200"]


@pytest.fixture(scope="module")
def fitted():
    return fit_gemm.fit()


@pytest.mark.parametrize("device", HOPPER)
def test_the_bundled_figures_are_the_fit(fitted, device):
    assert fit_gemm.committed(device) == fitted


def test_the_fit_is_within_its_error(fitted):
    errors = fit_gemm.errors(fitted)
    mean = sum(abs(e) for e in errors) / len(errors)
    assert len(errors) == 194
    assert mean < 0.075  # 6.9% when fitted; the figures it replaced were 10.9%
    assert abs(sum(errors) / len(errors)) < 0.05  # -3.0% signed; they were -9.2%


@pytest.mark.skipif("DTSIM_BIN" not in os.environ, reason="needs DTSIM_BIN (meson test sets it)")
@pytest.mark.parametrize("shape", [(4096, 2048, 2048), (4096, 15360, 5120), (256, 8192, 4096), (2048, 2048, 13312)])
def test_dtsim_costs_what_the_script_fits(shape):
    m, n, k = shape
    out = subprocess.run([os.environ["DTSIM_BIN"], "kernel", "gemm", "--device", "H100-SXM", "--m", str(m), "--n", str(n),
                          "--k", str(k), "--dtype", "bf16"], capture_output=True, text=True, check=True).stdout
    dtsim_us = float(re.search(r"time\s+([\d.]+) us", out).group(1))
    script_us = 1e6 * fit_gemm.model_seconds(fit_gemm.committed(), m, n, k, fit_gemm.published_anchor())
    assert dtsim_us == pytest.approx(script_us, rel=2e-3)
