#!/usr/bin/python3
"""Generate the PyTorch reference values for the gradcheck table's attention_*_torch and
mlp_*_torch rows (tests/gradcheck/gradcheck.c).

Run once, by hand, from any directory: /usr/bin/python3 gen_attn_mlp_refs.py
It rewrites attention_*.txt and mlp_*.txt beside this script. The tests read those files; they
never run Python. Inputs are drawn here (fixed seed), rounded to float32 and stored; every result
is computed in float64 from the stored values.

File format: sections "name count" followed by count values, 8 per line. The first section,
"dims", holds the integer sizes (attention: B T C NH causal rope; MLP: N C F).
Attention: softmax(q k^T / sqrt(hs), -inf above the diagonal when causal) v, written out because
Debian's torch 1.13 has no F.scaled_dot_product_attention, on q, k, v split from qkv (B,T,3C) as [q | k | v] per
token, heads of C/NH consecutive channels; RoPE is GPT-NeoX/LLaMA rotate-half with base 10000 on
q and k, positions 0..T-1. The loss is sum(out * dout), so the stored gradients are backward(dout).
"""
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(1234)


def draw(*shape, scale=1.0):
    """Uniform(-scale, scale), rounded to float32, returned as float64 leaf."""
    x = (torch.rand(*shape, dtype=torch.float64) * 2 - 1) * scale
    return x.float().double().requires_grad_(True)


def write(name, sections):
    with open(os.path.join(HERE, name), "w") as f:
        for key, value in sections:
            flat = value.detach().reshape(-1).tolist() if torch.is_tensor(value) else value
            f.write(f"{key} {len(flat)}\n")
            for i in range(0, len(flat), 8):
                f.write(" ".join(f"{float(v):.9g}" for v in flat[i:i + 8]) + "\n")


def rope(x, base=10000.0):
    """x (B,NH,T,hs) rotated: pairs (i, i + hs/2) by angle t * base^(-2i/hs)."""
    T, hs = x.shape[-2], x.shape[-1]
    half = hs // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / hs)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1)
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1)
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def attention(name, B, T, C, NH, causal, use_rope):
    hs = C // NH
    qkv = draw(B, T, 3 * C)
    dout = draw(B, T, C)
    q, k, v = qkv.split(C, dim=-1)
    q, k, v = (t.reshape(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
    if use_rope:
        q, k = rope(q), rope(k)
    scores = q @ k.transpose(-2, -1) / hs ** 0.5
    if causal:
        mask = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v
    out = y.transpose(1, 2).reshape(B, T, C)
    (out * dout).sum().backward()
    write(name, [("dims", [B, T, C, NH, int(causal), int(use_rope)]), ("qkv", qkv),
                 ("dout", dout), ("out", out), ("dqkv", qkv.grad)])


def mlp_gelu(name, N, C, F_):
    x, w_fc, b_fc = draw(N, C), draw(F_, C, scale=0.5), draw(F_, scale=0.5)
    w_proj, b_proj, dout = draw(C, F_, scale=0.5), draw(C, scale=0.5), draw(N, C)
    out = F.linear(F.gelu(F.linear(x, w_fc, b_fc), approximate="tanh"), w_proj, b_proj)
    (out * dout).sum().backward()
    write(name, [("dims", [N, C, F_]), ("in", x), ("w_fc", w_fc), ("b_fc", b_fc),
                 ("w_proj", w_proj), ("b_proj", b_proj), ("dout", dout), ("out", out),
                 ("din", x.grad), ("dw_fc", w_fc.grad), ("db_fc", b_fc.grad),
                 ("dw_proj", w_proj.grad), ("db_proj", b_proj.grad)])


def mlp_swiglu(name, N, C, F_):
    x, w_gate, w_up = draw(N, C), draw(F_, C, scale=0.5), draw(F_, C, scale=0.5)
    w_down, dout = draw(C, F_, scale=0.5), draw(N, C)
    out = F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)
    (out * dout).sum().backward()
    write(name, [("dims", [N, C, F_]), ("in", x), ("w_gate", w_gate), ("w_up", w_up),
                 ("w_down", w_down), ("dout", dout), ("out", out), ("din", x.grad),
                 ("dw_gate", w_gate.grad), ("dw_up", w_up.grad), ("dw_down", w_down.grad)])


attention("attention_causal.txt", B=2, T=5, C=8, NH=2, causal=True, use_rope=False)
attention("attention_bidir_rope.txt", B=1, T=6, C=12, NH=2, causal=False, use_rope=True)
attention("attention_causal_rope.txt", B=2, T=9, C=16, NH=4, causal=True, use_rope=True)
mlp_gelu("mlp_gelu.txt", N=5, C=6, F_=12)
mlp_swiglu("mlp_swiglu.txt", N=5, C=6, F_=10)
