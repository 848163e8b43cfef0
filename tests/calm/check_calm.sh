#!/usr/bin/env bash
# check_calm.sh MPIEXEC CALM TESS-CKPT MODE - the calm app end to end (docs/calm.md).
#   dp:    the same tokenizer + DAT steps with the global batch on 1 rank and split over 2: every
#          parameter of both models within 1e-5 (tess-ckpt diff of the final checkpoints; the
#          gradient sums are reordered over ranks, so bitwise equality is not expected); the
#          token-id caches (tokens.h5) written by both runs equal but for near-ties (at most 1 in
#          10^4 ids).
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
#   codes: the codebook's upkeep. (1) The VQ quantiser with the EMA codebook and dead-code
#          restart (tok.restart = 20 steps) trains on simulated data on 2 ranks: the
#          reconstruction MSE falls and the code perplexity of the hard assignments of the last
#          logged step is above K/2 = 16 (measured 24.3 of 32; 15.3 without the restart) and
#          above the first logged one; codes were restarted. (2) Rank-count independence: with
#          both quantisers and restarts every 2 steps, 1 rank x B and 2 ranks x B/2 restart the
#          same codes at the same steps (tokenizer.csv's codes_used and restarts columns equal)
#          and end with every tokenizer parameter and EMA state within 1e-5.
#   tiny:  model.preset = tiny (the spec's sizes) trains 2 tokenizer + 2 DAT steps on 2 ranks and
#          forecasts; the log names the spec's tiny sizes (K 256, M 16, d 64 x 2 layers, FFN 256,
#          N_max 64; 167,104 DAT parameters without the unit embeddings for one session, the
#          spec's ~0.15 M).
#   base:  model.preset = base passes --check on 1 rank (one window per forward: 2.3 GB) with the
#          spec's base sizes (K 512, M 32, d 256 x 6 layers, 8 heads, FFN 1024, N_max 256;
#          6,577,920 DAT parameters, the spec's ~6.5 M).
#   smoke: the spec's end-to-end smoke test: a short pretraining on simulated data on 2 ranks
#          (small model, 50 tokenizer + 300 DAT steps, the default heads) - the DAT's forecast of
#          the held-out tail beats copy-last (prediction score 1 - MSE/MSE_copy-last > 0.02 over
#          the 16 horizon frames; measured 0.07).
#   decode: the spec's decoding smoke test: run.mode=decode on simulated data on 2 ranks (2
#          animals x 1 session of 3000 frames, small model, 50 tokenizer steps, the scratch regime
#          with 600 head steps and the validation-based stop every 50) - the decoding head's
#          velocity R^2 on the held-out tail, mean over the sessions, is above 0.5 (measured
#          0.651 with the head at 1e-2 and the DAT at 3e-3, the head of step 200; 0.689 with
#          both at 3e-3, the head of step 400; 0.594 with the attention readout
#          at aa469f9; ridge 0.642, MLP 0.641 on the same frames). Until
#          aa469f9 it scored the last of 300 head steps, which sits where the loss has just left
#          its plateau and is still noisy: 0.628 at c6c40f2, 0.512 at 79b7253, 0.509 at aa469f9
#          with ridge at 0.642 throughout (docs/calm.md, "Behaviour decoding").
#   adapt: the embedding-only adaptation stage in the animal split, on 3 generated recordings
#          (h5import), 2 tokenizer + 4 DAT + 6 adaptation steps with validation every 2:
#          (1) every DAT parameter but the two embeddings bitwise unchanged by the stage, and of
#          those only the held-out animal's rows changed, every one of them; (2) the held-out
#          animal's test frames set to 1e4: the forecast changes, every trained state is bitwise
#          the same; (3) stopped after 3 adaptation steps and resumed (2 ranks): the state,
#          forecast.csv and the validation losses bitwise the same; (4) 1 rank x B vs 2 ranks x
#          B/2: parameters within 1e-5; forecast.csv has the zero-shot columns.
#   decode_dp: tokenizer + DAT + decoding-head steps (finetune regime: both the head and the DAT
#          train) with the global batch on 1 rank and split over 2: every parameter within 1e-5.
#   decode_patience: the decode stage's early stop (frozen regime, 2 simulated animals, 60 head
#          steps at decode.lr 0.1, validation every step, decode.patience = 2): the run stops
#          before its last step (run.log: "early stop at head step S"), decode_validation.csv
#          ends at S with exactly 2 validations after its minimum B = S - 2, the head of step B
#          scores and decode.csv has its results; stopped one step before S on 1 rank and
#          resumed on 2 ranks, the run stops at the same step S with the same best head. The
#          first run also writes decode.probe's decode_probe.csv (6 probes x 2 sessions + means).
#   decode_animal: leave-one-animal-out decoding (train.split = animal, 3 simulated animals,
#          animal 2 held out; finetune regime, decode.val_every = 2 of 8 head steps): decode.csv
#          scores the held-out animal's session alone (the head and the baselines fitted on the
#          other two); decode_validation.csv's best_val_loss is the running minimum of val_loss
#          and the head of that step scores (run.log); stopped after 9 steps (in the decode
#          stage) on 1 rank and resumed on 2: the best-validated head and DAT (dec/best,
#          dec/best_dat), the best loss and step within 1e-5 of an uninterrupted 1-rank run.
set -euo pipefail
mpiexec=$1 exe=$2 ckpt=$3 mode=$4; shift 4
fail() { echo "check_calm: FAIL: $*" >&2; exit 1; }
# last_ckpt DIR: the newest checkpoint of the run directory DIR
last_ckpt() { ls "$1"/checkpoints/ckpt_*.h5 | tail -n 1; }
# ckpt_within A B COND MESSAGE: tess-ckpt diff of the checkpoints A and B into diff.txt; fails
# with MESSAGE (and the diff) unless every entry on a line matching the awk condition COND is
# within 1e-5 (max_abs) - the tolerance of every rank-count and resume comparison here
ckpt_within() {
  "$mpiexec" -n 1 "$ckpt" diff "$1" "$2" > diff.txt || true
  awk "($3) && /max_abs/ { for (i = 1; i <= NF; i++) if (\$i == \"max_abs\" && \$(i + 1) > 1e-5) bad = 1 }
       END { exit bad }" diff.txt || { cat diff.txt; fail "$4"; }
}
small=(--set run.plots=false --set tok.width=32 --set tok.codes=32 --set tok.channels=16
       --set model.channels=32 --set model.ffn=64 --set model.max_neurons=32 --set tok.batch=16
       --set train.batch=4 --set train.mlp_steps=100)
