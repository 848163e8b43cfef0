#!/usr/bin/env python3
"""check_graphs_h5py.py - read a file written by tess-convert tu with h5py, as a user would.

    check_graphs_h5py.py tiny FILE         exact content of tests/data/tu_tiny
    check_graphs_h5py.py real NAME FILE    statistics of a shared TU dataset (SOURCES.md)

Exits 77 when h5py is missing, 1 on the first failed check."""
import sys

try:
    import h5py
    import numpy as np
except ImportError:
    print("h5py not available: skipped")
    sys.exit(77)

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def common(f):
    """Layout, dtypes, attribute types and CSR invariants; returns the /graphs group."""
    fmt = f.attrs["format"]
    check(isinstance(fmt, str) and fmt == "tessera.graphs", "format is the str 'tessera.graphs'")
    check(int(f.attrs["format_version"]) == 1, "format_version")
    g = f["graphs"]
    dtypes = {"node_ptr": np.int64, "edge_ptr": np.int64, "indptr": np.int64, "indices": np.int32,
              "x": np.float32, "y": np.int32, "label_values": np.int64}
    for name, dt in dtypes.items():
        check(g[name].dtype == dt, f"{name} dtype {g[name].dtype}")
    node_ptr, edge_ptr, indptr, indices = (g[k][()] for k in
                                           ("node_ptr", "edge_ptr", "indptr", "indices"))
    G, N = len(node_ptr) - 1, len(indptr) - 1
    check(g["x"].shape == (N, int(g.attrs["num_node_features"])), "x shape")
    C = int(g.attrs["num_classes"])
    check(g["y"].shape == (G,) and g["label_values"].shape == (C,), "y, label_values shapes")
    check((edge_ptr == indptr[node_ptr]).all(), "edge_ptr == indptr[node_ptr]")
    for gi in range(G):
        n0, n1 = node_ptr[gi], node_ptr[gi + 1]
        rows = [indices[indptr[i]:indptr[i + 1]] for i in range(n0, n1)]
        arcs = {(i, int(j)) for i, r in enumerate(rows) for j in r}
        ok = all(len(r) == len(set(r)) and (np.diff(r) > 0).all() for r in rows)
        ok = ok and all((j, i) in arcs and i != j and 0 <= j < n1 - n0 for i, j in arcs)
        if not ok:
            check(False, f"graph {gi}: rows sorted and unique, symmetric, no self loops")
            break
    return g


def tiny(path):
    with h5py.File(path, "r") as f:
        g = common(f)
        check(g.attrs["name"] == "TINY", "name")
        check(g.attrs["feature_kind"] == "node_labels_onehot[1..4]", "feature_kind")
        check(int(g.attrs["num_classes"]) == 2 and int(g.attrs["num_node_features"]) == 4, "C, F")
        check(list(g["node_ptr"][()]) == [0, 3, 7, 8], "node_ptr")
        check(list(g["edge_ptr"][()]) == [0, 4, 10, 10], "edge_ptr")
        check(list(g["indptr"][()]) == [0, 1, 3, 4, 6, 8, 10, 10, 10], "indptr")
        check(list(g["indices"][()]) == [1, 0, 2, 1, 1, 2, 0, 2, 0, 1], "indices")
        check(list(g["y"][()]) == [1, 0, 1], "y")
        check(list(g["label_values"][()]) == [-1, 1], "label_values")
        x = g["x"][()]
        check((x.sum(axis=1) == 1).all(), "one-hot x")
        check(list(x.argmax(axis=1)) == [0, 3, 0, 1, 1, 3, 0, 1], "x columns = node label - 1")


REAL = {  # graphs, classes, features, undirected edges per graph (SOURCES.md), max degree
    "MUTAG": (188, 2, 7, 19.79, 4),
    "ENZYMES": (600, 6, 3, 62.14, 9),
    "IMDB-BINARY": (1000, 2, 136, 96.53, 135),
}


def real(name, path):
    G, C, F, mean_edges, max_degree = REAL[name]
    with h5py.File(path, "r") as f:
        g = common(f)
        check(g.attrs["name"] == name, "name")
        check(len(g["y"]) == G and int(g.attrs["num_classes"]) == C, f"G, C of {name}")
        check(int(g.attrs["num_node_features"]) == F, f"F of {name}")
        check(set(g["y"][()]) == set(range(C)), "labels are 0..C-1")
        check(abs(len(g["indices"]) / 2 / G - mean_edges) < 0.006, "undirected edges per graph")
        check(np.diff(g["indptr"][()]).max() == max_degree, "max degree")
        x = g["x"][()]
        check((x.sum(axis=1) == 1).all(), "one-hot features")


if __name__ == "__main__":
    if sys.argv[1] == "tiny":
        tiny(sys.argv[2])
    else:
        real(sys.argv[2], sys.argv[3])
    print(f"check_graphs_h5py: {failures} failed")
    sys.exit(1 if failures else 0)
