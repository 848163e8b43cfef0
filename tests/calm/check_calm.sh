#!/usr/bin/env bash
# check_calm.sh MPIEXEC CALM TESS-CKPT MODE - the calm app end to end (docs/calm.md).
#   dp:    the same tokenizer + DAT steps with the global batch on 1 rank and split over 2: every
#          parameter of both models within 1e-5 (tess-ckpt diff of the final checkpoints; the
#          gradient sums are reordered over ranks, so bitwise equality is not expected); the
#          token-id caches (tokens.h5) written by both runs identical.
#   resume: stopped after 3 of 6 steps on 1 rank (exit 75; tokenizer done, DAT half-way) and
#          resumed on 2 ranks: every parameter within 1e-5 of an uninterrupted 1-rank run, the
#          token ids read back from the cache the stopped run wrote (tokens.h5).
#   val:   validation-based stopping in the leave-one-animal-out split (train.val_every = 2,
#          animal 1 held out): validation.csv's best_val_loss is the running minimum of
#          val_loss (the next-patch MSE), the forecast uses the DAT of the step with the lowest one (named in run.log);
#          stopped after 5 steps on 1 rank and resumed on 2, the best-validated parameters
#          (dat/best), the best loss and step within 1e-5 and every validation loss within 1e-4
#          of an uninterrupted 1-rank run.
#   inputs DIR: the fixture of the calm_bad_* fail tests (tests/calm/CMakeLists.txt), written
#          with h5import: DIR/notrace.h5 (only /gcamp/trace_array_original), DIR/nan.h5 (NaN at
#          [5, 3]), DIR/short/rec.h5 (60 frames, fewer than one window).
#   ids:   unit and session ids out of range on resume: a run stopped on 1 rank, resumed on 2
#          ranks with more and with fewer simulated animals (other unit and session tables) -
#          refused with exit 65 naming dat.unit_emb and dat.sess_emb.
#   smoke: the spec's end-to-end smoke test: a short pretraining on simulated data on 2 ranks
#          (small model, 50 tokenizer + 300 DAT steps, the default heads) - the DAT's forecast of
#          the held-out tail beats copy-last (prediction score 1 - MSE/MSE_copy-last > 0.02 over
#          the 16 horizon frames; measured 0.07).
set -euo pipefail
mpiexec=$1 exe=$2 ckpt=$3 mode=$4; shift 4
fail() { echo "check_calm: FAIL: $*" >&2; exit 1; }
small=(--set run.plots=false --set tok.width=32 --set tok.codes=32 --set tok.channels=16
       --set model.channels=32 --set model.ffn=64 --set model.max_neurons=32 --set tok.batch=16
       --set train.batch=4 --set train.mlp_steps=100)
case "$mode" in
dp)
  rm -rf np1 np2
  steps=(--set tok.steps=6 --set train.steps=6 --set train.warmup=2)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=np1 >/dev/null
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=np2 >/dev/null
  a=$(ls np1/checkpoints/ckpt_*.h5 | tail -n 1) b=$(ls np2/checkpoints/ckpt_*.h5 | tail -n 1)
  "$mpiexec" -n 1 "$ckpt" diff "$a" "$b" > diff.txt || true
  cat diff.txt
  awk '/\/params\// && /max_abs/ { for (i = 1; i <= NF; i++) if ($i == "max_abs" && $(i + 1) > 1e-5) bad = 1 }
       END { exit bad }' diff.txt || fail "parameters differ by more than 1e-5 between 1 and 2 ranks"
  n=$(grep -c "params/" diff.txt || true)
  echo "1 rank x B vs 2 ranks x B/2: $n parameter tensors differ, all within 1e-5"
  h5diff np1/tokens.h5 np2/tokens.h5 /ids || fail "the token-id caches of 1 and 2 ranks differ"
  echo "token-id caches of 1 and 2 ranks identical"
  ;;
