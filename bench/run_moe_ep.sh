#!/usr/bin/env bash
# bench/run_moe_ep.sh - the expert-parallel and aux-loss rows of docs/benchmarks.md ("MoE layer:
# expert parallelism, memory, R_sp + R_cp"), from bench_moe_ep at the issue's two shapes, one
# BLAS thread per rank:
#   1. EP = 2 vs EP = 1 on 2 ranks (the same tokens per rank, configurations alternating step by
#      step): the time of a step (forward, backward, gradient sync) in CPU seconds (mean over
#      the ranks) and wall seconds (the slowest rank), the layer time (forward + backward) and
#      the share of it in the expert exchanges at EP = 2, in CPU and in wall time (on a loaded
#      machine the wall time counts the ranks' descheduling: bench_moe_ep.c);
#   2. peak memory (VmHWM, the larger rank) against the floor computed from the shapes, EP = 1
#      and EP = 2 dropless, and EP = 2 with a capacity (factor 1.25, drop by score: the expert
#      side carved for E C rows instead of grown), each configuration alone in its run;
#   3. R_sp + R_cp on vs off, two MoE layers (R_cp couples them), alternating step by step (in
#      the order A B, B A, ...): on 1 rank, and on 2 ranks at EP = 2 (R_sp's co-located fast
#      path: only the z rows of pairs split across the ranks travel). The overhead is the median
#      of the per-step ratios - 1, with a distribution-free 95% confidence interval of that
#      median (the order statistics n/2 -+ 0.98 sqrt(n) of the n ratios: the interval holds the
#      true median with probability >= 95% whatever the distribution, if the steps are
#      independent), the interquartile range and the extremes of the ratios. 30 or more steps
#      give an interval about +-2 points wide on a quiet machine.
# Medians and (min-max) over `reps` steps; ratios are the
# median (min-max) of the per-step ratios of the alternating configurations.
# usage: bash bench/run_moe_ep.sh [build_dir=build/release] [reps=5]
# MOE_EP_TABLES="1 2 3" (default) selects the tables, e.g. "2" for the memory table alone;
# MOE_EP_RANKS="1 2" (default) the ranks of table 3, e.g. "2" for EP = 2 alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bd=${1:-build/release}
reps=${2:-5}
exe=$bd/bench/bench_moe_ep
# a rank waiting in MPI yields the core (on a machine shared with other processes, busy polling
# would count the peer's descheduled time as this rank's CPU time)
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 \
  OMP_NUM_THREADS=1
mpi=(mpiexec --bind-to none)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
# the issue's shapes, or MOE_EP_SHAPES="T d d_ff E k;..." (a quick check of this script)
IFS=';' read -ra shapes <<< "${MOE_EP_SHAPES:-2048 256 512 8 2;4096 512 1024 16 2}"
tables=" ${MOE_EP_TABLES:-1 2 3} "
want() { [[ "$tables" == *" $1 "* ]]; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc --all) cores; $(date -u +%FT%TZ); $bd;" \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
# med KEY < output: "median min max" of the KEY lines
med() { awk -v k="$1" '$1 == k {print $2}' | sort -n |
  awk '{a[NR]=$1} END{printf "%.4f %.4f %.4f\n", a[int((NR+1)/2)], a[1], a[NR]}'; }
val() { awk -v k="$1" '$1 == k {print $2}'; }
# ratio A B < output: "median min max" of B / A over the steps, paired in run order
ratio() { awk -v ka="$1" -v kb="$2" '$1 == ka {a[++na] = $2} $1 == kb {b[++nb] = $2}
  END {for (i = 1; i <= nb; i++) print b[i] / a[i]}' | sort -n |
  awk '{r[NR]=$1} END{printf "%.3f %.3f %.3f\n", r[int((NR+1)/2)], r[1], r[NR]}'; }

# ratio_ci A B < output: "n median ci_lo ci_hi q1 q3 min max" of the per-step ratios B / A: the
# 95% interval of the median from the order statistics floor(n/2 - 0.98 sqrt(n)) and
# ceil(n/2 + 1 + 0.98 sqrt(n)) (sign test; clipped to 1..n), quartiles at ranks n/4 and 3n/4
ratio_ci() { awk -v ka="$1" -v kb="$2" '$1 == ka {a[++na] = $2} $1 == kb {b[++nb] = $2}
  END {for (i = 1; i <= nb; i++) print b[i] / a[i]}' | sort -g |
  awk '{r[NR]=$1} END{n = NR; h = 0.98 * sqrt(n); lo = int(n / 2 - h); hi = int(n / 2 + 1 + h + 0.999)
    if (lo < 1) lo = 1; if (hi > n) hi = n; q1 = int((n + 3) / 4); q3 = int((3 * n + 3) / 4)
    printf "%d %.4f %.4f %.4f %.4f %.4f %.4f %.4f\n", n, r[int((n+1)/2)], r[lo], r[hi], r[q1], r[q3], r[1], r[n]}'; }

