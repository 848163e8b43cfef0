#!/usr/bin/env bash
# check_resume_ranges.sh MPIEXEC TINYLM TESS_CKPT FORGE - every value a resume uses is range-checked
# (issue "Reliability", point 7): a tinylm checkpoint of step 5 (global batch 32) edited and
# re-sealed by ckpt_forge (the dataset hash and the integrity record made to agree, so verify
# passes) must still be refused by --resume on 2 ranks, exit 65 naming the file and the value:
#   data_cursor 10000 (> train.steps x train.batch = 320), optim/step_count 6 (> 1 per step x 5).
# The untouched file, and a forged data_cursor inside the range, resume (exit 0).
set -uo pipefail
mpiexec=$1 exe=$2 tool=$3 forge=$4
fail() { echo "check_resume_ranges: FAIL: $*" >&2; exit 1; }
c=(--set run.plots=false --set optim.warmup_steps=2 --set log.progress=off --set train.steps=10
   --set train.batch=32)
rm -rf base; rc=0
"$mpiexec" -n 2 "$exe" "${c[@]}" --set run.dir=base --set ckpt.every=5 --set run.stop_at=5 >base.log 2>&1 || rc=$?
[ "$rc" -eq 75 ] || { cat base.log; fail "the first run exited $rc, expected 75"; }
ck=base/checkpoints/ckpt_00000005.h5
try() { # NAME EXPECTED_RC NEEDLE FORGE_ARGS...: forge a copy, verify it, resume from it
  local name=$1 want=$2 needle=$3; shift 3
  cp "$ck" "$name.h5"
  [ "$#" -eq 0 ] || "$forge" "$name.h5" "$@" || fail "$name: ckpt_forge failed"
  "$tool" verify "$name.h5" >"$name.verify" 2>&1 || { cat "$name.verify"; fail "$name: the forged file does not verify"; }
  rm -rf "run_$name"; local rc=0
  timeout -k 5 120 "$mpiexec" -n 2 "$exe" "${c[@]}" --set run.dir="run_$name" --resume "$name.h5" \
    >"$name.log" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$name.log"; fail "$name: exit $rc, expected $want"; }
  [ -z "$needle" ] || grep -qF -- "$needle" "$name.log" || { cat "$name.log"; fail "$name: no '$needle'"; }
  echo "$name: exit $rc${needle:+, '$needle'}"
}
try plain 0 ""
try cursor_inside 0 "" cursor 200
try cursor 65 "'cursor.h5' holds data_cursor 10000, beyond the 320 this run's data can reach" cursor 10000
try step_count 65 "'step_count.h5' holds optim/step_count = 6, outside [0, 5] (at most 1 per step, 5 steps)" \
  counter /optim/step_count 6
try step_count_negative 65 "holds optim/step_count = -1, outside [0, 5]" counter /optim/step_count -1