resume)
  rm -rf full part
  steps=(--set tok.steps=2 --set train.steps=4 --set train.warmup=0)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=full >/dev/null
  rc=0; "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=part --set run.stop_at=3 \
    >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75"
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=part --resume auto >/dev/null
  a=$(ls full/checkpoints/ckpt_*.h5 | tail -n 1) b=$(ls part/checkpoints/ckpt_*.h5 | tail -n 1)
  "$mpiexec" -n 1 "$ckpt" diff "$a" "$b" > diff.txt || true
  awk '/\/params\// && /max_abs/ { for (i = 1; i <= NF; i++) if ($i == "max_abs" && $(i + 1) > 1e-5) bad = 1 }
       END { exit bad }' diff.txt || { cat diff.txt; fail "resumed parameters differ by more than 1e-5"; }
  echo "stopped at step 3 on 1 rank, resumed on 2: parameters within 1e-5 of the uninterrupted run"
  grep -q "token ids: [0-9]* encoded once" part/run.log && grep -q "token ids: [0-9]* read from part/tokens.h5" part/run.log ||
    { cat part/run.log; fail "the resumed run did not read the token ids cached by the stopped run"; }
  echo "token ids encoded once by the stopped run, read back from part/tokens.h5 on resume"
  ;;
val)
  rm -rf vfull vpart
  steps=(--set tok.steps=2 --set train.steps=8 --set train.warmup=0 --set train.val_every=2
         --set train.split=animal --set train.mlp_steps=50)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=vfull >/dev/null
  awk -F, 'NR > 1 { m = (NR == 2 || $4 < m) ? $4 : m; if ($5 != m) bad = 1; if ($4 == m) s = $1 }
           END { print s; exit bad || NR != 5 }' vfull/validation.csv > best.txt ||
    { cat vfull/validation.csv; fail "best_val_loss is not the running minimum of 4 validations"; }
  best=$(( $(cat best.txt) - 2 ))  # driver step -> DAT step
  grep -q "validation: the DAT of step $best " vfull/run.log ||
    { grep validation vfull/run.log; fail "the forecast does not use the DAT of step $best"; }
  grep -q "forecast (animal split" vfull/run.log || fail "no forecast of the animal split"
  echo "validation every 2 DAT steps: the best at DAT step $best forecasts"
  rc=0; "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=vpart --set run.stop_at=5 \
    >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75"
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=vpart --resume auto >/dev/null
  a=$(ls vfull/checkpoints/ckpt_*.h5 | tail -n 1) b=$(ls vpart/checkpoints/ckpt_*.h5 | tail -n 1)
  "$mpiexec" -n 1 "$ckpt" diff "$a" "$b" > diff.txt || true
  "$mpiexec" -n 1 "$ckpt" ls "$a" > ls.txt
  grep -q "dat/best/" ls.txt || fail "no dat/best entries in the checkpoint"
  awk '(/\/best\// || /best_loss/ || /best_step/) && /max_abs/ { for (i = 1; i <= NF; i++) if ($i == "max_abs" && $(i + 1) > 1e-5) bad = 1 }
       END { exit bad }' diff.txt || { cat diff.txt; fail "resumed best-validated state differs by more than 1e-5"; }
  awk -F, 'NR == FNR { v[FNR] = $4; next } { d = $4 - v[FNR]; if (d > 1e-4 || d < -1e-4) bad = 1 }
             END { exit bad }' vfull/validation.csv vpart/validation.csv ||
    fail "the resumed run's validation losses differ from the uninterrupted run's"
  echo "stopped at step 5 on 1 rank, resumed on 2: the best-validated state within 1e-5"
  ;;
