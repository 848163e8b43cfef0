#!/usr/bin/env bash
# slurm_test.sh SRC TINYLM TESS_CKPT CASE [ZO [MOE [FEDKALTER [CALM]]]] - the jobs/ scripts on the real local cluster of
# cluster/slurm1.sh (started by the slurm_up fixture). Run in the test's own directory; job
# output goes to job.out there, the app's run directory to run/. Assertions read sbatch --wait's
# exit status (bad_config), `scontrol show job` (JobState, Restarts, ExitCode) and job.out.
#   srun | mpirun  tinylm 2 ranks through jobs/tinylm.sbatch with that launcher: exit 0,
#                  COMPLETED, world size 2, metrics.csv complete
#   bad_config     an unknown key: exit 78 passed through, FAILED, Restarts=0, the config error
#                  in job.out, no requeue, within seconds
#   preempt_usr1   once a checkpoint exists, `scancel --signal=USR1 --batch` (the batch shell forwards it):
#                  the job checkpoints, exits 75, requeues, resumes (SLURM_RESTART_COUNT=1),
#                  finishes; its final checkpoint and loss rows equal an uninterrupted run's
#   preempt_term   the same with `scancel --signal=TERM --full` (every process gets SIGTERM) and
#                  mpirun as the launcher: srun answers SIGTERM by killing its tasks (docs/jobs.md)
#   requeue_cap    the same USR1 with TESS_MAX_REQUEUES=0: checkpoint and 75, but no requeue:
#                  FAILED with ExitCode 75, Restarts=0
#   timelimit      -t 1 with --signal=B:USR1@40: Slurm's own early warning stops the job before
#                  its limit, it requeues and the next attempt resumes; then scancel: that
#                  attempt stops too but the job is not requeued
#   zo_srun        zo's default compare run through jobs/zo.sbatch: exit 0, COMPLETED, 2 ranks,
#                  metrics.csv and results.md written
#   zo_preempt     a longer zo run stopped by `scancel --signal=USR1 --batch` after its first
#                  checkpoint: 75, requeue, resume; metrics.csv byte-identical to an
#                  uninterrupted run's and the final checkpoints equal (tess-ckpt diff)
#   moe_srun       a short moe run with expert parallelism (dist.ep=2) through jobs/moe.sbatch:
#                  exit 0, COMPLETED, 2 ranks, eval.csv and routing.csv written
#   fedkalter_preempt  a 12-round fedkalter run (7 generated clients, 2 ranks) through
#                  jobs/fedkalter.sbatch, stopped by `scancel --signal=USR1 --batch` after its first
#                  per-round checkpoint: 75, requeue, resume; every metrics row (seconds aside),
#                  clients.csv (per-client parameter hashes) and kalter.csv byte-identical to an
#                  uninterrupted run's, and the final checkpoints equal (tess-ckpt diff)
#   calm_preempt   a short calm pretraining (small model, 60 tokenizer + 100 DAT steps, simulated
#                  data, 2 ranks) through jobs/calm.sbatch, stopped by `scancel --signal=USR1
#                  --batch` twice: after its first checkpoint (tokenizer stage) and after a DAT
#                  checkpoint of attempt 2 (which reads the token ids cached by attempt 2): 75,
#                  requeue, resume each time (Restarts=2); every tokenizer and DAT metrics row (seconds aside) and forecast.csv byte-identical to an
#                  uninterrupted run's, and the final checkpoints equal (tess-ckpt diff)
#   launcher       no Slurm: jobs/launch-mpirun.sh stopped by SIGINT (Ctrl-C) after a checkpoint
#                  exits 75; the same command again resumes and finishes
# Exit 77 (skipped) when Slurm is not installed or the cluster does not answer.
set -euo pipefail
src=$1 tinylm=$2 tess_ckpt=$3 case=$4 zo=${5:-} moe=${6:-} fedkalter=${7:-} calm=${8:-}
fail() { echo "slurm_test: FAIL ($case): $*" >&2; [ -f job.out ] && sed 's/^/  job.out| /' job.out >&2; exit 1; }
say() { echo "slurm_test: $*"; }

