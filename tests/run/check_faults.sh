#!/usr/bin/env bash
# check_faults.sh MPIEXEC TINYLM TESS_CKPT MODE - faults a run must survive with a clear, collective
# error (docs/checkpoints.md, "Fault matrix"). Each mode asserts the exit code, the message and,
# where a checkpoint existed, that it is still the valid `latest` afterwards.
#   disk_full [midway]: 2 ranks, run.dir on a 3 MiB tmpfs (skipped, exit 77, where mount is not
#               allowed), 1 MB checkpoints every 5 steps: the third does not fit. Refused before any
#               byte is written (exit 74, "does not fit"); with `midway` the check and the
#               reservation are bypassed (TESS_CKPT_TEST_NO_ROOM_CHECK=1) so the write fails midway,
#               10 times in a row, on a 3 MiB tmpfs (then the emptied file has no room for its
#               metadata: its handle is left open) and on a 3300 KiB one (it has: the collective
#               close runs) in turn: each exit 74 naming the file within 60 s, never a hang.
#   ulimit_f:   a checkpoint of step 5, then the run resumed on 2 ranks under ulimit -f 600 (KiB):
#               exit 74 naming the file and the limit, no rank killed by SIGXFSZ.
#   ulimit_v:   ulimit -v 250000 (KiB) on 1 rank: exit 71 naming OpenBLAS's buffer, not a spin;
#               then one rank of 2 under ulimit -v 600000 with a model that does not fit in it:
#               exit 71 naming the allocation.
set -uo pipefail
mpiexec=$1 exe=$2 tool=$3 mode=$4
fail() { echo "check_faults: FAIL: $*" >&2; exit 1; }
expect() { # CODE LOG NEEDLE: the last command exited CODE and LOG has NEEDLE
  [ "$rc" -eq "$1" ] || { cat "$2"; fail "$mode: exit $rc, expected $1"; }
  grep -qF -- "$3" "$2" || { cat "$2"; fail "$mode: no '$3' in the output"; }
}
valid_latest() { # DIR STEP: DIR/latest names the checkpoint of STEP and it verifies
  [ "$(cat "$1/latest")" = "ckpt_$(printf %08d "$2").h5" ] || fail "$mode: latest is $(cat "$1/latest"), expected step $2"
  "$tool" verify "$1" >verify.log 2>&1 || { cat verify.log; fail "$mode: the checkpoint of step $2 does not verify"; }
}
small=(--set run.plots=false --set optim.warmup_steps=2 --set log.progress=off)

