"""experiments/calm/seed_stats.py - the statistics the calm seed tables share
(forecast_table.py, decode_table.py): the finished runs of a grid, mean and sample std over seeds, their Markdown form, and
the win / tie / loss verdict of per-seed paired differences. Standard library only."""
import math
import os
import re


def mean_std(xs):
    """Mean and sample std of xs (std nan for one value)."""
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float("nan")
    return m, sd


def fmt(xs, signed=True):
    """'m ± sd' with 3 decimals, the mean alone for one value."""
    m, sd = mean_std(xs)
    s = f"{m:+.3f}" if signed else f"{m:.3f}"
    return s if len(xs) == 1 else f"{s} ± {sd:.3f}"


def verdict(diffs):
    """win when every paired difference is positive or their mean exceeds their std, loss
    likewise with the signs turned, tie otherwise."""
    m, sd = mean_std(diffs)
    if min(diffs) > 0 or (len(diffs) > 1 and m > sd):
        return "**win**"
    if max(diffs) < 0 or (len(diffs) > 1 and -m > sd):
        return "loss"
    return "tie"


def finished_runs(out, names, read_run):
    """{name: {seed: read_run(OUT/<name>-s<seed>)}} over the runs marked finished
    (OUT/<name>-s<seed>.done) whose name is in names."""
    runs = {}
    for entry in sorted(os.listdir(out)):
        mt = re.fullmatch(r"(.+)-s(\d+)\.done", entry)
        if mt and mt.group(1) in names:
            runs.setdefault(mt.group(1), {})[int(mt.group(2))] = read_run(
                os.path.join(out, entry[:-5]))
    return runs
