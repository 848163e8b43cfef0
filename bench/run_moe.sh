#!/usr/bin/env bash
# bench/run_moe.sh - the MoE layer benchmark of docs/benchmarks.md ("MoE layer"): one layer forward
# + backward in Tessera (bench_moe) and in PyTorch (bench_moe_torch.py), alternating in the same
# run, at the issue's two shapes, without and with R_sp, at 1 and 2 threads. Process CPU time per
# step (robust to other jobs on the machine, not to their cache and memory traffic), median and
# spread (min-max) over `reps` steps; the expert-GEMM share is the GEMM FLOPs of a step over the
# step's CPU time, against the 1024^3 peak bench_moe measures in the same process, the better of
# OpenBLAS's sgemm and the AVX-512 tiles the experts run on (named in the column): at the median
# step, and in brackets at the slowest and the fastest step (the spread of the share).
# With clock=wall the tables give wall time per step and tokens/s instead (meaningful on an idle
# machine only: there 2 threads are a speed comparison, CPU time is not).
# usage: bash bench/run_moe.sh [build_dir=build/ci] [reps=7] [clock=cpu|wall]
set -euo pipefail
cd "$(dirname "$0")/.."
bd=${1:-build/ci}
reps=${2:-7}
clock=${3:-cpu}
case $clock in
  cpu) key=step_cpu_s; unit=CPU ;;
  wall) key=step_s; unit=wall ;;
  *) echo "run_moe.sh: clock must be cpu or wall, got '$clock'" >&2; exit 2 ;;
esac
py=/usr/bin/python3
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc --all) cores; $(date -u +%FT%TZ); $bd"
echo
echo "| shape (T, d, d_ff, E, k) | threads | losses | Tessera $unit s/step (min-max) | PyTorch $unit s/step (min-max) | speed-up | Tessera tokens/s | expert-GEMM GFLOP/s (share of the peak, sgemm or tiles; slowest-fastest step) |"
echo "|---|---:|---|---|---|---:|---:|---|"
stats() { sort -n | awk '{a[NR]=$1} END{printf "%.4f %.4f %.4f\n", a[int((NR+1)/2)], a[1], a[NR]}'; }
for shape in "2048 256 512 8 2" "4096 512 1024 16 2"; do
  set -- $shape
  args="--tokens $1 --dim $2 --hidden $3 --experts $4 --topk $5 --reps $reps --warmup 1"
  for th in 1 2; do
    for sp in 0 1; do
      out=$(OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=1 "$bd/bench/bench_moe" --threads "$th" $args --sp "$sp")
      read -r tm tlo thi < <(echo "$out" | awk -v k=$key '$1 == k {print $2}' | stats)
      peak=$(echo "$out" | awk -v k=$([ "$clock" = cpu ] && echo peak_cpu_gflops || echo peak_gflops) '$1 == k {print $2}')
      flops=$(echo "$out" | awk '$1 == "gemm_flops_per_step" {print $2}')
      kind=$(echo "$out" | awk '$1 == "peak_kind" {print $2}')
      read -r pm plo phi < <(OMP_NUM_THREADS=$th "$py" bench/bench_moe_torch.py --threads "$th" $args --sp "$sp" |
        awk -v k=$key '$1 == k {print $2}' | stats)
      awk -v s="$1, $2, $3, $4, $5" -v th="$th" -v sp="$sp" -v tm="$tm" -v tlo="$tlo" -v thi="$thi" \
          -v pm="$pm" -v plo="$plo" -v phi="$phi" -v peak="$peak" -v f="$flops" -v T="$1" \
          -v kind="$kind" 'BEGIN {
        g = f / tm / 1e9
        printf "| %s | %d | %s | %.4f (%.4f-%.4f) | %.4f (%.4f-%.4f) | %.2fx | %.0f | %.0f (%.0f%% of %.0f %s; %.0f-%.0f%%) |\n",
               s, th, sp ? "L_lb + R_sp" : "L_lb", tm, tlo, thi, pm, plo, phi, pm / tm, T / tm, g,
               100 * g / peak, peak, kind, 100 * f / thi / 1e9 / peak, 100 * f / tlo / 1e9 / peak }'
    done
  done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
