#!/usr/bin/python3
"""PyTorch's side of bench_block and bench_memory: the same transformer, written the way a
PyTorch user would write it, timed and measured the same way.

    bench_block_torch.py [--mode speed|memory] [--threads 1] [--reps 5] [--warmup 2]
                         [--batch 8] [--layers 1]

Model (tess_bench_tfm_config in bench_common.c): vocabulary 64, T 256, C 256, 4 heads (hs 64),
F 704, pre-norm; embedding, blocks of RMSNorm (written out: torch 1.13 has no nn.RMSNorm), fused
qkv linear without bias, RoPE rotate-half, causal softmax attention (manual: torch 1.13 has no
F.scaled_dot_product_attention, so the full T x T scores are formed and masked), output
projection, RMSNorm, SwiGLU MLP without biases, residuals; final RMSNorm, head, cross-entropy.
fp32. Tokens as tess_bench_tokens: ids[i] = (7i+3) mod V, targets[i] = (7i+10) mod V.

speed:  a timed step is zero_grad(set_to_none) + forward + backward; prints "step_s" (wall)
        and "step_cpu_s" (process CPU time) lines.
memory: baseline VmRSS after `import torch` and one warm-up matmul, VmHWM reset to it, then model
        + AdamW + one step (forward, backward, update); prints VmHWM, the parameter count and the
        bytes of the tensors autograd saved for backward (unique storages, parameters excluded).
Prints "key value" lines, like the C programs, for bench/run_foundation.sh.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_common import rope_tables, rotate_half, setup, timed_steps

V, T, C, NH, FF = 64, 256, 256, 4, 704
HS = C // NH


def proc_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = RMSNorm(C)
        self.qkv = nn.Linear(C, 3 * C, bias=False)
        self.proj = nn.Linear(C, C, bias=False)
        self.norm2 = RMSNorm(C)
        self.w_gate = nn.Linear(C, FF, bias=False)
        self.w_up = nn.Linear(C, FF, bias=False)
        self.w_down = nn.Linear(FF, C, bias=False)

    def forward(self, x, cos, sin, mask):
        B = x.shape[0]
        q, k, v = self.qkv(self.norm1(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, NH, HS).transpose(1, 2) for t in (q, k, v))  # (B, NH, T, hs)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        h = self.norm2(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Model(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.emb = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        self.norm_f = RMSNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        cos, sin = rope_tables(T, HS)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))
        std_out = 0.02 / math.sqrt(2 * layers)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, std_out if name.endswith(("proj.weight", "w_down.weight")) else 0.02)

    def forward(self, ids, targets):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin, self.mask)
        logits = self.head(self.norm_f(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def tokens(batch):
    i = torch.arange(batch * T, dtype=torch.int64)
    return ((7 * i + 3) % V).view(batch, T), ((7 * i + 10) % V).view(batch, T)


def speed(args):
    model = Model(args.layers)
    ids, targets = tokens(args.batch)
    timed_steps(lambda: model.zero_grad(set_to_none=True), lambda: model(ids, targets),
                args.warmup, args.reps)


def memory(args):
    a = torch.randn(512, 512)
    (a @ a).sum().item()
    del a
    rss0 = proc_kib("VmRSS")
    print(f"baseline_rss_kib {rss0}")
    print(f"hwm_reset {int(reset_hwm())}")
    model = Model(args.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    ids, targets = tokens(args.batch)
    param_ptrs = {p.storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        st = t.storage()
        if st.data_ptr() not in param_ptrs:
            saved[st.data_ptr()] = st.nbytes()
        return t

    opt.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(ids, targets)
    loss.backward()
    opt.step()
    print(f"loss {loss.item():.6f}")
    print(f"hwm_kib {proc_kib('VmHWM')}")
    params = sum(p.numel() for p in model.parameters())
    print(f"params {params}")
    print(f"state_bytes {16 * params}")
    print(f"activation_bytes {sum(saved.values())}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["speed", "memory"], default="speed")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=1)
    args = ap.parse_args()
    setup(args.threads)
    if args.mode == "speed":
        speed(args)
    else:
        memory(args)


if __name__ == "__main__":
    main()
