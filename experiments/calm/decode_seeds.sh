#!/usr/bin/env bash
# experiments/calm/decode_seeds.sh - behaviour decoding on the simulator (docs/calm.md, "Behaviour
# decoding"): the small model of calm_smoke, 4 simulated animals x 1 session of 3000 frames,
# 50 tokenizer + 300 DAT steps, then decode.steps head steps with validation-based stopping
# (decode.val_every, decode.patience), the head (decode.readout, the default cosine learning-rate
# decay) against the ridge and MLP decoders on the same test frames. One
# run per cell x seed, one after the other, recorded in OUT/commands.tsv (cell, seed, exit code,
# seconds, the command) with the run directory OUT/<cell>-s<seed>/ (decode.csv, run.log, plots/).
#
# usage: experiments/calm/decode_seeds.sh OUT_DIR [CELL ...]
#   CELL: REGIME-SPLIT, REGIME frozen | finetune | scratch, SPLIT tail | animal (default: the
#   three regimes in the tail split, then scratch-animal). Finished runs (OUT/<cell>-s<seed>.done)
#   are skipped. CALM_SEEDS="1 2" seeds (the outer loop); CALM_NP=2; CALM_BIN (default
#   build/release/apps/calm/calm, copied to OUT/bin/calm-<commit> and run from there,
#   experiments/common.sh); CALM_NICE=0; CALM_DECODE_STEPS=800; CALM_VAL_EVERY=50;
#   CALM_PATIENCE=6 (validations without a new best before the head stops); CALM_READOUT=unit;
#   CALM_LR=1e-2 (decode.lr: the head's peak rate); CALM_BACKBONE_LR=0 (decode.backbone_lr: the
#   DAT's peak rate in finetune and scratch; 0: by regime, 1e-4 / 3e-3); CALM_WD=0.05
#   (decode.weight_decay: the head's); CALM_PROBE=false (decode.probe: the validation-slice
#   probes, decode_probe.csv).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1; shift
seeds=${CALM_SEEDS:-1 2}
np=${CALM_NP:-2}
bin=${CALM_BIN:-$root/build/release/apps/calm/calm}
[ -x "$bin" ] || bin=$root/build/ci/apps/calm/calm
common="--set run.mode=decode --set tok.width=32 --set tok.codes=32 --set tok.channels=16
  --set model.channels=32 --set model.ffn=64 --set tok.batch=16 --set train.batch=4
  --set sim.frames=3000 --set sim.animals=4 --set sim.sessions=1 --set model.max_neurons=80
  --set tok.steps=50 --set train.steps=300 --set decode.steps=${CALM_DECODE_STEPS:-800}
  --set decode.val_every=${CALM_VAL_EVERY:-50} --set decode.patience=${CALM_PATIENCE:-6}
  --set decode.readout=${CALM_READOUT:-unit} --set decode.lr=${CALM_LR:-1e-2}
  --set decode.backbone_lr=${CALM_BACKBONE_LR:-0} --set decode.weight_decay=${CALM_WD:-0.05}
  --set decode.probe=${CALM_PROBE:-false}"
cells=("$@")
[ ${#cells[@]} -gt 0 ] || cells=(scratch-tail frozen-tail finetune-tail scratch-animal)
# shellcheck source=experiments/common.sh
. "$root/experiments/common.sh"
exp_setup "$root" "$out" "$bin" calm
log=$out/commands.tsv
[ -f "$log" ] || printf 'cell\tseed\texit\tseconds\tcommand\n' > "$log"
for seed in $seeds; do
  for cell in "${cells[@]}"; do
    regime=${cell%%-*} split=${cell##*-}
    dir=$out/$cell-s$seed
    [ -f "$dir.done" ] && { echo "== $cell seed $seed: done, skipped"; continue; }
    rm -rf "$dir" "$dir.log"
    # shellcheck disable=SC2206
    cmd=(nice -n "${CALM_NICE:-0}" mpiexec -n "$np" "$exp_bin" $common --set decode.regime="$regime"
         --set train.split="$split" --set run.seed="$seed" --set run.dir="$dir")
    echo "== $cell seed $seed: ${cmd[*]}"
    exp_run "$log" "$dir" "$dir.log" "$cell" "$seed" -- "${cmd[@]}"
  done
done