case "$mode" in
disk_full)
  mkdir -p mnt
  mountpoint -q mnt && umount mnt
  mount -t tmpfs -o size=3m tmpfs mnt 2>/dev/null || { echo "cannot mount a tmpfs here: skipped"; exit 77; }
  trap 'umount mnt 2>/dev/null' EXIT
  hows=(check); [ "${5:-}" = midway ] && hows=(midway midway midway midway midway midway midway midway midway midway)
  n=0
  for how in "${hows[@]}"; do
    n=$((n + 1))
    if [ "$how" = midway ]; then # a fresh tmpfs of 3 MiB or 3300 KiB in turn
      umount mnt && mount -t tmpfs -o size=$([ $((n % 2)) -eq 1 ] && echo 3m || echo 3300k) tmpfs mnt ||
        fail "cannot remount the tmpfs"
    fi
    rm -rf mnt/r
    rc=0
    if [ "$how" = check ]; then
      timeout -k 5 120 "$mpiexec" -n 2 "$exe" "${small[@]}" --set train.steps=40 --set ckpt.every=5 \
        --set ckpt.keep=0 --set run.dir=mnt/r >full.log 2>&1 || rc=$?
      expect 74 full.log "ckpt_00000015.h5.tmp': a checkpoint of up to"
      grep -qF "does not fit in the" full.log || { cat full.log; fail "disk_full: no 'does not fit'"; }
    else
      TESS_CKPT_TEST_NO_ROOM_CHECK=1 timeout -k 5 60 "$mpiexec" -n 2 "$exe" "${small[@]}" \
        --set train.steps=40 --set ckpt.every=5 --set ckpt.keep=0 --set run.dir=mnt/r >full.log 2>&1 || rc=$?
      [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { cat full.log; fail "disk_full midway: the run hung"; }
      expect 74 full.log "writing checkpoint 'mnt/r/checkpoints/ckpt_000000"
      grep -Eq "cannot write dataset /|no room for its metadata" full.log ||
        { cat full.log; fail "disk_full midway: the failed write is not named"; }
    fi
    [ ! -e mnt/r/checkpoints/*.tmp ] 2>/dev/null || ls mnt/r/checkpoints
    last=$(cat mnt/r/checkpoints/latest); last=${last#ckpt_}; last=$((10#${last%.h5}))
    [ "$last" -ge 5 ] || fail "disk_full: no checkpoint before the disk filled"
    valid_latest mnt/r/checkpoints "$last"
    ls mnt/r/checkpoints | grep -q '\.tmp$' && fail "disk_full $how: a .tmp file was left behind"
    closed=""; [ "$how" = midway ] && closed=", tmp file closed"
    grep -qF "leaving the HDF5 handle" full.log && closed=", tmp file left open"
    echo "disk full ($how, $(df --output=size -h mnt | tail -1 | tr -d ' ')): exit 74$closed," \
         "the checkpoint of step $last is still the valid latest"
  done
  ;;
ulimit_f)
  rm -rf uf
  c=("${small[@]}" --set train.steps=20 --set ckpt.every=5 --set run.dir=uf)
  rc=0; "$mpiexec" -n 2 "$exe" "${c[@]}" --set run.stop_at=5 >stop.log 2>&1 || rc=$?
  expect 75 stop.log "stop requested"
  rc=0
  timeout -k 5 120 "$mpiexec" -n 2 bash -c 'ulimit -f 600; exec "$@"' limited "$exe" "${c[@]}" \
    --resume auto >uf.log 2>&1 || rc=$?
  expect 74 uf.log "cannot write 'uf/checkpoints/ckpt_00000010.h5.tmp': a checkpoint of up to"
  grep -qF "exceeds the file size limit of 614400 bytes" uf.log || { cat uf.log; fail "ulimit_f: limit not named"; }
  grep -qi "signal 25\|File size limit exceeded" uf.log && { cat uf.log; fail "ulimit_f: a rank was killed by SIGXFSZ"; }
  valid_latest uf/checkpoints 5
  echo "ulimit -f 600: exit 74 naming the file and the limit; the checkpoint of step 5 stays valid"
  ;;
ulimit_v)
  rc=0
  (ulimit -v 250000; exec timeout -k 5 60 "$exe" "${small[@]}" --set train.steps=5 --set run.dir=uv) \
    >uv.log 2>&1 || rc=$?
  expect 71 uv.log "cannot allocate the 128 MiB work buffer of OpenBLAS under the address-space limit of 244 MiB (ulimit -v)"
  big=("${small[@]}" --set train.steps=5 --set model.channels=1024 --set model.mlp_hidden=4096
       --set run.dir=uv2)
  rm -rf uv2; rc=0
  timeout -k 5 120 "$mpiexec" -n 1 bash -c 'ulimit -v 600000; exec "$@"' limited "$exe" "${big[@]}" : \
    -n 1 "$exe" "${big[@]}" >uv2.log 2>&1 || rc=$?
  expect 71 uv2.log "[rank 0]"
  grep -Eq "cannot allocate [0-9]+ bytes|out of memory" uv2.log || { cat uv2.log; fail "ulimit_v: the allocation is not named"; }
  echo "ulimit -v: exit 71 naming OpenBLAS's buffer (1 rank), and naming the allocation (1 of 2 ranks)"
  ;;
*) fail "unknown mode $mode" ;;
esac
