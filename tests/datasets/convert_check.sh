#!/usr/bin/env bash
# convert_check.sh - run tess-convert the way a user does, then check what it wrote.
#   convert_check.sh tu_tiny MPIEXEC CONVERT TEST_TU TINYDIR          C reader at 2 ranks
#   convert_check.sh tu_h5py MPIEXEC CONVERT PYTHON CHECKPY TINYDIR   h5py (77 without h5py)
#   convert_check.sh tu_real MPIEXEC CONVERT PYTHON CHECKPY TUROOT    MUTAG, ENZYMES, IMDB-BINARY
#                                                                     of the shared data
#   convert_check.sh text    MPIEXEC CONVERT TEST_TOKENS_TEXT TEXT_DIR     read back at 2 ranks
#   convert_check.sh calcium MPIEXEC CONVERT TEST_TRACES_REAL CALCIUM_DIR  read back at 2 ranks
# Tests on the shared data exit 77 (skipped) when it is absent.
set -euo pipefail
mode=$1 mpiexec=$2 tool=$3
convert() { "$mpiexec" -n 1 "$tool" "$@"; }

case "$mode" in
tu_tiny)
  convert tu "$5" tiny.h5
  "$mpiexec" -n 2 "$4" 2 "$5" tiny.h5 ;;
tu_h5py)
  python=$4 check=$5
  "$python" -c 'import h5py' 2>/dev/null || { echo "h5py not available: skipped"; exit 77; }
  convert tu "$6" tiny.h5
  "$python" "$check" tiny tiny.h5 ;;
tu_real)
  python=$4 check=$5 root=$6 found=0
  for spec in MUTAG:188 ENZYMES:600 IMDB-BINARY:1000; do
    name=${spec%%:*} graphs=${spec##*:}
    [ -d "$root/$name" ] || continue
    found=$((found + 1))
    out=$(convert tu "$root/$name" "$name.h5")
    printf '%s\n' "$out"
    grep -q "^$name: $graphs graphs" <<<"$out" || { echo "FAIL: $name summary" >&2; exit 1; }
    if "$python" -c 'import h5py' 2>/dev/null; then "$python" "$check" real "$name" "$name.h5"; fi
  done
  [ "$found" -gt 0 ] || { echo "no TU dataset under $root: skipped"; exit 77; } ;;
text)
  test=$4 input=$5/tinyshakespeare/input.txt
  [ -f "$input" ] || { echo "no $input: skipped"; exit 77; }
  convert text --tokenizer char "$input" shakespeare.h5
  "$mpiexec" -n 2 "$test" 2 "$input" shakespeare.h5 65 ;;
calcium)
  test=$4
  mapfile -t files < <(find "$5" -name '*-data.h5' 2>/dev/null | sort)
  [ "${#files[@]}" -gt 0 ] || { echo "no calcium recordings under $5: skipped"; exit 77; }
  convert calcium calcium.h5 "${files[@]}"
  "$mpiexec" -n 2 "$test" 2 calcium.h5 "${files[@]}" ;;
*)
  echo "usage: $0 tu_tiny|tu_h5py|tu_real|text|calcium MPIEXEC TESS-CONVERT ..." >&2; exit 2 ;;
esac
