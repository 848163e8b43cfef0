#!/usr/bin/env bash
# check_calm.sh MPIEXEC CALM TESS-CKPT MODE - the calm app end to end (docs/calm.md).
#   dp:    the same tokenizer + DAT steps with the global batch on 1 rank and split over 2: every
#          parameter of both models within 1e-5 (tess-ckpt diff of the final checkpoints; the
#          gradient sums are reordered over ranks, so bitwise equality is not expected); the
#          token-id caches (tokens.h5) written by both runs identical.
#   resume: stopped after 3 of 6 steps on 1 rank (exit 75; tokenizer done, DAT half-way) and
#          resumed on 2 ranks: every parameter within 1e-5 of an uninterrupted 1-rank run, the
#          token ids read back from the cache the stopped run wrote (tokens.h5); a
#          resume with more simulated animals (more unit and session embeddings) is refused with
#          exit 65 naming the embedding tables.
#   bad:   bad recordings in data.files, on 2 ranks: a file without /gcamp/trace_array, NaN in
#          the traces, fewer frames than one window - each exit 65 with a message naming the
#          file and the problem (the NaN file is written with h5py: skipped, 77, without it).
#   smoke: the spec's end-to-end smoke test: a short pretraining on simulated data on 2 ranks
#          (small model, 50 tokenizer + 300 DAT steps, the default heads) - the DAT's forecast of
#          the held-out tail beats copy-last (prediction score 1 - MSE/MSE_copy-last > 0.02 over
#          the 16 horizon frames; measured 0.07).
set -euo pipefail
mpiexec=$1 exe=$2 ckpt=$3 mode=$4; shift 4
fail() { echo "check_calm: FAIL: $*" >&2; exit 1; }
small=(--set run.plots=false --set tok.width=32 --set tok.codes=32 --set tok.channels=16
       --set model.channels=32 --set model.ffn=64 --set model.max_neurons=32 --set tok.batch=16
       --set train.batch=4)
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
  rm -rf full part wrong
  steps=(--set tok.steps=2 --set train.steps=4 --set train.warmup=0)
  "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=full >/dev/null
  rc=0; "$mpiexec" -n 1 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=part --set run.stop_at=3 \
    >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75"
  mkdir -p wrong/checkpoints && cp part/checkpoints/ckpt_*.h5 wrong/checkpoints/
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=part --resume auto >/dev/null
  a=$(ls full/checkpoints/ckpt_*.h5 | tail -n 1) b=$(ls part/checkpoints/ckpt_*.h5 | tail -n 1)
  "$mpiexec" -n 1 "$ckpt" diff "$a" "$b" > diff.txt || true
  awk '/\/params\// && /max_abs/ { for (i = 1; i <= NF; i++) if ($i == "max_abs" && $(i + 1) > 1e-5) bad = 1 }
       END { exit bad }' diff.txt || { cat diff.txt; fail "resumed parameters differ by more than 1e-5"; }
  echo "stopped at step 3 on 1 rank, resumed on 2: parameters within 1e-5 of the uninterrupted run"
  grep -q "token ids: [0-9]* encoded once" part/run.log && grep -q "token ids: [0-9]* read from part/tokens.h5" part/run.log ||
    { cat part/run.log; fail "the resumed run did not read the token ids cached by the stopped run"; }
  echo "token ids encoded once by the stopped run, read back from part/tokens.h5 on resume"
  rc=0; "$mpiexec" -n 2 "$exe" "${small[@]}" "${steps[@]}" --set run.dir=wrong --set sim.animals=3 \
    --resume auto > out.txt 2>&1 || rc=$?
  [ "$rc" -eq 65 ] || { cat out.txt; fail "resume with other data exited $rc, expected 65"; }
  grep -q "dat.unit_emb has shape \[252,32\], expected \[412,32\]" out.txt ||
    { cat out.txt; fail "no message naming the unit embedding"; }
  echo "resume with 3 animals instead of 2: refused (exit 65), unit and session tables named"
  ;;
bad)
  rm -rf good short bad
  "$mpiexec" -n 1 "$exe" --set run.mode=simulate --set run.dir=good --set sim.animals=1 \
    --set sim.sessions=1 --set run.plots=false >/dev/null
  "$mpiexec" -n 1 "$exe" --set run.mode=simulate --set run.dir=short --set sim.animals=1 \
    --set sim.sessions=1 --set sim.frames=60 --set run.plots=false >/dev/null
  mkdir bad
  f=good/sessions/sim-a000-s00.h5
  h5copy -i "$f" -o bad/notrace.h5 -s /timing -d /timing
  h5copy -i "$f" -o bad/notrace.h5 -s /behavior -d /behavior
  expect() {  # expect CODE REGEX ARGS...: the run fails with CODE and its output matches REGEX
    local code=$1 re=$2 rc=0; shift 2
    "$mpiexec" -n 2 "$exe" --set run.dir=badrun --set run.plots=false "$@" > out.txt 2>&1 || rc=$?
    [ "$rc" -eq "$code" ] || { cat out.txt; fail "$* exited $rc, expected $code"; }
    grep -Eq "$re" out.txt || { cat out.txt; fail "$*: no message matching '$re'"; }
    echo "ok: exit $rc, $(grep -Eo "$re" out.txt | head -n 1)"
  }
  expect 65 "'bad/notrace.h5': dataset /gcamp/trace_array is missing" --set data.files=bad/notrace.h5
  expect 65 "'short/sessions/sim-a000-s00.h5': 60 frames, fewer than one window of 64 frames" \
    --set data.files=short/sessions
  if ! /usr/bin/python3 -c "import h5py" 2>/dev/null; then echo "h5py absent: NaN case skipped"; exit 77; fi
  cp "$f" bad/nan.h5
  /usr/bin/python3 -c "import h5py; f = h5py.File('bad/nan.h5', 'r+'); d = f['/gcamp/trace_array']; d[5, 3] = float('nan'); f.close()"
  expect 65 "'bad/nan.h5': /gcamp/trace_array\[5, 3\] is not finite" --set data.files=bad/nan.h5
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
