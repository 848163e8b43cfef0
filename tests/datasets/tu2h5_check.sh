#!/usr/bin/env bash
# tu2h5_check.sh - run tess-tu2h5 the way a user does, then check what it wrote.
#   tu2h5_check.sh tiny MPIEXEC TU2H5 TEST_TU TINYDIR     read back with the C reader at 2 ranks
#   tu2h5_check.sh h5py MPIEXEC TU2H5 PYTHON CHECKPY TINYDIR   read with h5py (77 without h5py)
#   tu2h5_check.sh real MPIEXEC TU2H5 PYTHON CHECKPY TUROOT    MUTAG, ENZYMES, IMDB-BINARY from
#                                                       the shared data (77 when none is there)
set -euo pipefail
mode=$1 mpiexec=$2 tu2h5=$3
convert() { "$mpiexec" -n 1 "$tu2h5" "$@"; }

case "$mode" in
tiny)
  convert "$5" tiny.h5
  "$mpiexec" -n 2 "$4" 2 "$5" tiny.h5 ;;
h5py)
  python=$4 check=$5
  "$python" -c 'import h5py' 2>/dev/null || { echo "h5py not available: skipped"; exit 77; }
  convert "$6" tiny.h5
  "$python" "$check" tiny tiny.h5 ;;
real)
  python=$4 check=$5 root=$6 found=0
  for spec in MUTAG:188 ENZYMES:600 IMDB-BINARY:1000; do
    name=${spec%%:*} graphs=${spec##*:}
    [ -d "$root/$name" ] || continue
    found=$((found + 1))
    out=$(convert "$root/$name" "$name.h5")
    printf '%s\n' "$out"
    grep -q "^$name: $graphs graphs" <<<"$out" || { echo "FAIL: $name summary" >&2; exit 1; }
    if "$python" -c 'import h5py' 2>/dev/null; then "$python" "$check" real "$name" "$name.h5"; fi
  done
  [ "$found" -gt 0 ] || { echo "no TU dataset under $root: skipped"; exit 77; } ;;
*)
  echo "usage: $0 tiny|h5py|real ..." >&2; exit 2 ;;
esac
