#!/usr/bin/python3
"""PyTorch's side of bench_calm: one training step of the calm app's dual-axis transformer or of
its tokenizer, written the way a PyTorch user would write it, at the same sizes and shapes.

    bench_calm_torch.py [--tok 0] [--base 0] [--batch 4] [--threads 1] [--reps 3] [--warmup 1]

Dual-axis transformer (apps/calm/dat.h; --tok 0): h0 = E_tok[c] + E_unit[u] + E_sess[s] + W_in x
(the patch's P frames); per layer, pre-LayerNorm residual each: temporal attention per neuron over
the M patches (causal, RoPE rotate-half), neural attention per patch over the N neurons
(bidirectional, key-padding mask), GELU (tanh) FFN with biases; qkv and output projections
without bias; LayerNorm + Linear d->K next-token cross-entropy plus LayerNorm + Linear d->A P
next-patch head with a linear skip over the last S patches, in NLinear form (A = S = 4). Manual
attention (torch 1.13 has no F.scaled_dot_product_attention). --batch windows of N_max neurons x
M patches, every neuron real, tokens (7 i + 3) mod K, frames sin(0.1 t + n).

Tokenizer (apps/calm/tok.h; --tok 1): Conv1d(1->c, k 5, causal) + GELU -> Conv1d(c->c, k = stride
= P) -> Linear c->d_t -> n_t causal blocks (RoPE) -> Linear d_t->D_c -> L2 normalise; cosine
codebook (tau 0.1), Gumbel-softmax at tau_g 0.5 (noise drawn in the step); decoder Linear ->
n_t bidirectional blocks -> Linear -> ConvTranspose1d(k = stride = P) + GELU -> Conv1d(c->1, k 5,
causal); loss MSE + 0.5 MSE of differences + 0.1 orthogonality + 0.01 usage entropy. --batch
traces of M P frames, sin(0.1 t + trace).

--base 0|1: the spec's tiny or base sizes (as bench_calm). A timed step is zero_grad(set_to_none)
+ forward + backward + AdamW step (betas 0.9, 0.95, no weight decay); prints "step_s" (wall) and
"step_cpu_s" (process CPU time) per timed step, "params" and "loss" (first step), as key value
lines for bench/run_calm.sh.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_common import rope_tables, rotate_half, setup, timed_steps


def sizes(base):
    return dict(P=4, M=32 if base else 16, c=64, dt=128, nt=2, theads=4, Dc=32,
                K=512 if base else 256, d=256 if base else 64, layers=6 if base else 2,
                heads=8 if base else 4, ffn=1024 if base else 256, N=256 if base else 64, A=4, S=4)


class Attn(nn.Module):
    """x + W_o attn(LN(x) W_qkv^T) over the T axis of x (S, T, d)."""

    def __init__(self, d, heads, std, out_std):
        super().__init__()
        self.d, self.h, self.hs = d, heads, d // heads
        self.norm = nn.LayerNorm(d, eps=1e-5)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        nn.init.normal_(self.qkv.weight, 0.0, std)
        nn.init.normal_(self.proj.weight, 0.0, out_std)

    def forward(self, x, mask, rope):
        S, T, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).split(self.d, dim=-1)
        q, k, v = (t.view(S, T, self.h, self.hs).transpose(1, 2) for t in (q, k, v))
        if rope is not None:
            cos, sin = rope
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(S, T, self.d)
        return x + self.proj(y)


class FFN(nn.Module):
    def __init__(self, d, f, std, out_std):
        super().__init__()
        self.norm = nn.LayerNorm(d, eps=1e-5)
        self.fc = nn.Linear(d, f)
        self.out = nn.Linear(f, d)
        nn.init.normal_(self.fc.weight, 0.0, std)
        nn.init.normal_(self.out.weight, 0.0, out_std)
        nn.init.zeros_(self.fc.bias)
        nn.init.zeros_(self.out.bias)

    def forward(self, x):
        return x + self.out(F.gelu(self.fc(self.norm(x)), approximate="tanh"))


class DAT(nn.Module):
    def __init__(self, z, units, sessions):
        super().__init__()
        d, L = z["d"], z["layers"]
        std, out_std = 0.02, 0.02 / math.sqrt(2 * L)
        self.z = z
        self.tok = nn.Embedding(z["K"], d)
        self.unit = nn.Embedding(units, d)
        self.sess = nn.Embedding(sessions, d)
        for e in (self.tok, self.unit, self.sess):
            nn.init.normal_(e.weight, 0.0, std)
        self.patch_in = nn.Linear(z["P"], d, bias=False)
        nn.init.normal_(self.patch_in.weight, 0.0, std)
        self.tatt = nn.ModuleList(Attn(d, z["heads"], std, out_std) for _ in range(L))
        self.natt = nn.ModuleList(Attn(d, z["heads"], std, out_std) for _ in range(L))
        self.ffn = nn.ModuleList(FFN(d, z["ffn"], std, out_std) for _ in range(L))
        self.norm_f = nn.LayerNorm(d, eps=1e-5)
        self.head = nn.Linear(d, z["K"], bias=False)
        self.pnorm_f = nn.LayerNorm(d, eps=1e-5)
        AP, SP = z["A"] * z["P"], z["S"] * z["P"]
        self.phead = nn.Linear(d, AP, bias=False)
        self.skip = nn.Linear(SP, AP, bias=False)
        for w in (self.head.weight, self.phead.weight):
            nn.init.normal_(w, 0.0, std)
        nn.init.zeros_(self.skip.weight)
        M = z["M"]
        self.register_buffer("causal", torch.ones(M, M, dtype=torch.bool).triu(1))
        cos, sin = rope_tables(M, d // z["heads"])
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, tokens, unit, sess, frames, keymask, xc, res, has):
        """tokens (B,N,M), unit (B,N), sess (B), frames (B,N,M,P), keymask (B,N) True = padded,
        xc (B,N,M,S P) the skip's lags minus the last frame, res (B,N,M,A P) the residual
        targets, has (B,N,M,A P) 1 where the target exists."""
        B, N, M = tokens.shape
        d = self.z["d"]
        h = (self.tok(tokens) + self.unit(unit)[:, :, None] + self.sess(sess)[:, None, None]
             + self.patch_in(frames))
        nmask = keymask[:, None, None, None, :].expand(B, M, 1, 1, N).reshape(B * M, 1, 1, N)
        for ta, na, ff in zip(self.tatt, self.natt, self.ffn):
            h = ta(h.reshape(B * N, M, d), self.causal, (self.cos, self.sin))
            p = h.view(B, N, M, d).transpose(1, 2).reshape(B * M, N, d)
            p = ff(na(p, nmask, None))
            h = p.view(B, M, N, d).transpose(1, 2).reshape(B, N, M, d)
        logits = self.head(self.norm_f(h))[:, :, :-1]
        ce = F.cross_entropy(logits.reshape(-1, self.z["K"]), tokens[:, :, 1:].reshape(-1),
                             reduction="sum")
        y = self.phead(self.pnorm_f(h)) + self.skip(xc)
        mse = (((y - res) ** 2) * has).sum() / (self.z["A"] * self.z["P"])
        pairs = B * N * (M - 1)
        return (ce + mse) / pairs


def dat_inputs(z, B):
    N, M, P, A, S = z["N"], z["M"], z["P"], z["A"], z["S"]
    i = torch.arange(B * N * M, dtype=torch.int64)
    tokens = ((7 * i + 3) % z["K"]).view(B, N, M)
    unit = (torch.arange(B * N) % N).view(B, N)
    sess = torch.zeros(B, dtype=torch.int64)
    t = torch.arange(M * P, dtype=torch.float64)
    r = torch.arange(B * N, dtype=torch.float64)[:, None]
    fr = torch.sin(0.1 * t[None, :] + r).float().view(B, N, M * P)
    frames = fr.view(B, N, M, P)
    last = frames[..., P - 1:]  # (B,N,M,1)
    pad = torch.cat([torch.zeros(B, N, (S - 1) * P), fr], dim=-1)
    xc = torch.stack([pad[:, :, m * P:(m + S) * P] for m in range(M)], dim=2) - last
    for m in range(M):  # lags before patch 0 are zero, not minus the last frame
        back = S - 1 - m
        if back > 0:
            xc[:, :, m, :back * P] = 0.0
    padt = torch.cat([fr, torch.zeros(B, N, A * P)], dim=-1)
    fut = torch.stack([padt[:, :, (m + 1) * P:(m + 1 + A) * P] for m in range(M)], dim=2)
    has = torch.zeros(B, N, M, A * P)
    for m in range(M):
        has[:, :, m, :min(A, M - 1 - m) * P] = 1.0
    res = (fut - last) * has
    keymask = torch.zeros(B, N, dtype=torch.bool)
    return (tokens, unit, sess, frames, keymask, xc, res, has)


class Tok(nn.Module):
    def __init__(self, z):
        super().__init__()
        c, dt, nt, P = z["c"], z["dt"], z["nt"], z["P"]
        std, out_std = 0.02, 0.02 / math.sqrt(2 * nt)
        self.z = z
        self.conv1 = nn.Conv1d(1, c, 5)
        self.conv2 = nn.Conv1d(c, c, P, stride=P)
        self.enc_in = nn.Linear(c, dt)
        self.enc = nn.ModuleList(nn.ModuleList([Attn(dt, z["theads"], std, out_std),
                                                FFN(dt, 4 * dt, std, out_std)]) for _ in range(nt))
        self.enc_out = nn.Linear(dt, z["Dc"], bias=False)
        self.codebook = nn.Parameter(torch.randn(z["K"], z["Dc"]))
        self.dec_in = nn.Linear(z["Dc"], dt)
        self.dec = nn.ModuleList(nn.ModuleList([Attn(dt, z["theads"], std, out_std),
                                                FFN(dt, 4 * dt, std, out_std)]) for _ in range(nt))
        self.dec_out = nn.Linear(dt, c)
        self.convt = nn.ConvTranspose1d(c, c, P, stride=P)
        self.conv3 = nn.Conv1d(c, 1, 5)
        M = z["M"]
        self.register_buffer("causal", torch.ones(M, M, dtype=torch.bool).triu(1))
        cos, sin = rope_tables(M, dt // z["theads"])
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("eye", torch.eye(z["K"]))

    def forward(self, x, tau_g):
        z = self.z
        Bn, L = x.shape
        K = z["K"]
        a = F.gelu(self.conv1(F.pad(x[:, None, :], (4, 0))), approximate="tanh")
        e = self.enc_in(self.conv2(a).transpose(1, 2))  # (Bn, M, dt)
        for att, ff in self.enc:
            e = ff(att(e, self.causal, (self.cos, self.sin)))
        zq = F.normalize(self.enc_out(e), dim=-1, eps=1e-6)
        E = F.normalize(self.codebook, dim=-1, eps=1e-6)
        logits = zq @ E.t() / 0.1
        G = -torch.log(-torch.log(torch.rand(logits.shape).clamp_min(1e-12)))
        q = F.softmax((logits + G) / tau_g, dim=-1) @ E
        pbar = F.softmax(logits, dim=-1).mean(dim=(0, 1))
        ent = math.log(K) + (pbar * torch.log(pbar)).sum()
        orth = ((E @ E.t() - self.eye) ** 2).sum() / (K * K)
        h = self.dec_in(q)
        for att, ff in self.dec:
            h = ff(att(h, None, (self.cos, self.sin)))
        u = F.gelu(self.convt(self.dec_out(h).transpose(1, 2)), approximate="tanh")
        xh = self.conv3(F.pad(u, (4, 0)))[:, 0]
        mse = ((xh - x) ** 2).mean()
        dmse = (((xh[:, 1:] - xh[:, :-1]) - (x[:, 1:] - x[:, :-1])) ** 2).mean()
        return mse + 0.5 * dmse + 0.1 * orth + 0.01 * ent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tok", type=int, default=0)
    ap.add_argument("--base", type=int, default=0)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()
    setup(args.threads)
    torch.manual_seed(1234)
    z = sizes(args.base)
    if args.tok:
        model = Tok(z)
        t = torch.arange(z["M"] * z["P"], dtype=torch.float64)
        x = torch.sin(0.1 * t[None, :] + torch.arange(args.batch, dtype=torch.float64)[:, None]).float()
        step = lambda: model(x, 0.5)  # noqa: E731
    else:
        model = DAT(z, z["N"], 1)
        inputs = dat_inputs(z, args.batch)
        step = lambda: model(*inputs)  # noqa: E731
    print(f"params {sum(p.numel() for p in model.parameters())}")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.0)
    timed_steps(lambda: opt.zero_grad(set_to_none=True), step, args.warmup, args.reps, opt.step)


if __name__ == "__main__":
    main()
