#!/usr/bin/env bash
# fuzz.sh - run one libFuzzer program of the fuzz preset for a while, from its seed inputs.
# usage: bash tests/fuzz/fuzz.sh PROGRAM SECONDS INPUT_DIR...
#   PROGRAM    build/fuzz/tests/fuzz/fuzz_<target> (cmake --preset fuzz && cmake --build --preset fuzz)
#   SECONDS    total fuzzing time (-max_total_time)
#   INPUT_DIR  seed inputs (tests/fuzz/corpus/<target>, tests/fuzz/regress/<target>), read only
# New inputs go to ./corpus, crashes to ./crash-*, ./leak-*, ./timeout-* (in the current
# directory). One process at nice 10, one input at a time; an input running over 10 s is a hang.
# Exit: 0 nothing found; 77 PROGRAM not built (the test is skipped); else libFuzzer's code, after
# printing how to replay the input and keep it as a regression input.
set -uo pipefail
if [ "$#" -lt 3 ]; then
  sed -n '2,11p' "$0" >&2
  exit 64
fi
prog=$1 seconds=$2
shift 2
if [ ! -x "$prog" ]; then
  echo "fuzz.sh: $prog is not built: cmake --preset fuzz && cmake --build --preset fuzz (needs clang);" \
       "skipped" >&2
  exit 77
fi
mkdir -p corpus
rm -f crash-* leak-* timeout-* oom-*
# libFuzzer reports leaks itself; ASan's exit-time check would flag MPI's own allocations.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
nice -n 10 "$prog" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=1 \
  -print_final_stats=1 -artifact_prefix="$PWD/" corpus "$@" 2>&1 | tail -n 60
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  target=$(basename "$prog")
  for f in crash-* leak-* timeout-* oom-*; do
    [ -e "$f" ] || continue
    echo "fuzz.sh: $target found $PWD/$f; replay it with '$prog $PWD/$f'; once fixed, keep it as" \
         "tests/fuzz/regress/${target#fuzz_}/<what-it-was>" >&2
  done
fi
exit "$rc"