if [ "$case" = launcher ]; then
  rm -rf job.out run
  export TESS_BIN=$tinylm TESS_RUN_DIR=run
  args=(--set train.steps=400 --set run.log_every=50 --set train.eval_every=400
        --set run.plots=false --set ckpt.every=100)
  set -m # job control: without it bash starts background jobs with SIGINT ignored, untrappable
  bash "$src/jobs/launch-mpirun.sh" -n 2 tinylm "${args[@]}" >job.out 2>&1 &
  pid=$!
  set +m
  for _ in $(seq 300); do grep -q "checkpoint step=" job.out && break; sleep 0.2; done
  kill -INT "$pid"
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 75 ] || fail "after Ctrl-C the launcher exited $rc, expected 75"
  grep -q "run the same command again to resume" job.out || fail "no resume hint"
  rc=0
  bash "$src/jobs/launch-mpirun.sh" -n 2 tinylm "${args[@]}" >job.out 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || fail "the second run exited $rc"
  grep -Eq "resumed from step [1-9]" job.out || fail "the second run did not resume"
  [ "$(tail -n 1 run/metrics.csv | cut -d, -f1)" = 400 ] || fail "run/metrics.csv does not end at step 400"
  say "launcher passed"
  exit 0
fi

command -v sbatch >/dev/null || { echo "slurm_test: Slurm is not installed: skipped"; exit 77; }
eval "$(bash "$src/cluster/slurm1.sh" env)"
sinfo -h >/dev/null 2>&1 || { echo "slurm_test: no cluster at $SLURM_CONF: skipped"; exit 77; }

rm -rf job.out run ref
export TESS_ROOT=$src TESS_BIN=$tinylm TESS_RUN_DIR=run TESS_LAUNCHER=srun
sbatch_args=(--parsable -o job.out)

# field ID NAME: one field of `scontrol show job` (e.g. JobState, Restarts, ExitCode).
field() { scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# wait_final ID SECONDS: poll until the job reaches a final state (sbatch --wait polls every 2,
# then 8, then 32 s: too coarse for a test). Requeued attempts pass through PENDING.
wait_final() {
  local s
  for _ in $(seq $(($2 * 5))); do
    s=$(field "$1" JobState)
    case "$s" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) return 0 ;; esac
    sleep 0.2
  done
  fail "job $1 still $s after $2 s"
}

# wait_log REGEX SECONDS: until job.out matches.
wait_log() {
  for _ in $(seq $(($2 * 5))); do
    grep -Eq "$1" job.out 2>/dev/null && return 0
    sleep 0.2
  done
  fail "no /$1/ in job.out after $2 s"
}

# sbatch_wait ARGS...: sbatch --wait, bounded by $wait_s seconds (default 100); sets $id and $rc
# (the job's exit status).
sbatch_wait() {
  local bound=${wait_s:-100}
  rc=0
  id=$(timeout "$bound" sbatch "${sbatch_args[@]}" --wait "$@") || rc=$?
  if [ "$rc" -eq 124 ]; then squeue >&2; fail "sbatch --wait: job ${id:-?} not finished after $bound s"; fi
}

expect_job() { # expect_job ID STATE RESTARTS EXITCODE
  local st rs ec
  st=$(field "$1" JobState) rs=$(field "$1" Restarts) ec=$(field "$1" ExitCode)
  say "job $1: JobState=$st Restarts=$rs ExitCode=$ec"
  [ "$st" = "$2" ] || fail "JobState=$st, expected $2"
  [ "$rs" = "$3" ] || fail "Restarts=$rs, expected $3"
  [ "$ec" = "$4" ] || fail "ExitCode=$ec, expected $4"
}