if want 1; then
echo
echo "| shape (T per rank, d, d_ff, E, k) | EP = 1 step CPU s | EP = 2 step CPU s | EP 2 / EP 1 step, CPU (min-max) | EP 2 / EP 1 step, wall (min-max) | EP = 2 layer CPU s | EP = 2 exchange CPU s | exchange share of the layer, CPU (wall) | gradient sync CPU s, EP 1 / EP 2 |"
echo "|---|---:|---:|---|---|---:|---:|---|---|"
for shape in "${shapes[@]}"; do
  set -- $shape
  out=$("${mpi[@]}" -n 2 "$exe" --compare 1 --tokens "$1" --dim "$2" --hidden "$3" --experts "$4" \
    --topk "$5" --reps "$reps" --warmup 1)
  read -r a _ _ < <(echo "$out" | med a_step_cpu_s)
  read -r b _ _ < <(echo "$out" | med b_step_cpu_s)
  read -r rc rclo rchi < <(echo "$out" | ratio a_step_cpu_s b_step_cpu_s)
  read -r rw rwlo rwhi < <(echo "$out" | ratio a_step_s b_step_s)
  read -r bl _ _ < <(echo "$out" | med b_layer_cpu_s)
  read -r bx _ _ < <(echo "$out" | med b_a2a_cpu_s)
  read -r sc sclo schi < <(echo "$out" | ratio b_layer_cpu_s b_a2a_cpu_s)
  read -r sw _ _ < <(echo "$out" | ratio b_layer_s b_a2a_s)
  read -r as _ _ < <(echo "$out" | med a_sync_cpu_s)
  read -r bs _ _ < <(echo "$out" | med b_sync_cpu_s)
  awk -v s="$1, $2, $3, $4, $5" -v a="$a" -v b="$b" -v rc="$rc" -v rclo="$rclo" -v rchi="$rchi" \
      -v rw="$rw" -v rwlo="$rwlo" -v rwhi="$rwhi" -v bl="$bl" -v bx="$bx" -v sc="$sc" \
      -v sclo="$sclo" -v schi="$schi" -v sw="$sw" -v as="$as" -v bs="$bs" 'BEGIN {
    printf "| %s | %.3f | %.3f | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.3f | %.4f | %.1f%% (%.0f-%.0f%%) (wall %.0f%%) | %.3f / %.3f |\n",
           s, a, b, rc, rclo, rchi, rw, rwlo, rwhi, bl, bx, 100 * sc, 100 * sclo, 100 * schi,
           100 * sw, as, bs }'
done
fi

if want 2; then
echo
echo "| shape (T per rank, d, d_ff, E, k) | EP | capacity factor | parameters per rank | VmHWM MiB | at start MiB | VmHWM - start MiB | floor MiB | (VmHWM - start) / floor | layer arena MiB | backward scratch MiB | expert side grown MiB |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for shape in "${shapes[@]}"; do
  set -- $shape
  for spec in "1 0" "2 0" "2 125"; do
    read -r ep cf <<< "$spec"
    out=$("${mpi[@]}" -n 2 "$exe" --compare 0 --ep "$ep" --capacity "$cf" --tokens "$1" \
      --dim "$2" --hidden "$3" --experts "$4" --topk "$5" --reps 2 --warmup 1)
    awk -v s="$1, $2, $3, $4, $5" -v ep="$ep" -v cf="$cf" -v hwm="$(echo "$out" | val vmhwm_kib)" \
        -v base="$(echo "$out" | val base_kib)" -v fl="$(echo "$out" | val floor_bytes)" \
        -v p="$(echo "$out" | val params)" -v act="$(echo "$out" | val act_bytes)" \
        -v sc="$(echo "$out" | val scratch_bytes)" -v gr="$(echo "$out" | val grown_bytes)" 'BEGIN {
      m = 1048576; c = cf > 0 ? sprintf("%.2f", cf / 100) : "none (dropless)"
      printf "| %s | %d | %s | %.2fM | %.0f | %.0f | %.0f | %.0f | %.2f | %.0f | %.0f | %.0f |\n",
             s, ep, c, p / 1e6, hwm / 1024, base / 1024, (hwm - base) / 1024, fl / m,
             (hwm - base) * 1024 / fl, act / m, sc / m, gr / m }'
  done
done
fi

if want 3; then
echo
echo "| shape (T per rank, d, d_ff, E, k), 2 MoE layers | ranks, EP | steps | L_lb step CPU s (min-max) | + R_sp + R_cp step CPU s (min-max) | overhead: median of the per-step ratios | its 95% CI | interquartile range | min to max |"
echo "|---|---|---:|---|---|---:|---|---|---|"
for shape in "${shapes[@]}"; do
  set -- $shape
  for np in ${MOE_EP_RANKS:-1 2}; do
    out=$("${mpi[@]}" -n "$np" "$exe" --compare 2 --layers 2 --ep "$np" --tokens "$1" --dim "$2" \
      --hidden "$3" --experts "$4" --topk "$5" --reps "$reps" --warmup 1)
    read -r a alo ahi < <(echo "$out" | med a_step_cpu_s)
    read -r b blo bhi < <(echo "$out" | med b_step_cpu_s)
    read -r n r clo chi q1 q3 rlo rhi < <(echo "$out" | ratio_ci a_step_cpu_s b_step_cpu_s)
    awk -v s="$1, $2, $3, $4, $5" -v np="$np" -v n="$n" -v a="$a" -v alo="$alo" -v ahi="$ahi" \
        -v b="$b" -v blo="$blo" -v bhi="$bhi" -v r="$r" -v clo="$clo" -v chi="$chi" -v q1="$q1" \
        -v q3="$q3" -v rlo="$rlo" -v rhi="$rhi" 'BEGIN {
      printf "| %s | %d, %d | %d | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %+.1f%% | %+.1f%% to %+.1f%% | %+.1f%% to %+.1f%% | %+.1f%% to %+.1f%% |\n",
             s, np, np, n, a, alo, ahi, b, blo, bhi, 100 * (r - 1), 100 * (clo - 1),
             100 * (chi - 1), 100 * (q1 - 1), 100 * (q3 - 1), 100 * (rlo - 1), 100 * (rhi - 1) }'
  done
done
fi
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
