#!/usr/bin/env bash
# bench/run_moe.sh - the MoE layer benchmark of docs/benchmarks.md ("MoE layer"): one layer forward
# + backward in Tessera (bench_moe) and in PyTorch (bench_moe_torch.py) in the same run, at the
# issue's two shapes, without and with R_sp, at 1 and 2 threads. Each row runs `procs` Tessera
# processes (default 3) and one PyTorch process, PyTorch after the first Tessera one, each
# process `reps` timed steps after 1 warm-up. Process CPU time per step (robust to other jobs on
# the machine, not to their cache and memory traffic) or, with clock=wall, wall time per step
# (meaningful on an idle machine only: there 2 threads are a speed comparison, CPU time is not).
# Tessera's step is the median of its processes' median steps (the faster middle one for an
# even count), in brackets the fastest and the slowest process median; PyTorch's is its
# process's median step (min-max over its steps); the speed-up and tokens/s use those medians.
# The expert-GEMM share is taken in each process apart: the GEMM FLOPs of a step over that
# process's median step, against the 1024^3 peak the same process measures before and after its
# steps (the better of the two; bench_moe takes the faster of OpenBLAS's sgemm and the AVX-512
# tiles the experts run on, named in the column), because the peak moves by 10-25% between
# processes and much less within one. The last column gives the GEMM rate and share of the
# median process, the lowest-highest share over the processes, and the peaks' range. torch=0
# leaves PyTorch out (its columns print "-"): a quick share-only run. Cost with the defaults:
# PyTorch's 16 processes ~8 min (wall clock, idle, 5bae5e2), Tessera's 48 processes 2-3 min
# (2 min with reps = 5 under load): about 11 min in all.
# usage: bash bench/run_moe.sh [build_dir=build/ci] [reps=7] [clock=cpu|wall] [procs=3] [torch=1|0]
set -euo pipefail
cd "$(dirname "$0")/.."
bd=${1:-build/ci}
reps=${2:-7}
clock=${3:-cpu}
procs=${4:-3}
torch=${5:-1}
case $clock in
  cpu) key=step_cpu_s; pkey=peak_cpu_gflops; unit=CPU ;;
  wall) key=step_s; pkey=peak_gflops; unit=wall ;;
  *) echo "run_moe.sh: clock must be cpu or wall, got '$clock'" >&2; exit 2 ;;
esac
[[ $procs =~ ^[1-9][0-9]*$ ]] || { echo "run_moe.sh: procs must be >= 1, got '$procs'" >&2; exit 2; }
[[ $torch == 0 || $torch == 1 ]] || { echo "run_moe.sh: torch must be 0 or 1, got '$torch'" >&2; exit 2; }
py=/usr/bin/python3
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc --all) cores; $(date -u +%FT%TZ); $bd; $procs Tessera processes per row"
echo
echo "| shape (T, d, d_ff, E, k) | threads | losses | Tessera $unit s/step, median of $procs processes (fastest-slowest process) | PyTorch $unit s/step (min-max) | speed-up | Tessera tokens/s | expert-GEMM GFLOP/s (share of the own process's peak, sgemm or tiles; lowest-highest share over the processes; peaks) |"
echo "|---|---:|---|---|---|---:|---:|---|"
stats() { sort -n | awk '{a[NR]=$1} END{printf "%.4f %.4f %.4f\n", a[int((NR+1)/2)], a[1], a[NR]}'; }
for shape in "2048 256 512 8 2" "4096 512 1024 16 2"; do
  set -- $shape
  args="--tokens $1 --dim $2 --hidden $3 --experts $4 --topk $5 --reps $reps --warmup 1"
  for th in 1 2; do
    for sp in 0 1; do
      per=""                 # one line per Tessera process: median step, its share, its peak
      pm=- plo=- phi=-
      for ((p = 0; p < procs; p++)); do
        out=$(OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=1 "$bd/bench/bench_moe" --threads "$th" $args --sp "$sp")
        read -r tm _ < <(echo "$out" | awk -v k=$key '$1 == k {print $2}' | stats)
        peak=$(echo "$out" | awk -v k=$pkey '$1 == k {print $2}')
        flops=$(echo "$out" | awk '$1 == "gemm_flops_per_step" {print $2}')
        kind=$(echo "$out" | awk '$1 == "peak_kind" {print $2}')
        per+="$tm $(awk -v f="$flops" -v t="$tm" -v pk="$peak" 'BEGIN {printf "%.6f %.2f", 100 * f / t / 1e9 / pk, pk}') $kind $flops"$'\n'
        if ((p == 0 && torch == 1)); then
          read -r pm plo phi < <(OMP_NUM_THREADS=$th "$py" bench/bench_moe_torch.py --threads "$th" $args --sp "$sp" |
            awk -v k=$key '$1 == k {print $2}' | stats)
        fi
      done
      printf '%s' "$per" | sort -n -k1,1 | awk -v s="$1, $2, $3, $4, $5" -v th="$th" -v sp="$sp" \
          -v pm="$pm" -v plo="$plo" -v phi="$phi" -v T="$1" '
        { t[NR] = $1; sh[NR] = $2; pk[NR] = $3; kinds[$4] = 1; f = $5 }
        END {
          m = int((NR + 1) / 2)              # the median process by step time
          slo = shi = sh[1]; klo = khi = pk[1]
          for (i = 2; i <= NR; i++) {
            if (sh[i] < slo) slo = sh[i]; if (sh[i] > shi) shi = sh[i]
            if (pk[i] < klo) klo = pk[i]; if (pk[i] > khi) khi = pk[i]
          }
          kind = ""; for (k in kinds) kind = kind (kind == "" ? "" : "/") k
          torch = pm == "-" ? "- | -" : sprintf("%.4f (%.4f-%.4f) | %.2fx", pm, plo, phi, pm / t[m])
          printf "| %s | %d | %s | %.4f (%.4f-%.4f) | %s | %.0f | %.0f (%.0f%%; %.0f-%.0f%%; %s %.0f-%.0f) |\n",
                 s, th, sp ? "L_lb + R_sp" : "L_lb", t[m], t[1], t[NR], torch, T / t[m],
                 f / t[m] / 1e9, sh[m], slo, shi, kind, klo, khi }'
    done
  done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
