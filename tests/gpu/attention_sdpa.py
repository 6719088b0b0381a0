#!/usr/bin/env python3
"""Fused attention on this machine's GPU through PyTorch's scaled_dot_product_attention,
with each backend PyTorch offers (FlashAttention-2 and cuDNN), forward and backward,
over sequence lengths, head sizes and causal masks: the kernel measurements that check
the attention figures of dtsim's bundled kernel model (devices/<device>.json).

    python3 tests/gpu/attention_sdpa.py > attention-sdpa.json

16384 tokens per point (batch = 16384 / seq), hidden 2048 (heads = 2048 / head size), bf16.
FLOPs as the FlashAttention papers count them: forward 4*b*h*s^2*d, half under a causal
mask; backward 2.5x the forward. CUDA events around back-to-back calls, 3 warm-ups,
median of 10."""
import json

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

from cuda_events import timed  # tests/gpu/cuda_events.py, beside this script


def main():
    rows = []
    backends = {"flash2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for name, backend in backends.items():
        for head_dim in (64, 128):
            heads = 2048 // head_dim
            for seq in (512, 1024, 2048, 4096, 8192, 16384):
                batch = 16384 // seq
                for causal in (False, True):
                    q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                                           requires_grad=True) for _ in range(3))
                    grad = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
                    try:
                        with sdpa_kernel([backend]):
                            fwd, fwd_all = timed(lambda: sdpa(q, k, v, is_causal=causal))

                            def both():
                                out = sdpa(q, k, v, is_causal=causal)
                                out.backward(grad)
                            total, _ = timed(both)
                    except RuntimeError as e:
                        rows.append({"kernel": name, "seq": seq, "head_dim": head_dim, "causal": causal,
                                     "error": str(e).splitlines()[0]})
                        continue
                    flops = 4 * batch * heads * seq * seq * head_dim / (2 if causal else 1)
                    bwd = total - fwd
                    rows.append({"kernel": name, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
                                 "causal": causal, "forward_us": fwd, "backward_us": bwd,
                                 "forward_tflops": flops / fwd / 1e6, "backward_tflops": 2.5 * flops / bwd / 1e6,
                                 "forward_times_us": fwd_all})
    props = torch.cuda.get_device_properties(0)
    print(json.dumps({"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version(), "command": "python3 tests/gpu/attention_sdpa.py",
                      "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
