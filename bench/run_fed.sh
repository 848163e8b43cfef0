#!/usr/bin/env bash
# bench/run_fed.sh FEDKALTER TU_DIR [NPS] - one federated round of fedkalter on SM (7 clients,
# d = 64, L = 3, batch 128) for FedStar and Fed-Kalter, against bench_fed_torch.py (the same
# network and loop in PyTorch, one thread) in the same run; then Fed-Kalter on each rank count of
# NPS (default "1 2 4"). Prints the tables of docs/benchmarks.md ("fedkalter").
#
# Per round, both sides: CPU seconds of the process(es) (on a shared machine the wall clock
# measures the other jobs too) and wall seconds. Tessera: the app runs 1 and 3 rounds with the
# same data and one evaluation each (train.eval_every above the rounds, the last round evaluates)
# and no checkpoint; (CPU of 3 rounds - CPU of 1 round) / 2 is the CPU per round, its timers
# "train" and "aggregate" (mean per round, max over ranks) the wall time, metrics.csv the bytes.
# PyTorch: rounds 2 and 3 of bench_fed_torch.py (round 1 warms up). One thread each
# (OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1)); run on an otherwise idle machine for
# numbers worth quoting, FEDKALTER from the release preset. Exit 77 without the SM datasets.
set -euo pipefail
exe=$1 tu=$2 nps=${3-1 2 4}
here=$(cd "$(dirname "$0")" && pwd)
for n in MUTAG BZR COX2 DHFR PTC_MR AIDS NCI1; do
  [ -f "$tu/$n/${n}_A.txt" ] || { echo "run_fed: $tu/$n/${n}_A.txt is missing: skipped"; exit 77; }
done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 HDF5_USE_FILE_LOCKING=FALSE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# app NP METHOD ROUNDS: run fedkalter, print "cpu_s" (user + sys of all ranks) and keep its log.
app() {
  local np=$1 method=$2 rounds=$3 dir=$work/$2_np$1_r$3
  /usr/bin/time -f "%U %S" -o "$dir.time" mpiexec -n "$np" "$exe" --set data.setting=SM \
    --set data.dir="$tu" --set model.method="$method" --set train.rounds="$rounds" \
    --set train.eval_every=1000 --set ckpt.at_end=false --set run.plots=false \
    --set run.seed=1 --set run.dir="$dir" >"$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  awk '{ print $1 + $2 }' "$dir.time"
}
# timer LOG NAME COL: seconds per call of a timer of the end-of-run table ("name calls min mean
# max", seconds in all over the run): COL 3 min, 4 mean, 5 max over ranks
timer() { awk -v t="$2" -v c="$3" '$1 == t { print $c / $2 }' "$1"; }

echo "| method | Tessera CPU s/round | PyTorch CPU s/round | CPU ratio | Tessera wall s/round (train + aggregate) | PyTorch wall s/round | aggregation share (Tessera) | bytes sent per round |"
echo "|---|---|---|---|---|---|---|---|"
for method in fedstar fedkalter; do
  c1=$(app 1 "$method" 1) c3=$(app 1 "$method" 3)
  log=$work/${method}_np1_r3.log
  tr=$(timer "$log" train 5) ag=$(timer "$log" aggregate 4)
  bytes=$(tail -n 1 "$work/${method}_np1_r3/metrics.csv" | cut -d, -f3)
  /usr/bin/python3 "$here/bench_fed_torch.py" --dir "$tu" --method "$method" \
    --rounds 3 --threads 1 >"$work/torch_$method.log"
  read -r pt_cpu pt_wall < <(awk '$1 == "round" && $2 >= 2 { c += $10; w += $8; n++ }
                                 END { printf "%.3f %.3f\n", c / n, w / n }' "$work/torch_$method.log")
  awk -v m="$method" -v c1="$c1" -v c3="$c3" -v tr="$tr" -v ag="$ag" -v pc="$pt_cpu" \
      -v pw="$pt_wall" -v b="$bytes" 'BEGIN {
    tc = (c3 - c1) / 2
    printf "| %s | %.2f | %.2f | %.2fx | %.2f (%.2f + %.4f) | %.2f | %.2f%% | %d |\n",
           m, tc, pc, pc / tc, tr + ag, tr, ag, pw, 100 * ag / (tr + ag), b }'
done

echo
echo "| ranks | Fed-Kalter CPU s/round (all ranks) | wall s/round: train (max over ranks) | aggregate (mean) | bytes sent per round |"
echo "|---|---|---|---|---|"
for np in $nps; do
  c1=$(app "$np" fedkalter 1) c3=$(app "$np" fedkalter 3)
  log=$work/fedkalter_np${np}_r3.log
  tr=$(timer "$log" train 5) ag=$(timer "$log" aggregate 4)
  bytes=$(tail -n 1 "$work/fedkalter_np${np}_r3/metrics.csv" | cut -d, -f3)
  awk -v np="$np" -v c1="$c1" -v c3="$c3" -v tr="$tr" -v ag="$ag" -v b="$bytes" \
    'BEGIN { printf "| %d | %.2f | %.2f | %.4f | %d |\n", np, (c3 - c1) / 2, tr, ag, b }'
done
