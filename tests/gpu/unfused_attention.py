#!/usr/bin/env python3
"""Unfused attention's kernels one by one on this machine's GPU, at the shapes of
FlashAttention-2's and -3's benchmarks (16384 tokens, hidden 2048, head size 64 or 128,
512 to 4096 tokens a sequence), to split the gap between dtsim's unfused attention and
PyTorch's as those papers measured it (README, "The same gap on the A100"): which of
the batched GEMMs, the softmax, the mask, the dropout and the layout copies runs slower
than dtsim's GEMM and streaming rates.

    python3 tests/gpu/unfused_attention.py > unfused-attention.json
    python3 tests/gpu/summarize_unfused.py unfused-attention.json   # dtsim beside each kernel

Each kernel: CUDA events around one call, 3 warm-ups, the median of 10. The GEMMs run as
PyTorch calls them (torch.baddbmm / torch.bmm: cuBLAS strided-batched GEMMs), once on
contiguous operands (the FlashAttention benchmark's rearranged q, k, v) and once on
Megatron's layout ([seq, batch x heads, head] views transposed, as its CoreAttention
passes them). The whole attention_pytorch of FlashAttention-2's benchmark is timed too,
forward and backward, so that the kernels can be summed against it; and Megatron's
attention core forward, with its fused causal softmax where Transformer Engine or
Megatron's extension provides it, at the shapes of two A100 rows dtsim predicts too fast
(README, "One Megatron layer on the A100"), against dtsim's cost of the same kernels.""" 
import json
import math

import torch

from cuda_events import timed  # tests/gpu/cuda_events.py, beside this script


def attention_pytorch(qkv, causal):
    """FlashAttention-2's benchmark function (benchmarks/benchmark_flash_attention.py), dropout 0."""
    batch, seq, _, heads, d = qkv.shape
    q, k, v = qkv.unbind(dim=2)
    q = q.permute(0, 2, 1, 3).reshape(batch * heads, seq, d)
    k = k.permute(0, 2, 3, 1).reshape(batch * heads, d, seq)
    scores = torch.empty(batch * heads, seq, seq, dtype=qkv.dtype, device=qkv.device)
    scores = torch.baddbmm(scores, q, k, beta=0, alpha=1.0 / math.sqrt(d)).view(batch, heads, seq, seq)
    if causal:
        scores = scores + torch.triu(torch.full((seq, seq), -10000.0, device=qkv.device), 1).to(qkv.dtype)
    attention = torch.softmax(scores, dim=-1)
    return torch.einsum("bhts,bshd->bthd", attention, v)