# h5rec FILE DATASET T N: data.txt (T lines of N values) into FILE as the (T, N) f32 DATASET,
# with /timing/timestamp_confocal (T) f64 at 2 Hz (the layout tess_traces_import_flavell reads)
h5rec() {
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
case "$mode" in
adapt)
  # 3 generated recordings (animals) of 600 frames x 6 neurons, the last held out: units 12-17,
  # session 2; its training part is frames [0, 420) (validation slice [336, 420)), its test part
  # [420, 600). A poisoned copy has the held-out animal's test frames at 1e4.
  rm -rf rec poison ad1 ad2 adp adr && mkdir -p rec poison
  for a in 0 1 2; do
    for dir in rec poison; do
      awk -v a="$a" -v pt=$([ "$dir" = poison ] && [ "$a" = 2 ] && echo 420 || echo 600) 'BEGIN {
        for (t = 0; t < 600; t++) { for (n = 0; n < 6; n++) {
          v = sin((0.2 + 0.03 * n + 0.05 * a) * t + n) + 0.5 * sin(0.05 * t + a + 2 * n)
          v += 0.3 * cos(1.3 * t * (n + 1))
          printf "%s ", (t >= pt ? "1e4" : sprintf("%.5f", v)) }
          print "" } }' > data.txt
      h5rec "$dir/rec$a.h5" gcamp/trace_array 600 6
    done
  done
  steps=(--set data.files=rec --set tok.steps=2 --set train.steps=4 --set train.warmup=0
         --set train.split=animal --set train.mlp_steps=20 --set adapt.steps=6 --set adapt.batch=4
         --set adapt.val_every=2)
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=ad2 --set ckpt.every=6 > ad2.log 2>&1 ||
    { cat ad2.log; fail "the adaptation run failed"; }
  grep "^forecast of the held-out" ad2.log || fail "no zero-shot / adapted forecast in the log"
  head -n 1 ad2/forecast.csv | grep -q "mse_zero_shot,score_zero_shot$" || fail "forecast.csv has no zero-shot columns"
  # (1) frozen: from the end of the DAT stage (step 6) to the end, every DAT entry but the two
  # embeddings bitwise unchanged, and of those only the held-out animal's rows, every one of them
  dat=ad2/checkpoints/ckpt_00000006.h5 end=ad2/checkpoints/ckpt_00000012.h5
  "$mpiexec" -n 1 "$ckpt" diff "$dat" "$end" > diff.txt || true
  grep "/dat/params/" diff.txt | grep -v -e "dat.unit_emb " -e "dat.sess_emb " &&
    fail "frozen DAT parameters changed in the adaptation stage"
  rows() {  # rows DATASET: the rows of DATASET's differing elements between the two checkpoints
    { h5diff -r "$dat" "$end" "$1" || true; } | awk '$1 == "[" { print $2 }' | sort -n | uniq -c
  }
  rows /dat/params/dat.unit_emb > unit.txt
  rows /dat/params/dat.sess_emb > sess.txt
  awk '$2 < 12 || $2 > 17 || $1 != 32 { bad = 1 } END { exit bad || NR != 6 }' unit.txt ||
    { cat unit.txt; fail "unit embedding rows other than the held-out animal's changed, or one of its rows did not"; }
  awk '$2 != 2 || $1 != 32 { bad = 1 } END { exit bad || NR != 1 }' sess.txt ||
    { cat sess.txt; fail "session embedding rows other than the held-out session's changed, or it did not"; }
  echo "adaptation: the held-out animal's 6 unit rows and its session row changed, every other DAT parameter bitwise unchanged"
  # (2) the held-out animal's test frames poisoned: the stage's result bitwise the same
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set data.files=poison --set run.dir=adp > adp.log 2>&1 ||
    { cat adp.log; fail "the poisoned run failed"; }
  cmp -s ad2/forecast.csv adp/forecast.csv && fail "the poisoned test frames do not reach the forecast"
  "$mpiexec" -n 1 "$ckpt" diff "$end" adp/checkpoints/ckpt_00000012.h5 > diff.txt || true
  grep -E "^  /(tok|dat|adapt)/" diff.txt && fail "poisoned test frames of the held-out animal change the trained state"
  echo "test frames of the held-out animal at 1e4: every tokenizer, DAT and adaptation state bitwise the same"
  # (3) stopped mid-stage (step 9: 3 of 6 adaptation steps) and resumed: bitwise the same
  rc=0; "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=adr --set run.stop_at=9 \
    >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75"
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=adr --resume auto >/dev/null 2>&1 ||
    fail "the resumed run failed"
  "$mpiexec" -n 1 "$ckpt" diff "$end" adr/checkpoints/ckpt_00000012.h5 > diff.txt || true
  grep -E "^  /(tok|dat|adapt)/" diff.txt && fail "the resumed adaptation differs from the uninterrupted one"
  cmp ad2/forecast.csv adr/forecast.csv || fail "the resumed run's forecast differs"
  diff <(cut -d, -f1-5 ad2/adapt_validation.csv) <(cut -d, -f1-5 adr/adapt_validation.csv) ||
    fail "the resumed run's adaptation validation losses differ"
  echo "stopped after 3 of 6 adaptation steps and resumed: state and forecast bitwise the same"
  # (4) 1 rank x B vs 2 ranks x B/2: every parameter and the adaptation state within 1e-5
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=ad1 >/dev/null 2>&1 || fail "the 1-rank run failed"
  "$mpiexec" -n 1 "$ckpt" ls "$end" > ls.txt
  grep -q "adapt/start/" ls.txt && grep -q "adapt/best/" ls.txt && grep -q "adapt/optim/m/" ls.txt ||
    fail "no adaptation state in the checkpoints"
  ckpt_within ad1/checkpoints/ckpt_00000012.h5 "$end" '/\/params\// || /\/adapt\/(start|best)\//' \
    "1 and 2 ranks differ by more than 1e-5"
  echo "adaptation, 1 rank x B vs 2 ranks x B/2: parameters within 1e-5"
  ;;
