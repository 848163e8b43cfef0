#!/usr/bin/env bash
# check_version.sh MPIEXEC VERSION COMMIT PROGRAM... - every program's --version: exactly one line
# "<program> (Tessera VERSION, git COMMIT)" with exit code 0, run alone and on 2 ranks (rank 0
# prints), and --help names the flag.
set -euo pipefail
mpiexec=$1 version=$2 commit=$3; shift 3
fail() { echo "check_version: FAIL: $*" >&2; exit 1; }
[ "$#" -gt 0 ] || fail "no programs given"
for exe in "$@"; do
  want="$(basename "$exe") (Tessera $version, git $commit)"
  got=$("$exe" --version) || fail "$exe --version exited $?"
  [ "$got" = "$want" ] || fail "$exe --version printed '$got', expected '$want'"
  got=$("$mpiexec" -n 2 "$exe" --version) || fail "mpiexec -n 2 $exe --version exited $?"
  [ "$got" = "$want" ] || fail "on 2 ranks $exe --version printed '$got', expected '$want' once"
  help=$("$exe" --help) || fail "$exe --help exited $?"
  grep -q -- "--version" <<<"$help" || fail "$exe --help does not mention --version"
  echo "$got"
done
echo "check_version: $# programs passed"
