#!/usr/bin/env python3
"""experiments/fedkalter/plots.py OUT_DIR PNG_DIR - the curves of the experiments/fedkalter/run.sh
runs in OUT_DIR (finished runs only, OUT/<setting>-<method>-s<seed>.done), drawn with gnuplot into
PNG_DIR (docs/fedkalter.md embeds them): per setting, fedkalter_<setting>_test.png, the test
accuracy (%) averaged over the clients (unweighted, OUT/<run>/accuracy.csv) against the round,
one line per method: the mean over its finished seeds (their number in the legend); a curve
identical to an earlier method's is dashed and says so.

experiments/fedkalter/plots.py --gcfl PNG RUN_DIR... - GCFL's split rule over the rounds of GCFL
or GCFL+ runs (RUN_DIR/gcfl.csv, RUN_DIR/config.ini): per run the norm of the mean update and the
largest update norm of every cluster (points; one per cluster and round) and the run's eps1 and
eps2 (dashed lines), the end of the first run's warm-up (dotted); a cluster splits when, past the
warm-up, the first is below eps1 and the second above eps2. Prints per run its eps and the round
of its first split and the clusters at the end, or "no split". Standard library and gnuplot."""
import csv
import os
import subprocess
import sys
import tempfile

METHODS = ["selftrain", "fedavg", "fedprox", "gcfl", "gcflplus", "fedstar", "fedkalter"]
LABEL = {"selftrain": "Self-train", "fedavg": "FedAvg", "fedprox": "FedProx", "gcfl": "GCFL",
         "gcflplus": "GCFL+", "fedstar": "FedStar", "fedkalter": "Fed-Kalter"}
COLOR = {"selftrain": "#7f7f7f", "fedavg": "#1f77b4", "fedprox": "#2ca02c", "gcfl": "#9467bd",
         "gcflplus": "#8c564b", "fedstar": "#ff7f0e", "fedkalter": "#d62728"}


def load(out):
    """{setting: {method: {seed: run dir}}} of the finished runs."""
    runs = {}
    for name in sorted(os.listdir(out)):
        if name.endswith(".done"):
            setting, method, seed = name[:-len(".done")].rsplit("-", 2)
            runs.setdefault(setting, {}).setdefault(method, {})[int(seed[1:])] = \
                os.path.join(out, name[:-len(".done")])
    return runs


def curve(dirs):
    """[(round, mean test accuracy %)] over the runs in dirs, at the rounds every run evaluated."""
    per = {}
    for d in dirs:
        with open(os.path.join(d, "accuracy.csv")) as f:
            for r in csv.DictReader(f):
                per.setdefault(int(r["step"]), []).append(100.0 * float(r["test_acc"]))
    return [(st, sum(v) / len(v)) for st, v in sorted(per.items()) if len(v) == len(dirs)]


def main(out, pngdir):
    runs = load(out)
    if not runs:
        sys.exit(f"plots.py: no finished runs (<run>.done) in {out}")
    os.makedirs(pngdir, exist_ok=True)
    tmp = tempfile.mkdtemp()
    for setting, by_method in sorted(runs.items()):
        plots, drawn = [], {}
        for m in [m for m in METHODS if m in by_method]:
            c = curve(by_method[m].values())
            data = os.path.join(tmp, f"{setting}-{m}.dat")
            with open(data, "w") as f:
                f.writelines(f"{st} {a:.6g}\n" for st, a in c)
            n = len(by_method[m])
            # a curve equal to one already drawn (GCFL without a split is FedAvg) is dashed and
            # named as such, so the one below stays visible
            same = [LABEL[o] for o, oc in drawn.items() if oc == c]
            style = "dt 2" if same else "dt 1"
            title = f"{LABEL[m]} ({n} seed{'s' if n > 1 else ''}{', = ' + same[0] if same else ''})"
            plots.append(f"'{data}' using 1:2 with lines lw 2 {style} lc rgb '{COLOR[m]}' "
                         f"title '{title}'")
            drawn[m] = c
        png = os.path.join(pngdir, f"fedkalter_{setting}_test.png")
        script = (f"set terminal pngcairo size 900,560 noenhanced font ',11'\n"
                  f"set output '{png}'\nset grid\n"
                  "set offsets 0, 0, graph 0.03, graph 0.03\n"  # no curve on the frame
                  f"set title 'fedkalter, {setting.upper()}: test accuracy, unweighted mean over "
                  f"the clients (mean over the seeds)' font ',11'\n"
                  "set xlabel 'federated round'\nset ylabel 'test accuracy (%)'\n"
                  "set key inside bottom right opaque box samplen 2\n"
                  "plot " + ", ".join(plots) + "\n")
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        print(png)


