#!/usr/bin/env bash
# check_tool.sh MPIEXEC TESS_CKPT CKPT LEGACY - the tess-ckpt commands on a test checkpoint (written by
# test_ckpt_roundtrip at 2 ranks; LEGACY a format 2 file): ls, show, meta, diff, verify, their exit codes and messages,
# verify and diff failing on a copy with one flipped data byte, every command refusing (65, one
# line, no HDF5 stack, in bounded time) a copy with one flipped metadata byte or truncated, a
# checkpoint directory whose `latest` is missing, empty or a directory, and the clear errors for a
# missing file, a file that is not HDF5 and an HDF5 file that is not a Tessera checkpoint.
set -u
mpiexec=$1 tool=$2 ckpt=$3 legacy=$4
# ~50 short tess-ckpt runs, most of them singletons: Open MPI's isolated singleton starts no
# runtime daemon and ob1 does not initialise UCX (0.34 s -> 0.07 s a start). The runs are
# sequential and this test's session directory is its own (cmake/TessTest.cmake), where
# isolated singletons, which all take job id 0, do not meet another test's. Under mpiexec (the
# 2-rank verify runs) the singleton setting is unused.
export OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_pml=ob1
fails=0
# expect CODE REGEX -- cmd... : exit code CODE and output matching REGEX, never HDF5's own stack
expect() {
  local want=$1 regex=$2; shift 3
  local out code
  out=$("$@" 2>&1); code=$?
  if [ "$code" -ne "$want" ] || ! printf '%s\n' "$out" | grep -Eq -- "$regex" ||
     printf '%s\n' "$out" | grep -q 'HDF5-DIAG'; then
    printf '%s\n' "$out"
    echo "check_tool: FAIL: '$*' exited $code (want $want), output should match /$regex/" >&2
    fails=$((fails + 1))
  else
    echo "ok: $* -> $code, /$regex/"
  fi
}

cp "$ckpt" good.h5
expect 0 '^/params/emb.w +float32 +\[11,6\] +264 B +sharded\(dim=0,parts=2\)$' -- "$tool" ls good.h5
expect 0 '^27 datasets, ' -- "$tool" ls good.h5
expect 0 'nan 0  inf 0' -- "$tool" show good.h5 emb.w
expect 0 '^first values: 0 0\.361615419 0\.674287915' -- "$tool" show good.h5 /params/emb.w --first 3
expect 0 'layout=block_cyclic\(grid=1x2,block=2x3\)' -- "$tool" show good.h5 optim/v/grid.a
expect 64 "no dataset 'nope' in 'good.h5'" -- "$tool" show good.h5 nope
expect 0 '^first values: 47$' -- "$tool" show good.h5 optim/step_count
expect 0 '^  world_size +2$' -- "$tool" meta good.h5
expect 0 '^seed = 7$' -- "$tool" meta good.h5
expect 0 '^identical: 25 tensors' -- "$tool" diff good.h5 "$ckpt"
expect 0 'good.h5: ok \(step 42, written by 2 ranks' -- "$tool" verify good.h5
expect 0 'good.h5: ok' -- "$mpiexec" -n 2 "$tool" verify good.h5
expect 64 'bad command line for frobnicate' -- "$tool" frobnicate good.h5

# a checkpoint directory: its latest pointer is followed
mkdir -p dir && cp good.h5 dir/ckpt_00000042.h5 && echo ckpt_00000042.h5 > dir/latest
expect 0 'dir/ckpt_00000042.h5: tessera-checkpoint v4, step 42' -- "$tool" meta dir
# ... and when it is missing, empty, not one name, or a directory: an error naming it
mkdir -p nolatest && cp good.h5 nolatest/ckpt_00000042.h5
expect 66 "^error: 'nolatest' is a directory without a 'latest' pointer \(No such file or directory\)" -- "$tool" ls nolatest
expect 66 "^nolatest: FAILED" -- "$tool" verify nolatest
mkdir -p emptylatest && : > emptylatest/latest
expect 65 "'emptylatest/latest' is empty: expected one line naming a checkpoint" -- "$tool" verify emptylatest
mkdir -p dirlatest/latest
expect 65 "'dirlatest/latest' is not a file: expected one line naming a checkpoint" -- "$tool" verify dirlatest
mkdir -p badlatest && echo ../good.h5 > badlatest/latest
expect 65 "'badlatest/latest' does not hold one line naming a file of its directory" -- "$tool" meta badlatest

