# jobs/tess-job.sh - sourced by the jobs/*.sbatch scripts (bash): launch one Tessera app on the
# job's tasks, forward stop signals to it, and requeue the job when the app stopped early after a
# checkpoint (exit 75). docs/jobs.md explains the whole cycle.
#
#   source "$TESS_ROOT/jobs/tess-job.sh"
#   tess_job_run APP [APP ARGS...]          never returns: exits with the app's exit status
#
# What it runs, per attempt of the job:
#   $TESS_LAUNCHER APP_EXE --set run.dir=$TESS_RUN_DIR --resume $TESS_RESUME [APP ARGS...]
# Settings (environment; sbatch exports the submitting shell's environment to the job):
#   TESS_ROOT          the Tessera checkout (default: the directory sbatch was run from)
#   TESS_BIN           the app's executable (default $TESS_ROOT/build/release/apps/APP/APP)
#   TESS_LAUNCHER      srun (default: srun --mpi=pmix, direct launch) or mpirun (inside the job)
#   TESS_RUN_DIR       output and checkpoint directory (default runs/APP-$SLURM_JOB_ID; the same
#                      for every attempt of a job; point a new job at an old one to continue it)
#   TESS_RESUME        auto (default: the newest valid checkpoint in the run directory, if any),
#                      a checkpoint file, or "" to pass no --resume (start fresh)
#   TESS_CKPT_DIR      where the app commits checkpoints (default $TESS_RUN_DIR/checkpoints, the
#                      apps' default ckpt.dir); read only for the SIGTERM case below
#   TESS_MAX_REQUEUES  requeue at most this many times (default 10), then fail with exit 75
#   TESS_MODULES       modules to "module load" first, e.g. "openmpi/4.1 hdf5/1.10-openmpi"
#
# Signals: Slurm sends USR1 to this shell before the time limit (#SBATCH --signal=B:USR1@secs),
# or TERM at the limit, on scancel, or on preemption. bash runs a trap only once the foreground
# command returns, so the launcher runs in the background while this shell waits; the trap sends
# USR1 to srun/mpirun, which pass it to every rank. The ranks agree on a step, checkpoint and
# exit 75. Then the job requeues itself (same job id, SLURM_RESTART_COUNT one higher) unless it
# was cancelled: a job you scancel stays cancelled.
# A SIGTERM to every process of the job (time limit reached, preemption, scancel --full) also
# reaches the launcher, which hides the app's 75: mpirun forwards the SIGTERM, then exits 1; srun
# kills its tasks with SIGKILL. So after a stop signal, a launcher failure counts as 75 when the
# app committed a checkpoint during this attempt (TESS_CKPT_DIR/latest changed): progress is saved.

# shellcheck shell=bash
tess_job_log() { echo "tess-job: $*" >&2; }

# Forward a stop request to the launcher; remember it if the launcher has not started yet.
tess_job_forward() {
  tess_job_stop=1
  if [ -n "${tess_job_child:-}" ]; then kill -USR1 "$tess_job_child" 2>/dev/null || true; fi
}

