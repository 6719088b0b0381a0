"""Timing with CUDA events, as the one-GPU scripts of tests/gpu measure their kernels."""
import statistics

import torch


def timed(fn, repeats=10, warmup=3):
    """The median and every repeat, in microseconds, of one call of `fn` between two
    CUDA events, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)  # us
    return statistics.median(times), times