decode_dp)
  rm -rf dnp1 dnp2
  steps=(--set run.mode=decode --set decode.regime=finetune --set tok.steps=4 --set train.steps=4
         --set train.warmup=2 --set decode.steps=6 --set decode.batch=4)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=dnp1 >/dev/null
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=dnp2 >/dev/null
  ckpt_within "$(last_ckpt dnp1)" "$(last_ckpt dnp2)" '/\/params\//' \
    "parameters differ by more than 1e-5 between 1 and 2 ranks"
  grep -q "dec/params/dec.unit_gain" diff.txt || { cat diff.txt; fail "no decoding head (unit readout) in the checkpoints"; }
  echo "decode stage, 1 rank x B vs 2 ranks x B/2: $(grep -c "params/" diff.txt) parameter tensors within 1e-5"
  ;;
decode_animal)
  rm -rf afull apart
  steps=(--set run.mode=decode --set decode.regime=finetune --set train.split=animal
         --set sim.animals=3 --set sim.sessions=1 --set sim.frames=400 --set sim.neurons_min=20
         --set sim.neurons_max=30 --set tok.steps=2 --set train.steps=4
         --set train.warmup=1 --set decode.steps=8 --set decode.batch=4 --set decode.val_every=2
         --set decode.mlp_steps=20)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=afull > afull.log 2>&1 ||
    { cat afull.log; fail "the animal-split decode run failed"; }
  awk -F, 'NR > 1 && $1 >= 0 { print $1 }' afull/decode.csv | sort -u > scored.txt
  [ "$(cat scored.txt)" = "2" ] || { cat afull/decode.csv; fail "decode.csv scores sessions $(tr '\n' ' ' < scored.txt), expected the held-out 2 alone"; }
  grep -q "^decode (animal split, test frames, mean over 1 sessions), ridge on population summaries" afull.log ||
    fail "no pooled baseline in the log"
  awk -F, 'NR > 1 { m = (NR == 2 || $2 < m) ? $2 : m; if ($3 != m) bad = 1; if ($2 == m) s = $1 }
           END { print s; exit bad || NR != 5 }' afull/decode_validation.csv > best.txt ||
    { cat afull/decode_validation.csv; fail "best_val_loss is not the running minimum of 4 validations"; }
  best=$(( $(cat best.txt) - 6 ))  # driver step -> head step (2 tokenizer + 4 DAT steps first)
  grep -q "decode: validation: the head of step $best " afull.log ||
    { grep validation afull.log; fail "the scored head is not the one of step $best"; }
  echo "held-out animal 2 scored alone; validation every 2 head steps: the head of step $best scores"
  rc=0; "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=apart --set run.stop_at=9 \
    >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75"
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=apart --resume auto >/dev/null
  ckpt_within "$(last_ckpt afull)" "$(last_ckpt apart)" '/dec\/best/' \
    "resumed best-validated head differs by more than 1e-5"
  grep -q "dec/best/" diff.txt && grep -q "dec/best_dat/" diff.txt ||
    { cat diff.txt; fail "no dec/best and dec/best_dat entries in the checkpoints"; }
  echo "stopped at step 9 on 1 rank, resumed on 2: the best-validated head and DAT within 1e-5"
  ;;
