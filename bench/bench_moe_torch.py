#!/usr/bin/python3
"""PyTorch's side of bench_moe: the same MoE layer written the way a PyTorch user would write it
(index/scatter dispatch per expert, autograd for everything, the losses included), timed the
same way.

    bench_moe_torch.py [--threads 1] [--reps 5] [--warmup 2] [--tokens 2048] [--dim 256]
                       [--hidden 512] [--experts 8] [--topk 2] [--sp 0]

Layer: router logits x W_r^T (fp32), softmax, top-k (a stable descending sort, so ties go to the
lower id as in Tessera; torch.topk does not guarantee that), gates renormalised over the top-k;
expert e on the rows routed to it (index_select), SwiGLU, output scaled by the gate and
index_add'ed into the token's row; L_lb = E sum_e f_e P_e (lambda 1e-2, counts detached); with
--sp 1, R_sp (lambda 2e-3) of the SwiGLU intermediates of the two experts of each token, paired
by token id, through autograd. A timed step is zero_grad(set_to_none) + forward + backward of
sum(out * dy) + aux. Prints "step_s" and "step_cpu_s" lines.
"""
import argparse
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    for k, v in [("threads", 1), ("reps", 5), ("warmup", 2), ("tokens", 2048), ("dim", 256),
                 ("hidden", 512), ("experts", 8), ("topk", 2), ("sp", 0)]:
        ap.add_argument("--" + k, type=int, default=v)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    N, C, FF, E, K = a.tokens, a.dim, a.hidden, a.experts, a.topk
    wr = (torch.randn(E, C) * 0.02).requires_grad_()
    wg = (torch.randn(E, FF, C) * 0.02).requires_grad_()
    wu = (torch.randn(E, FF, C) * 0.02).requires_grad_()
    wd = (torch.randn(E, C, FF) * 0.02).requires_grad_()
    x = (torch.rand(N, C) * 2 - 1).requires_grad_()
    dy = torch.rand(N, C) * 2 - 1
    params = [wr, wg, wu, wd, x]

    def step():
        p = F.softmax(x @ wr.t(), dim=-1)
        _, order = torch.sort(p, dim=-1, descending=True, stable=True)
        topk = order[:, :K]
        pk = p.gather(1, topk)
        mass = pk.sum(-1, keepdim=True)
        gates = pk / mass
        out = torch.zeros(N, C)
        z_rows = torch.zeros(N, K, FF) if a.sp else None
        for e in range(E):
            tok, slot = (topk == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            xe = x.index_select(0, tok)
            z = F.silu(xe @ wg[e].t()) * (xe @ wu[e].t())
            ye = z @ wd[e].t()
            out = out.index_add(0, tok, ye * gates[tok, slot].unsqueeze(1))
            if a.sp:
                z_rows = z_rows.index_put((tok, slot), z)
        counts = torch.bincount(topk.flatten(), minlength=E).float().detach()
        lb = E / (K * N * N) * (counts * p.sum(0)).sum()
        aux = 1e-2 * lb
        if a.sp:
            zn = F.normalize(z_rows, dim=-1, eps=1e-8)
            cos = zn @ zn.transpose(1, 2)
            off = cos.pow(2).sum((1, 2)) - cos.diagonal(dim1=1, dim2=2).pow(2).sum(-1)
            aux = aux + 2e-3 * off.mean() / (K * (K - 1))
        return (out * dy).sum() + aux

    for s in range(-a.warmup, a.reps):
        w0, c0 = time.perf_counter(), time.process_time()
        for t in params:
            t.grad = None
        step().backward()
        w, c = time.perf_counter() - w0, time.process_time() - c0
        if s >= 0:
            print(f"step_s {w:.6f}\nstep_cpu_s {c:.6f}")


if __name__ == "__main__":
    main()
