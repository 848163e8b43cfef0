#!/usr/bin/env bash
# check_first_app.sh MPIEXEC FIRST_APP TESS_CKPT - the example app of docs/apps.md on the run driver:
#   it trains (loss from > 0.1 to < 1e-3), 2 and 4 ranks follow the 1-rank loss to a relative 1e-5
#   (gradient sums are reordered), a run stopped at step 100 (run.stop_at, as on a signal: exit 75)
#   and resumed with --resume auto ends with the same metrics (step, loss) and a bitwise equal
#   final checkpoint as the uninterrupted run while its `seconds` column keeps growing across the
#   restart, resuming the finished run does nothing, --print-params lists the described state,
#   a resume under another run.seed is refused (exit 78) on every rank, so is a fresh start over
#   an earlier run's checkpoints unless ckpt.overwrite says so, and an unwritable checkpoint
#   directory is an I/O error (exit 74) before the first step. --check on 2 ranks exits 0 and
#   writes no run directory; with --resume auto it loads the newest checkpoint; over an earlier run's
#   checkpoints without --resume it says what the run would say (exit 78).
set -euo pipefail
mpiexec=$1 exe=$2 tool=$3
fail() { echo "check_first_app: FAIL: $*" >&2; exit 1; }
rm -rf np1 np2 np4 stopped
common=(--set run.plots=false)
"$mpiexec" -n 1 "$exe" "${common[@]}" --set run.dir=np1 >np1.log 2>&1 || { cat np1.log; fail "1 rank"; }
first=$(sed -n 2p np1/metrics.csv | cut -d, -f2) last=$(tail -n 1 np1/metrics.csv | cut -d, -f2)
echo "loss $first -> $last"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(f > 0.1 && l < 1e-3) }' ||
  fail "did not train: loss $first -> $last (want > 0.1 -> < 1e-3)"
for np in 2 4; do
  "$mpiexec" -n "$np" "$exe" "${common[@]}" --set run.dir="np$np" >"np$np.log" 2>&1 ||
    { cat "np$np.log"; fail "$np ranks"; }
  paste -d, <(cut -d, -f1,2 np1/metrics.csv) <(cut -d, -f2 "np$np/metrics.csv") | tail -n +2 |
    awk -F, '{ d = $2 - $3; if (d < 0) d = -d; if (d > 1e-5 * $2) { print "step " $1 ": " $2 " vs " $3; bad = 1 } }
             END { exit bad }' || fail "$np ranks differ from 1 rank"
done
rc=0
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=stopped --set run.stop_at=100 >stop.log 2>&1 || rc=$?
[ "$rc" -eq 75 ] || { cat stop.log; fail "stop at 100: exit $rc, expected 75"; }
grep -q "stop requested: checkpoint after step 100" stop.log || fail "no stop message"
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=stopped --resume auto >resume.log 2>&1 ||
  { cat resume.log; fail "the resumed run failed"; }
grep -q "resumed from step 100" resume.log || fail "the run did not resume from step 100"
cmp <(cut -d, -f1,2 np2/metrics.csv) <(cut -d, -f1,2 stopped/metrics.csv) ||
  fail "metrics (step, loss) of the resumed run differ from the uninterrupted one"
"$tool" diff np2/checkpoints stopped/checkpoints || fail "final checkpoints differ"
awk -F, 'NR > 2 && $NF < prev { print "step " $1 ": seconds " $NF " < " prev; bad = 1 } { prev = $NF }
         END { exit bad }' stopped/metrics.csv || fail "seconds went backwards across the resume"
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=stopped --resume auto >again.log 2>&1 ||
  { cat again.log; fail "resuming the finished run failed"; }
grep -q "checkpoint is of a finished run (step 200): nothing to do" again.log ||
  { cat again.log; fail "resuming the finished run did not say there is nothing to do"; }
"$mpiexec" -n 1 "$exe" --print-params >params.log 2>&1 || { cat params.log; fail "--print-params"; }
grep -q "^params/w  *f32  *\[8\]" params.log && grep -q "^optim/v/b " params.log ||
  { cat params.log; fail "--print-params does not list params/w and optim/v/b"; }
rc=0
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=stopped --resume auto --set run.seed=7 \
  >seed.log 2>&1 || rc=$?
[ "$rc" -eq 78 ] || { cat seed.log; fail "resume under another seed: exit $rc, expected 78"; }
grep -q "written with run.seed = 1234, this run has 7" seed.log || { cat seed.log; fail "no seed message"; }
rc=0
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=np2 >fresh.log 2>&1 || rc=$?
[ "$rc" -eq 78 ] || { cat fresh.log; fail "fresh start over checkpoints: exit $rc, expected 78"; }
grep -q "holds 1 checkpoint of an earlier run: continue it with --resume auto" fresh.log ||
  { cat fresh.log; fail "no message for a fresh start over checkpoints"; }
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=np2 --set ckpt.overwrite=true >over.log 2>&1 ||
  { cat over.log; fail "ckpt.overwrite=true did not start over"; }
: >afile
rc=0
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=nockpt --set ckpt.dir=afile/sub >ro.log 2>&1 || rc=$?
[ "$rc" -eq 74 ] || { cat ro.log; fail "unwritable ckpt.dir: exit $rc, expected 74"; }
grep -q "afile/sub" ro.log && ! grep -q "step 1/" ro.log ||
  { cat ro.log; fail "the unwritable ckpt.dir was not refused before the first step"; }
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=checked --check >check.log 2>&1 ||
  { cat check.log; fail "--check"; }
grep -q "first_app: --check: options valid, set-up done on 2 ranks; no step run, no run directory" \
  check.log && [ ! -e checked ] || { cat check.log; ls -la; fail "--check ran or wrote something"; }
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=np2 --resume auto --check >check2.log 2>&1 &&
  grep -q "checkpoint loaded" check2.log || { cat check2.log; fail "--check --resume auto"; }
rc=0
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=np2 --check >check3.log 2>&1 || rc=$?
[ "$rc" -eq 78 ] && grep -q "holds 1 checkpoint of an earlier run" check3.log ||
  { cat check3.log; fail "--check over checkpoints: exit $rc, expected 78"; }
echo "check_first_app: passed"
