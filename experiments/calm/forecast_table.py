#!/usr/bin/env python3
"""experiments/calm/forecast_table.py OUT_DIR [PNG_DIR] - the results of
experiments/calm/forecast_seeds.sh (finished runs only, OUT/<row>-s<seed>.done).

Per row (data and split): the prediction score 1 - MSE/MSE_copy-last over the 16 horizon frames
(the MSE averaged over the frames first, as the app's log line) of CalM-lite and of every
baseline, mean +- sample std over the seeds; the strongest baseline of the row (the highest mean
score); the per-seed paired differences CalM-lite - that baseline (same seed: same windows, same
simulated sessions), and the verdict: win when every paired difference is positive or their
mean exceeds their std, loss likewise with the signs turned, tie otherwise. Markdown on stdout.

With PNG_DIR, gnuplot draws PNG_DIR/calm_forecast_seeds.png (the scores per row and seed, CalM-lite
against the row's strongest baseline) and PNG_DIR/calm_forecast_horizon.png (per row, the score
1 - MSE_h/MSE_copy-last,h per horizon frame h, mean over the seeds, of CalM-lite and every
baseline). Standard library and gnuplot."""
import csv
import os
import re
import subprocess
import sys

from seed_stats import finished_runs, fmt, mean_std, verdict

ROWS = ["sim-tail", "sim-animal", "worm-tail", "worm-animal", "worm-block250"]
ROWLABEL = {"sim-tail": "simulator, tail", "sim-animal": "simulator, animal",
            "worm-tail": "worms, tail", "worm-animal": "worms, animal",
            "worm-block250": "worms, block 250"}
MODELS = [("model", "CalM-lite"), ("context_mean", "context mean"), ("ridge_ar", "per-neuron AR"),
          ("pooled_ar", "pooled AR"), ("pop_var", "population VAR"), ("mlp", "MLP")]
BASELINES = [m for m in MODELS if m[0] != "model"]
COLOR = {"model": "#d62728", "context_mean": "#7f7f7f", "ridge_ar": "#1f77b4",
         "pooled_ar": "#2ca02c", "pop_var": "#9467bd", "mlp": "#ff7f0e"}
def read_run(d):
    """Scores over all horizon frames and per frame, the DAT step forecast, the test windows."""
    with open(os.path.join(d, "forecast.csv")) as f:
        rows = list(csv.DictReader(f))
    mse = {m: [float(r["mse_" + m]) for r in rows] for m, _ in MODELS}
    copy = [float(r["mse_copy_last"]) for r in rows]
    mc = sum(copy) / len(copy)
    score = {m: 1.0 - (sum(v) / len(v)) / mc for m, v in mse.items()}
    per_h = {m: [1.0 - a / b for a, b in zip(v, copy)] for m, v in mse.items()}
    log = open(os.path.join(d, "run.log")).read()
    step = re.search(r"validation: the DAT of step (\d+)", log)
    win = re.search(r"forecast \(\w+ split, (\d+) test windows", log)
    return {"score": score, "per_h": per_h, "best_step": int(step.group(1)) if step else None,
            "windows": int(win.group(1)) if win else None}