# submit_done SCRIPT ARGS...: jobs/SCRIPT (TESS_BIN from the environment), polled until it ends
# within $wait_s seconds (default 100): COMPLETED without a restart, exit code 0. Not sbatch
# --wait, which looks after 2, 12 and 42 s: a 10-second job took 42 s (bad_config checks its
# exit status).
submit_done() {
  id=$(sbatch "${sbatch_args[@]}" "$src/jobs/$1" "${@:2}")
  wait_final "$id" "${wait_s:-100}"
  expect_job "$id" COMPLETED 0 0:0
}

# submit_until_ckpt BIN SCRIPT ARGS...: jobs/SCRIPT with TESS_BIN=BIN in the background; sets $id
# and returns once the job has logged its first checkpoint.
submit_until_ckpt() {
  id=$(TESS_BIN=$1 sbatch "${sbatch_args[@]}" "$src/jobs/$2" "${@:3}")
  say "submitted job $id ($2, $TESS_LAUNCHER)"
  wait_log "checkpoint step=" 120
}

# stop_job ID usr1|term: preempt the job: USR1 to the batch shell (which forwards it to the app)
# or TERM to every process of the job.
stop_job() {
  if [ "$2" = usr1 ]; then scancel --signal=USR1 --batch "$1"; else scancel --signal=TERM --full "$1"; fi
  say "signalled job $1 ($2)"
}

# reference BIN ARGS...: the uninterrupted run, same ranks and options, straight under mpiexec
# into ref/ (run while the job waits to be requeued).
reference() {
  mpiexec -n 2 "$1" --set run.dir=ref "${@:2}" >ref.log 2>&1 || { cat ref.log; fail "reference run failed"; }
}

# expect_resumed ID RESTARTS: the job COMPLETED after RESTARTS requeues: attempt 1 ended with 75
# (mpirun exits 1 after a SIGTERM of its own; the job script counts the new checkpoint as 75),
# the job requeued itself, attempts 2..RESTARTS+1 ran and each resumed from a checkpoint.
expect_resumed() {
  local a
  expect_job "$1" COMPLETED "$2" 0:0
  grep -Eq "exited with 75|counted as 75" job.out || fail "attempt 1 did not end with 75"
  grep -q "requeueing job $1" job.out || fail "the job did not requeue itself"
  for a in $(seq 2 $(($2 + 1))); do
    grep -q "tess-job: job $1 attempt $a " job.out || fail "no attempt $a (SLURM_RESTART_COUNT=$((a - 1)))"
  done
  [ "$(grep -Ec "resumed from step [1-9]" job.out)" -eq "$2" ] ||
    fail "not every one of the $2 later attempts resumed from a checkpoint"
}

# preempt BIN SCRIPT usr1|term ARGS...: the preemption job of every app: jobs/SCRIPT with ARGS
# stopped after its first checkpoint, the reference run of BIN with ARGS meanwhile, then the job
# must have requeued once and resumed (expect_resumed). The caller compares run/ with ref/.
preempt() {
  submit_until_ckpt "$1" "$2" "${@:4}"
  stop_job "$id" "$3"
  reference "$1" "${@:4}"
  wait_final "$id" 200
  expect_resumed "$id" 1
}

# The preemption runs: long enough (600 steps, several seconds) to be stopped in the middle.
long=(--set train.steps=600 --set run.log_every=50 --set train.eval_every=400 --set run.plots=false
      --set ckpt.every=100)

case "$case" in
srun|mpirun)
  TESS_LAUNCHER=$case submit_done tinylm.sbatch --set train.steps=60 \
    --set run.log_every=20 --set train.eval_every=60 --set run.plots=false
  grep -q "tess-job: job $id attempt 1 .*: $case " job.out || fail "job.out does not show the $case launch"
  grep -q "global batch 32 = 2 ranks x 16" job.out || fail "the app did not run on 2 ranks"
  [ "$(tail -n 1 run/metrics.csv | cut -d, -f1)" = 60 ] || fail "run/metrics.csv does not end at step 60"
  ;;
