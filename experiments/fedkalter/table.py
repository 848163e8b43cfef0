#!/usr/bin/env python3
"""experiments/fedkalter/table.py OUT_DIR - the results table of experiments/fedkalter/run.sh: for
each setting x method, over the seeds that finished (OUT/<run>.done), the last-round test accuracy
(%) of every client (clients.csv, mean over seeds), the client mean, the spec's "±" (the mean over
clients of each client's std across seeds, FedStar's convention) and, labelled separately, the std
across seeds of the client mean; both stds are population stds (numpy's default). Next to it the
published row of the same method (second-hand: FedIGL, NeurIPS 2025, Table 1, FedSSP protocol)
and the run time from OUT/commands.tsv; with one seed both stds are "-". Markdown on stdout.
Standard library only."""
import csv
import math
import os
import sys

# Client order of each setting (apps/fedkalter/data.c) and the run.sh setting names.
CLIENTS = {
    "sm": ["MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1"],
    "sm-cv": ["MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1",
              "Letter-low", "Letter-med", "Letter-high"],
}
METHODS = ["selftrain", "fedavg", "fedprox", "gcfl", "gcflplus", "fedstar", "fedkalter"]
LABEL = {"selftrain": "Self-train", "fedavg": "FedAvg", "fedprox": "FedProx", "gcfl": "GCFL",
         "gcflplus": "GCFL+", "fedstar": "FedStar", "fedkalter": "Fed-Kalter"}
# Mean test accuracy ± (mean per-client std), 5 runs: FedIGL (NeurIPS 2025) Table 1, as quoted.
PUBLISHED = {
    "sm": {"fedavg": "74.12 ± 2.10", "fedprox": "69.35 ± 3.36", "gcfl": "77.71 ± 1.53",
           "fedstar": "78.63 ± 2.11"},
    "sm-cv": {"fedavg": "81.21 ± 1.00", "fedprox": "70.02 ± 2.27", "gcfl": "72.64 ± 0.71",
              "fedstar": "78.84 ± 1.07"},
}


def pstd(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def read_runs(out):
    """{(setting, method): {seed: [test accuracy % per client]}} of the finished runs."""
    runs = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(".done"):
            continue
        run = name[:-len(".done")]
        setting, method, seed = run.rsplit("-", 2)
        with open(os.path.join(out, run, "clients.csv")) as f:
            rows = list(csv.DictReader(f))
        acc = [100.0 * float(r["test_acc"]) for r in sorted(rows, key=lambda r: float(r["client"]))]
        if setting in CLIENTS and len(acc) != len(CLIENTS[setting]):
            sys.exit(f"table.py: {out}/{run}/clients.csv has {len(acc)} clients, "
                     f"expected {len(CLIENTS[setting])} for {setting}")
        runs.setdefault((setting, method), {})[int(seed[1:])] = acc
    return runs


def read_seconds(out):
    seconds = {}
    log = os.path.join(out, "commands.tsv")
    if os.path.exists(log):
        with open(log) as f:
            for r in csv.DictReader(f, delimiter="\t"):
                key = (r["setting"], r["method"], int(r["seed"]))
                seconds[key] = seconds.get(key, 0.0) + float(r["seconds"])
    return seconds


def main(out):
    runs, seconds = read_runs(out), read_seconds(out)
    for setting, names in CLIENTS.items():
        cells = [(m, runs[(setting, m)]) for m in METHODS if (setting, m) in runs]
        if not cells:
            continue
        print(f"\n{setting.upper()}: last-round test accuracy (%), mean over the seeds\n")
        print("| method | seeds | " + " | ".join(names) +
              " | client mean | ± (mean client std) | std of the client mean | per seed |"
              " published | min/run |")
        print("|---|---|" + "---|" * len(names) + "---|---|---|---|---|---|")
        for method, by_seed in cells:
            seeds = sorted(by_seed)
            per_client = [[by_seed[s][k] for s in seeds] for k in range(len(names))]
            means = [sum(v) / len(v) for v in per_client]
            client_mean = [sum(by_seed[s]) / len(names) for s in seeds]
            pm = sum(pstd(v) for v in per_client) / len(names)
            spread = (f"{pm:.2f} | {pstd(client_mean):.2f}" if len(seeds) > 1
                      else "- | -")  # one seed: no spread
            mins = [seconds[(setting, method, s)] / 60 for s in seeds
                    if (setting, method, s) in seconds]
            t = f"{sum(mins) / len(mins):.0f}" if mins else "-"
            print(f"| {LABEL.get(method, method)} | {','.join(map(str, seeds))} | " +
                  " | ".join(f"{m:.2f}" for m in means) +
                  f" | {sum(client_mean) / len(seeds):.2f} | {spread}"
                  f" | {' / '.join(f'{c:.2f}' for c in client_mean)}"
                  f" | {PUBLISHED.get(setting, {}).get(method, '-')} | {t} |")
        fs, fk = runs.get((setting, "fedstar"), {}), runs.get((setting, "fedkalter"), {})
        both = sorted(set(fs) & set(fk))
        if both:
            diff = [sum(fk[s]) / len(names) - sum(fs[s]) / len(names) for s in both]
            print(f"\nFed-Kalter − FedStar, client mean, same seed: " +
                  ", ".join(f"s{s} {d:+.2f}" for s, d in zip(both, diff)) +
                  f" (mean {sum(diff) / len(diff):+.2f}; Fed-Kalter ≥ FedStar on "
                  f"{sum(d >= 0 for d in diff)} of {len(diff)} seeds)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: experiments/fedkalter/table.py OUT_DIR")
    main(sys.argv[1])
