#!/usr/bin/env bash
# experiments/fedkalter/run.sh - the fedkalter protocol (docs/fedkalter.md, "Results"): one run per
# setting x method x seed of experiments/fedkalter/<setting>.ini on the TU datasets, one after the
# other, each recorded in OUT/commands.tsv (setting, method, seed, commit, exit code, seconds, the
# command) with its run directory OUT/<setting>-<method>-s<seed>/; experiments/fedkalter/table.py
# summarises them.
#
# usage: experiments/fedkalter/run.sh TU_DIR OUT_DIR [SETTING:METHOD ...]
#   SETTING: sm | sm-cv | sm-sn-cv (the .ini files here);  METHOD: a model.method value (selftrain, fedavg,
#   fedprox, gcfl, gcflplus, fedstar, fedkalter). Without SETTING:METHOD: every method on sm and
#   sm-cv. Seeds are the outer loop (seed 1 of every cell, then seed 2, ...), so the methods of a
#   seed finish together. Runs that finished (exit 0, marked by OUT/<run>.done) are skipped; a
#   run that was stopped resumes from its newest checkpoint (every 20 rounds), so the grid can be
#   filled over several sessions.
#   FK_SEEDS="1 2 3 4 5"  seeds;  FK_NP=1 ranks (results do not depend on it);
#   FK_BIN=build/release/apps/fedkalter/fedkalter (copied to OUT/bin/fedkalter-<commit> and run
#   from there, experiments/common.sh; the commit, "+dirty" with uncommitted changes in apps/ or
#   src/, is recorded);
#   FK_NICE=10 nice level; extra arguments for every run in FK_ARGS (e.g. "--set train.rounds=30").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 TU_DIR OUT_DIR [SETTING:METHOD ...]" >&2; exit 64; }
tu=$1 out=$2; shift 2
seeds=${FK_SEEDS:-1 2 3 4 5}
np=${FK_NP:-1}
bin=${FK_BIN:-$root/build/release/apps/fedkalter/fedkalter}
[ -x "$bin" ] || bin=$root/build/ci/apps/fedkalter/fedkalter
[ -f "$tu/MUTAG/MUTAG_A.txt" ] || {
  echo "run.sh: no $tu/MUTAG/MUTAG_A.txt (TU_DIR is the directory of the raw TU datasets)" >&2
  exit 66; }
methods="selftrain fedavg fedprox gcfl gcflplus fedstar fedkalter"
grid=("$@")
if [ ${#grid[@]} -eq 0 ]; then
  for s in sm sm-cv; do for m in $methods; do grid+=("$s:$m"); done; done
fi
for cell in "${grid[@]}"; do
  s=${cell%%:*} m=${cell##*:}
  [ -f "$root/experiments/fedkalter/$s.ini" ] || {
    echo "run.sh: unknown setting '$s' in '$cell' (sm | sm-cv)" >&2; exit 64; }
  case " $methods " in *" $m "*) ;; *)
    echo "run.sh: unknown method '$m' in '$cell' ($methods)" >&2; exit 64 ;; esac
done
# shellcheck source=experiments/common.sh
. "$root/experiments/common.sh"
exp_setup "$root" "$out" "$bin" fedkalter
log=$out/commands.tsv
[ -f "$log" ] || printf 'setting\tmethod\tseed\tcommit\texit\tseconds\tcommand\n' > "$log"
for seed in $seeds; do
  for cell in "${grid[@]}"; do
    s=${cell%%:*} m=${cell##*:} run=${cell%%:*}-${cell##*:}-s$seed
    dir=$out/$run
    [ -f "$dir.done" ] && { echo "== $run: done, skipped"; continue; }
    resume=()
    if compgen -G "$dir/checkpoints/*" > /dev/null; then resume=(--set ckpt.resume=auto)
    else rm -rf "$dir"; fi
    # shellcheck disable=SC2206
    cmd=(nice -n "${FK_NICE:-10}" mpiexec -n "$np" "$exp_bin" --config "$root/experiments/fedkalter/$s.ini"
         --set data.dir="$tu" --set model.method="$m" --set run.seed="$seed" --set run.dir="$dir"
         "${resume[@]}" ${FK_ARGS:-})
    echo "== $run: ${cmd[*]}"
    exp_run "$log" "$dir" "$out/$run.log" "$s" "$m" "$seed" "$exp_commit" -- "${cmd[@]}"
  done
done
