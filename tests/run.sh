#!/usr/bin/env bash
# tests/run.sh - the whole test suite from a clean clone: install missing dependencies (Slurm and
# clang included), configure the "ci" preset (warnings are errors, assertions on), build, build
# the fuzz targets of the "fuzz" preset (clang, libFuzzer + ASan/UBSan; their short runs
# fuzz_<target>_run are tests of the ci build, skipped where they were not built), run ctest on all
# cores. The slurm tests start a local one-node cluster (cluster/slurm1.sh) and stop it.
# usage: bash tests/run.sh [ctest args...]     e.g. bash tests/run.sh -L unit
#        TESS_TEST_EXCLUDE="slow|slurm" excludes labels unless ctest args are given (default: none).
set -euo pipefail
cd "$(dirname "$0")/.."
bash cluster/install-deps.sh --slurm --fuzz
# Whatever happens, no Slurm daemon or job of the test cluster outlives the run.
trap 'bash cluster/slurm1.sh down >/dev/null 2>&1 || true' EXIT

jobs=$(nproc)
# Machine facts for mpiexec, not project facts: 4-rank tests on 2 cores, and CI runs as root.
export OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 HDF5_USE_FILE_LOCKING=FALSE

cmake --preset ci
cmake --build --preset ci -j"$jobs"
cmake --preset fuzz
cmake --build --preset fuzz -j"$jobs" --target tess_fuzz # the fuzz programs only
if [ "$#" -gt 0 ]; then
  ctest --preset ci "$@"
elif [ -n "${TESS_TEST_EXCLUDE:-}" ]; then
  ctest --preset ci -LE "$TESS_TEST_EXCLUDE"
else
  ctest --preset ci
fi
