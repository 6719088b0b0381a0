#!/usr/bin/env python3
"""What a PyTorch eager op costs the host, and a step that is launch-bound.

    python3 tests/gpu/host_launch.py > host-launch.json

One GPU, PyTorch. dtsim's strategy key `host_launch` (8 us by default) is
the host's time to launch one kernel; a step of kernels shorter than that
takes its launches (README, "Validation", "Modelled: the host launches every
kernel"). The default comes from others' measurements; this script measures
it where dtsim's model runs:

- `add_us`: a loop of `y = x + 1` on a 1k-element tensor, timed on the host
  with no sync inside: the launch rate of the smallest eager op;
- `rms_norm_us`: Hugging Face's RMSNorm chain (float, pow, mean, + eps,
  rsqrt, *, cast, * weight) forward and backward on a small input, per
  launch (dtsim counts 8 forward and 12 backward);
- `tiny_gpt_step_ms`: the bundled `tiny-gpt` (4 layers, hidden 256, 8 heads,
  128 tokens, a 4096-token vocabulary, tied embeddings) at micro-batch 8 in
  bf16 autocast with torch.optim.AdamW, the median of 20 steps, beside what
  `dtsim simulate -m tiny-gpt -c dgx-h100 -s one_device,gbs=8,mbs=8` prints
  with and without `host_launch=0` (pass the dtsim binary as the first
  argument to have it run).

Prepared in the thirteenth session without a GPU: not yet run.
"""
import json
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def per_op_us(body, ops, repeats=5):
    """Median host time per op of `body` (which launches `ops` kernels), the GPU drained before each run."""
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        body()
        samples.append((time.perf_counter() - start) / ops * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def add_loop(x, n=10000):
    def body():
        for _ in range(n):
            x.add_(1)
    return body, n


def rms_norm(x, weight, eps=1e-6):
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return weight * (x.float() * torch.rsqrt(variance + eps)).to(x.dtype)


def rms_norm_loop(n=1000):
    x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weight = torch.ones(256, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def body():
        for _ in range(n):
            rms_norm(x, weight).sum().backward()
    return body, n * (8 + 12 + 2)  # the chain, its backward, the sum and its backward


class Block(torch.nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(hidden), torch.nn.LayerNorm(hidden)
        self.qkv, self.proj = torch.nn.Linear(hidden, 3 * hidden), torch.nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = torch.nn.Linear(hidden, 4 * hidden), torch.nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGpt(torch.nn.Module):
    def __init__(self, layers=4, hidden=256, heads=8, vocab=4096, seq=128):
        super().__init__()
        self.embed, self.pos = torch.nn.Embedding(vocab, hidden), torch.nn.Embedding(seq, hidden)
        self.blocks = torch.nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(hidden)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.norm(x) @ self.embed.weight.t()


def tiny_gpt_step_ms(steps=20, warmup=5):
    model = TinyGpt().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 4096, (8, 128), device="cuda")
    times = []
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens)
        loss = F.cross_entropy(logits.float().view(-1, 4096), tokens.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def dtsim_step_ms(binary, strategy):
    out = subprocess.run([binary, "simulate", "-m", "tiny-gpt", "-c", "dgx-h100", "-s", strategy, "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["step_time_s"] * 1e3


def main():
    x = torch.zeros(1024, device="cuda")
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "add_us": per_op_us(*add_loop(x)),
        "rms_norm_us": per_op_us(*rms_norm_loop()),
        "tiny_gpt_step_ms": tiny_gpt_step_ms(),
    }
    if len(sys.argv) > 1:
        result["dtsim_step_ms"] = dtsim_step_ms(sys.argv[1], "one_device,gbs=8,mbs=8")
        result["dtsim_step_ms_without_launches"] = dtsim_step_ms(sys.argv[1], "one_device,gbs=8,mbs=8,host_launch=0")
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
