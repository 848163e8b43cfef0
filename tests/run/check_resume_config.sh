#!/usr/bin/env bash
# check_resume_config.sh MPIEXEC TINYLM ZO - a resume compares the configuration with the
# checkpoint's (/config): options that define the problem or the model must match (exit 78, each
# differing key named with its stored and its current value); options declared resumable (the step
# budget, logging, ckpt.*) may change.
#   tinylm: a reverse-task checkpoint resumed under task.kind=sort (and another lr) is refused;
#           the same checkpoint resumed with train.steps grown from 10 to 14 continues to 14.
#   zo:     a checkpoint of the quadratic problem resumed under problem.kind=ridge, or under
#           chain.tau=4, is refused.
set -euo pipefail
mpiexec=$1 tinylm=$2 zo=$3
fail() { echo "check_resume_config: FAIL: $*" >&2; exit 1; }
rm -rf lm zo
expect78() { # LOG NEEDLE... : the last run exited 78 and its output names every NEEDLE
  local log=$1; shift
  for n in "$@"; do grep -qF -- "$n" "$log" || { cat "$log"; fail "no '$n' in $log"; }; done
}

lm=(--set train.steps=10 --set run.plots=false --set model.channels=16 --set model.mlp_hidden=16
    --set train.eval_every=5 --set optim.warmup_steps=2 --set run.dir=lm)
"$mpiexec" -n 2 "$tinylm" "${lm[@]}" >lm1.log 2>&1 || { cat lm1.log; fail "tinylm first run"; }
rc=0; "$mpiexec" -n 2 "$tinylm" "${lm[@]}" --resume auto --set task.kind=sort --set optim.lr=0.01 \
  >lm2.log 2>&1 || rc=$?
[ "$rc" -eq 78 ] || { cat lm2.log; fail "tinylm resume under task.kind=sort: exit $rc, expected 78"; }
expect78 lm2.log "task.kind: 'reverse' in lm/checkpoints/ckpt_00000010.h5, 'sort' now" \
  "optim.lr: '0.003' in lm/checkpoints/ckpt_00000010.h5, '0.01' now" "2 options differ"
[ "$(grep -c "options differ" lm2.log)" -eq 1 ] || { cat lm2.log; fail "the verdict is printed more than once"; }
"$mpiexec" -n 2 "$tinylm" "${lm[@]}" --resume auto --set train.steps=14 --set log.level=warn \
  --set ckpt.keep=1 >lm3.log 2>&1 || { cat lm3.log; fail "tinylm resume with more steps refused"; }
[ "$(tail -n 1 lm/metrics.csv | cut -d, -f1)" = 14 ] || fail "the resumed run did not reach step 14"
"$mpiexec" -n 2 "$tinylm" "${lm[@]}" --resume auto --set train.steps=14 >lm4.log 2>&1 ||
  { cat lm4.log; fail "resuming the finished run"; }
grep -q "the checkpoint is of a finished run (step 14): nothing to do" lm4.log || { cat lm4.log; fail "no 'nothing to do'"; }
grep -qi "nan" lm4.log && { cat lm4.log; fail "resuming a finished run printed NaN results"; }
echo "tinylm: task.kind and optim.lr changes refused (78, both keys named); train.steps 10 -> 14 resumed;"
echo "        resumed again when finished: nothing to do, no NaN summary"

z=(--set budget.samples=3000 --set baselines.nlopt_max_evals=200 --set run.plots=false
   --set run.dir=zo --set run.stop_at=1000)
rc=0; "$mpiexec" -n 2 "$zo" "${z[@]}" >zo1.log 2>&1 || rc=$?
[ "$rc" -eq 75 ] || { cat zo1.log; fail "zo stopped run: exit $rc, expected 75"; }
for change in problem.kind=ridge chain.tau=4; do
  rc=0; "$mpiexec" -n 2 "$zo" "${z[@]}" --resume auto --set "$change" >zo2.log 2>&1 || rc=$?
  [ "$rc" -eq 78 ] || { cat zo2.log; fail "zo resume under $change: exit $rc, expected 78"; }
  key=${change%%=*} val=${change#*=}
  expect78 zo2.log "$key: " "'$val' now" "1 option differs from zo/checkpoints/ckpt_00001000.h5"
done
echo "zo: problem.kind and chain.tau changes refused (78, the key named)"
