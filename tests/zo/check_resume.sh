#!/usr/bin/env bash
# check_resume.sh MPIEXEC ZO TESS_CKPT NP - checkpoint/resume of the zo app (docs/zo.md 7) at NP
# ranks: a run straight through (checkpoints every 700 iterations and at the end) against the same
# run stopped by run.stop_at (as on a signal: checkpoint, exit 75) at iteration 3000 (inside the
# MLMC zero-order method), resumed with --resume auto in a fresh process and stopped again at
# 21000 (inside the fixed-batch method), then resumed to the end. metrics.csv must be
# byte-identical, the final checkpoints bitwise equal (tess-ckpt diff), tess-ckpt verify must
# pass and tess-ckpt ls must show the float64 iterate.
set -euo pipefail
mpiexec=$1 exe=$2 tool=$3 np=$4
fail() { echo "check_resume: FAIL: $*" >&2; exit 1; }
rm -rf straight stopped
common=(--set budget.samples=20000 --set baselines.nlopt_max_evals=500 --set run.plots=false
        --set ckpt.every=700)
"$mpiexec" -n "$np" "$exe" "${common[@]}" --set run.dir=straight >/dev/null 2>&1 ||
  fail "the straight run failed"
rc=0
"$mpiexec" -n "$np" "$exe" "${common[@]}" --set run.dir=stopped --set run.stop_at=3000 \
  >stop1.log 2>&1 || rc=$?
[ "$rc" -eq 75 ] || { cat stop1.log; fail "stop at 3000: exit $rc, expected 75"; }
grep -q "stop requested: checkpoint after iteration 3000" stop1.log || fail "no stop message"
[ -f stopped/checkpoints/ckpt_00003000.h5 ] || fail "no checkpoint of iteration 3000"
[ ! -f stopped/metrics.csv ] || fail "a stopped run wrote metrics.csv"
rc=0
"$mpiexec" -n "$np" "$exe" "${common[@]}" --set run.dir=stopped --resume auto \
  --set run.stop_at=21000 >stop2.log 2>&1 || rc=$?
[ "$rc" -eq 75 ] || { cat stop2.log; fail "stop at 21000: exit $rc, expected 75"; }
grep -q "resumed from step 3000" stop2.log || fail "the second run did not resume from 3000"
"$mpiexec" -n "$np" "$exe" "${common[@]}" --set run.dir=stopped --resume auto >resume.log 2>&1 ||
  { cat resume.log; fail "the last resumed run failed"; }
grep -q "resumed from step 21000" resume.log || fail "the last run did not resume from 21000"
cmp straight/metrics.csv stopped/metrics.csv || fail "metrics.csv differs after two resumes"
echo "metrics.csv identical ($(wc -l < straight/metrics.csv) lines)"
"$tool" diff straight/checkpoints stopped/checkpoints || fail "final checkpoints differ"
"$tool" verify stopped/checkpoints/*.h5 >/dev/null || fail "tess-ckpt verify failed"
"$tool" ls stopped/checkpoints | grep -q "zo/x .*float64" || fail "tess-ckpt ls: no float64 zo/x"
echo "check_resume: np=$np passed"
