#!/usr/bin/env python3
"""experiments/moe/plots.py OUT_DIR PNG_DIR [NAME] - the plots of the experiments/moe/run.sh runs
in OUT_DIR (finished runs only, OUT/<family>-<ablation>-s<seed>.done) drawn with gnuplot into
PNG_DIR (docs/moe.md embeds them), mean +- sample std over the seeds of each cell:

  NAME_val_loss.png  held-out loss against the step, L_lb and +R_sp+R_cp of both families
  NAME_val_delta.png held-out loss minus the same seed's L_lb run against the step, per ablation
  NAME_entropy.png   routing entropy / log E per MoE layer at the last evaluation
  NAME_cos2.png      mean squared cosine of co-activated experts per MoE layer, last evaluation

NAME defaults to moe_text. The subtitle states the configuration read from the runs' config.ini
(the same in every run apart from family, ablation and seed). The loss plots start at 16% of
train.steps (the first evaluations, far above the rest, would flatten the curves) and scale
their y axis to what they draw. Standard library and gnuplot."""
import csv
import math
import os
import subprocess
import sys
import tempfile

ABL = ["lb", "sp", "cp", "spcp", "zspcp", "ov", "ova", "cpid", "cpdet", "z4spcp"]
LABEL = {"lb": "L_lb", "sp": "+R_sp", "cp": "+R_cp", "spcp": "+R_sp+R_cp",
         "zspcp": "+z+R_sp+R_cp", "ov": "Guo o+v", "ova": "Guo o+v auto-scaled",
         "cpid": "+R_cp identity", "cpdet": "+R_cp detached",
         "z4spcp": "+z(1e-4)+R_sp+R_cp"}