bad_config)
  sbatch_wait "$src/jobs/tinylm.sbatch" --set optim.lrr=0.1
  [ "$rc" -eq 78 ] || fail "sbatch --wait exited $rc, expected 78 (bad configuration)"
  expect_job "$id" FAILED 0 78:0
  grep -q "unknown key 'optim.lrr' (did you mean 'optim.lr'?)" job.out || fail "config error not in job.out"
  grep -q "requeueing" job.out && fail "a configuration error must not requeue"
  secs=$(field "$id" RunTime | awk -F: '{ print $1 * 3600 + $2 * 60 + $3 }')
  [ "$secs" -le 20 ] || fail "the job ran $secs s: a bad configuration must fail fast"
  ;;
preempt_usr1|preempt_term)
  [ "$case" = preempt_usr1 ] || export TESS_LAUNCHER=mpirun
  preempt "$tinylm" tinylm.sbatch "${case#preempt_}" "${long[@]}"
  got=(run/checkpoints/ckpt_*.h5) want=(ref/checkpoints/ckpt_*.h5) # 8-digit steps: glob order
  last=${got[-1]} ref_last=${want[-1]}
  [ "$(basename "$last")" = "$(basename "$ref_last")" ] || fail "final checkpoints $last and $ref_last differ in step"
  "$tess_ckpt" diff "$ref_last" "$last" || fail "final state differs from the uninterrupted run"
  # every loss row of the reference appears unchanged in the resumed run (the last row per step)
  awk -F, 'NR == FNR { if (FNR > 1) ref[$1] = $2; next }
           FNR > 1 { got[$1] = $2 }
           END { for (s in ref) if (!(s in got) || got[s] != ref[s]) { print "step " s ": " ref[s] " vs " got[s]; bad = 1 }
                 exit bad }' ref/metrics.csv run/metrics.csv || fail "loss rows differ from the uninterrupted run"
  ;;
requeue_cap)
  TESS_MAX_REQUEUES=0 submit_until_ckpt "$tinylm" tinylm.sbatch "${long[@]}"
  stop_job "$id" usr1
  wait_final "$id" 60
  expect_job "$id" FAILED 0 75:0
  grep -q "(TESS_MAX_REQUEUES): not requeued" job.out || fail "the cap was not reported"
  ;;
zo_srun)
  # zo's default compare (three methods of 200,000 samples each): 10 s on 2 idle cores, but it
  # took more than 100 s when the machine was saturated by other jobs
  wait_s=240 TESS_BIN=$zo submit_done zo.sbatch --set run.plots=false
  grep -q "2 ranks = 2 eval x 1 shard" job.out || fail "zo did not run on 2 ranks"
  [ -s run/metrics.csv ] && [ -s run/results.md ] || fail "zo wrote no metrics.csv or results.md"
  ;;
moe_srun)
  TESS_BIN=$moe submit_done moe.sbatch --set run.plots=false --set train.steps=40 \
    --set train.eval_every=20 --set dist.ep=2
  grep -q "global batch 16 = 2 ranks x 8" job.out || fail "moe did not run on 2 ranks"
  [ -s run/eval.csv ] && [ -s run/routing.csv ] || fail "moe wrote no eval.csv or routing.csv"
  ;;
zo_preempt)
  # 300,000 samples per method: 37,574 + 300,000 + 37,574 iterations, the first checkpoint at
  # 10,000 (a quarter into the first method), so the stop lands mid-run and the resumed attempt
  # crosses both method boundaries
  zlong=(--set budget.samples=300000 --set baselines.nlopt_max_evals=500 --set run.plots=false
         --set ckpt.every=10000)
  preempt "$zo" zo.sbatch usr1 "${zlong[@]}"
  cmp ref/metrics.csv run/metrics.csv || fail "metrics.csv differs from the uninterrupted run"
  "$tess_ckpt" diff ref/checkpoints run/checkpoints || fail "final state differs from the uninterrupted run"
  ;;
