#!/usr/bin/env bash
# bench/run_dist.sh - the distributed-layer benchmarks of docs/benchmarks.md: collectives vs raw
# MPI (2 and 4 ranks), the data-parallel overlap (2 ranks), p?gemm vs ?gemm (1 and 2 ranks).
# Builds the release preset, prints markdown tables. Run it on an otherwise idle machine.
# usage: bash bench/run_dist.sh [coll_reps=20]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-20}
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target bench_coll bench_dp bench_pgemm >/dev/null
b=build/release/bench
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc --all) cores; $(date -u +%FT%TZ)"
for np in 2 4; do
  echo
  echo "#### Collectives, $np ranks (median of $reps, µs; overhead = ours/raw - 1)"
  echo
  echo "| op | bytes/rank | raw MPI µs | Tessera µs | overhead |"
  echo "|---|---:|---:|---:|---:|"
  mpiexec -n "$np" "$b/bench_coll" "$reps" | awk '$1 == "coll" {
    printf "| %s | %s | %s | %s | %+.1f%% |\n", $2, $3, $4, $5, $6 }'
done
echo
echo "#### Data-parallel step, 2 ranks (transformer, 4 layers, B=4 x T=256 per rank)"
echo
echo "| bucket KiB | grad MiB | sync alone ms | backward + blocking sync ms | backward overlapped with sync ms | hidden fraction |"
echo "|---:|---:|---:|---:|---:|---:|"
for kib in 256 1024 4096; do
  mpiexec -n 2 "$b/bench_dp" 4 10 "$kib" | awk '$1 == "dp" { v[$2] = $3 } END {
    printf "| %s | %s | %s | %s | %s | %s |\n", v["bucket_kib"], v["grad_mib"], v["sync_alone_ms"],
           v["step_serial_ms"], v["step_overlap_ms"], v["hidden_fraction"] }'
done
echo
echo "#### p?gemm (Tessera ScaLAPACK bridge) vs single-process ?gemm, n = 1536, block 64"
echo
for np in 1 2; do
  echo "- $np rank(s):"
  mpiexec -n "$np" "$b/bench_pgemm" 1536 5 64 | grep '^pgemm' | sed 's/^/  - /'
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
