#!/usr/bin/env bash
# check_convert_inputs.sh TESS_CONVERT TU_DIR - a converter never overwrites its own input: an
# output that names an input file (tu: a file of the TU directory; text: the input itself) is
# refused with exit 64 naming it, and the input is left byte for byte as it was. Also: the TU
# reader accepts blank lines at the end of a file and refuses one in the middle.
set -uo pipefail
exe=$1 tu=$2
fail() { echo "check_convert_inputs: FAIL: $*" >&2; exit 1; }
rm -rf work && mkdir -p work && cp -r "$tu" work/tu && printf 'one two\n' >work/two.txt
a=$(ls work/tu/*_A.txt | head -n 1); cp "$a" work/A.orig
rc=0; "$exe" tu work/tu "$a" >tu.log 2>&1 || rc=$?
[ "$rc" -eq 64 ] || { cat tu.log; fail "tu with the output on its input: exit $rc, expected 64"; }
grep -qF "the output '$a' exists and is not an HDF5 file (an input?): refusing to overwrite it" tu.log ||
  { cat tu.log; fail "tu: the refusal does not name the file"; }
cmp -s "$a" work/A.orig || fail "tu overwrote its input"
cp work/two.txt work/two.orig
rc=0; "$exe" text work/two.txt work/two.txt >text.log 2>&1 || rc=$?
[ "$rc" -eq 64 ] || { cat text.log; fail "text with the output on its input: exit $rc, expected 64"; }
grep -qF "the output 'work/two.txt' is the input 'work/two.txt': refusing to overwrite it" text.log ||
  { cat text.log; fail "text: the refusal does not name the file"; }
cmp -s work/two.txt work/two.orig || fail "text overwrote its input"
"$exe" text work/two.txt work/two.h5 >/dev/null 2>&1 || fail "a new output was refused"
"$exe" text work/two.txt work/two.h5 >/dev/null 2>&1 || fail "an existing HDF5 output was not replaced"
echo "tu and text refuse an output that is one of their inputs (exit 64); an HDF5 output is replaced"
# The TU reader accepts blank lines at the end of a file (docs/datasets.md), not in the middle.
printf '\n \n' >>"$a"
"$exe" tu work/tu work/tu.h5 >blank.log 2>&1 || { cat blank.log; fail "tu refused trailing blank lines"; }
cp work/A.orig "$a"; sed -i '1a\\' "$a"
rc=0; "$exe" tu work/tu work/tu2.h5 >blank2.log 2>&1 || rc=$?
[ "$rc" -eq 65 ] && grep -qF "_A.txt:2: empty line" blank2.log || { cat blank2.log; fail "a blank line inside: exit $rc"; }
echo "tu: trailing blank lines accepted, a blank line inside refused (65, file:line)"
