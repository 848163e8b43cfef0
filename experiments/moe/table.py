#!/usr/bin/env python3
"""experiments/moe/table.py OUT_DIR [--present] - the results table of experiments/moe/run.sh:
for each family x ablation (with --present only those with a finished run; otherwise the others
are marked "to run"), mean +- sample std over the seeds that finished (OUT/<run>.done) of the last
evaluation of eval.csv (held-out loss and perplexity, routing entropy / log E, MaxVio, MI of the
top-1 expert with the domain and with the next layer's top-1, mean squared cosine of co-activated
experts), and the run time from OUT/commands.tsv; then, per family and ablation, the differences
to the same seed's L_lb run (paired: same data order and held-out sequences), the mean +-
sample std of the held-out loss difference over those seeds and its paired t statistic with the
two-sided p value of Student's t distribution (n - 1 degrees of freedom); then the same paired
test between the losses the paper compares (R_cp against R_sp, both against each alone, the
z-loss on top of both, both against Guo et al.'s o+v, R_cp detached against R_cp) and for their interaction (both - R_sp - R_cp + L_lb), over the seeds every run of a comparison finished.
Markdown on stdout. Standard library only."""
import csv
import math
import os
import sys

ROWS = ["lb", "sp", "cp", "spcp", "zspcp", "ov", "ova", "cpid", "cpdet", "z4spcp"]
LABEL = {"lb": "L_lb", "sp": "+R_sp", "cp": "+R_cp", "spcp": "+R_sp+R_cp",
         "zspcp": "+z+R_sp+R_cp", "ov": "Guo o+v", "ova": "Guo o+v auto-scaled",
         "cpid": "+R_cp identity", "cpdet": "+R_cp detached",
         "z4spcp": "+z(1e-4)+R_sp+R_cp"}
# Comparisons between ablations, later minus earlier on the same seed: which of the paper's two
# losses lowers the held-out loss more, whether both together beat each alone, whether the
# z-loss (1e-3 or 1e-4) adds to them, the pair against Guo et al.'s baseline, and R_cp with its
# deeper layer detached against the full R_cp.
VERSUS = [("sp", "cp"), ("sp", "spcp"), ("cp", "spcp"), ("spcp", "zspcp"), ("spcp", "z4spcp"),
          ("ov", "spcp"), ("ova", "spcp"), ("cp", "cpdet")]
COLS = [("val_loss", "val loss", 3), ("val_ppl", "val ppl", 1), ("entropy", "entropy", 3),
        ("maxvio", "MaxVio", 2), ("mi_domain", "MI(e; domain)", 3),
        ("mi_next", "MI(e_l; e_l+1)", 3), ("cos2", "cos²", 4)]


def mean_std(xs, digits, sign=""):
    """'mean ± sample std' of xs with digits decimals (sign "+": the mean with its sign)."""
    if not xs:
        return "-"
    m = sum(xs) / len(xs)
    if len(xs) == 1:
        return f"{m:{sign}.{digits}f}"
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return f"{m:{sign}.{digits}f} ± {sd:.{digits}f}"


def incomplete_beta(a, b, x):
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (modified
    Lentz), evaluated where it converges fast (x below the mean (a + 1)/(a + b + 2), else through
    I_x(a, b) = 1 - I_{1-x}(b, a))."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - incomplete_beta(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * h


