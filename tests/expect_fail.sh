#!/usr/bin/env bash
# expect_fail.sh CODE REGEX -- cmd...
# Runs cmd; passes (exit 0) only if cmd exits with CODE and its stdout+stderr match REGEX
# (extended regex). Prints the output either way so ctest --output-on-failure shows it.
set -u
want_code=$1; regex=$2; shift 2
[ "$1" = "--" ] && shift
out=$("$@" 2>&1); code=$?
printf '%s\n' "$out"
if [ "$code" -ne "$want_code" ]; then
  echo "expect_fail: exit code $code, expected $want_code" >&2; exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "expect_fail: output does not match /$regex/" >&2; exit 1
fi
echo "expect_fail: exit $code and message as expected"
