#!/usr/bin/env bash
# experiments/calm/forecast_seeds.sh - the forecasting comparison against the strongest baseline
# (docs/calm.md, "Against the strongest baseline"): the small model of calm_smoke with 600 DAT
# steps, one run per row x seed, one after the other, each recorded in OUT/commands.tsv (row,
# seed, exit code, seconds, the command) with its run directory OUT/<row>-s<seed>/ (forecast.csv,
# validation.csv, run.log); experiments/calm/forecast_table.py summarises them.
#
# usage: experiments/calm/forecast_seeds.sh WORM_DIR OUT_DIR [ROW ...]
#   WORM_DIR: the flavell_nsm_5htr folder of the calcium data (holds swf415_no_id, swf702_with_id);
#   ROW: sim-tail | sim-animal | worm-tail | worm-animal | worm-block250 (default: all five; the
#   worm rows are skipped with a message when WORM_DIR is absent). Runs that finished (marked by
#   OUT/<row>-s<seed>.done) are skipped, so the grid can be filled over several sessions.
#   CALM_SEEDS="1234 7 99"  seeds (the outer loop: every row gets a seed before the next seed);
#   CALM_NP=2 ranks;  CALM_BIN=build/release/apps/calm/calm (copied to
#   OUT/bin/calm-<commit> and run from there);  CALM_NICE=0  nice level.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
worms=$1 out=$2; shift 2
seeds=${CALM_SEEDS:-1234 7 99}
np=${CALM_NP:-2}
bin=${CALM_BIN:-$root/build/release/apps/calm/calm}
[ -x "$bin" ] || bin=$root/build/ci/apps/calm/calm

small="--set tok.width=32 --set tok.codes=32 --set tok.channels=16 --set model.channels=32
  --set model.ffn=64 --set model.max_neurons=32 --set tok.batch=16 --set train.batch=4
  --set tok.steps=50 --set train.steps=600"
row_args() {
  local files="--set data.files=$worms/swf415_no_id,$worms/swf702_with_id"
  case $1 in
  sim-tail) echo "--set train.val_every=25 --set sim.animals=16" ;;
  sim-animal) echo "--set train.val_every=25 --set sim.animals=16 --set train.split=animal" ;;
  worm-tail) echo "--set train.val_every=25 $files" ;;
  worm-animal) echo "--set train.val_every=25 $files --set train.split=animal" ;;
  # a 250-frame block's validation slice (35 frames) holds no window: no val_every here
  worm-block250) echo "$files --set train.split=block --set train.block=250" ;;
  *) echo "forecast_seeds.sh: unknown row '$1'" >&2; return 64 ;;
  esac
}

rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(sim-tail sim-animal worm-tail worm-animal worm-block250)
# shellcheck source=experiments/common.sh
. "$root/experiments/common.sh"
exp_setup "$root" "$out" "$bin" calm
log=$out/commands.tsv
[ -f "$log" ] || printf 'row\tseed\texit\tseconds\tcommand\n' > "$log"
for seed in $seeds; do
  for row in "${rows[@]}"; do
    dir=$out/$row-s$seed
    [ -f "$dir.done" ] && { echo "== $row seed $seed: done, skipped"; continue; }
    if [ "${row#worm}" != "$row" ] && [ ! -d "$worms/swf415_no_id" ]; then
      echo "== $row seed $seed: no worm data in $worms, skipped"; continue
    fi
    rargs=$(row_args "$row")
    rm -rf "$dir" "$dir.log"
    # shellcheck disable=SC2206
    cmd=(nice -n "${CALM_NICE:-0}" mpiexec -n "$np" "$exp_bin" $small $rargs
         --set run.seed="$seed" --set run.dir="$dir")
    echo "== $row seed $seed: ${cmd[*]}"
    exp_run "$log" "$dir" "$dir.log" "$row" "$seed" -- "${cmd[@]}"
  done
done
