#!/usr/bin/env bash
# check_moe_experiment.sh MPIEXEC MOE CONVERT PYTHON - the experiment's tools (experiments/moe/
# run.sh, table.py, plots.py) on a tiny grid, so that they cannot silently fall out of step with
# the app's outputs: a two-domain token stream from tess-convert ids (CONVERT) as train.h5 and
# val.h5, run.sh on it for 4 cells (vanilla L_lb, +R_sp, +R_cp, +R_sp+R_cp) x 2 seeds (1 rank, a
# small model, 6 steps, evaluation every 3), then
#   - table.py's mean ± sample std of every column at the last evaluation, its minutes per run
#     (commands.tsv), its per-seed differences to L_lb (and their mean ± std and paired t with
#     its p value), and its per-seed held-out loss differences of +R_cp to +R_sp and of the
#     interaction (+R_sp+R_cp − +R_sp − +R_cp + L_lb) must equal the values computed here with
#     awk from the runs' eval.csv, to the printed digits;
#   - cells without runs are "to run" rows, and absent with --present;
#   - plots.py writes its four PNGs (skipped when gnuplot is absent).
# 77 (skipped) without PYTHON.
set -euo pipefail
mpiexec=$1 exe=$2 convert=$3 python=${4:-}
fail() { echo "check_moe_experiment: FAIL: $*" >&2; exit 1; }
[ -n "$python" ] && [ -x "$python" ] || { echo "skipped: no python3"; exit 77; }
exp=$(cd "$(dirname "$0")/../../experiments/moe" && pwd)
rm -rf corpus grid pngs
mkdir -p corpus

# Two domains of 400 ids in [0, 64): 47 windows of 17 tokens, enough for batches of 8.
awk 'BEGIN { for (i = 0; i < 400; i++) printf "%d%s", (i * 7) % 64, i % 20 == 19 ? "\n" : " " }' > a.ids
awk 'BEGIN { for (i = 0; i < 400; i++) printf "%d ", (i * i + 3) % 61 }' > b.ids
"$mpiexec" -n 1 "$convert" ids --vocab-size 64 corpus/train.h5 prose=a.ids code=b.ids \
  > convert.log 2>&1 || { cat convert.log; fail "tess-convert ids"; }
cp corpus/train.h5 corpus/val.h5

MOE_MPIEXEC=$mpiexec MOE_BIN=$exe MOE_NP=1 MOE_NICE=0 MOE_SEEDS="1 2" MOE_ARGS="--set data.vocab=64 \
--set data.seq_len=16 --set data.unigram_samples=16 --set model.layers=2 --set model.channels=32 \
--set model.heads=2 --set model.mlp_hidden=32 --set moe.experts=4 --set moe.expert_hidden=16 \
--set train.batch=8 --set train.eval_batch=8 --set train.steps=6 --set train.eval_every=3 \
--set optim.warmup_steps=1 --set run.plots=false" \
  bash "$exp/run.sh" corpus grid vanilla:lb vanilla:sp vanilla:cp vanilla:spcp > grid.log 2>&1 ||
  { cat grid.log; fail "run.sh"; }
for a in lb sp cp spcp; do
  for s in 1 2; do
    [ -f "grid/vanilla-$a-s$s.done" ] || { cat grid.log; fail "run vanilla-$a-s$s did not finish"; }
  done
done
[ "$(awk -F'\t' 'NR > 1 && $4 == 0' grid/commands.tsv | wc -l)" -eq 8 ] ||
  { cat grid/commands.tsv; fail "commands.tsv: 8 runs with exit 0 expected"; }

"$python" "$exp/table.py" grid > table.md || fail "table.py"
"$python" "$exp/table.py" grid --present > present.md || fail "table.py --present"
cat table.md

# col FILE NAME: the column NAME of FILE's last row (a CSV with a header).
col() { awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) c = i; next }
  { v = $c } END { if (!c) exit 1; print v }' "$1"; }
# near GOT WANT DIGITS: GOT (printed with DIGITS decimals) is WANT rounded.
near() { awk -v g="$1" -v w="$2" -v d="$3" 'BEGIN { exit !((g - w) ^ 2 <= (0.5001 * 10 ^ -d) ^ 2) }'; }
# stats X1 X2: "mean std" (sample std) of two numbers.
stats() { awk -v a="$1" -v b="$2" 'BEGIN { m = (a + b) / 2; printf "%.12g %.12g\n", m, sqrt((a - m) ^ 2 + (b - m) ^ 2) }'; }
# cell FILE FAMILY LABEL K: field K (1 = family) of the table row of FAMILY and LABEL.
cell() { awk -F' *[|] *' -v f="$2" -v l="$3" -v k="$4" '$2 == f && $3 == l { print $(k + 1); exit }' "$1"; }

cols=(val_loss val_ppl entropy maxvio mi_domain mi_next cos2) digits=(3 1 3 2 3 3 4)
for abl in lb spcp; do
  label=$([ $abl = lb ] && echo L_lb || echo +R_sp+R_cp)
  [ "$(cell table.md vanilla "$label" 3)" = "1,2" ] || fail "$label: seeds 1,2 expected"
  for i in "${!cols[@]}"; do
    read -r m s < <(stats "$(col grid/vanilla-$abl-s1/eval.csv "${cols[i]}")" \
                          "$(col grid/vanilla-$abl-s2/eval.csv "${cols[i]}")")
    got=$(cell table.md vanilla "$label" $((i + 4)))
    near "${got%% ± *}" "$m" "${digits[i]}" && near "${got##* ± }" "$s" "${digits[i]}" ||
      fail "$label ${cols[i]}: table '$got', computed mean $m std $s"
  done
  read -r m s < <(awk -F'\t' -v a=$abl '$2 == a { t[++n] = $5 / 60 } END { print t[1], t[2] }' \
                  grid/commands.tsv | { read -r x y; stats "$x" "$y"; })
  near "$(cell table.md vanilla "$label" 11)" "$m" 1 || fail "$label min/run: expected $m"
