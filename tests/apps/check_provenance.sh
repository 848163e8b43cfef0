#!/usr/bin/env bash
# check_provenance.sh MPIEXEC TINYLM VERSION COMMIT - config.ini of a 2-rank run starts with the
# provenance comments (io/rundir.h): version, commit, rank count, host, a UTC start time within
# the run and the BLAS kernels the run's log names; --config reads the file back to the same
# resolved configuration, and a longer run started from it resumes the first run's checkpoint.
set -euo pipefail
mpiexec=$1 exe=$2 version=$3 commit=$4
fail() { echo "check_provenance: FAIL: $*" >&2; exit 1; }
rm -rf run
common=(--set run.plots=false --set optim.warmup_steps=1 --set run.log_every=1)
before=$(date -u +%s)
"$mpiexec" -n 2 "$exe" "${common[@]}" --set train.steps=4 --set run.dir=run >first.log
after=$(date -u +%s)
ini=run/config.ini
head -n 7 "$ini"
expect_line() {   # expect_line N TEXT
  [ "$(sed -n "$1p" "$ini")" = "$2" ] || fail "line $1 of $ini is '$(sed -n "$1p" "$ini")', expected '$2'"
}
expect_line 1 "; tessera_version = $version"
expect_line 2 "; git_commit = $commit"
expect_line 3 "; ranks = 2"
expect_line 4 "; host = $(hostname)"
started=$(sed -n 5p "$ini" | sed -n 's/^; started_utc = \([0-9T:-]*Z\)$/\1/p')
[ -n "$started" ] || fail "line 5 of $ini is not '; started_utc = YYYY-MM-DDTHH:MM:SSZ'"
t=$(date -u -d "$started" +%s)
[ "$t" -ge "$before" ] && [ "$t" -le "$after" ] ||
  fail "started_utc $started is not within the run ($before..$after s since the epoch)"
kernels=$(sed -n 's/^BLAS: .* (kernels \([^,)]*\).*$/\1/p' first.log)
[ -n "$kernels" ] || { cat first.log; fail "the run's log names no BLAS kernels"; }
expect_line 6 "; blas_kernels = $kernels"

# Read back: the resolved configuration is the file without its provenance lines.
"$exe" --config "$ini" --print-config > printed.ini
diff <(tail -n +7 "$ini") printed.ini || fail "--config $ini does not read back to the same options"

# Resume: 8 steps from the 4-step run's config.ini continue its checkpoint at step 4.
"$mpiexec" -n 2 "$exe" --config "$ini" --set train.steps=8 --resume auto > resumed.log
grep -q "resumed from step 4 " resumed.log || { cat resumed.log; fail "the run did not resume at step 4"; }
[ "$(tail -n 1 run/metrics.csv | cut -d, -f1)" = 8 ] || fail "the resumed run did not reach step 8"
head -n 3 "$ini" | tail -n 1 | grep -qx "; ranks = 2" || fail "the resumed run's config.ini lost its provenance"
echo "check_provenance: passed"
