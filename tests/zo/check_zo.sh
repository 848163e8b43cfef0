#!/usr/bin/env bash
# check_zo.sh MPIEXEC ZO MODE [ARGS] - end-to-end checks of the zo app (apps/zo).
#   converge   1 rank, quadratic d = 32, sticky tau = 4, 2e5 samples (docs/zo.md 5.7): the
#              zero-order run without MLMC must end below R = 1e-2, the MLMC one below 5e-2
#              (its floor is ~log2(M) = 8 times higher), first-order SGD below 1e-2. The progress
#              line counts chain samples ("samples N/TOTAL  R samples/s  ETA T"), never beyond
#              the total, and ends at "samples TOTAL/TOTAL ... ETA 0s".
#   ranks N..  the default comparison (quadratic d = 64, tau = 16; small budget) at 1 rank and at
#              each N: metrics.csv must be byte-identical (directions by counters, scalars
#              exchanged exactly; first-order and NLopt are computed redundantly / on rank 0).
#   shard      1 rank against 2 ranks with dist.shard = 2 (x split by coordinates): the error
#              trajectories agree to a relative 1e-6 (sums over shards are reordered).
#   problems   ridge and logistic (switch rule) and l1 (decay rule, averaged iterate) at 2 ranks,
#              sigma = 0.3, 3e4 samples:
#              each zero-order run without MLMC ends below R = 0.5 (from R = 1 at x = 0).
#   sweep      a tiny sweep at 2 ranks (2 d x 2 tau x 4 methods, one seed, one run per rank):
#              metrics.csv has 4 rows, runs.csv 16, every floor is finite and positive; every run
#              is reported, and the progress line ends at "runs 16/16  R samples/s  ETA 0s".
set -euo pipefail
mpiexec=$1 exe=$2 mode=$3; shift 3
fail() { echo "check_zo: FAIL: $*" >&2; exit 1; }
rm -rf converge np[0-9]* rep sh2 ridge logistic l1 sweep # earlier runs: no fresh start over them
# col FILE NAME: the values of column NAME (by header) of a CSV, one per line
col() { awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) c = i; next } { print $c }' "$1"; }
last() { col "$1" "$2" | tail -n 1; }
below() { awk -v v="$1" -v b="$2" 'BEGIN { exit !(v == v + 0 && v < b) }'; }

case "$mode" in
converge)
  "$mpiexec" -n 1 "$exe" --set run.dir=converge --set problem.dim=32 --set chain.tau=4 \
    --set budget.samples=200000 --set baselines.nlopt=none --set run.plots=false \
    --set log.progress_every=0.5 | tee converge.out
  grep -E "^samples [0-9]+/[0-9]+  " converge.out |
    awk '{ split($2, p, "/"); if (p[1] + 0 > p[2] + 0) bad = 1; n++ } END { exit bad || n < 1 }' ||
    fail "no progress line in samples, or one beyond its total"
  grep -Eq "^samples ([0-9]+)/\1  [0-9.kMG]+ samples/s  ETA 0s$" converge.out ||
    fail "the progress line does not end at its total with ETA 0s"
  for m in zo_plain:1e-2 zo:5e-2 fo:1e-2; do
    v=$(last converge/metrics.csv "${m%%:*}_err")
    echo "${m%%:*}: final R = $v (limit ${m#*:})"
    below "$v" "${m#*:}" || fail "${m%%:*} ended at R = $v, expected < ${m#*:}"
  done
  ;;
ranks)
  common=(--set budget.samples=30000 --set baselines.nlopt_max_evals=1500 --set run.plots=false)
  "$mpiexec" -n 1 "$exe" "${common[@]}" --set run.dir=np1 >/dev/null
  for np in "$@"; do
    "$mpiexec" -n "$np" "$exe" "${common[@]}" --set run.dir="np$np" >/dev/null
    cmp np1/metrics.csv "np$np/metrics.csv" || fail "metrics.csv on $np ranks differs from 1 rank"
    echo "metrics.csv on $np ranks is identical to 1 rank ($(wc -l < np1/metrics.csv) lines)"
  done
  ;;
shard)
  common=(--set budget.samples=30000 --set baselines.nlopt=none --set baselines.first_order=false
          --set run.plots=false)
  "$mpiexec" -n 1 "$exe" "${common[@]}" --set run.dir=rep >/dev/null
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set dist.shard=2 --set run.dir=sh2 >/dev/null
  for c in zo_err zo_plain_err; do
    paste -d, <(col rep/metrics.csv $c) <(col sh2/metrics.csv $c) |
      awk -F, -v c=$c '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > w) w = r }
                       END { printf "%s: largest relative difference %.2e over %d points\n", c, w, NR;
                             exit !(NR > 10 && w <= 1e-6) }' || fail "$c with 2 shards differs"
  done
  ;;
problems)
  for p in ridge:switch:false logistic:switch:false l1:decay:true; do
    IFS=: read -r kind rule avg <<< "$p"
    "$mpiexec" -n 2 "$exe" --set run.dir="$kind" --set problem.kind="$kind" --set optim.rule="$rule" \
      --set optim.average="$avg" --set problem.sigma=0.3 --set budget.samples=30000 \
      --set baselines.nlopt=none --set run.plots=false >/dev/null
    v=$(last "$kind/metrics.csv" zo_plain_err)
    echo "$kind: zero-order (fixed batch) final R = $v"
    below "$v" 0.5 || fail "$kind: R = $v, expected < 0.5"
  done
  ;;
sweep)
  "$mpiexec" -n 2 "$exe" --set run.mode=sweep --set run.dir=sweep --set sweep.dims=8,16 \
    --set sweep.taus=1,16 --set sweep.seeds=1 --set sweep.relax=2 --set run.plots=false |
    tee sweep.out
  [ "$(grep -c "^zo sweep: run [0-9]*/16 " sweep.out)" -eq 16 ] || fail "not every run reported"
  grep -Eq "^runs 16/16  [0-9.kMG]+ samples/s  ETA 0s$" sweep.out ||
    fail "the sweep's progress line does not end at runs 16/16 with a samples rate"
  [ "$(tail -n +2 sweep/metrics.csv | wc -l)" -eq 4 ] || fail "sweep/metrics.csv: expected 4 rows"
  [ "$(tail -n +2 sweep/runs.csv | wc -l)" -eq 16 ] || fail "sweep/runs.csv: expected 16 rows"
  col sweep/runs.csv floor | awk '{ if (!($1 > 0 && $1 < 1e3)) bad = 1 } END { exit bad }' ||
    fail "a floor is not finite and positive"
  cat sweep/results.md
  ;;
*) fail "unknown mode '$mode'" ;;
esac
echo "check_zo: $mode passed"