inputs)
  dir=$1
  rm -rf "$dir" && mkdir -p "$dir/short"
  write() {  # write FILE DATASET T N [NAN_T NAN_N]: a (T, N) f32 dataset of sines, one NaN if
             # given, and /timing/timestamp_confocal (T) f64 at 2 Hz
    awk -v T="$3" -v N="$4" -v nt="${5:--1}" -v nn="${6:--1}" 'BEGIN {
      for (t = 0; t < T; t++) { for (n = 0; n < N; n++)
        printf "%s ", (t == nt && n == nn) ? "nan" : sprintf("%.4f", sin(0.3 * t + n)); print "" } }' > data.txt
    printf 'PATH %s\nINPUT-CLASS TEXTFP\nRANK 2\nDIMENSION-SIZES %s %s\nOUTPUT-CLASS FP\nOUTPUT-SIZE 32\nOUTPUT-ARCHITECTURE IEEE\nOUTPUT-BYTE-ORDER LE\n' \
      "$2" "$3" "$4" > import.cfg
    h5import data.txt -c import.cfg -o "$1" >/dev/null || fail "h5import $1"
    awk -v T="$3" 'BEGIN { for (t = 0; t < T; t++) print t / 2 }' > time.txt
    printf 'PATH timing/timestamp_confocal\nINPUT-CLASS TEXTFP\nRANK 1\nDIMENSION-SIZES %s\nOUTPUT-CLASS FP\nOUTPUT-SIZE 64\nOUTPUT-ARCHITECTURE IEEE\nOUTPUT-BYTE-ORDER LE\n' \
      "$3" > import.cfg
    h5import time.txt -c import.cfg -o time.h5 >/dev/null || fail "h5import time.h5"
    h5copy -i time.h5 -o "$1" -s /timing -d /timing || fail "h5copy $1"
    rm time.h5
  }
  write "$dir/notrace.h5" gcamp/trace_array_original 300 5
  write "$dir/nan.h5" gcamp/trace_array 300 5 5 3
  write "$dir/short/rec.h5" gcamp/trace_array 60 5
  ls "$dir"
  ;;
ids)
  # unit and session ids out of range on resume: a run stopped on 1 rank (exit 75), resumed on
  # 2 ranks with other data - more animals (ids above the stored unit and session tables) and
  # fewer - refused by the driver with exit 65 naming the tables, on every rank
  rm -rf part wrong
  steps=(--set tok.steps=2 --set train.steps=4 --set train.warmup=0)
  rc=0; "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=part --set run.stop_at=3 \
    >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75"
  for case in "3 412 6" "1 106 2"; do
    read -r animals units sessions <<< "$case"
    rm -rf wrong && mkdir -p wrong/checkpoints && cp part/checkpoints/ckpt_*.h5 wrong/checkpoints/
    rc=0; "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=wrong \
      --set sim.animals="$animals" --resume auto > out.txt 2>&1 || rc=$?
    [ "$rc" -eq 65 ] || { cat out.txt; fail "resume with $animals animals exited $rc, expected 65"; }
    grep -q "dat.unit_emb has shape \[252,32\], expected \[$units,32\]" out.txt ||
      { cat out.txt; fail "$animals animals: no message naming the unit embedding"; }
    grep -q "dat.sess_emb has shape \[4,32\], expected \[$sessions,32\]" out.txt ||
      { cat out.txt; fail "$animals animals: no message naming the session embedding"; }
    echo "resume with $animals animals instead of 2: refused (exit 65), unit and session tables named"
  done
  ;;
smoke)
  rm -rf smoke
  "$mpiexec" -n 2 "$exe" "${small[@]}" --set tok.steps=50 --set train.steps=300 \
    --set run.dir=smoke > smoke.log 2>&1 || { cat smoke.log; fail "the run failed"; }
  grep "^forecast" smoke.log
  score=$(awk -F, 'NR > 1 { m += $2; c += $3 } END { printf "%.6f", 1 - m / c }' smoke/forecast.csv)
  echo "prediction score over the horizon: $score"
  awk -v s="$score" 'BEGIN { exit !(s > 0.02) }' || fail "the DAT does not beat copy-last (score $score)"
  ;;
esac