# After exit 75: requeue this job unless it was cancelled or TESS_MAX_REQUEUES is reached.
tess_job_requeue() {
  local restarts=${SLURM_RESTART_COUNT:-0} max=${TESS_MAX_REQUEUES:-10} info state reason
  if [ "$restarts" -ge "$max" ]; then
    tess_job_log "stopped early, but this attempt is restart $restarts of at most $max" \
                 "(TESS_MAX_REQUEUES): not requeued"
    return
  fi
  info=$(scontrol -o show job "$SLURM_JOB_ID" 2>/dev/null) || info=""
  state=$(sed -n 's/.* JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
  reason=$(sed -n 's/.* Reason=\([^ ]*\).*/\1/p' <<<"$info")
  # RUNNING: an early signal (--signal, scancel --signal, preemption warning). Past the time limit
  # the job is COMPLETING with Reason=TimeLimit. COMPLETING for any other reason: scancel.
  if [ "$state" = RUNNING ] || [ "$reason" = TimeLimit ]; then
    tess_job_log "stopped early after a checkpoint: requeueing job $SLURM_JOB_ID" \
                 "(restart $((restarts + 1)) of at most $max)"
    scontrol requeue "$SLURM_JOB_ID"
  else
    tess_job_log "job $SLURM_JOB_ID is ${state:-unknown} (${reason:-?}): cancelled, not requeued"
  fi
}

# The newest committed checkpoint of DIR (the name in DIR/latest), or nothing.
tess_job_latest() { cat "$1/latest" 2>/dev/null || true; }

tess_job_run() {
  local app=$1 rc exe run_dir launch resume=() ckpt_dir latest0
  shift
  tess_job_stop=0 tess_job_child=""
  trap tess_job_forward USR1 TERM # set before anything else: an early signal must not kill us
  [ -n "${SLURM_JOB_ID:-}" ] || { tess_job_log "not inside a Slurm job: submit with sbatch"; exit 64; }
  if [ -n "${TESS_MODULES:-}" ]; then
    # shellcheck disable=SC2086
    module load $TESS_MODULES || { tess_job_log "module load $TESS_MODULES failed"; exit 66; }
  fi
  exe=${TESS_BIN:-${TESS_ROOT:-$SLURM_SUBMIT_DIR}/build/release/apps/$app/$app}
  [ -x "$exe" ] || { tess_job_log "no executable '$exe': build it (README) or set TESS_BIN"; exit 66; }
  run_dir=${TESS_RUN_DIR:-runs/$app-$SLURM_JOB_ID}
  mkdir -p "$run_dir"
  ckpt_dir=${TESS_CKPT_DIR:-$run_dir/checkpoints}
  latest0=$(tess_job_latest "$ckpt_dir")

  # One BLAS/OpenMP thread per CPU of each task; HDF5 locks fail on NFS/Lustre (OPERATIONS 3.7).
  export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1} OPENBLAS_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
  export HDF5_USE_FILE_LOCKING=FALSE
  if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  case "${TESS_LAUNCHER:-srun}" in
    srun) launch=(srun --mpi=pmix --kill-on-bad-exit=1 -n "$SLURM_NTASKS") ;;
    mpirun) launch=(mpirun -n "$SLURM_NTASKS") ;;
    *) tess_job_log "TESS_LAUNCHER='$TESS_LAUNCHER': expected srun or mpirun"; exit 64 ;;
  esac
  if [ -n "${TESS_RESUME-auto}" ]; then resume=(--resume "${TESS_RESUME-auto}"); fi
  tess_job_log "job $SLURM_JOB_ID attempt $((${SLURM_RESTART_COUNT:-0} + 1)) on ${SLURM_JOB_NODELIST:-?}:" \
               "${launch[*]} $exe --set run.dir=$run_dir ${resume[*]} $*"
  if [ "$tess_job_stop" -eq 1 ]; then
    tess_job_log "stop requested before the launch: nothing to checkpoint"
    rc=75
  else
    "${launch[@]}" "$exe" --set run.dir="$run_dir" "${resume[@]}" "$@" &
    tess_job_child=$!
    [ "$tess_job_stop" -eq 0 ] || kill -USR1 "$tess_job_child" 2>/dev/null || true
    wait "$tess_job_child"; rc=$? # 128+sig when a trap ran: wait again until it has exited
    while kill -0 "$tess_job_child" 2>/dev/null; do wait "$tess_job_child"; rc=$?; done
    wait "$tess_job_child"; rc=$? # bash keeps the exited child's status: the real one
  fi
  tess_job_log "$app exited with $rc (exit codes: docs/jobs.md)"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 75 ] && [ "$tess_job_stop" -eq 1 ] &&
     [ -n "$(tess_job_latest "$ckpt_dir")" ] && [ "$(tess_job_latest "$ckpt_dir")" != "$latest0" ]; then
    tess_job_log "stopped by a signal after committing $ckpt_dir/$(tess_job_latest "$ckpt_dir"):" \
                 "counted as 75"
    rc=75
  fi
  if [ "$rc" -eq 75 ]; then tess_job_requeue; fi
  exit "$rc"
}
