#!/usr/bin/env bash
# check_tinylm.sh MPIEXEC TINYLM - end-to-end training proof and data-parallel invariance.
#   converge: 1 rank, embedded defaults (reverse task): the held-out loss must fall below 0.01
#             and the token accuracy above 99%, read from eval.csv.
#   dp N...:  the same 30 steps with the global batch split over N ranks (gradients synced in
#             4 KiB buckets, about 80 per step, overlapped with backward); the training loss of
#             every logged step and the parameter norm must match the 1-rank run to a relative
#             1e-4 (the gradient sums over ranks are reordered, so bitwise equality is not
#             expected; measured differences are below 1e-7).
set -euo pipefail
mpiexec=$1 exe=$2 mode=$3; shift 3
fail() { echo "check_tinylm: FAIL: $*" >&2; exit 1; }
rm -rf converge np[0-9]* # earlier runs' checkpoints: the apps refuse to start fresh over them

case "$mode" in
converge)
  "$mpiexec" -n 1 "$exe" --set run.dir=converge --set run.plots=false
  last=$(tail -n 1 converge/eval.csv)
  loss=$(echo "$last" | cut -d, -f2) acc=$(echo "$last" | cut -d, -f3)
  echo "final held-out loss $loss, token accuracy $acc"
  awk -v l="$loss" -v a="$acc" 'BEGIN { exit !(l < 0.01 && a > 0.99) }' ||
    fail "did not converge: held-out loss $loss (want < 0.01), accuracy $acc (want > 0.99)"
  first=$(sed -n 2p converge/metrics.csv | cut -d, -f2)
  awk -v f="$first" 'BEGIN { exit !(f > 2.0) }' || fail "first logged loss $first: expected > 2 (chance is ln 11 = 2.4)"
  ;;
dp)
  common=(--set train.steps=30 --set run.log_every=5 --set train.eval_every=30 --set optim.warmup_steps=5
          --set run.plots=false)
  "$mpiexec" -n 1 "$exe" "${common[@]}" --set run.dir=np1 >/dev/null
  for np in "$@"; do
    "$mpiexec" -n "$np" "$exe" "${common[@]}" --set dist.bucket_kib=4 --set run.dir="np$np" >/dev/null
    for col in 2:loss 5:param_norm; do
      paste -d, <(cut -d, -f1,"${col%%:*}" np1/metrics.csv) <(cut -d, -f"${col%%:*}" "np$np/metrics.csv") |
        tail -n +2 |
        awk -F, -v np="$np" -v what="${col#*:}" '{ d = $2 - $3; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : -$2);
             printf "step %s: %s 1 rank %s, %s ranks %s, rel diff %.2e\n", $1, what, $2, np, $3, r;
             if (r > 1e-4) bad = 1 } END { exit bad }' ||
        fail "${col#*:} on $np ranks differs from 1 rank"
    done
  done
  ;;
*) fail "unknown mode '$mode'" ;;
esac
echo "check_tinylm: $mode passed"
