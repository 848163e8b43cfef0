#!/usr/bin/python3
"""PyTorch's side of bench/run_fed.sh: one federated round of fedkalter's network (FedStar or
Fed-Kalter, docs/fedkalter.md) on the SM clients, written the way a PyTorch user would write it
(torch.sparse block-diagonal batches, autograd, torch.optim.Adam per client), timed per round.

    bench_fed_torch.py --dir TU_DIR [--method fedkalter|fedstar] [--rounds 3] [--threads 1]
                       [--hidden 64] [--layers 3] [--batch 128]

Data: the 7 SM datasets (MUTAG BZR COX2 DHFR PTC_MR AIDS NCI1) from the raw TU text, with
fedkalter's loader rules (labels remapped, one-hot node labels of width max - min + 1, edges
deduplicated, self loops dropped) and its structure encodings (RWSE 16 + DSE 16), computed once
before timing. Train split: G - ceil(0.2 G) graphs per client (the same counts as fedkalter; the
ids are a plain permutation: the stratification does not change the cost).

A timed round: every client trains one epoch of shuffled mini-batches (a batch: block-diagonal A,
A-hat and A-hat o A-hat as torch.sparse_coo tensors built from per-graph edge lists,
the network, mean NLL, backward, Adam with lr 1e-3 and weight_decay 5e-4), then the shared
entries (FedStar: se, layer*.trans; Fed-Kalter: also p0, layer*.q, layer*.eta) are averaged
weighted by training graphs and copied into every client. Prints per round "round R train_s T
agg_s A round_s S cpu_s C" and the line "mean_of_rounds_2.. train_s T agg_s A round_s S"
(round 1 is warm-up). Exit 77 when the TU files are absent.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SM = ["MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1"]
K_SE = 16


def read_ints(path, cols):
    data = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
    return data.reshape(-1, cols)


def load_tu(root, name):
    """-> list of graphs (n, edge_index (2, e) local, both directions), x one-hot, se, labels."""
    p = os.path.join(root, name, name)
    edges = read_ints(p + "_A.txt", 2) - 1
    gi = read_ints(p + "_graph_indicator.txt", 1)[:, 0] - 1
    gl = read_ints(p + "_graph_labels.txt", 1)[:, 0]
    nl = read_ints(p + "_node_labels.txt", 1)[:, 0]
    _, y = np.unique(gl, return_inverse=True)
    width = int(nl.max() - nl.min() + 1)
    x_all = np.zeros((len(nl), width), dtype=np.float32)
    x_all[np.arange(len(nl)), nl - nl.min()] = 1.0
    G = len(gl)
    first = np.searchsorted(gi, np.arange(G + 1))
    eg = gi[edges[:, 0]]
    order = np.argsort(eg, kind="stable")
    edges, eg = edges[order], eg[order]
    efirst = np.searchsorted(eg, np.arange(G + 1))
    graphs = []
    for g in range(G):
        n = int(first[g + 1] - first[g])
        e = edges[efirst[g]:efirst[g + 1]] - first[g]
        e = e[e[:, 0] != e[:, 1]]
        e = np.unique(np.concatenate([e, e[:, ::-1]]), axis=0)  # dedup, both directions
        A = np.zeros((n, n))
        A[e[:, 0], e[:, 1]] = 1.0
        deg = A.sum(1)
        M = A / np.where(deg > 0, deg, np.inf)[None, :]  # A D^-1, 1/0 := 0
        se = np.zeros((n, 2 * K_SE), dtype=np.float32)
        Mk = np.eye(n)
        for k in range(K_SE):
            Mk = M @ Mk
            se[:, k] = np.diag(Mk)
        se[np.arange(n), K_SE + np.clip(deg, 1, K_SE).astype(int) - 1] = 1.0
        graphs.append((n, torch.from_numpy(e.T.copy()), torch.from_numpy(x_all[first[g]:first[g + 1]]),
                       torch.from_numpy(se)))
    return graphs, torch.from_numpy(y), width, int(y.max() + 1)


def make_batch(graphs, ids):
    """Block-diagonal batch: A, A-hat (on A + I), A-hat o A-hat as sparse COO; x, se, graph index."""
    off, ei, xs, ses, gof = 0, [], [], [], []
    for b, g in enumerate(ids):
        n, e, x, se = graphs[g]
        ei.append(e + off)
        xs.append(x)
        ses.append(se)
        gof.append(torch.full((n,), b, dtype=torch.int64))
        off += n
    N = off
    e = torch.cat(ei, 1)
    A = torch.sparse_coo_tensor(e, torch.ones(e.shape[1]), (N, N)).coalesce()
    deg = torch.bincount(e[0], minlength=N).float() + 1.0
    loops = torch.arange(N).repeat(2, 1)
    eh = torch.cat([loops, e], 1)
    vals = 1.0 / torch.sqrt(deg[eh[0]] * deg[eh[1]])
    Ah = torch.sparse_coo_tensor(eh, vals, (N, N)).coalesce()
    Ah2 = torch.sparse_coo_tensor(eh, vals * vals, (N, N)).coalesce()
    return A, Ah, Ah2, torch.cat(xs), torch.cat(ses), torch.cat(gof)


class Net(nn.Module):
    """fedkalter's network (docs/fedkalter.md), FedStar or Fed-Kalter channels."""

    def __init__(self, method, Fin, C, d, L):
        super().__init__()
        self.kal, self.L, self.d = method == "fedkalter", L, d
        self.pre = nn.Linear(Fin, d)
        self.se = nn.Linear(2 * K_SE, d)
        self.gin1 = nn.ModuleList(nn.Linear(2 * d, d) for _ in range(L))
        self.gin2 = nn.ModuleList(nn.Linear(d, d) for _ in range(L))
        self.trans = nn.ModuleList(nn.Linear(d, d) for _ in range(L))
        self.hp = nn.Linear(2 * d, d)
        self.post = nn.Linear(d, d)
        self.readout = nn.Linear(d, C)
        if self.kal:
            self.p0 = nn.Parameter(torch.zeros(d))
            self.q = nn.ParameterList(nn.Parameter(torch.full((d,), -2.0)) for _ in range(L))
            self.eta = nn.ParameterList(nn.Parameter(torch.ones(d)) for _ in range(L))
            self.noise = nn.ModuleList(nn.Linear(d, d) for _ in range(L))
            for lin in self.noise:
                nn.init.zeros_(lin.bias)

    def shared_names(self):
        return [n for n, _ in self.named_parameters()
                if n.startswith(("se.", "trans.", "p0", "q.", "eta."))]

    def forward(self, A, Ah, Ah2, x, se, gof, B):
        h = self.pre(x)
        s = self.se(se)
        P = F.softplus(self.p0).expand_as(s) if self.kal else None
        for l in range(self.L):
            X = torch.cat([h, s], 1)
            z = self.gin2[l](F.relu(self.gin1[l](X + torch.sparse.mm(A, X))))
            if self.kal:
                Wa = self.trans[l].weight
                s_minus = torch.tanh(self.trans[l](torch.sparse.mm(Ah, s)))
                g = 1.0 - s_minus * s_minus
                Pm = g * g * (torch.sparse.mm(Ah2, P) @ (Wa * Wa).t()) + F.softplus(self.q[l])
                R = F.softplus(self.noise[l](h)) + 1e-4
                eta = self.eta[l]
                S = torch.clamp(eta * eta * Pm + R, min=1e-8)
                K = eta * Pm / S
                s = s_minus + K * (z - eta * s_minus)
                P = Pm * R / S
            else:
                s = torch.tanh(self.trans[l](torch.sparse.mm(Ah, s)))
            h = F.dropout(F.relu(z), 0.5, self.training)
        o = self.hp(torch.cat([h, s], 1))
        pooled = torch.zeros(B, self.d).index_add_(0, gof, o)
        return self.readout(F.dropout(F.relu(self.post(pooled)), 0.5, self.training))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--method", default="fedkalter", choices=["fedkalter", "fedstar"])
    for k, v in [("rounds", 3), ("threads", 1), ("hidden", 64), ("layers", 3), ("batch", 128)]:
        ap.add_argument("--" + k, type=int, default=v)
    a = ap.parse_args()
    if not all(os.path.exists(os.path.join(a.dir, n, n + "_A.txt")) for n in SM):
        print(f"bench_fed_torch: the SM datasets are not under {a.dir}: skipped")
        sys.exit(77)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    clients = []
    for name in SM:
        graphs, y, Fin, C = load_tu(a.dir, name)
        G = len(graphs)
        n_train = G - (2 * G + 9) // 10
        train = torch.randperm(G)[:n_train]
        net = Net(a.method, Fin, C, a.hidden, a.layers)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=5e-4)
        clients.append((name, graphs, y, train, net, opt))
    shared = clients[0][4].shared_names()
    weights = torch.tensor([float(len(c[3])) for c in clients])
    weights /= weights.sum()
    print(f"bench_fed_torch: {a.method}, {len(clients)} clients, {sum(len(c[3]) for c in clients)}"
          f" training graphs, {sum(clients[0][4].get_parameter(n).numel() for n in shared)} "
          f"shared floats per client, {a.threads} thread(s), data {time.perf_counter() - t0:.1f} s")
    rows = []
    for r in range(1, a.rounds + 1):
        w0, c0 = time.perf_counter(), time.process_time()
        for name, graphs, y, train, net, opt in clients:
            net.train()
            order = train[torch.randperm(len(train))]
            for first in range(0, len(order), a.batch):
                ids = order[first:first + a.batch].tolist()
                A, Ah, Ah2, x, se, gof = make_batch(graphs, ids)
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(net(A, Ah, Ah2, x, se, gof, len(ids)), y[ids])
                loss.backward()
                opt.step()
        w1 = time.perf_counter()
        with torch.no_grad():  # weighted average of the shared entries, written into every client
            for n in shared:
                avg = sum(w * c[4].get_parameter(n) for w, c in zip(weights, clients))
                for c in clients:
                    c[4].get_parameter(n).copy_(avg)
        w2, c2 = time.perf_counter(), time.process_time()
        rows.append((w1 - w0, w2 - w1, w2 - w0))
        print(f"round {r} train_s {w1 - w0:.4f} agg_s {w2 - w1:.6f} round_s {w2 - w0:.4f} "
              f"cpu_s {c2 - c0:.4f}", flush=True)
    tail = rows[1:] if len(rows) > 1 else rows
    m = [sum(v[i] for v in tail) / len(tail) for i in range(3)]
    print(f"mean_of_rounds_2.. train_s {m[0]:.4f} agg_s {m[1]:.6f} round_s {m[2]:.4f}")


if __name__ == "__main__":
    main()
