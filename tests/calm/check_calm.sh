#!/usr/bin/env bash
# check_calm.sh MPIEXEC CALM TESS-CKPT MODE - the calm app end to end (docs/calm.md).
#   dp:    the same tokenizer + DAT steps with the global batch on 1 rank and split over 2: every
#          parameter of both models within 1e-5 (tess-ckpt diff of the final checkpoints; the
#          gradient sums are reordered over ranks, so bitwise equality is not expected).
#   smoke: a short pretraining on simulated data on 2 ranks: the DAT's forecast of the held-out
#          tail beats copy-last (prediction score > 0 averaged over the horizon).
set -euo pipefail
mpiexec=$1 exe=$2 ckpt=$3 mode=$4; shift 4
fail() { echo "check_calm: FAIL: $*" >&2; exit 1; }
small=(--set run.plots=false --set tok.width=32 --set tok.codes=32 --set tok.channels=16
       --set model.channels=32 --set model.ffn=64 --set model.max_neurons=32 --set tok.batch=16
       --set train.batch=4)
case "$mode" in
dp)
  rm -rf np1 np2
  steps=(--set tok.steps=6 --set train.steps=6 --set train.warmup=2)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=np1 >/dev/null
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=np2 >/dev/null
  a=$(ls np1/checkpoints/ckpt_*.h5 | tail -n 1) b=$(ls np2/checkpoints/ckpt_*.h5 | tail -n 1)
  "$mpiexec" -n 1 "$ckpt" diff "$a" "$b" > diff.txt || true
  cat diff.txt
  awk '/\/params\// && /max_abs/ { for (i = 1; i <= NF; i++) if ($i == "max_abs" && $(i + 1) > 1e-5) bad = 1 }
       END { exit bad }' diff.txt || fail "parameters differ by more than 1e-5 between 1 and 2 ranks"
  n=$(grep -c "params/" diff.txt || true)
  echo "1 rank x B vs 2 ranks x B/2: $n parameter tensors differ, all within 1e-5"
  ;;
smoke)
  rm -rf smoke
  "$mpiexec" -n 2 "$exe" --set run.dir=smoke --set run.plots=false "$@" | tee smoke.log
  score=$(awk -F, 'NR > 1 { m += $2; c += $3 } END { printf "%.6f", 1 - m / c }' smoke/forecast.csv)
  echo "prediction score over the horizon: $score"
  awk -v s="$score" 'BEGIN { exit !(s > 0) }' || fail "the DAT does not beat copy-last (score $score)"
  ;;
esac
