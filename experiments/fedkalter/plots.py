#!/usr/bin/env python3
"""experiments/fedkalter/plots.py OUT_DIR PNG_DIR - the curves of the experiments/fedkalter/run.sh
runs in OUT_DIR (finished runs only, OUT/<setting>-<method>-s<seed>.done), drawn with gnuplot into
PNG_DIR (docs/fedkalter.md embeds them): per setting, fedkalter_<setting>_test.png, the test
accuracy (%) averaged over the clients (unweighted, OUT/<run>/accuracy.csv) against the round,
one line per method: the mean over its finished seeds (their number in the legend); a curve
identical to an earlier method's is dashed and says so. Standard library and gnuplot."""
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


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: experiments/fedkalter/plots.py OUT_DIR PNG_DIR")
    main(sys.argv[1], sys.argv[2])
