#!/usr/bin/env bash
# bench/run_calm.sh - the calm benchmarks of docs/benchmarks.md ("calm"): one training step of the
# dual-axis transformer (DAT) and of the tokenizer at the spec's tiny and base sizes, Tessera
# (bench_calm) against PyTorch (bench_calm_torch.py, same architecture and shapes), one thread
# each, alternating whole processes in the same run (`rounds` rounds, who goes first alternating,
# `reps` timed steps after one warm-up per process). Process CPU time per step (robust to other
# jobs' CPU use, not to their cache and memory traffic): median and min-max over all timed steps
# of a side. MFU = the model FLOPs of a step (bench_calm: 3 x 2 x forward multiply-adds,
# attention scores in full) over the step's median CPU time, against the sgemm peak in CPU time
# that bench_calm measures in the same process (median over its runs). Then the all-reduce share:
# bench_calm on 2 ranks (mpiexec -n 2, each rank the same per-rank batch), wall time of the
# gradient sync (tess_gradsync_finish) over the wall time of the step, medians.
# usage: bash bench/run_calm.sh [build_dir=build/release] [reps=3] [rounds=2]
set -euo pipefail
cd "$(dirname "$0")/.."
bd=${1:-build/release}
reps=${2:-3}
rounds=${3:-2}
py=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
export OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc --all) cores; $(date -u +%FT%TZ); $bd;" \
     "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src apps bench || echo +dirty)"
echo
echo "| model | preset | batch | params | Tessera CPU s/step (min-max) | PyTorch CPU s/step (min-max) | speed-up | Tessera items/s | PyTorch items/s | Tessera GFLOP/s (MFU) | PyTorch GFLOP/s (MFU) |"
echo "|---|---|---:|---:|---|---|---:|---:|---:|---|---|"
stats() { sort -n | awk '{a[NR]=$1} END{printf "%.4f %.4f %.4f\n", a[int((NR+1)/2)], a[1], a[NR]}'; }
for what in "0 DAT windows" "1 tokenizer traces"; do
  set -- $what
  tok=$1 name=$2 unit=$3
  for base in 0 1; do
    if [ "$tok" = 1 ]; then batch=64; else batch=$([ "$base" = 1 ] && echo 1 || echo 4); fi
    args="--tok $tok --base $base --batch $batch --reps $reps --warmup 1 --threads 1"
    : > t.txt; : > p.txt; : > peak.txt
    for r in $(seq 1 "$rounds"); do
      for side in $( [ $((r % 2)) = 1 ] && echo "c py" || echo "py c"); do
        if [ "$side" = c ]; then
          out=$("$bd/bench/bench_calm" $args)
          echo "$out" | awk '$1 == "step_cpu_s" {print $2}' >> t.txt
          echo "$out" | awk '$1 == "peak_cpu_gflops" {print $2}' >> peak.txt
          flops=$(echo "$out" | awk '$1 == "flops_per_step" {print $2}')
          params=$(echo "$out" | awk '$1 == "params" {print $2}')
        else
          "$py" bench/bench_calm_torch.py $args | awk '$1 == "step_cpu_s" {print $2}' >> p.txt
        fi
      done
    done
    read -r tm tlo thi < <(stats < t.txt)
    read -r pm plo phi < <(stats < p.txt)
    peak=$(stats < peak.txt | cut -d' ' -f1)
    awk -v n="$name" -v pr="$([ "$base" = 1 ] && echo base || echo tiny)" -v b="$batch" -v u="$unit" \
        -v par="$params" -v tm="$tm" -v tlo="$tlo" -v thi="$thi" -v pm="$pm" -v plo="$plo" \
        -v phi="$phi" -v f="$flops" -v peak="$peak" 'BEGIN {
      gt = f / tm / 1e9; gp = f / pm / 1e9
      printf "| %s | %s | %d %s | %d | %.4f (%.4f-%.4f) | %.4f (%.4f-%.4f) | %.2fx | %.3g | %.3g | %.1f (%.0f%% of %.0f) | %.1f (%.0f%%) |\n",
             n, pr, b, u, par, tm, tlo, thi, pm, plo, phi, pm / tm, b / tm, b / pm, gt,
             100 * gt / peak, peak, gp, 100 * gp / peak }'
  done
done
rm -f t.txt p.txt peak.txt
echo
echo "All-reduce share of the step on 2 ranks (wall time, medians over $reps steps):"
echo
echo "| model | preset | batch per rank | gradient floats | step s | all-reduce s | share |"
echo "|---|---|---:|---:|---:|---:|---:|"
for c in "0 0 4" "0 1 1" "1 0 64"; do
  set -- $c
  out=$(mpiexec -n 2 "$bd/bench/bench_calm" --tok "$1" --base "$2" --batch "$3" --reps "$reps" --warmup 1)
  st=$(echo "$out" | awk '$1 == "step_s" {print $2}' | stats | cut -d' ' -f1)
  sy=$(echo "$out" | awk '$1 == "sync_s" {print $2}' | stats | cut -d' ' -f1)
  par=$(echo "$out" | awk '$1 == "params" {print $2}')
  awk -v n="$([ "$1" = 1 ] && echo tokenizer || echo DAT)" -v pr="$([ "$2" = 1 ] && echo base || echo tiny)" \
      -v b="$3" -v par="$par" -v st="$st" -v sy="$sy" 'BEGIN {
    printf "| %s | %s | %d | %d | %.4f | %.4f | %.1f%% |\n", n, pr, b, par, st, sy, 100 * sy / st }'
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
