# experiments/common.sh - what every experiment grid (experiments/*/run.sh, *_seeds.sh) does
# around one run; sourced, not run. The grids keep their own cells, options and commands.tsv
# columns; these functions keep the binary, the environment and the record of a run the same
# in all of them.
#
#   exp_setup ROOT OUT BIN NAME: the commit of ROOT into exp_commit ("+dirty" with uncommitted
#       changes in apps/ or src/), BIN copied to OUT/bin/NAME-<commit> (the runs use the copy, so
#       a rebuild during the grid changes none of them) into exp_bin, and the environment of
#       mpiexec (oversubscription, one BLAS / OpenMP thread, no HDF5 file locking, root allowed
#       when running as root) exported.
#   exp_run TSV RUN_DIR LOG FIELD... -- COMMAND...: runs COMMAND with stdout and stderr appended
#       to LOG, the date and load (uptime) before and after it into RUN_DIR.load, then appends
#       one line to TSV: the FIELDs, the exit code, the seconds and the command, tab-separated.
#       On exit 0 it marks the run finished (RUN_DIR.done: a grid skips such runs), otherwise it
#       prints LOG's last lines. Returns 0 either way (the grid goes on with its next run).

exp_setup() {
  local root=$1 out=$2 bin=$3 name=$4
  exp_commit=$(git -C "$root" rev-parse --short HEAD)
  git -C "$root" diff --quiet HEAD -- apps src || exp_commit=$exp_commit+dirty
  mkdir -p "$out/bin"
  cp "$bin" "$out/bin/$name-$exp_commit"
  exp_bin=$out/bin/$name-$exp_commit
  export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
  export HDF5_USE_FILE_LOCKING=FALSE
  if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}

exp_run() {
  local tsv=$1 dir=$2 log=$3 fields=() t0 rc=0
  shift 3
  while [ "$1" != "--" ]; do fields+=("$1"); shift; done
  shift
  { date -u; uptime; } >> "$dir.load"
  t0=$(date +%s)
  "$@" >> "$log" 2>&1 || rc=$?
  { date -u; uptime; } >> "$dir.load"
  printf '%s\t' "${fields[@]}" "$rc" "$(( $(date +%s) - t0 ))" >> "$tsv"
  printf '%s\n' "$*" >> "$tsv"
  if [ "$rc" -eq 0 ]; then touch "$dir.done"; else tail -n 5 "$log"; fi
}