# one flipped byte inside /params/head.b
cp good.h5 flipped.h5
off=$("$tool" show flipped.h5 head.b | sed -n 's/.*file offset \([0-9]*\),.*/\1/p')
byte=$(od -An -tu1 -j $((off + 6)) -N1 flipped.h5 | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 16)))" | dd of=flipped.h5 bs=1 seek=$((off + 6)) conv=notrunc 2>/dev/null
expect 65 'dataset /params/head.b does not match its hash' -- "$tool" verify flipped.h5
expect 65 'flipped.h5: FAILED' -- "$mpiexec" -n 2 "$tool" verify good.h5 flipped.h5
expect 1 '/params/head.b +max_abs [0-9.e+-]+  max_rel [0-9.e+-]+  differing 1 of 13' -- "$tool" diff good.h5 flipped.h5

# a format 2 file (no integrity record) is verified and reported as unprotected
expect 0 "ok, unprotected format 2 \(step 42, written by 2 ranks, every hash matches; no integrity record" -- "$tool" verify "$legacy"

# inputs that are not checkpoints
expect 66 "cannot open checkpoint 'missing.h5': No such file or directory" -- "$tool" verify missing.h5
expect 66 "cannot open checkpoint 'missing.h5'" -- "$tool" ls missing.h5
echo "[run]" > text.h5
expect 65 "checkpoint 'text.h5' is not an HDF5 file" -- "$tool" ls text.h5
rm -f plain.h5 && h5copy -i good.h5 -o plain.h5 -s /config -d /config
expect 65 "'plain.h5' is not a Tessera checkpoint \(no 'format' attribute\)" -- "$tool" meta plain.h5
head -c 6000 good.h5 > cut.h5
expect 65 "corrupt checkpoint 'cut.h5': it has 6000 bytes, its integrity record says [0-9]+ \(truncated" -- "$tool" verify cut.h5

# one flipped metadata byte (format 4: the integrity record sees it before HDF5 parses anything):
# the first byte of the superblock, a byte of the layout attribute of /params/head.b, the last
# byte of the file; every command (ls and verify for the last two) refuses it in one line within
# the time limit
flip() { # flip FILE OFFSET: xor the byte at OFFSET with 0x02
  local byte; byte=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((byte ^ 2)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
ub=$(od -An -t d8 -j 24 -N8 good.h5 | tr -d ' ')
lay=$(grep -abo 'sharded(dim=0,parts=2)' good.h5 | tail -1 | cut -d: -f1)
for at in "$ub" "$((lay + 3))" "$(($(stat -c %s good.h5) - 1))"; do
  cp good.h5 meta.h5 && flip meta.h5 "$at"
  cmds=("ls meta.h5" "verify meta.h5")
  [ "$at" = "$ub" ] && cmds+=("show meta.h5 head.b" "meta meta.h5" "diff good.h5 meta.h5"
                              "export meta.h5 out.safetensors")
  for cmd in "${cmds[@]}"; do
    # shellcheck disable=SC2086
    expect 65 "corrupt checkpoint 'meta.h5': its metadata changed since it was written" \
      -- timeout 60 "$tool" $cmd
  done
done
expect 65 "corrupt checkpoint 'meta.h5': its metadata changed" -- timeout 60 "$mpiexec" -n 2 "$tool" verify meta.h5
cp good.h5 meta.h5 && flip meta.h5 3
expect 65 "^error: corrupt checkpoint 'meta.h5' \([0-9]+ bytes\): no integrity record" -- timeout 60 "$tool" ls meta.h5

[ "$fails" -eq 0 ] || { echo "check_tool: $fails failed" >&2; exit 1; }
echo "check_tool: all passed"
