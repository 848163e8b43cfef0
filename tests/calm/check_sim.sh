#!/usr/bin/env bash
# check_sim.sh MPIEXEC TESS-CALSIM TESS-CONVERT - the simulator end to end:
#   the same sessions written by 1 rank and by 4 ranks are byte-identical files (every draw is
#   keyed by (seed, animal, session, neuron), sessions are split over ranks); a different seed
#   changes them; tess-convert calcium reads the files as Flavell-lab recordings.
set -euo pipefail
mpiexec=$1 sim=$2 convert=$3
fail() { echo "check_sim: FAIL: $*" >&2; exit 1; }
rm -rf np1 np4 seed2 sim.h5
common=(--set sim.animals=3 --set sim.sessions=2 --set sim.frames=200 --set sim.neurons_min=20
        --set sim.neurons_max=40 --set sim.population=60)
"$mpiexec" -n 1 "$sim" "${common[@]}" --set out.dir=np1
"$mpiexec" -n 4 "$sim" "${common[@]}" --set out.dir=np4 >/dev/null
"$mpiexec" -n 2 "$sim" "${common[@]}" --set out.dir=seed2 --set sim.seed=2 >/dev/null
n=$(ls np1/*.h5 | wc -l)
[ "$n" -eq 6 ] || fail "expected 6 session files on 1 rank, found $n"
[ "$(ls np4/*.h5 | wc -l)" -eq 6 ] || fail "expected 6 session files on 4 ranks"
for f in np1/*.h5; do
  cmp "$f" "np4/$(basename "$f")" || fail "$(basename "$f") differs between 1 and 4 ranks"
  if cmp -s "$f" "seed2/$(basename "$f")"; then fail "$(basename "$f"): seed 2 gives the same file"; fi
done
echo "6 sessions byte-identical on 1 and 4 ranks; seed 2 differs"
"$mpiexec" -n 1 "$convert" calcium --behavior velocity,running sim.h5 np1/*.h5 |
  tee convert.log
[ -s sim.h5 ] || fail "tess-convert calcium wrote nothing"