def main(out, png_dir=None):
    runs = finished_runs(out, ROWS, read_run)
    print("| data, split | seeds | test windows | " + " | ".join(l for _, l in MODELS) +
          " | strongest baseline | CalM-lite − strongest, per seed | verdict |")
    print("|---" * (len(MODELS) + 6) + "|")
    summary = {}
    for row in ROWS:
        if row not in runs:
            continue
        seeds = sorted(runs[row])
        sc = {m: [runs[row][s]["score"][m] for s in seeds] for m, _ in MODELS}
        best = max(BASELINES, key=lambda b: mean_std(sc[b[0]])[0])
        diffs = [a - b for a, b in zip(sc["model"], sc[best[0]])]
        summary[row] = (seeds, sc, best, diffs)
        wins = sorted({runs[row][s]["windows"] for s in seeds})
        cells = [fmt(sc[m]) for m, _ in MODELS]
        per_seed = ", ".join(f"{d:+.3f} ({s})" for d, s in zip(diffs, seeds))
        print(f"| {ROWLABEL[row]} | {len(seeds)} | {'/'.join(map(str, wins))} | " +
              " | ".join(cells) + f" | {best[1]} | {per_seed}; mean {fmt(diffs)} | "
              f"{verdict(diffs)} |")
    print()
    for row in ROWS:
        if row in runs:
            steps = [runs[row][s]["best_step"] for s in sorted(runs[row])]
            print(f"- {ROWLABEL[row]}: best-validated DAT step per seed "
                  f"{', '.join('—' if x is None else str(x) for x in steps)} (seeds "
                  f"{', '.join(map(str, sorted(runs[row])))})")
    if png_dir:
        plots(runs, summary, png_dir)


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def plots(runs, summary, png_dir):
    os.makedirs(png_dir, exist_ok=True)
    rows = [r for r in ROWS if r in summary]
    nseed = sorted({len(summary[r][0]) for r in rows})
    # scores per row and seed: CalM-lite and the row's strongest baseline
    data = []
    for i, r in enumerate(rows):
        seeds, sc, best, _ = summary[r]
        for j, s in enumerate(seeds):
            data.append(f"{i - 0.12} {sc['model'][j]} {i + 0.12} {sc[best[0]][j]}")
    dat = os.path.join(png_dir, ".calm_seeds.dat")
    with open(dat, "w") as f:
        f.write("\n".join(data) + "\n")
    tics = ", ".join(f'"{ROWLABEL[r]}\\n(vs {summary[r][2][1]})" {i}' for i, r in enumerate(rows))
    png = os.path.join(png_dir, "calm_forecast_seeds.png")
    gnuplot(f"""set terminal pngcairo size 1000,600 noenhanced font ',11'
set output '{png}'
set grid ytics
set title "calm: forecast score per seed, CalM-lite against each row's strongest baseline\\n(small model, 600 DAT steps, {'/'.join(map(str, nseed))} seeds per row; score = 1 - MSE/MSE(copy-last) over 16 frames)"
set xtics ({tics})
set xrange [-0.6:{len(rows) - 0.4}]
set ylabel 'prediction score on the test windows'
set xlabel 'data, split (in brackets: the strongest baseline of the row, by mean score)' offset 0,-1.2
set bmargin 7
set key below horizontal
plot '{dat}' using 1:2 with points pt 7 ps 1.4 lc rgb '{COLOR["model"]}' title 'CalM-lite (one point per seed)', \\
     '' using 3:4 with points pt 5 ps 1.4 lc rgb '{COLOR["mlp"]}' title 'strongest baseline of the row (same seeds)'
""")
    os.remove(dat)
    # score per horizon frame, mean over the seeds, one panel per row
    png = os.path.join(png_dir, "calm_forecast_horizon.png")
    cols = 3
    nr = (len(rows) + cols - 1) // cols
    script = [f"set terminal pngcairo size 1350,{430 * nr} noenhanced font ',10'",
              f"set output '{png}'", f"set multiplot layout {nr},{cols} title "
              f"'calm: score 1 - MSE_h / MSE_h(copy-last) per horizon frame h on the test windows, "
              f"mean over the seeds (small model, 600 DAT steps)'", "set grid",
              "set xlabel 'horizon frame h (frames ahead)'", "set ylabel 'score at frame h'",
              "set key bottom left font ',8'"]
    tmp = []
    for r in rows:
        seeds = sorted(runs[r])
        H = len(runs[r][seeds[0]]["per_h"]["model"])
        d = os.path.join(png_dir, f".calm_h_{r}.dat")
        tmp.append(d)
        with open(d, "w") as f:
            for h in range(H):
                vals = [sum(runs[r][s]["per_h"][m][h] for s in seeds) / len(seeds) for m, _ in MODELS]
                f.write(f"{h + 1} " + " ".join(f"{v:.5f}" for v in vals) + "\n")
        script.append(f"set title '{ROWLABEL[r]} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})'")
        script.append("set yrange [-0.5:*]")
        plot = ", ".join(f"'{d}' using 1:{k + 2} with linespoints lw {3 if m == 'model' else 1.5} "
                         f"pt 7 ps 0.6 lc rgb '{COLOR[m]}' title '{l}'"
                         for k, (m, l) in enumerate(MODELS))
        script.append("plot " + plot)
    script.append("unset multiplot")
    gnuplot("\n".join(script) + "\n")
    for d in tmp:
        os.remove(d)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(*sys.argv[1:])
