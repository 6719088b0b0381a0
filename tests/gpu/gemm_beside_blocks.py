#!/usr/bin/env python3
"""Does a GEMM stall beside a kernel that holds some SMs, or slow in proportion?

    python3 tests/gpu/gemm_beside_blocks.py > gemm-beside-blocks.json

One GPU. An NCCL collective runs as one thread block per channel, each block
holding an SM for the collective's whole duration. This script stands in for
it with a kernel of `blocks` thread blocks that each take a whole SM (1024
threads and most of its shared memory) and spin for `hold_us`, launched on
one stream just before a cuBLAS GEMM (torch.matmul, bf16) on another. The GEMM
is timed with CUDA events on its own stream, beside the held SMs and alone.

dtsim's model (sim::contention_slowdown) says: on a device whose figures
say `persistent` (Hopper), cuBLAS gives each of its blocks a fixed share of
the tiles, the blocks that find no free SM wait, and the GEMM runs twice as
long while the held SMs stay held (dtsim's rate model: 2x during the hold,
full speed after it); elsewhere it runs on S - c SMs, time x S / (S - c).
README, "Validation", "Hopper's persistent GEMMs beside NCCL" and candidate
4, say what each answer would change. Prepared in the twelfth session
without a GPU: not yet run.
"""
import json
import statistics

import torch
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void __launch_bounds__(1024) hold(long long cycles) {
  extern __shared__ char taken[];  // sized so that nothing else fits on the SM
  const long long start = clock64();
  while (clock64() - start < cycles) {
    if (threadIdx.x == 0) taken[0] = 0;
  }
}

void hold_sms(int64_t blocks, int64_t cycles, int64_t shared_bytes) {
  cudaFuncSetAttribute(hold, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
  hold<<<static_cast<unsigned>(blocks), 1024, static_cast<size_t>(shared_bytes),
         at::cuda::getCurrentCUDAStream()>>>(cycles);
}
"""
CPP_SOURCE = "void hold_sms(int64_t blocks, int64_t cycles, int64_t shared_bytes);"

# The same kernel through CuPy's NVRTC, which compiles in a second where
# torch's load_inline builds an extension for a minute.
CUPY_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(1024) hold(long long cycles) {
  extern __shared__ char taken[];
  const long long start = clock64();
  while (clock64() - start < cycles) {
    if (threadIdx.x == 0) taken[0] = 0;
  }
}
"""


def hold_function():
    """hold_sms(blocks, cycles, shared_bytes) on torch's current stream."""
    try:
        import cupy
        kernel = cupy.RawKernel(CUPY_SOURCE, "hold")

        def hold_sms(blocks, cycles, shared_bytes):
            kernel.max_dynamic_shared_size_bytes = shared_bytes
            with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                kernel((blocks,), (1024,), (cupy.int64(cycles),), shared_mem=shared_bytes)
        return hold_sms, "cupy"
    except ImportError:
        ext = load_inline("dtsim_hold_sms", CPP_SOURCE, cuda_sources=CUDA_SOURCE, functions=["hold_sms"])
        return ext.hold_sms, "load_inline"


# Training's GEMMs (Llama's and GPT-3's layers at a few thousand tokens) and one small one.
SHAPES = [(8192, 4096, 4096), (8192, 14336, 4096), (4096, 5120, 20480), (8192, 12288, 12288), (16384, 1536, 12288),
          (2048, 2048, 2048)]
BLOCKS = [1, 2, 4, 8, 16, 24, 32, 48, 64]  # NCCL runs one block per channel: 2 to 32 channels on NVLink and IB
REPEATS = 10


def timed(stream, fn):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record()
        fn()
        stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3  # us


def spin_clock_hz(stream, spin):
    """The SM clock as a spinning block sees it: `spin(cycles)` launches one block that spins that long."""
    cycles = 20_000_000
    us = statistics.median(timed(stream, lambda: spin(cycles)) for _ in range(5))
    return cycles / (us * 1e-6)


def gemm_alone_us(stream, a, b):
    """The median time of `a @ b` on `stream`, after five warm-ups."""
    for _ in range(5):
        timed(stream, lambda: torch.matmul(a, b))
    return statistics.median(timed(stream, lambda: torch.matmul(a, b)) for _ in range(REPEATS))


def main():
    hold_sms, built_with = hold_function()
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    shared = 200 * 1024
    gemm_stream, hold_stream = torch.cuda.Stream(), torch.cuda.Stream()
    clock_hz = spin_clock_hz(hold_stream, lambda cycles: hold_sms(1, cycles, shared))
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        alone = gemm_alone_us(gemm_stream, a, b)
        for blocks in BLOCKS:
            # hold_first: the SMs are held when the GEMM starts (a collective already running);
            # gemm_first: the holder is launched just after the GEMM (a collective starting mid-GEMM).
            for order, hold_factor in (("hold_first", 2.0), ("hold_first", 5.0), ("gemm_first", 2.0)):
                hold_us = hold_factor * alone
                cycles = int(hold_us * 1e-6 * clock_hz)
                beside = []
                for _ in range(REPEATS):
                    torch.cuda.synchronize()
                    if order == "hold_first":
                        with torch.cuda.stream(hold_stream):
                            hold_sms(blocks, cycles, shared)
                        beside.append(timed(gemm_stream, lambda: torch.matmul(a, b)))
                    else:
                        def gemm_then_hold():
                            torch.matmul(a, b)
                            with torch.cuda.stream(hold_stream):
                                hold_sms(blocks, cycles, shared)
                        beside.append(timed(gemm_stream, gemm_then_hold))
                torch.cuda.synchronize()
                rows.append({"m": m, "n": n, "k": k, "sms": sms, "blocks_held": blocks, "order": order,
                             "hold_us": hold_us, "alone_us": alone, "beside_us": statistics.median(beside),
                             "proportional_us": alone * sms / (sms - blocks), "stalled_us": hold_us + alone})
    print(json.dumps({"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda, "spin_clock_hz": clock_hz, "hold_kernel": built_with,
                      "command": "python3 tests/gpu/gemm_beside_blocks.py", "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
