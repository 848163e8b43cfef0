#!/usr/bin/env bash
# run_foundation.sh - run the Foundation benchmarks and print docs/benchmarks.md's tables.
#
#   bench/run_foundation.sh [--build DIR] [--threads "1 2"] [--rounds 5] [--no-build]
#
# --threads lists the thread counts to run (default "1 2"): each process gets that many OpenBLAS
# threads and torch.set_num_threads of it; the memory benchmark always runs on one thread.
#
# Builds bench_matmul, bench_block and bench_memory with the release preset into DIR (default
# build/release), then runs, each side interleaved with its peer so that load from other
# processes hits both alike:
#   1. bench_matmul                  tess_matmul vs cblas_sgemm on a training step's GEMMs
#   2. bench_block / bench_block_torch.py, --rounds processes each (2 warm-up and 3 timed steps
#                                    per process), alternating who goes first: one transformer
#                                    block forward+backward, Tessera vs PyTorch
#   3. bench_memory / bench_block_torch.py --mode memory: peak RSS of a training step vs what
#                                    it must hold
# and prints the machine facts, the load averages before and after each, and one markdown table per
# benchmark on stdout. Raw outputs go to DIR/bench-out/. Takes 100-110 s on a 2-core
# machine with the default thread counts.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build="$root/build/release"
threads="1 2"
rounds=5
reps=3
do_build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$(realpath -m "$2"); shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --no-build) do_build=0; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "run_foundation.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
done

python=/usr/bin/python3
if [ "$do_build" = 1 ]; then
    (cd "$root" && cmake --preset release -B "$build" >/dev/null &&
        cmake --build "$build" -j"$(nproc)" --target bench_matmul bench_block bench_memory >/dev/null)
fi
bin="$build/bench"
for b in bench_matmul bench_block bench_memory; do
    [ -x "$bin/$b" ] || { echo "run_foundation.sh: $bin/$b missing (build it or drop --no-build)" >&2; exit 66; }
done
"$python" -c "import torch" 2>/dev/null ||
    { echo "run_foundation.sh: $python cannot import torch (apt install python3-torch)" >&2; exit 66; }

out="$build/bench-out"
rm -rf "$out"
mkdir -p "$out"

# Machine facts and load.
{
    echo "date $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
    echo "cores $(nproc)"
    echo "cpu_detail $(lscpu | awk -F: '/^CPU family|^Model:|^Hypervisor vendor|^L2 cache|^L3 cache/ {
        gsub(/^ +/, "", $2); printf "%s %s; ", $1, $2 }')SIMD: $(grep -o -w -E 'avx512f|avx2|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    echo "load_at_start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "kernel $(uname -r)"
    echo "compiler $(cc --version | head -1)"
    echo "build_type $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
    echo "native $(sed -n 's/^TESS_NATIVE:[A-Z]*=//p' "$build/CMakeCache.txt")"
    echo "torch $("$python" -c 'import torch; print(torch.__version__)')"
    echo "torch_blas $(ldd "$("$python" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))')" | awk '/libblas|libopenblas|mkl/ {printf "%s ", $3}')"
} > "$out/facts.txt"
load() { echo "$1 $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }

# t threads per process. OMP_WAIT_POLICY=PASSIVE: PyTorch's OpenMP workers otherwise spin after
# each parallel region on the core OpenBLAS's second thread needs (2 threads: 354 ms a step
# instead of about 225 ms in a trial on the bench machine); Tessera uses no OpenMP.
run_env() {
    local t=$1; shift
    OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OMP_WAIT_POLICY=PASSIVE "$@"
}

for t in $threads; do
    load "matmul_t${t}_before"
    run_env "$t" "$bin/bench_matmul" --threads "$t" > "$out/matmul_t$t.txt"
    load "matmul_t${t}_after"

    load "block_t${t}_before"
    for r in $(seq 1 "$rounds"); do
        ours=(run_env "$t" "$bin/bench_block" --threads "$t" --reps "$reps")
        theirs=(run_env "$t" "$python" "$here/bench_block_torch.py" --mode speed --threads "$t"
                --reps "$reps")
        if [ $((r % 2)) = 1 ]; then
            "${ours[@]}" > "$out/block_tess_t${t}_r$r.txt"
            "${theirs[@]}" > "$out/block_torch_t${t}_r$r.txt"
        else
            "${theirs[@]}" > "$out/block_torch_t${t}_r$r.txt"
            "${ours[@]}" > "$out/block_tess_t${t}_r$r.txt"
        fi
    done
    load "block_t${t}_after"
done

load "memory_before"
run_env 1 "$bin/bench_memory" > "$out/memory_tess.txt"
run_env 1 "$python" "$here/bench_block_torch.py" --mode memory --layers 2 > "$out/memory_torch.txt"
load "memory_after"

"$python" "$here/foundation_report.py" "$out" "$threads"