def config_value(run, key):
    """The value of section.key in RUN/config.ini (the run's resolved configuration)."""
    section, name = key.split(".")
    current = None
    with open(os.path.join(run, "config.ini")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                current = line[1:-1]
            elif current == section and "=" in line and line.split("=")[0].strip() == name:
                return line.split("=", 1)[1].strip()
    sys.exit(f"plots.py: no {key} in {run}/config.ini")


def gcfl(png, run_dirs):
    tmp = tempfile.mkdtemp()
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    plots, lo, hi = [], float("inf"), 0.0
    for i, run in enumerate(run_dirs):
        eps1, eps2 = (float(config_value(run, f"train.gcfl_eps{j}")) for j in (1, 2))
        with open(os.path.join(run, "gcfl.csv")) as f:
            rows = list(csv.DictReader(f))
        if not rows:
            sys.exit(f"plots.py: {run}/gcfl.csv has no rows")
        data = os.path.join(tmp, f"run{i}.dat")
        with open(data, "w") as f:
            f.writelines(f"{r['step']} {r['mean_update_norm']} {r['max_update_norm']}\n"
                         for r in rows)
        norms = [float(r[k]) for r in rows for k in ("mean_update_norm", "max_update_norm")]
        lo, hi = min([lo, eps1] + [v for v in norms if v > 0]), max([hi, eps2] + norms)
        first = [int(r["step"]) for r in rows if r["split"] == "1"]
        last = [r for r in rows if r["step"] == rows[-1]["step"]]  # the last round's clusters
        clusters = len(last) + sum(r["split"] == "1" for r in last)
        what = (f"first split at round {first[0]}, {clusters} clusters at the end" if first
                else "no split")
        c = colors[i % len(colors)]
        name = f"eps1 {eps1:g}, eps2 {eps2:g}"
        plots += [f"'{data}' using 1:3 with points pt 9 ps 0.6 lc rgb '{c}' "
                  f"title 'largest update norm ({name}: {what})'",
                  f"'{data}' using 1:2 with points pt 7 ps 0.5 lc rgb '{c}' "
                  f"title 'norm of the mean update ({name})'",
                  f"{eps2} with lines dt 2 lw 2 lc rgb '{c}' title 'eps2 = {eps2:g} (largest "
                  "must be above)'",
                  f"{eps1} with lines dt 3 lw 2 lc rgb '{c}' title 'eps1 = {eps1:g} (mean must "
                  "be below)'"]
        print(f"{run}: eps1 {eps1:g}, eps2 {eps2:g}: {what}")
    warmup = config_value(run_dirs[0], "train.gcfl_warmup")
    seed = config_value(run_dirs[0], "run.seed")
    setting = config_value(run_dirs[0], "data.setting")
    method = LABEL.get(config_value(run_dirs[0], "model.method"), "GCFL")
    script = (f"set terminal pngcairo size 900,600 noenhanced font ',11'\n"
              f"set output '{png}'\nset grid\nset logscale y\n"
              f"set yrange [{lo / 2:g}:{hi * 2:g}]\n"  # the eps lines off the frame
              f"set title \"fedkalter {method}, {setting}, seed {seed}: the split rule per cluster "
              "and round\\n(points: one per cluster; later runs drawn over earlier ones; runs of "
              "one seed agree up to the first split)\" font ',11'\n"
              "set xlabel 'federated round'\n"
              "set ylabel 'L2 norm of the shared-parameter update (log scale)'\n"
              "set key below Left reverse samplen 2 font ',10'\n"
              f"set arrow from {warmup}, graph 0 to {warmup}, graph 1 nohead dt 4 lc rgb 'gray40'\n"
              f"set label 'end of warm-up (no split up to round {warmup})' at {warmup}, graph 0.95 "
              "offset 0.5, 0 font ',10'\n"
              "plot " + ", ".join(plots) + "\n")
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(png)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--gcfl":
        gcfl(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    else:
        sys.exit("usage: experiments/fedkalter/plots.py OUT_DIR PNG_DIR\n"
                 "       experiments/fedkalter/plots.py --gcfl PNG RUN_DIR...")