done
# The paired differences of +R_sp+R_cp to L_lb, seed by seed, and their mean ± std.
for i in 0 2 3 4 5 6; do
  want=""
  for s in 1 2; do
    want+="$(awk -v a="$(col grid/vanilla-spcp-s$s/eval.csv "${cols[i]}")" \
                 -v b="$(col grid/vanilla-lb-s$s/eval.csv "${cols[i]}")" 'BEGIN { print a - b }') "
  done
  k=$((i < 2 ? 4 : i + 3))
  got=$(awk -F' *[|] *' -v k=$((k + 1)) '$2 == "vanilla" && $3 == "+R_sp+R_cp" && $4 == "1,2" { r = $k }
    END { print r }' table.md)
  read -r w1 w2 <<< "$want"
  near "${got%%, *}" "$w1" "${digits[i]}" && near "${got##*, }" "$w2" "${digits[i]}" ||
    fail "Δ ${cols[i]} per seed: table '$got', computed $want"
  if [ "$i" -eq 0 ]; then
    read -r m s < <(stats "$w1" "$w2")
    got=$(awk -F' *[|] *' '$2 == "vanilla" && $3 == "+R_sp+R_cp" && $4 == "1,2" { r = $(NF - 2) }
      END { print r }' table.md)
    near "${got%% ± *}" "$m" 3 && near "${got##* ± }" "$s" 3 || fail "mean Δ val loss '$got': $m ± $s"
    # paired t = mean / (std / sqrt 2); with one degree of freedom (Cauchy) two-sided
    # p = 1 - (2 / pi) atan |t|
    want=$(awk -v m="$m" -v s="$s" 'BEGIN { t = m / (s / sqrt(2)); a = t < 0 ? -t : t
      printf "t = %+.2f (p %.3f)", t, 1 - 2 / 3.14159265358979 * atan2(a, 1) }')
    got=$(awk -F' *[|] *' '$2 == "vanilla" && $3 == "+R_sp+R_cp" && $4 == "1,2" { r = $(NF - 1) }
      END { print r }' table.md)
    [ "$got" = "$want" ] || fail "paired t: table '$got', computed '$want'"
  fi
done
# The comparisons between ablations: +R_cp − +R_sp and the interaction, seed by seed.
v() { col "grid/vanilla-$1-s$2/eval.csv" val_loss; }
for cmp in "+R_cp − +R_sp" "interaction: +R_sp+R_cp − +R_sp − +R_cp + L_lb"; do
  want=""
  for s in 1 2; do
    if [ "${cmp%%:*}" = interaction ]; then
      want+="$(awk -v a="$(v spcp $s)" -v b="$(v sp $s)" -v c="$(v cp $s)" -v d="$(v lb $s)" \
               'BEGIN { print a - b - c + d }') "
    else
      want+="$(awk -v a="$(v cp $s)" -v b="$(v sp $s)" 'BEGIN { print a - b }') "
    fi
  done
  got=$(awk -F' *[|] *' -v c="$cmp" '$2 == "vanilla" && $3 == c && $4 == "1,2" { print $5 }' table.md)
  read -r w1 w2 <<< "$want"
  near "${got%%, *}" "$w1" 3 && near "${got##*, }" "$w2" 3 ||
    fail "$cmp per seed: table '$got', computed $want"
  # the differences are below the printed digits in so short runs: their t (full precision)
  # and its sign check the direction of the comparison
  read -r m sd < <(stats "$w1" "$w2")
  want=$(awk -v m="$m" -v s="$sd" 'BEGIN { t = m / (s / sqrt(2)); a = t < 0 ? -t : t
    printf "t = %+.2f (p %.3f)", t, 1 - 2 / 3.14159265358979 * atan2(a, 1) }')
  got=$(awk -F' *[|] *' -v c="$cmp" '$2 == "vanilla" && $3 == c && $4 == "1,2" { print $(NF - 1) }' \
        table.md)
  [ "$got" = "$want" ] || fail "$cmp paired t: table '$got', computed '$want'"
done
grep -q '^| deepseek | L_lb | to run |' table.md || fail "no 'to run' row for the cells without runs"
grep -q 'to run' present.md && fail "--present prints cells without runs"
[ "$(grep -c '^| vanilla |' present.md)" -eq 11 ] ||
  { cat present.md; fail "--present: 4 rows, 3 paired rows, 4 comparisons"; }

if command -v gnuplot > /dev/null; then
  "$python" "$exp/plots.py" grid pngs tiny > plots.log 2>&1 || { cat plots.log; fail "plots.py"; }
  for p in val_loss val_delta entropy cos2; do
    [ "$(head -c 4 "pngs/tiny_$p.png" | tail -c 3)" = PNG ] || fail "plots.py: no pngs/tiny_$p.png"
  done
else
  echo "gnuplot absent: plots.py not checked"
fi
echo "check_moe_experiment: OK"
