#!/usr/bin/env python3
"""torch_reference.py CKPT.h5 MODEL.safetensors LOGITS.safetensors

A tinylm checkpoint in PyTorch, checked against Tessera's own forward pass:

  1. builds an equivalent torch.nn.Module from the options stored in the checkpoint (/config);
  2. loads its weights twice: from the HDF5 checkpoint with h5py (the fused [q|k|v] projection
     split into q, k, v by rows) and from MODEL.safetensors, written by
     `tess-ckpt export CKPT MODEL.safetensors --names torch --split-qkv` and read here with NumPy
     alone (8-byte little-endian header length, JSON header, raw little-endian data);
     both must give bitwise the same state_dict, and load_state_dict(strict=True) must accept it;
  3. runs the module in float64 on the ids of LOGITS.safetensors (written by tinylm with
     --set train.logits_out=LOGITS.safetensors from the same final weights) and checks
     max |logits_torch - logits_tessera| <= 1e-4 * max(1, max |logits_tessera|)
     (Tessera computes in float32).

Exit 0 when they agree, 1 when not, 77 (skipped, with a message) when torch, h5py or NumPy is
missing.
"""
import configparser
import json
import math
import struct
import sys

try:
    import h5py
    import numpy as np
    import torch
    from torch import nn
except ImportError as e:  # the suite skips (exit 77) where python3-torch is not installed
    print(f"torch_reference: SKIPPED ({e}; install python3-torch python3-h5py python3-numpy)")
    sys.exit(77)

TOLERANCE = 1e-4


def read_safetensors(path):
    """name -> numpy array, with NumPy only (the public safetensors layout)."""
    dtypes = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4"}
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return out


def rope(x, base):
    """Rotate-half RoPE on (B, NH, T, hs): channel i < hs/2 pairs with i + hs/2, angle t base^(-2i/hs)."""
    T, hs = x.shape[2], x.shape[3]
    i = torch.arange(hs // 2, dtype=torch.float64)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * base ** (-2.0 * i / hs)[None, :]
    cos, sin = torch.cos(angle), torch.sin(angle)
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, c, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, c, heads, base):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(c, c, bias=False) for _ in range(4))
        self.heads, self.base = heads, base

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.heads
        split = lambda y: y.view(B, T, self.heads, hs).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        q, k = rope(q, self.base), rope(k, self.base)
        att = q @ k.transpose(-2, -1) / math.sqrt(hs)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        return self.o((att @ v).transpose(1, 2).reshape(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, c, f):
        super().__init__()
        self.gate, self.up = nn.Linear(c, f, bias=False), nn.Linear(c, f, bias=False)
        self.down = nn.Linear(f, c, bias=False)

    def forward(self, x):
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


class GeluMLP(nn.Module):
    def __init__(self, c, f):
        super().__init__()
        self.fc, self.proj = nn.Linear(c, f), nn.Linear(f, c)

    def forward(self, x):
        return self.proj(nn.functional.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, o):
        super().__init__()
        norm = (lambda: RMSNorm(o["C"], o["eps"])) if o["norm"] == "rmsnorm" else (
            lambda: nn.LayerNorm(o["C"], eps=o["eps"]))
        self.norm1, self.norm2 = norm(), norm()
        self.attn = Attention(o["C"], o["heads"], o["rope_base"])
        self.mlp = SwiGLU(o["C"], o["F"]) if o["mlp"] == "swiglu" else GeluMLP(o["C"], o["F"])

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """tinylm's decoder (src/nn/transformer.h): pre-norm blocks, RoPE attention, tied nothing."""

    def __init__(self, o):
        super().__init__()
        self.tok_emb = nn.Embedding(o["V"], o["C"])
        self.layers = nn.ModuleList(Block(o) for _ in range(o["L"]))
        self.norm_f = RMSNorm(o["C"], o["eps"]) if o["norm"] == "rmsnorm" else nn.LayerNorm(
            o["C"], eps=o["eps"])
        self.lm_head = nn.Linear(o["C"], o["V"], bias=False)

    def forward(self, ids):
        x = self.tok_emb(ids)
        for block in self.layers:
            x = block(x)
        return self.lm_head(self.norm_f(x))


def torch_name(name):
    """Tessera registry name -> PyTorch name (as tess-ckpt export --names torch)."""
    stem, _, leaf = name.rpartition(".")
    prefix = stem + "." if stem else ""
    if leaf in ("w", "b"):
        return prefix + ("weight" if leaf == "w" else "bias")
    if leaf[:2] in ("w_", "b_"):
        return prefix + leaf[2:] + (".weight" if leaf[0] == "w" else ".bias")
    return name + ".weight"


def state_from_hdf5(f):
    """The /params datasets as a PyTorch state_dict, q|k|v split by rows."""
    out = {}
    for name, ds in f["params"].items():
        x = ds[()]
        tname = torch_name(name)
        if name.endswith(".w_qkv"):
            for part, rows in zip("qkv", np.split(x, 3, axis=0)):
                out[tname.replace("qkv", part)] = rows
        else:
            out[tname] = x
    return out


def main():
    ckpt, exported, logits_file = sys.argv[1:4]
    with h5py.File(ckpt, "r") as f:
        ini = configparser.ConfigParser(inline_comment_prefixes=(";",))
        ini.read_string(f["config"].asstr()[()])
        from_h5 = state_from_hdf5(f)
    m = ini["model"]
    opts = {"C": int(m["channels"]), "heads": int(m["heads"]), "F": int(m["mlp_hidden"]),
            "L": int(m["layers"]), "norm": m["norm"], "mlp": m["mlp"],
            "eps": float(m["norm_eps"]), "rope_base": float(m["rope_base"]),
            "V": int(ini["task"]["symbols"]) + 1}
    from_st = read_safetensors(exported)
    assert sorted(from_h5) == sorted(from_st), f"names differ: {sorted(from_h5)} vs {sorted(from_st)}"
    for name in from_h5:
        assert from_h5[name].dtype == from_st[name].dtype and np.array_equal(
            from_h5[name], from_st[name]), f"{name}: HDF5 and safetensors differ"
    model = TinyLM(opts).double()
    model.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in from_st.items()},
                          strict=True)
    ref = read_safetensors(logits_file)
    ids, want = torch.from_numpy(ref["ids"].copy()), ref["logits"].astype(np.float64)
    with torch.no_grad():
        got = model(ids).numpy()
    err = float(np.abs(got - want).max())
    bound = TOLERANCE * max(1.0, float(np.abs(want).max()))
    print(f"torch_reference: {len(from_st)} tensors, HDF5 == safetensors bitwise; logits "
          f"{tuple(want.shape)}: max |torch - tessera| = {err:.3g} (bound {bound:.3g})")
    if not err <= bound:
        print("torch_reference: FAIL: the logits differ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
