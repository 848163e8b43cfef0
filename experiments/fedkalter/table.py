#!/usr/bin/env python3
"""experiments/fedkalter/table.py OUT_DIR - the results tables of experiments/fedkalter/run.sh,
over the seeds that finished (OUT/<run>.done) of each setting x method. Markdown on stdout.

Last round (the spec's protocol): the test accuracy (%) of every client after the last round
(OUT/<run>/clients.csv, mean over seeds), the client mean, the spec's "±" (the mean over clients of
each client's std across seeds, FedStar's convention) and, labelled separately, the std across
seeds of the client mean, the client mean per seed, the published row of the same method
(second-hand: FedIGL, NeurIPS 2025, Table 1, FedSSP protocol) and the minutes per run
(OUT/commands.tsv).

Best validation per client (the spec's secondary column, not the protocol): for every client the
evaluated round with its highest validation accuracy (OUT/<run>/client_accuracy.csv; the earliest
such round on ties) and its test accuracy there; the table has the last-round table's columns
(per client mean over seeds, client mean, "±", std of the client mean, per seed). Runs without
client_accuracy.csv (the app writes it since commit 77246db) are left out of it; the seeds column
says which are in.

Best validation per run (an extra table): per run, the evaluated round with the highest
validation accuracy averaged over the clients (unweighted, OUT/<run>/accuracy.csv; the earliest
such round on ties) and the client-mean test accuracy at that round. Mean and std across seeds.

Under both: Fed-Kalter - FedStar per common seed. All stds are population stds (numpy's default);
with one seed they are "-". Standard library only.
"""
import csv
import math
import os
import sys