def point(seq, d, dtype):
    batch, heads = 16384 // seq, 2048 // d
    bh = batch * heads
    scale = 1.0 / math.sqrt(d)
    rnd = lambda *shape: torch.randn(*shape, device="cuda", dtype=dtype)
    q, kt, v, grad_out = rnd(bh, seq, d), rnd(bh, d, seq), rnd(bh, seq, d), rnd(bh, seq, d)
    scores = torch.empty(bh, seq, seq, device="cuda", dtype=dtype)
    probs, grad_probs = rnd(bh, seq, seq).softmax(-1), rnd(bh, seq, seq)
    mask = torch.triu(torch.full((seq, seq), -10000.0, device="cuda"), 1).to(dtype)
    keep = torch.ops.aten.native_dropout(probs, 0.1, True)[1]
    # Megatron's CoreAttention: q, k, v as [seq, batch x heads, head] (from [s, b, np, hn]).
    qm, km, vm = rnd(seq, bh, d), rnd(seq, bh, d), rnd(seq, bh, d)
    score_bytes = bh * seq * seq * probs.element_size()
    kernels = {
        # name: (call, FLOPs, the GEMM's m, n, k or the bytes a streaming kernel moves)
        "qk_baddbmm": (lambda: torch.baddbmm(scores, q, kt, beta=0, alpha=scale), 2 * bh * seq * seq * d, (seq, seq, d)),
        "qk_baddbmm_megatron_layout": (lambda: torch.baddbmm(scores, qm.transpose(0, 1), km.transpose(0, 1).transpose(1, 2),
                                                             beta=0, alpha=scale), 2 * bh * seq * seq * d, (seq, seq, d)),
        "av_bmm": (lambda: torch.bmm(probs, v), 2 * bh * seq * seq * d, (seq, d, seq)),
        "av_bmm_megatron_layout": (lambda: torch.bmm(probs, vm.transpose(0, 1)), 2 * bh * seq * seq * d, (seq, d, seq)),
        "grad_probs_bmm": (lambda: torch.bmm(grad_out, v.transpose(1, 2)), 2 * bh * seq * seq * d, (seq, seq, d)),
        "grad_v_bmm": (lambda: torch.bmm(probs.transpose(1, 2), grad_out), 2 * bh * seq * seq * d, (seq, d, seq)),
        "grad_q_bmm": (lambda: torch.bmm(grad_probs, kt.transpose(1, 2)), 2 * bh * seq * seq * d, (seq, d, seq)),
        "softmax_forward": (lambda: torch.softmax(scores, dim=-1), 0, 2 * score_bytes),
        "softmax_backward": (lambda: torch._softmax_backward_data(grad_probs, probs, -1, dtype), 0, 3 * score_bytes),
        "causal_mask_add": (lambda: scores + mask, 0, 2 * score_bytes),
        "dropout_forward": (lambda: torch.ops.aten.native_dropout(probs, 0.1, True), 0,
                            2 * score_bytes + score_bytes // probs.element_size()),
        "dropout_backward": (lambda: torch.ops.aten.native_dropout_backward(grad_probs, keep, 1 / 0.9), 0,
                             2 * score_bytes + score_bytes // probs.element_size()),
        "scores_copy": (lambda: probs.clone(), 0, 2 * score_bytes),
    }
    rows = []
    for name, (fn, flops, shape) in kernels.items():
        us, _ = timed(fn)
        row = {"kernel": name, "seq": seq, "head_dim": d, "batch_heads": bh, "dtype": str(dtype).split(".")[-1], "us": us}
        if flops:
            row.update({"m": shape[0], "n": shape[1], "k": shape[2], "tflops": flops / us / 1e6})
        else:
            row.update({"bytes": shape, "GBps": shape / us / 1e3})
        rows.append(row)
    for causal in (False, True):
        qkv = torch.randn(batch, seq, 3, heads, d, device="cuda", dtype=dtype, requires_grad=True)
        forward, _ = timed(lambda: attention_pytorch(qkv, causal))
        out = attention_pytorch(qkv, causal)
        grad = torch.randn_like(out)

        def both():
            attention_pytorch(qkv, causal).backward(grad)
        flops = 4 * batch * heads * seq * seq * d / (2 if causal else 1)
        total, _ = timed(both)
        rows.append({"kernel": "attention_pytorch", "causal": causal, "seq": seq, "head_dim": d, "batch_heads": bh,
                     "dtype": str(dtype).split(".")[-1], "forward_us": forward, "backward_us": total - forward,
                     "forward_tflops": flops / forward / 1e6, "backward_tflops": 2.5 * flops / (total - forward) / 1e6})
    return rows


def fused_upper_triang_softmax():
    """Megatron's fused causal softmax (scaled_upper_triang_masked_softmax), from
    Transformer Engine or Megatron's own extension where either is installed; None
    where neither is (the core is then timed with PyTorch's mask and softmax)."""
    try:
        import transformer_engine_torch as tex
        return "transformer_engine", tex.scaled_upper_triang_masked_softmax_forward
    except ImportError:
        pass
    try:
        import scaled_upper_triang_masked_softmax_cuda as megatron
        return "megatron", megatron.forward
    except ImportError:
        return None


def megatron_core(name, samples, heads, seq, d, dtype=torch.float16):
    """The attention core as Megatron-LM ran it in 2021-2022 (megatron/model/transformer.py,
    CoreAttention) at the shapes of an A100 row dtsim misses: baddbmm of q and k in its
    [seq, batch x heads, head] layout, the scaled causal softmax, dropout 0.1, bmm with v,
    and the context permuted back to [seq, batch, hidden]. Korthikanti et al.'s 22B layer
    (tp 8: 4 samples x 8 heads of 96) and the SC'21 1.7B row (16 samples x 24 heads of 96)."""
    bh = samples * heads
    rnd = lambda *shape: torch.randn(*shape, device="cuda", dtype=dtype)
    qm, km, vm = rnd(seq, bh, d), rnd(seq, bh, d), rnd(seq, bh, d)
    scores = torch.empty(bh, seq, seq, device="cuda", dtype=dtype)
    mask = torch.triu(torch.full((seq, seq), -10000.0, device="cuda"), 1).to(dtype)
    fused = fused_upper_triang_softmax()
    scale = 1.0 / math.sqrt(d)

    def softmax(s):
        if fused:
            return fused[1](s, 1.0)
        return torch.softmax(s + mask, dim=-1)

    def core():
        s = torch.baddbmm(scores, qm.transpose(0, 1), km.transpose(0, 1).transpose(1, 2), beta=0, alpha=scale)
        p = torch.ops.aten.native_dropout(softmax(s), 0.1, True)[0]
        context = torch.bmm(p, vm.transpose(0, 1))  # [b x np, s, hn]
        return context.view(samples, heads, seq, d).permute(2, 0, 1, 3).contiguous()
    us, _ = timed(core)
    s = torch.baddbmm(scores, qm.transpose(0, 1), km.transpose(0, 1).transpose(1, 2), beta=0, alpha=scale)
    softmax_us, _ = timed(lambda: softmax(s))
    return {"kernel": "megatron_core_forward", "shape": name, "samples": samples, "heads": heads, "seq": seq,
            "head_dim": d, "batch_heads": bh, "dtype": str(dtype).split(".")[-1], "forward_us": us,
            "softmax_us": softmax_us, "softmax": fused[0] if fused else "pytorch (no fused kernel installed)"}


def main():
    rows = []
    for shape in (("korthikanti_22b_tp8", 4, 8, 2048, 96), ("sc21_1.7b", 16, 24, 2048, 96)):
        try:
            rows.append(megatron_core(*shape))
        except RuntimeError as e:  # out of memory
            rows.append({"kernel": "megatron_core_forward", "shape": shape[0], "error": str(e).splitlines()[0]})
        torch.cuda.empty_cache()
    for dtype in (torch.float16, torch.bfloat16):
        for d in (64, 128):
            for seq in (512, 1024, 2048, 4096):
                try:
                    rows += point(seq, d, dtype)
                except RuntimeError as e:  # out of memory
                    rows.append({"seq": seq, "head_dim": d, "dtype": str(dtype), "error": str(e).splitlines()[0]})
                torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(0)
    print(json.dumps({"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
                      "cuda": torch.version.cuda, "command": "python3 tests/gpu/unfused_attention.py",
                      "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
