#!/usr/bin/env bash
# jobs/quickstart.sh - the main job, from a fresh clone: install missing dependencies, build the
# release preset, run every available app on 2 ranks with its embedded defaults, and say what each
# did and where its results are.
#
# usage: bash jobs/quickstart.sh            (as root on Debian 12, or a user with sudo)
#   TESS_NPROCS=4 bash jobs/quickstart.sh   other rank counts (oversubscribed beyond the cores)
# Results: runs/quickstart/<app>/ (config.ini, metrics.csv, plots/, log).
# On a Slurm cluster use the per-app sbatch scripts in jobs/ instead.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash cluster/install-deps.sh

cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)"
bin=$root/build/release/apps

np=${TESS_NPROCS:-2}
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export HDF5_USE_FILE_LOCKING=FALSE
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

out=$root/runs/quickstart
mkdir -p "$out"
run_app() {   # run_app NAME EXE ARGS... : runs on $np ranks, logs to runs/quickstart/NAME/log
  local name=$1 exe=$2; shift 2
  rm -rf "${out:?}/$name" # a fresh demo run: apps refuse to start over an earlier run's checkpoints
  mkdir -p "$out/$name"
  echo "== $name: mpiexec -n $np $exe $* =="
  mpiexec -n "$np" "$exe" --set run.dir="$out/$name" "$@" 2>&1 | tee "$out/$name/log"
}

run_app tinylm "$bin/tinylm/tinylm"
run_app zo "$bin/zo/zo"
run_app moe "$bin/moe/moe" --set train.steps=100 --set train.eval_every=50
# fedkalter: 7 generated clients, Fed-Kalter, 20 rounds (docs/fedkalter.md for the TU settings)
run_app fedkalter "$bin/fedkalter/fedkalter" --set train.rounds=20
run_app calm_sim "$bin/calm/calm" --set run.mode=simulate
run_app calm "$bin/calm/calm" --set tok.steps=100 --set train.steps=100

echo
echo "quickstart: done. Results under $out:"
find "$out" -maxdepth 3 \( -name metrics.csv -o -name '*.png' -o -name config.ini \) | sort | sed 's/^/  /'
