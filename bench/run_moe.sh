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
# The expert-GEMM share is taken in each process apart, step by step: the GEMM FLOPs of a step
# over its time, against the 1024^3 peak that bench_moe times right after that step (two calls
# each of OpenBLAS's sgemm and of the AVX-512 tiles the experts run on, the fastest of the four),
# and the process's share is the median over its steps. Pairing each step with a peak of the
# same minute matters on a shared VM, whose speed drifts by several percent within a minute and
# by 10-25% between processes: against the best of a few peak calls before and after the steps
# (the earlier definition; bench_moe still prints those peaks) twelve processes' shares spread
# over 6.6 points, paired over 2.7, the median 1 point lower (docs/benchmarks.md, "each step
# against the peak of the same minute"). The last column gives the GEMM rate and share of the
# median process, the lowest-highest share over the processes, and the range of the processes'
# median paired peaks. torch=0 leaves PyTorch out (its columns print "-"): a quick share-only
# run. Cost with the defaults:
# PyTorch's 16 processes ~8 min (wall clock, idle, 5bae5e2), Tessera's 24 processes ~2 min
# (40 processes, 5 per row: 3.3 min idle, adc9cfe): about 10 min in all.
# usage: bash bench/run_moe.sh [build_dir=build/ci] [reps=7] [clock=cpu|wall] [procs=3] [torch=1|0]
set -euo pipefail
cd "$(dirname "$0")/.."
bd=${1:-build/ci}
reps=${2:-7}
clock=${3:-cpu}
procs=${4:-3}
torch=${5:-1}
case $clock in
  cpu) key=step_cpu_s; pkey=step_peak_cpu_gflops; unit=CPU ;;
  wall) key=step_s; pkey=step_peak_gflops; unit=wall ;;
  *) echo "run_moe.sh: clock must be cpu or wall, got '$clock'" >&2; exit 2 ;;
esac
[[ $procs =~ ^[1-9][0-9]*$ ]] || { echo "run_moe.sh: procs must be >= 1, got '$procs'" >&2; exit 2; }
[[ $torch == 0 || $torch == 1 ]] || { echo "run_moe.sh: torch must be 0 or 1, got '$torch'" >&2; exit 2; }
py=/usr/bin/python3
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc --all) cores; $(date -u +%FT%TZ); $bd; $procs Tessera processes per row"
echo
echo "| shape (T, d, d_ff, E, k) | threads | losses | Tessera $unit s/step, median of $procs processes (fastest-slowest process) | PyTorch $unit s/step (min-max) | speed-up | Tessera tokens/s | expert-GEMM GFLOP/s (share of the peak timed after each step, median process, sgemm or tiles; lowest-highest share over the processes; peaks) |"
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
        flops=$(echo "$out" | awk '$1 == "gemm_flops_per_step" {print $2}')
        kind=$(echo "$out" | awk '$1 == "peak_kind" {print $2}')
        # per step: share against the peak timed right after it; the process: their median,
        # and the median of its paired peaks
        read -r share peak < <(echo "$out" | awk -v k=$key -v pk=$pkey -v f="$flops" '
          $1 == k { t[++n] = $2 } $1 == pk { q[++m] = $2 }
          function median(a, c,   i, j, x) { # insertion sort; the middle, the lower one for even c
            for (i = 2; i <= c; i++) {
              x = a[i]
              for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]
              a[j + 1] = x
            }
            return a[int((c + 1) / 2)] }
          END {
            for (i = 1; i <= n; i++) s[i] = 100 * f / t[i] / 1e9 / q[i]
            printf "%.6f %.2f\n", median(s, n), median(q, m) }')
        per+="$tm $share $peak $kind $flops"$'\n'
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
