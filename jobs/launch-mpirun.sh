#!/usr/bin/env bash
# jobs/launch-mpirun.sh - run one Tessera app with mpirun on a workstation (no scheduler), with
# the same checkpoint/resume behaviour as the sbatch scripts: Ctrl-C (or kill -TERM/-USR1 of this
# script) makes the app finish its step, write a checkpoint and exit 75; running the same command
# again resumes from it.
#
# usage: jobs/launch-mpirun.sh [-n RANKS] APP [APP ARGS...]
#   jobs/launch-mpirun.sh -n 2 tinylm --set train.steps=2000
#   TESS_RUN_DIR=runs/exp1 jobs/launch-mpirun.sh tinylm --config exp1.ini   (again: resumes)
# Settings (environment):
#   TESS_BIN      the app's executable (default build/release/apps/APP/APP of this checkout)
#   TESS_RUN_DIR  output and checkpoint directory (default runs/APP)
#   TESS_RESUME   auto (default), a checkpoint file, or "" to pass no --resume (start fresh)
# Ranks beyond the cores are oversubscribed. Exit status: the app's (docs/jobs.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
np=2
if [ "${1:-}" = -n ]; then np=$2; shift 2; fi
[ "$#" -ge 1 ] || { sed -n '7,10p' "$0" >&2; exit 64; }
app=$1
shift
exe=${TESS_BIN:-$root/build/release/apps/$app/$app}
[ -x "$exe" ] || { echo "launch-mpirun: no executable '$exe': build it (README) or set TESS_BIN" >&2; exit 66; }
run_dir=${TESS_RUN_DIR:-runs/$app}
resume=()
if [ -n "${TESS_RESUME-auto}" ]; then resume=(--resume "${TESS_RESUME-auto}"); fi

export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export HDF5_USE_FILE_LOCKING=FALSE
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

# mpirun answers SIGINT/SIGTERM by killing the ranks a few seconds later, but forwards SIGUSR1
# (measured with Open MPI 4.1). So mpirun runs in its own session, out of reach of the terminal's Ctrl-C,
# and this script turns every stop request into one SIGUSR1 for it.
stop=0 child=""
# shellcheck disable=SC2317 # called by the trap
forward() {
  stop=1
  if [ -n "$child" ]; then kill -USR1 "$child" 2>/dev/null || true; fi
}
trap forward INT TERM USR1
echo "launch-mpirun: mpirun -n $np $exe --set run.dir=$run_dir ${resume[*]} $*" >&2
setsid mpirun -n "$np" "$exe" --set run.dir="$run_dir" "${resume[@]}" "$@" &
child=$!
[ "$stop" -eq 0 ] || kill -USR1 "$child" 2>/dev/null || true
rc=0
wait "$child" || rc=$? # 128+sig when a trap ran: wait again until mpirun has exited
while kill -0 "$child" 2>/dev/null; do rc=0; wait "$child" || rc=$?; done
rc=0
wait "$child" || rc=$? # bash keeps the exited child's status: the real one
if [ "$rc" -eq 75 ]; then
  echo "launch-mpirun: $app stopped after writing a checkpoint; run the same command again to resume" >&2
fi
exit "$rc"
