#!/usr/bin/env bash
# check_option_bounds.sh PYTHON EXE - every option of the app EXE at the bounds of its declared
# range, with --check (check_option_bounds.py says what it asserts); skipped (77) without python3.
set -euo pipefail
python=$1
shift
"$python" -c 'import json, resource, subprocess' 2>/dev/null ||
  { echo "check_option_bounds: SKIP: no usable python3 ('$python')"; exit 77; }
exec "$python" "$(dirname "$0")/check_option_bounds.py" "$@"
