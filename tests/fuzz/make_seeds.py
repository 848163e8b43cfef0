#!/usr/bin/env python3
"""make_seeds.py - write the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/).

usage: python3 tests/fuzz/make_seeds.py   (rewrites corpus/{config,tu,calcium,tokens}; the ckpt
seed is a checkpoint written by the library: the ckpt_seed program).

Every seed is a small, hand-made example of the real format (an INI file and command line, a TU
dataset of two graphs) or, for the structure-aware HDF5 targets, the encoding that the target's
decoder (fuzz_calcium.c, fuzz_tokens.c) turns into a valid file of the real layout. Valid seeds
let the fuzzer start past the first checks instead of finding the layout byte by byte.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def config():
    ini = ("[train]\nsteps = 20\nranks = -2\nlr = 0.01\ntau = -3.5e4\nflag = yes\n"
           "dir = runs/a\nschedule = linear\ncolour = blue\n\n[client.optim]\nlr = 1e-3\n")
    write("config", "ini_all_types", ini)
    write("config", "ini_comments", "; a comment\n# another\n[train]\ndir = a b ; trailing\n"
          "  steps=3  \n[client.optim]\nflag = off\n")
    write("config", "ini_errors", "[train]\nsteps = -1\nlr = 2\nlrr = 0.1\n[nosuch]\nx = 1\n"
          "colour = purple\nno_equals_here\n")
    args = ["--config", "@", "--set", "train.steps=5", "--set", "client.optim.colour=green",
            "--resume", "runs/b", "--print-config"]
    write("config", "args_config_set", ini + "\0" + "\0".join(args))
    write("config", "args_eq_forms", "\0" + "\0".join(
        ["--set=train.lr=0.5", "--resume=x", "--set", "client.optim.schedule = constant"]))
    write("config", "args_bad", "\0" + "\0".join(["--set", "train.lr", "--config", "--bogus"]))
    write("config", "args_help", "\0--help")


def tu():
    # features byte, then A, graph_indicator, graph_labels, node_labels, node_attributes
    a = "1, 2\n2, 1\n2, 3\n3, 2\n1, 3\n3, 1\n4, 5\n5, 4\n5, 5\n"
    gi = "1\n1\n1\n2\n2\n"
    gl = "1\n-1\n"
    nl = "0\n1\n0\n2\n1\n"
    na = "0.5, 1.0\n-1, 2\n0, 0\n3.25, 1e-3\n7, 8\n"
    write("tu", "labels_attributes", bytes([0]) + "\0".join([a, gi, gl, nl, na]).encode())
    write("tu", "labels_only", bytes([1]) + "\0".join([a, gi, gl, nl]).encode())
    write("tu", "degree_three_files", bytes([4]) + "\0".join([a, gi, gl]).encode())
    write("tu", "both_one_sided", bytes([3]) + "\0".join(["1,2\n4,5\n", gi, gl, nl, na]).encode())


def real(v):
    """fuzz_real's encoding of an integer v in [-100, 155]."""
    return bytes([0, v + 100])


def calcium():
    words = ["a", "b", "c", "", "a/b", "d e", ".", "bb"]

    def names(s):
        toks = s.split(",") if s else []
        return bytes([len(toks)]) + bytes(words.index(t) for t in toks)

    def dset(dims, values, type_=0):
        rank_byte = {1: 0, 2: 80}[len(dims)]
        out = bytes([1, type_, rank_byte]) + bytes(dims)
        return out + b"".join(real(v) for v in values)

    T, N = 5, 3
    gcamp = dset([T, N], [(3 * t + n) % 7 - 3 for t in range(T) for n in range(N)])
    ts = bytes([1]) + dset([T], [10] + [1] * (T - 1))  # increasing: 10, 11, ...
    beh = dset([T], [1, -2, 3, 0, 5]) + dset([T], [0, 0, 1, 1, 0], type_=3)
    write("calcium", "two_behaviours", names("a,b") + bytes([0]) + gcamp + ts + beh)
    write("calcium", "no_behaviour", names("") + bytes([0]) + gcamp + ts)
    write("calcium", "float32_traces", names("c") + bytes([1]) +
          dset([T, N], [1] * (T * N), type_=1) + ts + dset([T], [2, 2, 2, 2, 2], type_=2))


def tokens():
    n, vocab, T = 30, 10, 4
    toks = bytes((7 * i + 3) % vocab for i in range(n))
    head = bytes([0, 0, 1, 0, 0, n, 0, vocab - 1])  # format, version, /tokens u16 1-D, vocab_size
    tail = bytes([1, 1, 0, 1])  # tokenizer, /vocab uint8 of vocab_size bytes
    reads = bytes([0, 2, 0, 3, 1, 0, 1, 4, 1, 5, 3, 0])
    write("tokens", "u16_shuffled", head + toks + tail + bytes([T - 1, 0, 0, 1, 7]) + reads)
    head32 = bytes([0, 0, 1, 1, 0, n, 0, vocab - 1])
    write("tokens", "i32_range_in_order", head32 + toks + bytes([0, 0, 0, 0]) +
          bytes([1, 1, 2, 0, 0]) + reads)


if __name__ == "__main__":
    config()
    tu()
    calcium()
    tokens()
