#!/usr/bin/env python3
"""experiments/calm/decode_table.py OUT_DIR [PNG_DIR] - the results of
experiments/calm/decode_seeds.sh (finished runs only, OUT/<cell>-s<seed>.done).

Per cell (regime and split): the running-speed R^2 and r and the run state's accuracy and AUROC
on the test frames (decode.csv's means over the scored sessions, decoder 0 the head, 1 ridge, 2
the MLP), mean +- sample std over the seeds; the per-seed paired differences head - ridge of the
speed R^2 and of the run-state AUROC (same seed: same simulated sessions, same test frames) and
the verdict per metric: win when every paired difference is positive or their mean exceeds their
std, loss likewise with the signs turned, tie otherwise; the head step the validation chose.
Markdown on stdout.

With PNG_DIR, gnuplot draws PNG_DIR/calm_decode_seeds.png: per cell and seed the speed R^2 and
the run-state AUROC of the head, ridge and the MLP. Standard library and gnuplot."""
import csv
import os
import re
import subprocess
import sys

from seed_stats import finished_runs, fmt, verdict

CELLS = ["frozen-tail", "finetune-tail", "scratch-tail", "frozen-animal", "finetune-animal",
         "scratch-animal"]
DECODERS = ["head", "ridge", "MLP"]
METRICS = [("velocity_r2", "speed R²"), ("velocity_r", "speed r"),
           ("running_accuracy", "run acc."), ("running_auroc", "run AUROC")]
COLOR = {"head": "#d62728", "ridge": "#1f77b4", "MLP": "#ff7f0e"}


def read_run(d):
    """decode.csv's mean rows per decoder, the scored head step, the run's seconds."""
    with open(os.path.join(d, "decode.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r["session"] == "-1"]
    res = {DECODERS[int(r["decoder"])]: {m: float(r[m]) for m, _ in METRICS} for r in rows}
    log = open(os.path.join(d, "run.log")).read()
    step = re.search(r"validation: the head of step (\d+) scores", log)
    return {"res": res, "best_step": int(step.group(1)) if step else None}


def main(out, png_dir=None):
    runs = finished_runs(out, CELLS, read_run)
    cells = [c for c in CELLS if c in runs]
    print("| regime, split | seeds | decoder | " + " | ".join(l for _, l in METRICS) + " |")
    print("|---" * (len(METRICS) + 3) + "|")
    for c in cells:
        seeds = sorted(runs[c])
        for dec in DECODERS:
            vals = [fmt([runs[c][s]["res"][dec][m] for s in seeds], m.startswith("velocity"))
                    for m, _ in METRICS]
            label = c.replace("-", ", ")
            print(f"| {label} | {','.join(map(str, seeds))} | {dec} | " + " | ".join(vals) + " |")
    print()
    print("| regime, split | head − ridge, speed R², per seed | verdict | head − ridge, run AUROC, "
          "per seed | verdict | head step scored, per seed |")
    print("|---" * 6 + "|")
    for c in cells:
        seeds = sorted(runs[c])
        cols = []
        for m in ("velocity_r2", "running_auroc"):
            diffs = [runs[c][s]["res"]["head"][m] - runs[c][s]["res"]["ridge"][m] for s in seeds]
            cols.append(", ".join(f"{d:+.3f} ({s})" for d, s in zip(diffs, seeds)) +
                        f"; mean {fmt(diffs)}")
            cols.append(verdict(diffs))
        steps = ", ".join("—" if runs[c][s]["best_step"] is None else str(runs[c][s]["best_step"])
                          for s in seeds)
        print(f"| {c.replace('-', ', ')} | " + " | ".join(cols) + f" | {steps} |")
    if png_dir:
        plots(runs, cells, png_dir)


def plots(runs, cells, png_dir):
    os.makedirs(png_dir, exist_ok=True)
    dat = os.path.join(png_dir, ".calm_decode.dat")
    with open(dat, "w") as f:  # x (cell index + decoder offset), R^2, AUROC; one block per decoder
        for k, dec in enumerate(DECODERS):
            for i, c in enumerate(cells):
                for s in sorted(runs[c]):
                    r = runs[c][s]["res"][dec]
                    f.write(f"{i + 0.2 * (k - 1)} {r['velocity_r2']} {r['running_auroc']}\n")
            f.write("\n\n")
    nseed = sorted({len(runs[c]) for c in cells})
    tics = ", ".join(f'"{c.replace("-", chr(92) + "n")}" {i}' for i, c in enumerate(cells))
    png = os.path.join(png_dir, "calm_decode_seeds.png")
    plot = []
    for col, panel in ((2, "speed R²"), (3, "run state AUROC")):
        plot.append(f"set ylabel '{panel} on the test frames'")
        plot.append(f"set title '{panel}'")
        plot.append("plot " + ", ".join(
            f"'{dat}' index {k} using 1:{col} with points pt {(7, 5, 9)[k]} ps 1.4 "
            f"lc rgb '{COLOR[dec]}' title '{dec}'" for k, dec in enumerate(DECODERS)))
    script = f"""set terminal pngcairo size 1200,520 noenhanced font ',11'
set output '{png}'
set multiplot layout 1,2 title "calm: behaviour decoding on the simulator's test frames, one point per seed\\n({'/'.join(map(str, nseed))} seed(s) per cell; 4 animals x 3000 frames, small model, the head of the best validation step)"
set grid ytics
set xtics ({tics})
set xrange [-0.6:{len(cells) - 0.4}]
set xlabel 'decode.regime (upper line), train.split (lower line)' offset 0,-1
set key below horizontal
set bmargin 7
set offsets 0, 0, graph 0.08, graph 0.08
""" + "\n".join(plot) + "\nunset multiplot\n"
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(dat)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(*sys.argv[1:])
