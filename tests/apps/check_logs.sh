#!/usr/bin/env bash
# check_logs.sh MPIEXEC FIRST_APP - the run driver's logging on the example app of docs/apps.md:
#   output redirected from mpiexec holds plain lines only (no '\r', no ESC: progress = auto
#   does not trust the pty Open MPI gives rank 0); <run.dir>/run.log holds the run's first
#   lines, its progress and its end, each stamped with the UTC time; log.per_rank adds
#   run.rank1.log; -q silences the terminal but not run.log; log.progress = off prints no
#   progress and tty is honoured when asked for; a stopped and resumed run appends to its
#   run.log, and its metrics.jsonl holds the same rows as its metrics.csv (one JSON object per
#   row, keys = the CSV header); -v with -q is refused (exit 78); a mistyped option is one line
#   "error: ... (did you mean 'run.seed'?)" (exit 78) without a traceback, which -v shows.
set -euo pipefail
mpiexec=$1 exe=$2
fail() { echo "check_logs: FAIL: $*" >&2; exit 1; }
rm -rf auto quiet tty stopped off
common=(--set run.plots=false)
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=auto >auto.out 2>&1 || { cat auto.out; fail "run"; }
grep -q "^step 200/200  loss [0-9.e+-]*  .* samples/s  ETA 0s$" auto.out ||
  { cat auto.out; fail "no plain last progress line"; }
! grep -q $'\r\|\033' auto.out || { cat -A auto.out; fail "carriage return or escape in redirected output"; }
[ -f auto/run.log ] || fail "no auto/run.log"
[ ! -e auto/run.rank1.log ] || fail "run.rank1.log without log.per_rank"
grep -Eq "^20[0-9]{2}-[0-9]{2}-[0-9]{2} [0-9:]{8} step 200/200  loss " auto/run.log &&
  grep -q " first_app: 2 ranks, run directory auto " auto/run.log && grep -q " checkpoint step=200 " auto/run.log ||
  { cat auto/run.log; fail "run.log lacks the stamped first line, last progress or checkpoint"; }

"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=quiet -q --set log.per_rank=true >quiet.out 2>&1 ||
  { cat quiet.out; fail "quiet run"; }
! grep -q "^step\|checkpoint" quiet.out || { cat quiet.out; fail "-q still prints progress or info"; }
grep -q " step 200/200 " quiet/run.log || { cat quiet/run.log; fail "-q emptied run.log"; }
grep -q " first_app: 2 ranks, run directory quiet " quiet/run.rank1.log || { cat quiet/run.rank1.log; fail "run.rank1.log lacks rank 1's info"; }

"$mpiexec" -n 1 "$exe" "${common[@]}" --set run.dir=off --set log.progress=off >off.out 2>&1 ||
  { cat off.out; fail "progress off"; }
! grep -q "^step [0-9]*/" off.out || { cat off.out; fail "progress off still prints progress"; }
"$mpiexec" -n 1 "$exe" "${common[@]}" --set run.dir=tty --set log.progress=tty >tty.out 2>&1 ||
  { cat tty.out; fail "progress tty"; }
grep -q $'\rstep 200/200 ' tty.out || { cat -A tty.out; fail "log.progress = tty not honoured"; }

rc=0
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=stopped --set run.stop_at=100 >stop.out 2>&1 || rc=$?
[ "$rc" -eq 75 ] || { cat stop.out; fail "stop at 100: exit $rc, expected 75"; }
"$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=stopped --resume auto >resume.out 2>&1 ||
  { cat resume.out; fail "resume"; }
grep -q "stop requested: checkpoint after step 100" stopped/run.log &&
  grep -q "resumed from step 100" stopped/run.log && grep -q " step 200/200 " stopped/run.log ||
  { cat stopped/run.log; fail "run.log of the resumed run does not continue the stopped one"; }

[ "$(wc -l <stopped/metrics.jsonl)" -eq "$(($(wc -l <stopped/metrics.csv) - 1))" ] ||
  fail "metrics.jsonl and metrics.csv have different row counts"
header=$(head -n 1 stopped/metrics.csv)
first=$(sed -n 2p stopped/metrics.csv | cut -d, -f1)
head -n 1 stopped/metrics.jsonl | grep -q "^{\"${header%%,*}\":$first," ||
  { head -n 2 stopped/metrics.jsonl; fail "metrics.jsonl does not start with the CSV's first row"; }
tail -n 1 stopped/metrics.jsonl | grep -q "^{\"step\":200,.*\"seconds\":[0-9.e-]*}$" ||
  { tail -n 1 stopped/metrics.jsonl; fail "metrics.jsonl does not end at step 200"; }

rc=0
"$mpiexec" -n 2 "$exe" -v -q >vq.out 2>&1 || rc=$?
[ "$rc" -eq 78 ] && grep -q -- "-v and -q contradict each other" vq.out ||
  { cat vq.out; fail "-v -q: exit $rc, expected 78 and a message"; }
rc=0
"$mpiexec" -n 2 "$exe" --set run.sed=7 >typo.out 2>&1 || rc=$?
[ "$rc" -eq 78 ] || { cat typo.out; fail "mistyped key: exit $rc, expected 78"; }
[ "$(grep -c "rank\|error" typo.out)" -eq 1 ] &&
  grep -q "^error: --set run.sed=7: unknown key 'run.sed' (did you mean 'run.seed'?)$" typo.out ||
  { cat typo.out; fail "a mistyped key is not one line naming the closest key"; }
rc=0
"$mpiexec" -n 2 "$exe" --set run.sed=7 -v >typo_v.out 2>&1 || rc=$?
[ "$rc" -eq 78 ] && grep -q "^\[rank 0\] src/run/run.c:[0-9]* run_all(): tess_config_parse_args" typo_v.out ||
  { cat typo_v.out; fail "-v does not show the traceback of an option error"; }
echo "check_logs: passed"
