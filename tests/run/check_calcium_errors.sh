#!/usr/bin/env bash
# check_calcium_errors.sh TESS_CONVERT PYTHON - tess-convert calcium on malformed Flavell-lab
# sessions (written here with h5py; skipped, exit 77, without it): each is refused with exit 65 and
# a message that says what is wrong: a trace of 0 neurons, a string-typed or a 2-D timestamp
# dataset, a NaN timestamp (it used to shift the frame rate). A well-formed file converts.
set -uo pipefail
exe=$1 py=$2
fail() { echo "check_calcium_errors: FAIL: $*" >&2; exit 1; }
"$py" -c "import h5py, numpy" 2>/dev/null || { echo "no h5py: skipped"; exit 77; }
rm -rf cal && mkdir cal
"$py" - <<'PY' || exit 1
import h5py, numpy as np
T, N = 20, 3
def write(name, traces=None, ts=None):
    with h5py.File(f"cal/{name}.h5", "w") as f:
        f["gcamp/trace_array"] = np.ones((T, N), np.float32) if traces is None else traces
        f["timing/timestamp_confocal"] = np.arange(T) * 0.6 if ts is None else ts
        for b in ("velocity", "head_angle", "reversal_vec"):
            f[f"behavior/{b}"] = np.zeros(T)
write("good")
write("zero_neurons", traces=np.ones((T, 0), np.float32))
write("string_ts", ts=np.array([b"%d" % i for i in range(T)]))
write("ts_2d", ts=(np.arange(T) * 0.6).reshape(T, 1))
nan = np.arange(T) * 0.6; nan[7] = np.nan
write("nan_ts", ts=nan)
PY
"$exe" calcium cal/out.h5 cal/good.h5 >good.log 2>&1 || { cat good.log; fail "the well-formed session was refused"; }
check() { # NAME NEEDLE
  local rc=0; "$exe" calcium "cal/out_$1.h5" "cal/$1.h5" >"$1.log" 2>&1 || rc=$?
  [ "$rc" -eq 65 ] || { cat "$1.log"; fail "$1: exit $rc, expected 65"; }
  grep -qF -- "$2" "$1.log" || { cat "$1.log"; fail "$1: no '$2' in the message"; }
}
check zero_neurons "/gcamp/trace_array has shape [20, 0], expected (frames, neurons) with at least one frame and one neuron"
check string_ts "/timing/timestamp_confocal holds strings, expected numbers (one per frame)"
check ts_2d "/timing/timestamp_confocal has 2 dimensions, expected 1 (one value per frame)"
check nan_ts "/timing/timestamp_confocal[7] is not finite (every frame needs a time)"
echo "calcium: 0 neurons, string and 2-D timestamps, a NaN timestamp refused (65) with what is wrong"
