#!/usr/bin/python3
"""Turn the raw outputs of bench/run_foundation.sh (a directory of "key value" files) into the
markdown tables of docs/benchmarks.md.

    foundation_report.py OUT_DIR "THREADS"

Medians pool every timed step of every round of one side; the ratio is Tessera's tokens/s over
PyTorch's. MFU = tess_tfm_train_flops per step / step time / the fastest 1024^3 cblas_sgemm seen
by Tessera's processes at the same thread count, in wall time and in process CPU time.
"""
import glob
import os
import statistics
import sys

MIB = 1024.0 * 1024.0


def read_kv(path):
    """Dict of key -> list of values (strings), in file order."""
    kv = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("|"):
                continue
            key, _, value = line.partition(" ")
            kv.setdefault(key, []).append(value)
    return kv


def one(kv, key, conv=str):
    return conv(kv[key][0])


def verdict(ok):
    return "met" if ok else "**not met**"


def machine(out, threads):
    facts = {k: v[0] for k, v in read_kv(os.path.join(out, "facts.txt")).items()}
    first = read_kv(os.path.join(out, f"matmul_t{threads.split()[0]}.txt"))
    print("### Machine and load\n")
    print(f"- Date: {facts['date']}; CPU: {facts['cpu']}, {facts['cores']} cores "
          f"(lscpu / nproc); kernel {facts['kernel']}")
    print(f"- Build: {facts['build_type']}, TESS_NATIVE={facts['native']}; {facts['compiler']}")
    print(f"- OpenBLAS: `{one(first, 'blas_config')}`, core `{one(first, 'blas_core')}`")
    print(f"- PyTorch {facts['torch']} (CPU), linked to {facts['torch_blas'].strip()}")
    print("- Load averages (1, 5, 15 min) around each benchmark:", end="")
    with open(os.path.join(out, "load.txt")) as f:
        for line in f:
            label, *avg = line.split()
            print(f" {label} {'/'.join(avg)};", end="")
    print("\n")


def matmul(out, t):
    path = os.path.join(out, f"matmul_t{t}.txt")
    kv = read_kv(path)
    ratio = one(kv, "matmul_step_ratio", float)
    print(f"### 1. Matmul path vs raw cblas_sgemm, {t} thread(s)\n")
    print(f"N = B*T = 2048 rows; F = 8C/3 rounded up to 64; attention T = 256, hs = 64. "
          f"Timed in {'process CPU' if one(kv, 'clock') == 'cpu' else 'wall'} time; peak (fastest 1024^3 cblas_sgemm) "
          f"{one(kv, 'peak_gflops', float):.1f} GFLOP/s. Ratio = cblas time / tess_matmul time "
          f"(median of interleaved pairs).\n")
    with open(path) as f:
        for line in f:
            if line.startswith("|"):
                print(line, end="")
    print(f"\nGoal: step-total ratio >= 0.95: {ratio:.3f}, {verdict(ratio >= 0.95)}.\n")


def block_side(out, side, t):
    files = sorted(glob.glob(os.path.join(out, f"block_{side}_t{t}_r*.txt")))
    kvs = [read_kv(p) for p in files]
    wall = [float(x) for kv in kvs for x in kv["step_s"]]
    cpu = [float(x) for kv in kvs for x in kv["step_cpu_s"]]
    losses = [one(kv, "loss", float) for kv in kvs]
    return kvs, statistics.median(wall), statistics.median(cpu), len(wall), losses[0]