def paired_t(xs):
    """'t = T (p P)': the one-sample t statistic of xs (mean over its standard error) and the
    two-sided p value of Student's t with len(xs) - 1 degrees of freedom; '-' for fewer than two
    values or no spread."""
    n = len(xs)
    if n < 2:
        return "-"
    m = sum(xs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    if sd == 0.0:
        return "-"
    t = m / (sd / math.sqrt(n))
    df = n - 1
    p = incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return f"t = {t:+.2f} (p {p:.3f})"


def main(out, present):
    seconds = {}
    log = os.path.join(out, "commands.tsv")
    if os.path.exists(log):
        with open(log) as f:
            for r in csv.DictReader(f, delimiter="\t"):
                if r["exit"] == "0":
                    seconds[(r["family"], r["ablation"], r["seed"])] = float(r["seconds"])
    runs = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(".done"):
            continue
        run = name[:-len(".done")]
        fam, abl, seed = run.rsplit("-", 2)
        with open(os.path.join(out, run, "eval.csv")) as f:
            last = list(csv.DictReader(f))[-1]
        runs.setdefault((fam, abl), []).append((seed[1:], last))
    for got in runs.values():  # seeds in numeric order (the directory listing puts s10 before s2)
        got.sort(key=lambda run: int(run[0]))
    print("| family | losses | seeds | " + " | ".join(c[1] for c in COLS) + " | min/run |")
    print("|---|---|---|" + "---|" * len(COLS) + "---|")
    for fam in ["vanilla", "deepseek"]:
        for abl in ROWS:
            got = runs.get((fam, abl), [])
            if not got:
                if not present:
                    print(f"| {fam} | {LABEL[abl]} | to run |" + " |" * (len(COLS) + 1))
                continue
            cells = [mean_std([float(r[c]) for _, r in got], d) for c, _, d in COLS]
            mins = [seconds[(fam, abl, s)] / 60 for s, _ in got if (fam, abl, s) in seconds]
            t = f"{sum(mins) / len(mins):.1f}" if mins else "-"
            seeds = ",".join(s for s, _ in got)
            print(f"| {fam} | {LABEL[abl]} | {seeds} | " + " | ".join(cells) + f" | {t} |")
    paired(runs)
    versus(runs)


def versus(runs):
    """Per family: the held-out loss differences between the ablations of VERSUS and the
    interaction +R_sp+R_cp - +R_sp - +R_cp + L_lb, seed by seed over the seeds all its runs
    finished, with mean +- std and paired t."""
    print()
    print("| family | comparison | seeds | Δ val loss per seed | mean Δ val loss | paired t (p) |")
    print("|---|---|---|---|---|---|")
    for fam in ["vanilla", "deepseek"]:
        val = {abl: {s: float(r["val_loss"]) for s, r in runs.get((fam, abl), [])}
               for abl in ROWS}
        rows = [(f"{LABEL[b]} − {LABEL[a]}", {b: 1, a: -1}) for a, b in VERSUS]
        rows.append(("interaction: +R_sp+R_cp − +R_sp − +R_cp + L_lb",
                     {"spcp": 1, "sp": -1, "cp": -1, "lb": 1}))
        for label, weights in rows:
            seeds = sorted(set.intersection(*(set(val[a]) for a in weights)), key=int)
            if not seeds:
                continue
            d = [sum(w * val[a][s] for a, w in weights.items()) for s in seeds]
            print(f"| {fam} | {label} | {','.join(seeds)} | "
                  + ", ".join(f"{x:+.3f}" for x in d)
                  + f" | {mean_std(d, 3, '+')} | {paired_t(d)} |")


def paired(runs):
    """Per family and ablation: the per-seed differences to L_lb of the same seed."""
    cols = [c for c in COLS if c[0] != "val_ppl"]
    print()
    print("| family | losses − L_lb | seeds | " + " | ".join(
        f"Δ {c[1]} per seed" for c in cols) + " | mean Δ val loss | paired t (p) |")
    print("|---|---|---|" + "---|" * (len(cols) + 2))
    for fam in ["vanilla", "deepseek"]:
        base = dict(runs.get((fam, "lb"), []))
        for abl in ROWS[1:]:
            got = [(s, r) for s, r in runs.get((fam, abl), []) if s in base]
            if not got:
                continue
            cells = [", ".join(f"{float(r[c]) - float(base[s][c]):+.{d}f}" for s, r in got)
                     for c, _, d in cols]
            dloss = [float(r["val_loss"]) - float(base[s]["val_loss"]) for s, r in got]
            print(f"| {fam} | {LABEL[abl]} | {','.join(s for s, _ in got)} | "
                  + " | ".join(cells) + f" | {mean_std(dloss, 3, '+')} | {paired_t(dloss)} |")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["--present"]):
        sys.exit("usage: experiments/moe/table.py OUT_DIR [--present]")
    main(sys.argv[1], len(sys.argv) == 3)
