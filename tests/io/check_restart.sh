#!/usr/bin/env bash
# check_restart.sh MPIEXEC TINYLM TESS_CKPT NP - restart equivalence of tinylm with checkpoints:
# 20 steps straight vs 10 steps + checkpoint + a fresh process resuming (--resume auto) for 10
# more must give bitwise-identical parameters and optimizer state (tess-ckpt diff exits 0) and
# identical metrics rows (step, loss, lr, grad_norm, param_norm). Then the app's resume errors:
# a missing file (66), a corrupt checkpoint (65), a checkpoint of another model (65), each with
# its message and the same exit code on every rank; --resume auto falling back past a newest
# checkpoint with one flipped metadata byte; root attributes and a counter edited with h5py
# refused.
set -u
mpiexec=$1 tinylm=$2 tool=$3 np=$4
fail() { echo "check_restart: FAIL: $*" >&2; exit 1; }
run() { "$mpiexec" -n "$np" "$tinylm" "${common[@]}" "$@"; }
common=(--set train.batch=8 --set train.eval_every=1000 --set train.eval_batch=16
        --set run.log_every=1 --set run.plots=false --set optim.schedule=constant
        --set optim.warmup_steps=3 --set model.channels=32 --set model.mlp_hidden=64)
rm -rf straight split

run --set train.steps=20 --set run.dir=straight >straight.log 2>&1 || { cat straight.log; fail "straight run"; }
run --set train.steps=10 --set run.dir=split >split1.log 2>&1 || { cat split1.log; fail "first half"; }
run --set train.steps=20 --set run.dir=split --resume auto >split2.log 2>&1 || { cat split2.log; fail "resumed half"; }
grep -q "resumed from step 10 (split/checkpoints/ckpt_00000010.h5)" split2.log ||
  { cat split2.log; fail "the second process did not resume from step 10"; }

"$tool" diff straight/checkpoints split/checkpoints || fail "parameters or optimizer state differ after the restart"
diff <(cut -d, -f1-5 straight/metrics.csv) <(cut -d, -f1-5 split/metrics.csv) ||
  fail "metrics rows differ after the restart"
[ "$(wc -l < split/metrics.csv)" -eq 21 ] || fail "metrics.csv should have a header and 20 rows"
echo "restart at $np rank(s): parameters, optimizer state and 20 metrics rows identical"

# resume errors end the run on every rank with the documented code and message
expect() {
  local code=$1 regex=$2; shift 2
  out=$(run "$@" 2>&1); rc=$?
  [ "$rc" -eq "$code" ] && printf '%s\n' "$out" | grep -Eq -- "$regex" ||
    { printf '%s\n' "$out"; fail "'$*' exited $rc (want $code), output should match /$regex/"; }
  echo "ok: exit $rc, /$regex/"
}
expect 66 "cannot open checkpoint 'nothere.h5': No such file or directory" \
  --set train.steps=20 --set run.dir=err --resume nothere.h5
cp split/checkpoints/ckpt_00000010.h5 bad.h5
off=$("$tool" show bad.h5 layers.0.attn.w_qkv | sed -n 's/.*file offset \([0-9]*\),.*/\1/p')
printf '\377' | dd of=bad.h5 bs=1 seek=$((off + 100)) conv=notrunc 2>/dev/null
expect 65 "dataset /params/layers.0.attn.w_qkv does not match its hash" \
  --set train.steps=20 --set run.dir=err --resume bad.h5
expect 65 "incompatible checkpoint .*written for a different model" \
  --set train.steps=20 --set run.dir=split --set model.mlp_hidden=48 --resume auto

# one flipped metadata byte in the newest checkpoint (the case: bit 1 of byte 2138, now
# past the user block, and the first byte of the superblock): --resume auto falls back to the
# previous checkpoint on every rank, within the time limit, and the run completes
ub=$(od -An -t d8 -j 24 -N8 split/checkpoints/ckpt_00000020.h5 | tr -d ' ')
for at in $((ub + 2138)) "$ub"; do
  rm -rf fb && cp -r split fb
  byte=$(od -An -tu1 -j "$at" -N1 fb/checkpoints/ckpt_00000020.h5 | tr -d ' ')
  printf "$(printf '\\%03o' $((byte ^ 2)))" | dd of=fb/checkpoints/ckpt_00000020.h5 bs=1 seek="$at" conv=notrunc 2>/dev/null
  out=$(timeout 120 "$mpiexec" -n "$np" "$tinylm" "${common[@]}" --set train.steps=25 --set run.dir=fb --resume auto 2>&1); rc=$?
  { [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q "checkpoint 'fb/checkpoints/ckpt_00000020.h5' skipped: corrupt checkpoint 'fb/checkpoints/ckpt_00000020.h5': its metadata changed" &&
    printf '%s\n' "$out" | grep -q "resumed from step 10 (fb/checkpoints/ckpt_00000010.h5)"; } ||
    { printf '%s\n' "$out"; fail "resume auto with a flipped metadata byte at $at: exit $rc, expected a fall back to step 10"; }
  echo "ok: metadata byte $at flipped in the newest: fell back to step 10 at $np rank(s)"
done
expect 65 "corrupt checkpoint 'fb/checkpoints/ckpt_00000020.h5': its metadata changed" \
  --set train.steps=20 --set run.dir=err --resume fb/checkpoints/ckpt_00000020.h5

# root attributes edited with h5py (step = -5, data_cursor, the optimizer's step count): refused
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
  for edit in 'f.attrs["step"] = -5' 'f.attrs["data_cursor"] = 3' 'f["optim/step_count"][0] = 99'; do
    cp split/checkpoints/ckpt_00000010.h5 edited.h5
    HDF5_USE_FILE_LOCKING=FALSE /usr/bin/python3 -c "import h5py
with h5py.File('edited.h5', 'r+') as f: $edit" || fail "h5py edit $edit"
    expect 65 "corrupt checkpoint 'edited.h5'" --set train.steps=20 --set run.dir=err --resume edited.h5
  done
else
  echo "h5py not installed: the h5py edits are not checked"
fi
echo "check_restart: passed at $np rank(s)"