decode_patience)
  rm -rf pfull ppart
  steps=(--set run.mode=decode --set decode.regime=frozen --set sim.animals=2 --set sim.sessions=1
         --set sim.frames=600 --set sim.neurons_min=20 --set sim.neurons_max=30 --set tok.steps=2
         --set train.steps=4 --set train.warmup=1 --set decode.steps=60 --set decode.batch=4
         --set decode.lr=0.1 --set decode.val_every=1 --set decode.patience=2
         --set decode.mlp_steps=20)
  pre=6 # tokenizer + DAT steps before the head's: driver step = pre + head step
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set decode.probe=true --set run.dir=pfull \
    > pfull.log 2>&1 || { cat pfull.log; fail "the decode run with decode.patience failed"; }
  # decode.probe: 6 probes x (2 sessions + their mean), the ridge on the raw traces scored
  awk -F, 'NR > 1 { n++ } $1 == -1 && $2 == 0 && $3 == 2 && $4 + 0 == $4 && $4 < 1 { ok = 1 }
           END { exit !(ok && n == 18) }' pfull/decode_probe.csv ||
    { cat pfull/decode_probe.csv; fail "decode_probe.csv lacks its 18 rows or the raw-trace ridge's R^2"; }
  stop=$(sed -n 's/.*decode: early stop at head step \([0-9]*\) of 60:.*/\1/p' pfull.log)
  [ -n "$stop" ] && [ "$stop" -lt 60 ] || { grep decode: pfull.log; fail "no early stop before head step 60"; }
  # the validations: the last at the stop, its minimum exactly patience x val_every = 2 before
  awk -F, -v last=$((pre + stop)) 'NR > 1 { n++; if (n == 1 || $2 < m) { m = $2; s = $1 } e = $1 }
       END { print s - '"$pre"'; exit e != last || last - s != 2 }' pfull/decode_validation.csv > best.txt ||
    { cat pfull/decode_validation.csv; fail "the validations do not end 2 after their minimum at head step $stop"; }
  best=$(cat best.txt)
  grep -q "decode: validation: the head of step $best " pfull.log ||
    { grep decode: pfull.log; fail "the scored head is not the best-validated one of step $best"; }
  awk -F, '$1 == -1 && $2 == 0 { ok = 1 } END { exit !ok }' pfull/decode.csv ||
    { cat pfull/decode.csv; fail "decode.csv has no results of the head"; }
  echo "early stop at head step $stop of 60; the head of step $best (best validation) scores"
  rc=0; "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=ppart \
    --set run.stop_at=$((pre + stop - 1)) >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || fail "the run stopped at driver step $((pre + stop - 1)) exited $rc, expected 75"
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=ppart --resume auto > ppart.log 2>&1 ||
    { cat ppart.log; fail "the resumed run failed"; }
  grep -q "decode: early stop at head step $stop of 60" ppart.log &&
    grep -q "decode: validation: the head of step $best " ppart.log ||
    { grep decode: ppart.log; fail "the resumed run did not stop at head step $stop with the head of step $best"; }
  echo "stopped at driver step $((pre + stop - 1)) on 1 rank, resumed on 2: the same early stop and head"
  ;;
