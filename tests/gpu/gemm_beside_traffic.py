#!/usr/bin/env python3
"""Does a collective's memory traffic slow a GEMM beside it, beyond its SMs?

    python3 tests/gpu/gemm_beside_traffic.py > gemm-beside-traffic.json

One GPU, PyTorch and CuPy. tests/gpu/gemm_beside_blocks.py holds whole SMs
with blocks that only spin: on an H100 a GEMM started beside them runs
1.15-1.35x as long at 8-32 held SMs. An NCCL kernel's blocks also move its
bytes through the GPU's memory (what it sends is read, what it receives
written). Here the same blocks copy a buffer of their own (16 MiB a block,
past the L2 once there are a few) for the hold, so the GEMM shares both the
SMs and the memory; each row gives the copy's rate beside the GEMM's time
with spinning blocks, with copying blocks and alone.
"""
import json
import statistics

import cupy
import torch

from gemm_beside_blocks import gemm_alone_us, spin_clock_hz, timed  # this script's folder

SOURCE = r"""
extern "C" __global__ void __launch_bounds__(1024) hold(long long cycles, const int4* src, int4* dst,
                                                         long long per_block, int copy,
                                                         unsigned long long* moved) {
  extern __shared__ char taken[];  // sized so that nothing else fits on the SM
  const long long start = clock64();
  const int4* s = src + blockIdx.x * per_block;
  int4* d = dst + blockIdx.x * per_block;
  unsigned long long copied = 0;
  while (clock64() - start < cycles) {
    if (copy) {
      for (long long i = threadIdx.x; i < per_block && clock64() - start < cycles; i += blockDim.x) {
        d[i] = s[i];
        copied += 2 * sizeof(int4);  // read and written
      }
    }
    if (threadIdx.x == 0) taken[0] = 0;
  }
  atomicAdd(moved, copied);
}
"""
SHAPES = [(8192, 4096, 4096), (8192, 14336, 4096), (8192, 12288, 12288)]
BLOCKS = [8, 16, 24, 32]
REPEATS = 10
PER_BLOCK_BYTES = 16 << 20
SHARED = 200 * 1024


def main():
    kernel = cupy.RawKernel(SOURCE, "hold")
    kernel.max_dynamic_shared_size_bytes = SHARED
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    per_block = PER_BLOCK_BYTES // 16
    src = cupy.zeros(max(BLOCKS) * PER_BLOCK_BYTES // 4, dtype=cupy.float32)
    dst = cupy.zeros_like(src)
    moved = cupy.zeros(1, dtype=cupy.uint64)
    gemm_stream, hold_stream = torch.cuda.Stream(), torch.cuda.Stream()

    def hold(blocks, cycles, copy):
        with cupy.cuda.ExternalStream(hold_stream.cuda_stream):
            moved.fill(0)  # on the holder's stream, before it
            kernel((blocks,), (1024,), (cupy.int64(cycles), src, dst, cupy.int64(per_block), cupy.int32(copy), moved),
                   shared_mem=SHARED)

    clock_hz = spin_clock_hz(hold_stream, lambda cycles: hold(1, cycles, 0))
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        alone = gemm_alone_us(gemm_stream, a, b)
        for blocks in BLOCKS:
            hold_us = 3.0 * alone
            cycles = int(hold_us * 1e-6 * clock_hz)
            row = {"m": m, "n": n, "k": k, "sms": sms, "blocks_held": blocks, "hold_us": hold_us, "alone_us": alone,
                   "proportional_us": alone * sms / (sms - blocks)}
            for copy in (0, 1):
                beside, rates = [], []
                for _ in range(REPEATS):
                    torch.cuda.synchronize()
                    hold(blocks, cycles, copy)
                    beside.append(timed(gemm_stream, lambda: torch.matmul(a, b)))
                    torch.cuda.synchronize()
                    rates.append(int(moved.get()[0]) / (hold_us * 1e-6))
                row["copying_us" if copy else "spinning_us"] = statistics.median(beside)
                if copy:
                    row["copy_bytes_per_s"] = statistics.median(rates)
            rows.append(row)
    print(json.dumps({"gpu": props.name, "torch": torch.__version__, "cupy": cupy.__version__, "spin_clock_hz": clock_hz,
                      "command": "python3 tests/gpu/gemm_beside_traffic.py", "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
