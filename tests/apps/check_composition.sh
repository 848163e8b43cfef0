#!/usr/bin/env bash
# check_composition.sh SRC - apps are compositions on the run driver (docs/apps.md): no file under
# apps/ calls the checkpoint writer or reader, the stop-signal flag, the metrics resume logic or
# MPI start-up itself, and none passes a raw MPI_Comm. The tools are not apps: tess-ckpt
# (apps/ckpt) reads checkpoints by design and tess-convert (apps/convert) is a serial converter.
set -euo pipefail
src=$1
fail() { echo "check_composition: FAIL: $*" >&2; exit 1; }
hits=$(grep -rnE 'tess_ckpt_|tess_signals_|tess_metrics_open_resume|MPI_Init|tess_runtime_start' \
         "$src/apps" --include='*.c' --include='*.h' | grep -v "^$src/apps/ckpt/\|^$src/apps/convert/" || true)
[ -z "$hits" ] || fail "apps carry run plumbing of their own:
$hits"
hits=$(grep -rn 'MPI_Comm\b' "$src/apps" --include='*.c' --include='*.h' | grep -v "^$src/apps/ckpt/\|^$src/apps/convert/" || true)
[ -z "$hits" ] || fail "apps pass raw communicators:
$hits"
echo "check_composition: passed"
