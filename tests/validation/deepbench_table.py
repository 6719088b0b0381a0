#!/usr/bin/env python3
"""Writes tests/validation/deepbench-v100.json: the dense GEMMs of Baidu's
DeepBench training results on an NVIDIA V100 (results/train/DeepBench_NV_V100.xlsx,
sheet "Results - FP16 ip, Mixed math": 16-bit inputs on the tensor cores with
32-bit accumulation, cublasGemmEx under CUBLAS_TENSOR_OP_MATH, the mean of 400
back-to-back calls), with the machine its "Specs" sheet names (a DGX-1, CUDA
10.1.243, driver 418.67). NVIDIA's engineers updated these results in October
2019 (commit 30c51150).

    tests/validation/deepbench_table.py DEEPBENCH_GIT_DIR > tests/validation/deepbench-v100.json

The figures are the source's (M, N, K, transposes, milliseconds; TFLOP/s as
2·M·N·K over the time). An .xlsx file is a zip of XML: the standard library
reads it.
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from io import BytesIO

COMMIT = "30c51150869ee217f150ef5f31dc69241ed23b49"
PATH = "results/train/DeepBench_NV_V100.xlsx"
SHEET = "Results - FP16 ip, Mixed math"
NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}


def sheets(data):
    """Each sheet's rows as lists of cell texts, by sheet name."""
    book = zipfile.ZipFile(BytesIO(data))
    strings = []
    if "xl/sharedStrings.xml" in book.namelist():
        for item in ET.fromstring(book.read("xl/sharedStrings.xml")).findall("m:si", NS):
            strings.append("".join(t.text or "" for t in item.iter(f"{{{NS['m']}}}t")))
    names = [s.get("name") for s in ET.fromstring(book.read("xl/workbook.xml")).find("m:sheets", NS)]
    out = {}
    for index, name in enumerate(names, 1):
        rows = []
        for row in ET.fromstring(book.read(f"xl/worksheets/sheet{index}.xml")).iter(f"{{{NS['m']}}}row"):
            cells = []
            for cell in row.findall("m:c", NS):
                value = cell.find("m:v", NS)
                text = value.text if value is not None else ""
                cells.append(strings[int(text)] if cell.get("t") == "s" and text else text)
            rows.append(cells)
        out[name] = rows
    return out


def main(repo):
    data = subprocess.run(["git", "-C", repo, "show", f"{COMMIT}:{PATH}"], check=True, capture_output=True).stdout
    book = sheets(data)
    specs = {row[0]: row[1] for row in book["Specs"] if len(row) >= 2}
    system = next(row[0] for row in book["Specs"] if len(row) == 1 and "DGX" in row[0])
    rows = []
    for cells in book[SHEET]:
        if len(cells) < 7 or not all(c.isdigit() for c in cells[1:4]):
            continue
        try:
            ms = float(cells[6])
        except ValueError:  # a note where the time goes ("both matrices are ..."): left out as ambiguous
            continue
        m, n, k = int(cells[1]), int(cells[2]), int(cells[3])
        rows.append({"app": cells[0], "m": m, "n": n, "k": k, "a_transpose": cells[4] == "T",
                     "b_transpose": cells[5] == "T", "ms": ms, "tflops": round(2.0 * m * n * k / (ms * 1e-3) / 1e12, 2)})
    print(json.dumps({
        "about": "Baidu DeepBench's dense GEMM training results on an NVIDIA V100, 16-bit inputs on the tensor cores "
                 "with 32-bit accumulation (cublasGemmEx, CUBLAS_TENSOR_OP_MATH, the mean of 400 back-to-back calls "
                 "timed with std::chrono). C (M x N) = A (M x K) B (K x N), column-major as cuBLAS, each operand "
                 "transposed or not as the row says. Written by tests/validation/deepbench_table.py; nothing derived "
                 "but TFLOP/s.",
        "source": {"repo": "baidu-research/DeepBench", "commit": COMMIT, "file": PATH, "sheet": SHEET,
                   "note": "results updated by NVIDIA in October 2019 ('Patch the code base to ensure Tensor Cores to "
                           "be used in more cases and update NVIDIA results based on this patch')"},
        "machine": {"gpu": specs.get("GPU Model"), "system": system, "cuda": specs.get("CUDA Version"),
                    "driver": specs.get("Nvidia Driver"), "cudnn": specs.get("Cudnn Version")},
        "rows": rows}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