fedkalter_preempt)
  flong=(--set train.rounds=12 --set train.eval_every=4 --set run.plots=false --set ckpt.every=3)
  preempt "$fedkalter" fedkalter.sbatch usr1 "${flong[@]}"
  # round, loss, bytes, shared floats of the last row per round (the seconds column differs)
  for d in ref run; do
    awk -F, 'FNR > 1 { row[$1] = $1 "," $2 "," $3 "," $4 } END { for (r = 1; r in row; r++) print row[r] }' \
      "$d/metrics.csv" >"$d.rows"
  done
  [ "$(wc -l <ref.rows)" -eq 12 ] || fail "the reference has $(wc -l <ref.rows) rounds, expected 12"
  cmp ref.rows run.rows || fail "metrics rows differ from the uninterrupted run"
  cmp ref/clients.csv run/clients.csv || fail "clients.csv (accuracies, parameter hashes) differs"
  cmp ref/kalter.csv run/kalter.csv || fail "kalter.csv differs from the uninterrupted run"
  "$tess_ckpt" diff ref/checkpoints run/checkpoints || fail "final state differs from the uninterrupted run"
  ;;
calm_preempt)
  clong=(--set run.plots=false --set tok.width=32 --set tok.codes=32 --set tok.channels=16
         --set model.channels=32 --set model.ffn=64 --set model.max_neurons=32 --set tok.batch=16
         --set train.batch=4 --set tok.steps=60 --set train.steps=100 --set train.warmup=5
         --set ckpt.every=10)
  submit_until_ckpt "$calm" calm.sbatch "${clong[@]}" # stopped first in the tokenizer stage
  stop_job "$id" usr1
  wait_log "resumed from step [1-9]" 120
  wait_log "checkpoint step=(7|8|9)0 " 120
  stop_job "$id" usr1 # and again after a checkpoint of the DAT stage
  reference "$calm" "${clong[@]}"
  wait_final "$id" 300
  expect_resumed "$id" 2
  grep -q "token ids: [0-9]* read from run/tokens.h5" run/run.log ||
    fail "attempt 3 did not read the token ids cached by attempt 2"
  # the last row per step without the seconds column (rows after the checkpoint are rewritten)
  for f in tokenizer metrics; do
    for d in ref run; do
      awk -F, 'FNR > 1 { sub(/,[^,]*$/, ""); row[$1 + 0] = $0; if ($1 + 0 > n) n = $1 + 0 }
               END { for (r = 1; r <= n; r++) if (r in row) print row[r] }' "$d/$f.csv" >"$d.$f"
    done
    [ -s ref.$f ] || fail "the reference wrote no $f.csv rows"
    cmp ref.$f run.$f || fail "$f.csv rows differ from the uninterrupted run"
  done
  cmp ref/forecast.csv run/forecast.csv || fail "forecast.csv differs from the uninterrupted run"
  "$tess_ckpt" diff ref/checkpoints run/checkpoints || fail "final state differs from the uninterrupted run"
  ;;
timelimit)
  id=$(sbatch "${sbatch_args[@]}" -t 1 --signal=B:USR1@40 "$src/jobs/tinylm.sbatch" \
         --set train.steps=1000000 --set run.log_every=200 --set train.eval_every=1000000 \
         --set run.plots=false --set ckpt.every=1000)
  say "submitted job $id with a 1-minute limit and USR1 40 s before it"
  wait_log "requeueing job $id" 75
  wait_log "resumed from step [1-9]" 60
  scancel "$id" # a cancelled job stops with a checkpoint too, but is not requeued
  wait_final "$id" 30
  grep -q "DUE TO TIME LIMIT" job.out && fail "the time limit was reached before the job stopped"
  [ "$(field "$id" Restarts)" -ge 1 ] || fail "Restarts=$(field "$id" Restarts), expected >= 1"
  [ "$(field "$id" JobState)" = CANCELLED ] || fail "JobState=$(field "$id" JobState) after scancel"
  grep -q "cancelled, not requeued" job.out || fail "the cancelled attempt did not say it stays cancelled"
  ;;
*) fail "unknown case '$case'" ;;
esac
say "$case passed"
