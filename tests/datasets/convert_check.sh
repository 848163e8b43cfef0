#!/usr/bin/env bash
# convert_check.sh - run a dataset converter on the shared data the way a user does, then read
# its output with a test program at 2 ranks. Exits 77 when the shared data are absent.
#   convert_check.sh text    MPIEXEC TESS-TEXT2H5    TEST_TOKENS_TEXT TEXT_DIR
#   convert_check.sh calcium MPIEXEC TESS-CALCIUM2H5 TEST_TRACES_REAL CALCIUM_DIR
set -euo pipefail
mode=$1 mpiexec=$2 tool=$3 test=$4 dir=$5
case "$mode" in
text)
  input=$dir/tinyshakespeare/input.txt
  [ -f "$input" ] || { echo "no $input: skipped"; exit 77; }
  "$mpiexec" -n 1 "$tool" --tokenizer char "$input" shakespeare.h5
  "$mpiexec" -n 2 "$test" 2 "$input" shakespeare.h5 65 ;;
calcium)
  mapfile -t files < <(find "$dir" -name '*-data.h5' 2>/dev/null | sort)
  [ "${#files[@]}" -gt 0 ] || { echo "no calcium recordings under $dir: skipped"; exit 77; }
  "$mpiexec" -n 1 "$tool" calcium.h5 "${files[@]}"
  "$mpiexec" -n 2 "$test" 2 calcium.h5 "${files[@]}" ;;
*)
  echo "usage: $0 text|calcium MPIEXEC TOOL TEST DIR" >&2; exit 2 ;;
esac