FAMILIES = ["vanilla", "deepseek"]
FAMLABEL = {"vanilla": "vanilla", "deepseek": "DeepSeek-style"}
COLOR = {"lb": "#000000", "sp": "#1f77b4", "cp": "#2ca02c", "spcp": "#d62728",
         "zspcp": "#9467bd", "ov": "#ff7f0e", "ova": "#e377c2", "cpid": "#8c564b",
         "cpdet": "#17becf", "z4spcp": "#bcbd22"}


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def mean_std(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def load(out):
    """{(family, ablation): {seed: run dir}} of the finished runs."""
    runs = {}
    for name in sorted(os.listdir(out)):
        if name.endswith(".done"):
            fam, abl, seed = name[:-len(".done")].rsplit("-", 2)
            runs.setdefault((fam, abl), {})[seed] = os.path.join(out, name[:-len(".done")])
    return runs


def config_subtitle(run_dir):
    """The shared configuration of the runs, from one run's resolved config.ini."""
    cfg, sec = {}, ""
    with open(os.path.join(run_dir, "config.ini")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                sec = line[1:-1]
            elif "=" in line and not line.startswith(";"):
                k, v = (s.strip() for s in line.split("=", 1))
                cfg[f"{sec}.{k}"] = v
    return (f"{cfg['model.layers']} layers, C={cfg['model.channels']}, E={cfg['moe.experts']}, "
            f"top-{cfg['moe.top_k']}, expert width {cfg['moe.expert_hidden']}, "
            f"T={cfg['data.seq_len']}, batch {cfg['train.batch']}, {cfg['train.steps']} steps, "
            f"lr {cfg['optim.lr']}\\n7-domain text, BPE {cfg['data.vocab']}; "
            f"held-out: {cfg['train.eval_batch']} sequences"), int(cfg["train.steps"])


def write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(" ".join(f"{x:.8g}" if isinstance(x, float) else str(x) for x in r) + "\n")


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def header(png, title, subtitle, xlabel, ylabel):
    return (f"set terminal pngcairo size 900,560 noenhanced font ',11'\n"
            f"set termoption noenhanced\nset output '{png}'\nset grid\n"
            f"set title \"{title}\\n{subtitle}\" font ',10'\n"
            f"set xlabel '{xlabel}'\nset ylabel '{ylabel}'\n"
            "set key inside top right opaque box samplen 2\n")


def curves(runs, cell, column, first, base=None):
    """[(step, mean, std, seeds)] of eval.csv's column over the cell's seeds from step first on;
    with base (a cell), the difference to the same seed's base run (only seeds that both
    finished)."""
    got = runs.get(cell, {})
    seeds = sorted(s for s in got if base is None or s in runs.get(base, {}))
    per = {}
    for s in seeds:
        rows = read_csv(os.path.join(got[s], "eval.csv"))
        ref = {}
        if base is not None:
            ref = {r["step"]: float(r[column])
                   for r in read_csv(os.path.join(runs[base][s], "eval.csv"))}
        for r in rows:
            if int(r["step"]) >= first and (base is None or r["step"] in ref):
                per.setdefault(int(r["step"]), []).append(
                    float(r[column]) - (ref[r["step"]] if base is not None else 0.0))
    return [(st, *mean_std(v), len(v)) for st, v in sorted(per.items()) if len(v) == len(seeds)]


def per_layer(runs, cell, column):
    """[(layer, mean, std)] of routing.csv's column at the last evaluation, over the seeds."""
    per = {}
    for d in runs.get(cell, {}).values():
        rows = read_csv(os.path.join(d, "routing.csv"))
        last = rows[-1]["step"]
        for r in rows:
            if r["step"] == last:
                per.setdefault(int(r["layer"]), []).append(float(r[column]))
    return [(layer, *mean_std(v)) for layer, v in sorted(per.items())]


def line(tmp, tag, fam, abl, rows, points=False):
    """Write rows (x, mean, std, ...) to a data file in tmp; the gnuplot clause drawing them as
    error-bar lines in the cell's style: colour per ablation, dash (and with points, the marker)
    per family."""
    path = os.path.join(tmp, f"{tag}-{fam}-{abl}.dat")
    write(path, rows)
    lt = "1" if fam == "vanilla" else "2"
    pts = f" pt {'7' if fam == 'vanilla' else '5'} ps 0.8" if points else ""
    return (f"'{path}' using 1:2:3 with yerrorlines lw 2 dt {lt}{pts} "
            f"lc rgb '{COLOR[abl]}' title '{FAMLABEL[fam]} {LABEL[abl]}'")


def draw(png, title, subtitle, xlabel, ylabel, settings, clauses):
    """One PNG of the clauses (none: no file), after the header and the settings."""
    if clauses:
        gnuplot(header(png, title, subtitle, xlabel, ylabel) + settings + "plot "
                + ", ".join(clauses) + "\n")


def main(out, pngdir, name):
    runs = load(out)
    if not runs:
        sys.exit(f"plots.py: no finished runs (<run>.done) in {out}")
    sub, steps = config_subtitle(next(iter(next(iter(runs.values())).values())))
    first, xr = int(0.16 * steps), f"set xrange [{0.16 * steps:g}:{1.04 * steps:g}]\n"
    n = max(len(v) for v in runs.values())
    nseeds = f"{n} seeds" if n > 1 else "1 seed"
    os.makedirs(pngdir, exist_ok=True)
    tmp = tempfile.mkdtemp()

    # Held-out loss, L_lb against +R_sp+R_cp in both families (error bars: sample std).
    cells = [(fam, abl) for fam in FAMILIES for abl in ["lb", "spcp"]]
    draw(os.path.join(pngdir, f"{name}_val_loss.png"),
         f"moe: held-out loss, mean and std over {nseeds}", sub, "optimizer step",
         "held-out cross-entropy (nats/token)", xr,
         [line(tmp, "loss", fam, abl, c) for fam, abl in cells
          if (c := curves(runs, (fam, abl), "val_loss", first))])

    # Paired differences to L_lb (same seed, same held-out sequences).
    cells = [(fam, abl) for fam in FAMILIES for abl in ABL[1:]]
    draw(os.path.join(pngdir, f"{name}_val_delta.png"),
         "moe: held-out loss minus the same seed's L_lb run "
         f"(mean and std over {nseeds}; < 0: better)", sub, "optimizer step",
         "difference in held-out loss (nats/token)",
         xr + "set key outside right top\nset xzeroaxis lw 1 lc rgb '#808080'\n",
         [line(tmp, "delta", fam, abl, c) for fam, abl in cells
          if (c := curves(runs, (fam, abl), "val_loss", first, base=(fam, "lb")))])

    # Per-layer routing entropy and cos^2 at the last evaluation (x offset per family).
    for column, what, ylabel in [
            ("entropy", "routing entropy per MoE layer", "entropy / log E (dimensionless)"),
            ("cos2", "squared cosine of co-activated experts per MoE layer",
             "mean squared cosine of the SwiGLU z (dimensionless)")]:
        plots, last = [], 0
        for fam in FAMILIES:
            for ai, abl in enumerate(ABL):
                c = per_layer(runs, (fam, abl), column)
                if c:
                    off = (ai - 2.5) * 0.03 + (0.2 if fam == "deepseek" else 0.0)
                    last = max(last, c[-1][0])
                    plots.append(line(tmp, column, fam, abl,
                                      [(layer + off, m, s) for layer, m, s in c], points=True))
        draw(os.path.join(pngdir, f"{name}_{column}.png"),
             f"moe: {what}, last evaluation (mean and std over {nseeds})", sub,
             "MoE layer (0 = first)", ylabel,
             f"set xtics 1\nset xrange [-0.3:{last + 0.6:g}]\nset key outside right top\n", plots)
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: experiments/moe/plots.py OUT_DIR PNG_DIR [NAME]")
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else "moe_text")
