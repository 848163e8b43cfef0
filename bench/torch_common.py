"""Pieces shared by the PyTorch sides of the benchmarks (bench_block_torch.py, bench_calm_torch.py):
the thread setup with its report, the RoPE rotate-half tables and rotation, and the timed-step
loop. Output is "key value" lines, like the C programs, for the bench/run_*.sh scripts."""
import time

import torch


def setup(threads):
    """Sets torch's intra-op thread count and prints torch_version and torch_threads."""
    torch.set_num_threads(threads)
    print(f"torch_version {torch.__version__}")
    print(f"torch_threads {torch.get_num_threads()}")


def rope_tables(T, hs, base=10000.0):
    """cos, sin (T, hs) each, float32: angle t * base^(-2i/hs) of pair i < hs/2 at position t,
    computed in float64 and repeated over the two halves (GPT-NeoX/LLaMA rotate-half)."""
    inv = base ** (-torch.arange(0, hs // 2, dtype=torch.float64) * 2.0 / hs)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]  # (T, hs/2)
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1).float()
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1).float()
    return cos, sin


def rotate_half(x):
    """[-x2, x1] of the halves x1, x2 of the last axis; x * cos + rotate_half(x) * sin rotates."""
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def timed_steps(zero_grad, loss_fn, warmup, reps, update=None):
    """warmup + reps steps of zero_grad(), loss = loss_fn(), loss.backward(), update() if given;
    prints "loss" after the first step, and "step_s" (wall) and "step_cpu_s" (process CPU time)
    of every step after the warm-up ones."""
    for s in range(-warmup, reps):
        w0, c0 = time.perf_counter(), time.process_time()
        zero_grad()
        loss = loss_fn()
        loss.backward()
        if update is not None:
            update()
        w, c = time.perf_counter() - w0, time.process_time() - c0
        if s == -warmup:
            print(f"loss {loss.item():.6f}")
        if s >= 0:
            print(f"step_s {w:.6f}")
            print(f"step_cpu_s {c:.6f}")