decode)
  rm -rf decode
  "$mpiexec" -n 2 "$exe" "${small[@]}" --set run.mode=decode --set decode.regime=scratch \
    --set sim.frames=3000 --set sim.animals=2 --set sim.sessions=1 --set tok.steps=50 \
    --set decode.steps=600 --set decode.val_every=50 --set run.dir=decode > decode.log 2>&1 ||
    { cat decode.log; fail "the run failed"; }
  grep "^decode (tail split, test frames" decode.log || fail "no decoding result line in decode.log"
  grep "decode: validation: the head of step" decode/run.log ||
    fail "no head chosen by the validation loss in decode/run.log"
  r2=$(awk -F, '$1 == -1 && $2 == 0 { print $3 }' decode/decode.csv)
  ridge=$(awk -F, '$1 == -1 && $2 == 1 { print $3 }' decode/decode.csv)
  echo "velocity R^2 on the test frames: head $r2, ridge $ridge"
  awk -v r="$r2" 'BEGIN { exit !(r > 0.5) }' || fail "the decoding head's velocity R^2 $r2 is not above 0.5"
  ;;
dp)
  rm -rf np1 np2
  steps=(--set tok.steps=6 --set train.steps=6 --set train.warmup=2)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=np1 >/dev/null
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=np2 >/dev/null
  ckpt_within "$(last_ckpt np1)" "$(last_ckpt np2)" '/\/params\//' \
    "parameters differ by more than 1e-5 between 1 and 2 ranks"
  cat diff.txt
  n=$(grep -c "params/" diff.txt || true)
  echo "1 rank x B vs 2 ranks x B/2: $n parameter tensors differ, all within 1e-5"
  # the tokenizers agree to ~1e-7, not bitwise (sums over ranks), so an id whose two best codes
  # tie to that level may flip: at most 1 in 10^4 ids may differ (measured 0 or 1 of 483,840)
  nd=$(h5diff np1/tokens.h5 np2/tokens.h5 /ids | awk '/differences found/ { print $1 }' || true)
  total=$(h5ls np1/tokens.h5 | awk '$1 == "ids" { gsub(/[{}]/, "", $3); print $3 }')
  nd=${nd:-0}
  [ "$nd" -le $((total / 10000)) ] || fail "$nd of $total token ids differ between 1 and 2 ranks"
  echo "token-id caches of 1 and 2 ranks: $nd of $total ids differ (near-ties)"
  ;;
