#!/usr/bin/python3
"""PyTorch's side of bench_ckpt: torch.save / torch.load of the same tensors, timed the same way.

    bench_ckpt_torch.py DIR [--mib 100] [--tensors 8] [--reps 1]

State: a dict of --tensors float32 tensors "layer.<i>.w" of shape (rows_i, 1024) totalling --mib
MiB, rows split as bench_ckpt.c splits them, element g (global row-major index) of tensor i equal
to ((g * 2654435761 + i * 40503) mod 2^20) / 2^20 - 0.5, as bench_ckpt.c fills it. One
repetition:
  save  open DIR/torch.pt, torch.save(state, f), f.flush(), os.fsync(f.fileno()), close: the
        idiom of a careful PyTorch user (no tmp + rename).
  load  drop the page cache (write "3" to /proc/sys/vm/drop_caches if allowed, else
        posix_fadvise(DONTNEED) on the file), then torch.load(path); the result is compared with
        the state (untimed) and freed; the file is removed (untimed).
Times are wall seconds (time.perf_counter). Memory: VmHWM growth across the save and the load
(VmHWM reset to VmRSS just before, through /proc/self/clear_refs). Prints "key value" lines
(medians over --reps), like bench_ckpt, for bench/run_ckpt.sh.
"""
import argparse
import os
import statistics
import time

import torch

COLS = 1024
CHUNK = 256  # rows per fill chunk


def proc_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def drop_cache(path):
    """Drop the page cache before a read; returns the method used."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return "drop_caches"
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        return "fadvise"


def build_state(mib, ntensors):
    """The tensors, filled in chunks of CHUNK rows (small temporaries: first touches of fresh
    memory are slow on the bench VM)."""
    total_rows = mib * ((1 << 20) // (COLS * 4))
    if ntensors > total_rows:
        raise SystemExit(f"bench_ckpt_torch.py: {ntensors} tensors do not fit in {mib} MiB")
    state = {}
    base = torch.arange(CHUNK * COLS, dtype=torch.int64)
    for i in range(ntensors):
        rows = total_rows // ntensors + (1 if i < total_rows % ntensors else 0)
        t = torch.empty(rows, COLS, dtype=torch.float32)
        flat = t.view(-1)
        for r0 in range(0, rows, CHUNK):
            n = min(CHUNK, rows - r0) * COLS
            g = base[:n] + r0 * COLS
            bits = (g * 2654435761 + i * 40503) & 0xFFFFF
            torch.sub(bits.to(torch.float32) / 1048576.0, 0.5, out=flat[r0 * COLS:r0 * COLS + n])
        state[f"layer.{i}.w"] = t
    return state


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--mib", type=int, default=100)
    ap.add_argument("--tensors", type=int, default=8)
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        raise SystemExit(f"bench_ckpt_torch.py: '{a.dir}' is not a directory")
    torch.set_num_threads(1)
    state = build_state(a.mib, a.tensors)
    state_bytes = sum(t.numel() * t.element_size() for t in state.values())
    largest = max(t.numel() * t.element_size() for t in state.values())
    path = os.path.join(a.dir, "torch.pt")
    hwm_reset = reset_hwm()
    save_s, load_s, save_kib, load_kib = [], [], [], []
    file_bytes, method, bad = -1, "none", 0
    for _ in range(a.reps):
        reset_hwm()
        rss = proc_kib("VmRSS")
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        save_s.append(time.perf_counter() - t0)
        save_kib.append(proc_kib("VmHWM") - rss)
        file_bytes = os.path.getsize(path)

        method = drop_cache(path)
        reset_hwm()
        rss = proc_kib("VmRSS")
        t0 = time.perf_counter()
        loaded = torch.load(path)
        load_s.append(time.perf_counter() - t0)
        load_kib.append(proc_kib("VmHWM") - rss)
        bad += sum(0 if torch.equal(loaded[k], v) else 1 for k, v in state.items())
        del loaded
        os.remove(path)
        fd = os.open(a.dir, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    print(f"torch {torch.__version__}")
    print(f"reps {a.reps}\ntensors {a.tensors}\nstate_bytes {state_bytes}\nfile_bytes {file_bytes}")
    print(f"largest_tensor_bytes {largest}\ncache_drop {method}\nhwm_reset {int(hwm_reset)}")
    print(f"torch_save_s {statistics.median(save_s):.4f}\ntorch_load_s {statistics.median(load_s):.4f}")
    print(f"save_hwm_growth_kib {statistics.median(save_kib):.0f}")
    print(f"load_hwm_growth_kib {statistics.median(load_kib):.0f}")
    print(f"load_mismatched_tensors {bad}")
    if bad:
        raise SystemExit(f"bench_ckpt_torch.py: {bad} tensors differ after torch.load")


if __name__ == "__main__":
    main()
