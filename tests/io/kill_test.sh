#!/usr/bin/env bash
# kill_test.sh MPIEXEC EXE NP POINT STEP - a checkpoint writer SIGKILLed at POINT
# (after_write | before_rename | after_rename, see io/ckpt.h) leaves the previous checkpoint valid
# and `latest` pointing at it; the next start resumes from STEP (2, or 3 once the rename happened).
set -u
mpiexec=$1 exe=$2 np=$3 point=$4 step=$5
dir=ckpts
fail() { echo "kill_test: FAIL: $*" >&2; exit 1; }
rm -rf "$dir"
"$mpiexec" -n "$np" "$exe" prepare "$dir" || fail "prepare"
TESS_CKPT_TEST_KILL_AT=$point "$mpiexec" -n "$np" "$exe" kill "$dir" >kill.log 2>&1
rc=$?
echo "writer killed at $point: mpiexec exit $rc"
[ "$rc" -ne 0 ] || { cat kill.log; fail "the writer survived TESS_CKPT_TEST_KILL_AT=$point"; }
grep -q "signal 9" kill.log || { cat kill.log; fail "the writer did not die of SIGKILL"; }
ls -l "$dir"
"$mpiexec" -n "$np" "$exe" check "$dir" "$step" || fail "check after a kill at $point"
echo "kill_test: $point passed"