# Client order of each setting (apps/fedkalter/data.c) and the run.sh setting names.
CLIENTS = {
    "sm": ["MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1"],
    "sm-cv": ["MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1",
              "Letter-low", "Letter-med", "Letter-high"],
    # without COLLAB (not available): 12 clients, the published row is not comparable
    "sm-sn-cv": ["MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1", "IMDB-BINARY",
                 "IMDB-MULTI", "Letter-low", "Letter-med", "Letter-high"],
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


def mean(xs):
    return sum(xs) / len(xs)


def pstd(xs):
    """Population std of xs (one value: 0)."""
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def spread(xs):
    """The std across seeds as printed: "-" with one seed."""
    return f"{pstd(xs):.2f}" if len(xs) > 1 else "-"


class Run:
    """One finished run: acc = last-round test accuracy (%) per client in client order;
    best_round, best_test = the evaluated round with the highest mean validation accuracy (the
    earliest on ties) and the client-mean test accuracy (%) there; best_client = per client the
    test accuracy (%) at the evaluated round of its highest validation accuracy (the earliest on
    ties), None without client_accuracy.csv."""

    def __init__(self, path, n_clients):
        with open(os.path.join(path, "clients.csv")) as f:
            rows = sorted(csv.DictReader(f), key=lambda r: int(r["client"]))
        self.acc = [100.0 * float(r["test_acc"]) for r in rows]
        if n_clients is not None and len(self.acc) != n_clients:
            sys.exit(f"table.py: {path}/clients.csv has {len(self.acc)} clients, "
                     f"expected {n_clients}")
        with open(os.path.join(path, "accuracy.csv")) as f:
            evals = [(int(r["step"]), float(r["val_acc"]), float(r["test_acc"]))
                     for r in csv.DictReader(f)]
        if not evals:
            sys.exit(f"table.py: {path}/accuracy.csv has no evaluated round")
        best = max(evals, key=lambda e: (e[1], -e[0]))
        self.best_round, self.best_test = best[0], 100.0 * best[2]
        self.best_client = None
        per_client = os.path.join(path, "client_accuracy.csv")
        if os.path.exists(per_client):
            with open(per_client) as f:
                rows = [(int(r["client"]), int(r["step"]), float(r["val_acc"]),
                         float(r["test_acc"])) for r in csv.DictReader(f)]
            best = {}
            for k, step, val, test in rows:
                if k not in best or (val, -step) > (best[k][0], -best[k][1]):
                    best[k] = (val, step, test)
            if sorted(best) != list(range(len(self.acc))):
                sys.exit(f"table.py: {path}/client_accuracy.csv has clients {sorted(best)}, "
                         f"expected 0..{len(self.acc) - 1}")
            self.best_client = [100.0 * best[k][2] for k in range(len(self.acc))]

    def client_mean(self):
        return mean(self.acc)


def read_runs(out):
    """{(setting, method): {seed: Run}} of the finished runs."""
    runs = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(".done"):
            continue
        run = name[:-len(".done")]
        setting, method, seed = run.rsplit("-", 2)
        n = len(CLIENTS[setting]) if setting in CLIENTS else None
        runs.setdefault((setting, method), {})[int(seed[1:])] = Run(os.path.join(out, run), n)
    return runs


def read_seconds(out):
    """{(setting, method, seed): seconds} summed over a run's calls (a resumed run has several)."""
    seconds = {}
    log = os.path.join(out, "commands.tsv")
    if os.path.exists(log):
        with open(log) as f:
            for r in csv.DictReader(f, delimiter="\t"):
                key = (r["setting"], r["method"], int(r["seed"]))
                seconds[key] = seconds.get(key, 0.0) + float(r["seconds"])
    return seconds


def client_table(title, names, cells, value, published, seconds):
    """Per method: value(run) (a % per client) averaged over the seeds, the client mean, the "±"
    (mean over clients of the std across seeds), the std of the client mean, the client mean per
    seed, published[method] and the minutes per run (seconds[(method, seed)])."""
    print(f"\n{title}\n")
    print("| method | seeds | " + " | ".join(names) +
          " | client mean | ± (mean client std) | std of the client mean | per seed |"
          " published | min/run |")
    print("|---|---|" + "---|" * len(names) + "---|---|---|---|---|---|")
    for method, by_seed in cells:
        seeds = sorted(by_seed)
        per_client = [[value(by_seed[s])[k] for s in seeds] for k in range(len(names))]
        client_mean = [mean(value(by_seed[s])) for s in seeds]
        pm = f"{mean([pstd(v) for v in per_client]):.2f}" if len(seeds) > 1 else "-"
        mins = [seconds[(method, s)] / 60 for s in seeds if (method, s) in seconds]
        print(f"| {LABEL.get(method, method)} | {','.join(map(str, seeds))} | " +
              " | ".join(f"{mean(v):.2f}" for v in per_client) +
              f" | {mean(client_mean):.2f} | {pm} | {spread(client_mean)}"
              f" | {' / '.join(f'{c:.2f}' for c in client_mean)}"
              f" | {published.get(method, '-')}"
              f" | {f'{mean(mins):.0f}' if mins else '-'} |")


def best_val_table(setting, cells):
    print(f"\n{setting.upper()}: client-mean test accuracy (%) at the round of the best mean"
          " validation accuracy (one round per run; not the protocol)\n")
    print("| method | seeds | round per seed | per seed | mean | std across seeds |"
          " last-round mean |")
    print("|---|---|---|---|---|---|---|")
    for method, by_seed in cells:
        seeds = sorted(by_seed)
        best = [by_seed[s].best_test for s in seeds]
        print(f"| {LABEL.get(method, method)} | {','.join(map(str, seeds))}"
              f" | {' / '.join(str(by_seed[s].best_round) for s in seeds)}"
              f" | {' / '.join(f'{b:.2f}' for b in best)} | {mean(best):.2f} | {spread(best)}"
              f" | {mean([by_seed[s].client_mean() for s in seeds]):.2f} |")


def difference_line(what, fs, fk, value):
    """Fed-Kalter - FedStar of value(run) on the seeds both have; nothing without one."""
    both = sorted(set(fs) & set(fk))
    if not both:
        return
    diff = [value(fk[s]) - value(fs[s]) for s in both]
    print(f"\nFed-Kalter − FedStar, {what}, same seed: " +
          ", ".join(f"s{s} {d:+.2f}" for s, d in zip(both, diff)) +
          f" (mean {mean(diff):+.2f}; Fed-Kalter ≥ FedStar on "
          f"{sum(d >= 0 for d in diff)} of {len(diff)} seeds)")


def main(out):
    runs, seconds = read_runs(out), read_seconds(out)
    for setting, names in CLIENTS.items():
        cells = [(m, runs[(setting, m)]) for m in METHODS if (setting, m) in runs]
        if not cells:
            continue
        fs, fk = runs.get((setting, "fedstar"), {}), runs.get((setting, "fedkalter"), {})
        secs = {(m, seed): t for (s, m, seed), t in seconds.items() if s == setting}
        client_table(f"{setting.upper()}: last-round test accuracy (%), mean over the seeds",
                     names, cells, lambda r: r.acc, PUBLISHED.get(setting, {}), secs)
        difference_line("client mean", fs, fk, Run.client_mean)
        # per-client best validation: only the runs that logged client_accuracy.csv
        pcells = [(m, {s: r for s, r in by_seed.items() if r.best_client is not None})
                  for m, by_seed in cells]
        pcells = [(m, by_seed) for m, by_seed in pcells if by_seed]
        if pcells:
            client_table(f"{setting.upper()}: test accuracy (%) of every client at its own best "
                         "validation round, mean over the seeds (the spec's secondary column; "
                         "not the protocol)", names, pcells, lambda r: r.best_client, {}, secs)
            difference_line("per-client best-validation test, client mean",
                            dict(pcells).get("fedstar", {}), dict(pcells).get("fedkalter", {}),
                            lambda r: mean(r.best_client))
        best_val_table(setting, cells)
        difference_line("best-validation test", fs, fk, lambda r: r.best_test)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: experiments/fedkalter/table.py OUT_DIR")
    main(sys.argv[1])