def block(out, t):
    tess_kvs, tw, tc, tn, tloss = block_side(out, "tess", t)
    _, pw, pc, pn, ploss = block_side(out, "torch", t)
    tokens = one(tess_kvs[0], "tokens_per_step", float)
    flops = one(tess_kvs[0], "flops_per_step", float)
    peak_w = max(one(kv, "peak_gflops", float) for kv in tess_kvs) * 1e9
    peak_c = max(one(kv, "peak_cpu_gflops", float) for kv in tess_kvs) * 1e9
    cpu_ok = t == "1"  # CPU time adds threads up: only meaningful for one thread

    def row(name, n, w, c, loss):
        cpu_tok = f"{tokens / c:.0f}" if cpu_ok else "n/a"
        cpu_mfu = f"{100 * flops / c / peak_c:.0f}%" if cpu_ok else "n/a"
        print(f"| {name} | {n} | {1e3 * w:.1f} | {tokens / w:.0f} | {cpu_tok} | "
              f"{100 * flops / w / peak_w:.0f}% | {cpu_mfu} | {loss:.4f} |")

    print(f"**{t} thread(s)** (torch.set_num_threads({t}), OPENBLAS_NUM_THREADS={t}); "
          f"model FLOPs per step {flops / 1e9:.2f} G (tess_tfm_train_flops); sgemm peak "
          f"{peak_w / 1e9:.1f} GFLOP/s wall, {peak_c / 1e9:.1f} GFLOP/s CPU time.\n")
    print("| Implementation | timed steps | step ms (median, wall) | tokens/s (wall) | "
          "tokens/s (CPU time) | MFU (wall) | MFU (CPU time) | loss at init |")
    print("|---|---|---|---|---|---|---|---|")
    row("Tessera (tess_tfm, L = 1)", tn, tw, tc, tloss)
    row("PyTorch 1.13 (same model)", pn, pw, pc, ploss)
    rw = pw / tw
    rc = f"{pc / tc:.2f}x" if cpu_ok else "n/a"
    print(f"| **Tessera / PyTorch** | | | **{rw:.2f}x** | {rc} | | | |")
    print(f"\nGoal: Tessera >= 1.5x PyTorch's tokens/s: {rw:.2f}x (wall), "
          f"{verdict(rw >= 1.5)}.\n")


def memory(out):
    rows = []
    tess_floor = None
    for side, name in (("tess", "Tessera"), ("torch", "PyTorch 1.13")):
        kv = read_kv(os.path.join(out, f"memory_{side}.txt"))
        base = one(kv, "baseline_rss_kib", int) * 1024
        growth = one(kv, "hwm_kib", int) * 1024 - base
        state = one(kv, "state_bytes", int)
        act = one(kv, "activation_bytes", int)
        floor = one(kv, "floor_bytes", int) if "floor_bytes" in kv else state + act
        if side == "tess":
            tess_floor = floor
        reset = one(kv, "hwm_reset", int)
        rows.append((name, base, growth, state, act, floor, reset, one(kv, "params", int)))
    print("### 3. Peak memory of one training step (forward, backward, AdamW update)\n")
    print(f"tinylm-like model: bench shapes with L = 2 ({rows[0][7]} parameters), B = 8, T = 256. "
          "Growth = VmHWM after the step - VmRSS before the model was built (after MPI_Init / "
          "`import torch` and one warm-up sgemm), VmHWM reset to VmRSS through "
          "/proc/self/clear_refs. Floor = params + grads + AdamW m and v (16 bytes/parameter) + "
          "the activations kept for backward: Tessera's arena (tess_tfm_activation_bytes, "
          "scratch included), PyTorch's autograd-saved tensors (unique storages, parameters "
          "excluded).\n")
    print("| Implementation | baseline RSS MiB | growth MiB | params+grads+m+v MiB | "
          "activations MiB | floor MiB | growth / own floor | growth / Tessera floor |")
    print("|---|---|---|---|---|---|---|---|")
    for name, base, growth, state, act, floor, reset, _ in rows:
        note = "" if reset else " (VmHWM not reset)"
        print(f"| {name}{note} | {base / MIB:.1f} | {growth / MIB:.1f} | {state / MIB:.1f} | "
              f"{act / MIB:.1f} | {floor / MIB:.1f} | {growth / floor:.2f}x | "
              f"{growth / tess_floor:.2f}x |")
    ratio = rows[0][2] / rows[0][5]
    print(f"\nGoal: Tessera growth / floor <= 1.3x: {ratio:.2f}x, {verdict(ratio <= 1.3)}.\n")


def main():
    out, threads = sys.argv[1], sys.argv[2]
    machine(out, threads)
    for t in threads.split():
        matmul(out, t)
    print("### 2. One transformer block, forward + backward, Tessera vs PyTorch\n")
    print("Both sides: embedding (V = 64) + 1 block (RMSNorm, fused qkv without bias, RoPE "
          "rotate-half, causal softmax attention, output projection, RMSNorm, SwiGLU F = 704 "
          "without biases, residuals) + final RMSNorm + head + cross-entropy; B = 8, T = 256, "
          "C = 256, NH = 4 (hs 64), fp32. A step = zero grads + forward + backward. Each side "
          "ran in separate processes, interleaved round by round; medians pool all timed steps.\n")
    for t in threads.split():
        block(out, t)
    memory(out)


if __name__ == "__main__":
    main()
