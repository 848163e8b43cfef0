#!/usr/bin/env bash
# check_sim.sh MPIEXEC CALM TESS-CONVERT - the simulator (calm, run.mode = simulate) end to end:
#   the same sessions written by 1 rank and by 4 ranks are byte-identical files (every draw is
#   keyed by (seed, animal, session, neuron), sessions are split over ranks); a different seed
#   changes them; a run stopped after one round and resumed on another rank count writes the
#   same files; tess-convert calcium reads the files as Flavell-lab recordings.
set -euo pipefail
mpiexec=$1 sim=$2 convert=$3
fail() { echo "check_sim: FAIL: $*" >&2; exit 1; }
rm -rf np1 np4 seed2 resumed sim.h5
common=(--set run.mode=simulate --set run.plots=false --set sim.animals=3 --set sim.sessions=2 --set sim.frames=200 --set sim.neurons_min=20
        --set sim.neurons_max=40 --set sim.population=60)
"$mpiexec" -n 1 "$sim" "${common[@]}" --set run.dir=np1
"$mpiexec" -n 4 "$sim" "${common[@]}" --set run.dir=np4 >/dev/null
"$mpiexec" -n 2 "$sim" "${common[@]}" --set run.dir=seed2 --set run.seed=2 >/dev/null
n=$(ls np1/sessions/*.h5 | wc -l)
[ "$n" -eq 6 ] || fail "expected 6 session files on 1 rank, found $n"
[ "$(ls np4/sessions/*.h5 | wc -l)" -eq 6 ] || fail "expected 6 session files on 4 ranks"
for f in np1/sessions/*.h5; do
  cmp "$f" "np4/sessions/$(basename "$f")" || fail "$(basename "$f") differs between 1 and 4 ranks"
  if cmp -s "$f" "seed2/sessions/$(basename "$f")"; then fail "$(basename "$f"): seed 2 gives the same file"; fi
done
echo "6 sessions byte-identical on 1 and 4 ranks; seed 2 differs"
# stopped after one round on 2 ranks (exit 75), resumed on 3: the same files
rc=0; "$mpiexec" -n 2 "$sim" "${common[@]}" --set run.dir=resumed --set run.stop_at=1 >/dev/null || rc=$?
[ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75"
[ "$(ls resumed/sessions/*.h5 | wc -l)" -eq 2 ] || fail "the stopped run should have written 2 sessions"
"$mpiexec" -n 3 "$sim" "${common[@]}" --set run.dir=resumed --resume auto >/dev/null
for f in np1/sessions/*.h5; do
  cmp "$f" "resumed/sessions/$(basename "$f")" || fail "$(basename "$f") differs after stop and resume"
done
echo "stopped on 2 ranks after one round, resumed on 3: the same 6 files"
"$mpiexec" -n 1 "$convert" calcium --behavior velocity,running sim.h5 np1/sessions/*.h5 |
  tee convert.log
[ -s sim.h5 ] || fail "tess-convert calcium wrote nothing"
