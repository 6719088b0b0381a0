#!/usr/bin/env python3
"""Eager PyTorch training steps on one GPU, with the kernels they ran.

    python3 tests/gpu/pytorch_steps.py MODEL.json:MBS [...] > pytorch-steps.json

dtsim's own GPU loop (`dtsim validate --backend cuda`) runs the kernels
dtsim's model says a step runs, so it checks the kernel model, not the
framework. This script runs the step as eager PyTorch writes it, from a
dtsim model file (layers, hidden, heads, ffn_hidden, vocab, seq_len, mlp,
norm, positions, tied_embeddings): fp32 weights under bf16 autocast,
`scaled_dot_product_attention`, LayerNorm as `torch.nn.LayerNorm` and
RMSNorm and rotary as Hugging Face's chains of element-wise ops, the fp32
cross entropy of `logits.float()`, clipping and `torch.optim.AdamW`'s
default (foreach) step: what `dtsim simulate -m MODEL.json -c dgx-h100
-s one_device,mbs=MBS,gbs=MBS` models under `framework=pytorch`.

For each model it prints the median step time and, from torch.profiler, the
GPU time of one step by kernel (name, calls, microseconds) and by class
(gemm, attention, optimizer, other), so a difference between dtsim and the
step can be traced to the kernels that make it.
"""
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps=1e-5):
    # Hugging Face's LlamaRMSNorm: a chain of element-wise kernels.
    dtype = x.dtype
    x = x.float()
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Norm(torch.nn.Module):
    def __init__(self, kind, hidden):
        super().__init__()
        self.kind = kind
        if kind == "layernorm":
            self.norm = torch.nn.LayerNorm(hidden)
        else:
            self.weight = torch.nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return self.norm(x) if self.kind == "layernorm" else rms_norm(x, self.weight)


class Block(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, self.heads = cfg["hidden"], cfg["heads"]
        self.gated = cfg.get("mlp", "gelu") == "swiglu"
        ffn = cfg.get("ffn_hidden") or 4 * h
        bias = bool(cfg.get("bias", False))
        self.norm1, self.norm2 = Norm(cfg.get("norm", "layernorm"), h), Norm(cfg.get("norm", "layernorm"), h)
        self.qkv = torch.nn.Linear(h, 3 * h, bias=bias)
        self.proj = torch.nn.Linear(h, h, bias=bias)
        self.fc1 = torch.nn.Linear(h, 2 * ffn if self.gated else ffn, bias=bias)
        self.fc2 = torch.nn.Linear(ffn, h, bias=bias)

    def forward(self, x, rope):
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        if rope is not None:
            cos, sin = rope
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(a)
        y = self.fc1(self.norm2(x))
        if self.gated:
            gate, up = y.chunk(2, dim=-1)
            y = F.silu(gate) * up
        else:
            y = F.gelu(y)
        return x + self.fc2(y)


class Gpt(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, s = cfg["hidden"], cfg["seq_len"]
        self.embed = torch.nn.Embedding(cfg["vocab"], h)
        self.learned = cfg.get("positions", "rope") == "learned"
        self.pos = torch.nn.Embedding(s, h) if self.learned else None
        self.blocks = torch.nn.ModuleList(Block(cfg) for _ in range(cfg["layers"]))
        self.norm = Norm(cfg.get("norm", "layernorm"), h)
        self.tied = cfg.get("tied_embeddings", True)
        self.head = None if self.tied else torch.nn.Linear(h, cfg["vocab"], bias=False)
        d = h // cfg["heads"]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        angles = torch.outer(torch.arange(s, dtype=torch.float32), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        if self.learned:
            x = x + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        rope = None if self.learned else (self.cos.to(torch.bfloat16), self.sin.to(torch.bfloat16))
        for block in self.blocks:
            x = block(x, rope)
        x = self.norm(x)
        return x @ self.embed.weight.t() if self.tied else self.head(x)


def classify(name):
    n = name.lower()
    if any(t in n for t in ("flash", "fmha", "attention", "cudnn")):
        return "attention"
    if any(t in n for t in ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "cublas", "splitk")):
        return "gemm"
    if "multi_tensor" in n or "foreach" in n or "adam" in n:
        return "optimizer"
    return "other"


def run_model(path, mbs, steps=10, warmup=3):
    with open(path) as f:
        cfg = json.load(f)
    torch.manual_seed(0)
    with torch.device("cuda"):  # initialised where it runs: seconds, not a CPU minute for 2B parameters
        model = Gpt(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = cfg["vocab"]
    tokens = torch.randint(0, vocab, (mbs, cfg["seq_len"]), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens)
        loss = F.cross_entropy(logits.float().view(-1, vocab), tokens.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    times = []
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    from torch.profiler import ProfilerActivity, profile
    profiled = 2
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(profiled):
            step()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        calls, total = kernels.get(e.name, (0, 0.0))
        kernels[e.name] = (calls + 1, total + e.time_range.elapsed_us())
    if not kernels:  # an older profiler keeps device time on the averages only
        for e in prof.key_averages():
            us = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
            if us > 0:
                kernels[e.key] = (e.count, us)
    table = sorted(({"name": k[:160], "calls": c / profiled, "us": t / profiled, "class": classify(k)}
                    for k, (c, t) in kernels.items()), key=lambda r: -r["us"])
    by_class = {}
    for r in table:
        by_class[r["class"]] = by_class.get(r["class"], 0.0) + r["us"]
    params = sum(p.numel() for p in model.parameters())
    result = {"model": path, "mbs": mbs, "params": params, "step_ms": statistics.median(times),
              "step_ms_all": times, "gpu_busy_ms": sum(r["us"] for r in table) / 1e3,
              "by_class_ms": {k: v / 1e3 for k, v in by_class.items()},
              "kernels": table[:60], "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30}
    del model, optimizer
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return result


def main():
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "command": "python3 tests/gpu/pytorch_steps.py " + " ".join(sys.argv[1:]), "runs": []}
    for arg in sys.argv[1:]:
        path, mbs = arg.rsplit(":", 1)
        try:
            out["runs"].append(run_model(path, int(mbs)))
        except Exception as e:  # one model's failure (memory, say) leaves the others' figures
            out["runs"].append({"model": path, "mbs": int(mbs), "error": repr(e)})
            torch.cuda.empty_cache()
        print(f"{arg}: {out['runs'][-1].get('step_ms', out['runs'][-1].get('error'))}", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