resume)
  rm -rf full part
  steps=(--set tok.steps=2 --set train.steps=4 --set train.warmup=0)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=full >/dev/null
  rc=0; "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=part --set run.stop_at=3 \
    >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75"
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=part --resume auto >/dev/null
  ckpt_within "$(last_ckpt full)" "$(last_ckpt part)" '/\/params\//' \
    "resumed parameters differ by more than 1e-5"
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
  "$mpiexec" -n 1 "$ckpt" ls "$(last_ckpt vfull)" > ls.txt
  grep -q "dat/best/" ls.txt || fail "no dat/best entries in the checkpoint"
  ckpt_within "$(last_ckpt vfull)" "$(last_ckpt vpart)" '/\/best\// || /best_loss/ || /best_step/' \
    "resumed best-validated state differs by more than 1e-5"
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
    h5rec "$1" "$2" "$3" "$4"
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
codes)
  rm -rf vq && "$mpiexec" -n 2 "$exe" "${small[@]}" --set tok.quantizer=vq --set tok.restart=20 \
    --set tok.steps=150 --set train.steps=1 --set train.warmup=0 --set run.dir=vq > vq.log 2>&1 ||
    { cat vq.log; fail "the VQ run failed"; }
  cat vq/tokenizer.csv
  awk -F, 'NR == 2 { m0 = $3; p0 = $5 } NR > 1 { m = $3; p = $5; r = $7 }
    END { printf "VQ: MSE %.3f -> %.3f, code perplexity %.1f -> %.1f of 32, %d codes restarted\n", m0, m, p0, p, r
          exit !(m < m0 && p > 16 && p > p0 && r > 0) }' vq/tokenizer.csv ||
    fail "the VQ tokenizer did not train to a code perplexity above 16 with restarts"
  for q in vq gumbel; do
    rm -rf np1 np2
    steps=(--set tok.quantizer=$q --set tok.restart=2 --set tok.steps=8 --set train.steps=1
           --set train.warmup=0)
    "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=np1 >/dev/null
    "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=np2 >/dev/null
    cut -d, -f1,6,7 np1/tokenizer.csv > c1.txt && cut -d, -f1,6,7 np2/tokenizer.csv > c2.txt
    diff c1.txt c2.txt || fail "$q: codes used / restarts differ between 1 and 2 ranks"
    [ "$(tail -n 1 c1.txt | cut -d, -f3)" -gt 0 ] || fail "$q: no code was restarted"
    ckpt_within "$(last_ckpt np1)" "$(last_ckpt np2)" '/tok\/(params|codes)\//' \
      "$q: tokenizer state differs by more than 1e-5"
    echo "$q: 1 rank x B vs 2 ranks x B/2: $(tail -n 1 c1.txt | cut -d, -f3) codes restarted alike, tokenizer within 1e-5"
  done
  ;;
tiny)
  rm -rf tiny
  "$mpiexec" -n 2 "$exe" --set model.preset=tiny --set run.plots=false --set tok.steps=2 \
    --set sim.animals=1 --set sim.sessions=1 \
    --set train.steps=2 --set train.warmup=0 --set run.dir=tiny > tiny.log 2>&1 ||
    { cat tiny.log; fail "the tiny preset run failed"; }
  grep "model (preset" tiny.log
  grep -q "model (preset tiny): tokenizer c 64, d_t 128 x 2 layers, D_c 32, K 256, .* DAT d 64 x 2 layers, 4 heads, FFN 256, N_max 64 x M 16, 167104 parameters" tiny.log ||
    fail "the tiny preset does not have the spec's sizes"
  [ "$(wc -l < tiny/forecast.csv)" -eq 17 ] || fail "no forecast of the 16 horizon frames"
  ;;
base)
  rm -rf base
  "$mpiexec" -n 1 "$exe" --check --set model.preset=base --set train.batch=1 --set run.dir=base \
    > base.log 2>&1 || { cat base.log; fail "--check with the base preset failed"; }
  grep "model (preset" base.log
  grep -q "model (preset base): tokenizer c 64, d_t 128 x 2 layers, D_c 32, K 512, .* DAT d 256 x 6 layers, 8 heads, FFN 1024, N_max 256 x M 32, 6577920 parameters" base.log ||
    fail "the base preset does not have the spec's sizes"
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
