#!/usr/bin/python3
"""Turn the raw outputs of bench/run_foundation.sh (a directory of "key value" files) into the
markdown tables of docs/benchmarks.md.

    foundation_report.py OUT_DIR "THREADS"

Medians and bests pool every timed step of every round of one side; the ratio is Tessera's
tokens/s over PyTorch's. MFU = tess_tfm_train_flops per step / median step time / the fastest
1024^3 cblas_sgemm seen by Tessera's processes at the same thread count.
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
    print(f"- CPU details: {facts['cpu_detail'].strip()}")
    print(f"- Build: {facts['build_type']}, TESS_NATIVE={facts['native']}; {facts['compiler']}")
    print(f"- OpenBLAS: `{one(first, 'blas_config')}`, core `{one(first, 'blas_core')}`")
    print(f"- PyTorch {facts['torch']} (CPU), linked to {facts['torch_blas'].strip()}")
    print(f"- Load average (1, 5, 15 min) before the run: {facts['load_at_start'].replace(' ', '/')}"
          "; around each benchmark (these include the benchmark itself, about 1 per busy "
          "thread):", end="")
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
    return {"kvs": kvs, "n": len(wall), "median": statistics.median(wall), "best": min(wall),
            "cpu": statistics.median(cpu), "loss": one(kvs[0], "loss", float)}


def block(out, t):
    ours, theirs = block_side(out, "tess", t), block_side(out, "torch", t)
    kv0 = ours["kvs"][0]
    tokens = one(kv0, "tokens_per_step", float)
    flops = one(kv0, "flops_per_step", float)
    peak = max(one(kv, "peak_gflops", float) for kv in ours["kvs"]) * 1e9
    cpu_ok = t == "1"  # CPU time adds threads up: only meaningful for one thread

    def row(name, s):
        cpu_tok = f"{tokens / s['cpu']:.0f}" if cpu_ok else "n/a"
        print(f"| {name} | {s['n']} | {1e3 * s['median']:.1f} | {1e3 * s['best']:.1f} | "
              f"{tokens / s['median']:.0f} | {tokens / s['best']:.0f} | {cpu_tok} | "
              f"{100 * flops / s['median'] / peak:.0f}% | {s['loss']:.4f} |")

    print(f"**{t} thread(s)** (torch.set_num_threads({t}), OPENBLAS_NUM_THREADS={t}); "
          f"model FLOPs per step {flops / 1e9:.2f} G (tess_tfm_train_flops); sgemm peak "
          f"{peak / 1e9:.1f} GFLOP/s (fastest 1024^3 cblas_sgemm, wall).\n")
    print("| Implementation | timed steps | step ms, median | step ms, best | tokens/s, median | "
          "tokens/s, best | tokens/s, median CPU time | MFU (median) | loss at init |")
    print("|---|---|---|---|---|---|---|---|---|")
    row("Tessera (tess_tfm, L = 1)", ours)
    row("PyTorch 1.13 (same model)", theirs)
    r_med = theirs["median"] / ours["median"]
    r_best = theirs["best"] / ours["best"]
    r_cpu = f"{theirs['cpu'] / ours['cpu']:.2f}x" if cpu_ok else "n/a"
    print(f"| **Tessera / PyTorch** | | | | **{r_med:.2f}x** | {r_best:.2f}x | {r_cpu} | | |")
    print(f"\nGoal: Tessera >= 1.5x PyTorch's tokens/s: {r_med:.2f}x (medians, wall), "
          f"{verdict(r_med >= 1.5)}.\n")


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
          "ran in separate processes, interleaved round by round (who goes first alternates); "
          "medians and bests pool all timed steps. Best = fastest step, the estimate least "
          "affected by other processes' load.\n")
    for t in threads.split():
        block(out, t)
    memory(out)


if __name__ == "__main__":
    main()
