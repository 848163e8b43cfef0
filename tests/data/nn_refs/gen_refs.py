#!/usr/bin/python3
"""Write the PyTorch reference data for the gradcheck table's *_torch rows (tests/gradcheck/gradcheck.c,
docs/nn.md, "Reference data") and the softmax check of tests/tensor/test_tensor.c.

Run with Debian's python3 and python3-torch, from anywhere:
    /usr/bin/python3 tests/data/nn_refs/gen_refs.py
It rewrites one <layer>.txt per layer next to this script. The outputs are checked into git, so
the C test never needs Python. Inputs are drawn in float32 from a seeded generator (and stored
exactly, with 9 significant digits); expected outputs and gradients are computed in float64 from
those same float32 values, so they are the exact answers the fp32 C code should approach.

File format (the same as gen_attn_mlp_refs.py's, read by tests/tess_ref.h): sections
    <name> <count>
followed by count values in row-major order, 8 per line. The first section, "dims", holds the
integer sizes; shapes follow from them (see each function below). Gradients named d<x> are those
of L = <dout, out>, or of dloss * loss for the losses. Section names are the gradcheck row's buffer
names: inputs <x>, the output's upstream gradient d<out>, outputs and caches, gradients d<x>.
"""
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
EPS = 1e-5
EPS_T = torch.tensor([EPS], dtype=torch.float64)  # written as is, not rounded to float32


def fmt(v):
    return "%.9g" % v


def write(layer, sections):
    """sections: list of (name, tensor); integer tensors are written as integers."""
    with open(os.path.join(HERE, layer + ".txt"), "w") as f:
        for name, t in sections:
            t = torch.as_tensor(t).detach()
            is_int = not torch.is_floating_point(t)
            vals = t.reshape(-1).tolist()
            f.write("%s %d\n" % (name, len(vals)))
            for k in range(0, len(vals), 8):
                f.write(" ".join(str(int(v)) if is_int else fmt(v) for v in vals[k:k + 8]) + "\n")


class Draw:
    """float32 uniform draws from one seeded generator, returned as float64 leaf tensors."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def __call__(self, *shape, lo=-1.0, hi=1.0, grad=False):
        x = (lo + (hi - lo) * torch.rand(*shape, generator=self.g, dtype=torch.float32))
        return x.double().requires_grad_(grad)

    def ints(self, n, lo, hi):
        return torch.randint(lo, hi + 1, (n,), generator=self.g, dtype=torch.int32)


def linear():
    N, C, OC = 4, 8, 6
    d = Draw(1)
    x, w, b = d(N, C, grad=True), d(OC, C, grad=True), d(OC, grad=True)
    dout = d(N, OC)
    out = F.linear(x, w, b)
    out.backward(dout)
    write("linear", [("dims", torch.tensor([N, C, OC])), ("in", x), ("w", w), ("b", b),
                     ("dout", dout), ("out", out.detach()), ("din", x.grad), ("dw", w.grad),
                     ("db", b.grad)])


def embedding():
    N, V, C = 7, 5, 4
    d = Draw(2)
    ids = d.ints(N, 0, V - 1)
    ids[3] = ids[0]  # a repeated id: its gradient rows must add up
    table = d(V, C, grad=True)
    dout = d(N, C)
    out = F.embedding(ids.long(), table)
    out.backward(dout)
    write("embedding", [("dims", torch.tensor([N, V, C])), ("ids", ids), ("table", table),
                        ("dout", dout), ("out", out.detach()), ("dtable", table.grad)])


def rmsnorm():
    N, C = 3, 16
    d = Draw(3)
    x, w = d(N, C, lo=-2.0, hi=2.0, grad=True), d(C, lo=0.5, hi=1.5, grad=True)
    dout = d(N, C)
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    out = x * rstd * w
    out.backward(dout)
    write("rmsnorm", [("dims", torch.tensor([N, C])), ("eps", EPS_T), ("in", x),
                      ("w", w), ("dout", dout), ("out", out.detach()),
                      ("rstd", rstd.detach().reshape(N)), ("din", x.grad), ("dw", w.grad)])


def layernorm():
    N, C = 3, 16
    d = Draw(4)
    x = d(N, C, lo=-2.0, hi=2.0, grad=True)
    w, b = d(C, lo=0.5, hi=1.5, grad=True), d(C, grad=True)
    dout = d(N, C)
    out = F.layer_norm(x, (C,), w, b, EPS)
    out.backward(dout)
    xd = x.detach()
    mean = xd.mean(-1)
    rstd = torch.rsqrt(xd.var(-1, unbiased=False) + EPS)
    write("layernorm", [("dims", torch.tensor([N, C])), ("eps", EPS_T), ("in", x),
                        ("w", w), ("b", b), ("dout", dout), ("out", out.detach()),
                        ("mean", mean), ("rstd", rstd), ("din", x.grad), ("dw", w.grad),
                        ("db", b.grad)])


def crossentropy():
    N, V = 6, 9
    d = Draw(5)
    logits = d(N, V, lo=-3.0, hi=3.0, grad=True)
    targets = d.ints(N, 0, V - 1)
    targets[2] = -1  # ignored row
    dloss = d(1)
    loss = F.cross_entropy(logits, targets.long(), ignore_index=-1, reduction="mean")
    (loss * dloss[0]).backward()
    write("crossentropy", [("dims", torch.tensor([N, V])), ("logits", logits),
                           ("targets", targets), ("dloss", dloss), ("loss", loss.detach()),
                           ("probs", torch.softmax(logits.detach(), -1)),
                           ("dlogits", logits.grad)])


def mse():
    n = 20
    d = Draw(6)
    pred, target, dloss = d(n, grad=True), d(n), d(1)
    loss = F.mse_loss(pred, target)
    (loss * dloss[0]).backward()
    write("mse", [("dims", torch.tensor([n])), ("pred", pred), ("target", target),
                  ("dloss", dloss), ("loss", loss.detach()), ("dpred", pred.grad)])


def activation(name, fn, seed):
    n = 32
    d = Draw(seed)
    x = d(n, lo=-4.0, hi=4.0, grad=True)
    dout = d(n)
    out = fn(x)
    out.backward(dout)
    write(name, [("dims", torch.tensor([n])), ("in", x), ("dout", dout), ("out", out.detach()),
                 ("din", x.grad)])


def main():
    linear()
    embedding()
    rmsnorm()
    layernorm()
    crossentropy()
    mse()
    activation("gelu", lambda x: F.gelu(x, approximate="tanh"), 7)
    activation("silu", F.silu, 8)


if __name__ == "__main__":
    main()
