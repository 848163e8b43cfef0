#!/usr/bin/env bash
# run_ckpt.sh - the checkpoint benchmarks of docs/benchmarks.md ("Checkpoints"): tess_ckpt_save /
# tess_ckpt_load throughput at 1 and 2 ranks against a raw write()+fsync / read() of the same
# bytes and against torch.save(+fsync) / torch.load, and the extra memory of a save.
#
#   bench/run_ckpt.sh [--build DIR] [--sizes "100 500 2048"] [--rounds "4 4 2"] [--tensors 8]
#                     [--no-build]
#
# --sizes are state sizes in MiB (--tensors float32 tensors of (rows, 1024) each), --rounds the
# rounds per size (one number for all sizes, or one per size). A round runs three processes, in
# an order that rotates from round to round so that load from other processes hits every side:
#   bench_ckpt on 1 rank   two repetitions of: raw write+fsync and tess_ckpt_save, then raw read,
#                          ranges read and tess_ckpt_load; raw first in one repetition, Tessera
#                          in the other
#   bench_ckpt on 2 ranks  tess_ckpt_save, ranges read and tess_ckpt_load (state sharded over the
#                          ranks; ranges first in odd rounds); its raw reference is the 1-rank raw
#                          of the same round
# (ranges read: pread() of exactly the checkpoint's byte ranges that tess_ckpt_load reads, in its
# order and slab size: the cost of the file layout without HDF5, MPI-IO or the hash.)
#   bench_ckpt_torch.py    torch.save + os.fsync, torch.load
# The page cache is dropped before every read (as root through /proc/sys/vm/drop_caches, else
# posix_fadvise on the files). Ratios are medians of per-repetition ratios (1 rank against raw)
# or of per-round ratios (2 ranks, torch). The first round also times the checkpoint hash alone
# (bench_ckpt --profile 1).
# Files go to a fresh directory under /tmp, removed on exit. Builds bench_ckpt with the release
# preset into DIR (default build/release), keeps raw outputs in DIR/bench-out/ckpt/, prints
# markdown on stdout. The defaults take about 5 minutes on the 2-core bench machine; the
# 2 GiB size alone writes about 8 GiB per round.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build="$root/build/release"
sizes="100 500 2048"
rounds="4 4 2"
tensors=8
do_build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$(realpath -m "$2"); shift 2 ;;
        --sizes) sizes="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --tensors) tensors="$2"; shift 2 ;;
        --no-build) do_build=0; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "run_ckpt.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
done
read -r -a size_list <<< "$sizes"
read -r -a round_list <<< "$rounds"
if [ "${#round_list[@]}" -ne 1 ] && [ "${#round_list[@]}" -ne "${#size_list[@]}" ]; then
    echo "run_ckpt.sh: --rounds needs one number or one per size (${#size_list[@]})" >&2
    exit 64
fi

python=/usr/bin/python3
if [ "$do_build" = 1 ]; then
    (cd "$root" && cmake --preset release -B "$build" >/dev/null &&
        cmake --build "$build" -j"$(nproc)" --target bench_ckpt >/dev/null)
fi
bin="$build/bench/bench_ckpt"
[ -x "$bin" ] || { echo "run_ckpt.sh: $bin missing (build it or drop --no-build)" >&2; exit 66; }
"$python" -c "import torch" 2>/dev/null ||
    { echo "run_ckpt.sh: $python cannot import torch (apt install python3-torch)" >&2; exit 66; }

# Room: the 1-rank process holds the raw file and the checkpoint at once; memory: the largest
# state once in the C process (plus untouched gradients), twice in torch.load's process.
max_mib=0
for s in "${size_list[@]}"; do [ "$s" -gt "$max_mib" ] && max_mib=$s; done
free_mib=$(df -Pm /tmp | awk 'NR == 2 {print $4}')
avail_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
if [ "$free_mib" -lt $((3 * max_mib)) ] || [ "$avail_mib" -lt $((3 * max_mib)) ]; then
    echo "run_ckpt.sh: need 3 x $max_mib MiB free in /tmp and in memory" \
         "(have $free_mib MiB disk, $avail_mib MiB memory)" >&2
    exit 73
fi

work=$(mktemp -d /tmp/tess-ckbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
out="$build/bench-out/ckpt"
rm -rf "$out"
mkdir -p "$out"

export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export HDF5_USE_FILE_LOCKING=FALSE
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

{
    echo "date $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc --all) cores"
    echo "kernel $(uname -r)"
    echo "fs $(df -PT "$work" | awk 'NR == 2 {print $2, $1}') ($(findmnt -no OPTIONS -T "$work"))"
    echo "memory $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "dirty $(cat /proc/sys/vm/dirty_background_ratio)/$(cat /proc/sys/vm/dirty_ratio) %"
    echo "build_type $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
    echo "hdf5 $(pkg-config --modversion hdf5-openmpi 2>/dev/null || echo unknown) (openmpi flavour)"
    echo "mpi $(mpiexec --version 2>/dev/null | head -1)"
    echo "io_component ${OMPI_MCA_io:-default (ompio)}"
    echo "torch $("$python" -c 'import torch; print(torch.__version__)')"
    echo "tensors $tensors"
} > "$out/facts.txt"
load() { echo "$1 $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }

t_start=$(date +%s)
load "start"
for i in "${!size_list[@]}"; do
    mib=${size_list[$i]}
    nr=${round_list[0]}
    [ "${#round_list[@]}" -gt 1 ] && nr=${round_list[$i]}
    load "${mib}MiB_before"
    for r in $(seq 1 "$nr"); do
        prof=0
        [ "$r" = 1 ] && prof=1
        sides=(np1 np2 torch)
        for k in 0 1 2; do
            side=${sides[$(((k + r - 1) % 3))]}
            f="$out/${mib}_${side}_r$r.txt"
            case $side in
                np1) mpiexec -n 1 "$bin" "$work" --mib "$mib" --tensors "$tensors" --reps 2 \
                         --order $(((r + 1) % 2)) --profile "$prof" > "$f" ;;
                np2) mpiexec -n 2 "$bin" "$work" --mib "$mib" --tensors "$tensors" --raw 0 \
                         --order $(((r + 1) % 2)) --profile "$prof" > "$f" ;;
                torch) "$python" "$here/bench_ckpt_torch.py" "$work" --mib "$mib" \
                           --tensors "$tensors" > "$f" ;;
            esac
        done
    done
    load "${mib}MiB_after"
done
echo "seconds $(($(date +%s) - t_start))" >> "$out/facts.txt"

"$python" - "$out" "$sizes" "$rounds" <<'EOF'
import statistics
import sys
from pathlib import Path

out, sizes = Path(sys.argv[1]), [int(s) for s in sys.argv[2].split()]
rounds = [int(r) for r in sys.argv[3].split()]
rounds = rounds * len(sizes) if len(rounds) == 1 else rounds
nrounds = dict(zip(sizes, rounds))
MIB = 1 << 20
med = statistics.median


def kv(path):
    d = {}
    for line in path.read_text().splitlines():
        k, _, v = line.partition(" ")
        d[k] = v
    return d


facts = kv(out / "facts.txt")
runs = {(m, side, r): kv(out / f"{m}_{side}_r{r}.txt")
        for m in sizes for side in ("np1", "np2", "torch") for r in range(1, nrounds[m] + 1)}


def samples(m, side, key):
    """Per round, the seconds of every repetition of key ("tess_write", "torch_save", ...)."""
    res = []
    for r in range(1, nrounds[m] + 1):
        d = runs[m, side, r]
        res.append([float(x) for x in d[key + "_all"].split()] if key + "_all" in d
                   else [float(d[key + "_s"])])
    return res


def seconds(m, side, key):
    """Median over every repetition of every round."""
    return med([t for rnd in samples(m, side, key) for t in rnd])


def rate(m, side, key):
    return float(runs[m, side, 1]["state_bytes"]) / MIB / seconds(m, side, key)


def ratios(m, side, key, peer_side, peer_key):
    """Peer seconds / our seconds: per repetition inside one process (same side), else per
    round against the median of the peer's process in that round."""
    ours, peer = samples(m, side, key), samples(m, peer_side, peer_key)
    if side == peer_side:
        return [p / o for po, oo in zip(peer, ours) for p, o in zip(po, oo)]
    return [med(p) / med(o) for p, o in zip(peer, ours)]


def cell(xs):
    v = med(xs)
    return f"**{v:.2f}**" + (f" ({min(xs):.2f}-{max(xs):.2f})" if len(xs) > 1 else "")


print("#### Machine and load\n")
print(f"- Date: {facts['date']}; CPU: {facts['cpu']}; kernel {facts['kernel']}; "
      f"memory {facts['memory']}")
print(f"- Files: {facts['fs']}; dirty background / dirty ratio {facts['dirty']}")
print(f"- Build: {facts['build_type']}; HDF5 {facts['hdf5']}; {facts['mpi']}, MPI-IO "
      f"{facts['io_component']}; PyTorch {facts['torch']}")
drops = sorted({v["cache_drop"] for v in runs.values()})
print(f"- Page cache dropped before every read by: {', '.join(drops)}")
workers = sorted({v.get("hash_worker", "n/a") for v in runs.values() if "tess_read_s" in v})
print(f"- Load hash worker (MPI_THREAD_FUNNELED): {', '.join(workers)} (1: on)")
print(f"- State: {facts['tensors']} float32 tensors (rows, 1024) per size, sharded on dim 0 at "
      "2 ranks. Rounds: " + ", ".join(f"{m} MiB: {n}" for m, n in nrounds.items())
      + " (the 1-rank process makes 2 repetitions per round, raw first in one, Tessera first "
      "in the other)")
loads = [line.split(" ", 1) for line in (out / "load.txt").read_text().splitlines()]
print("- Load average (1, 5, 15 min): " + "; ".join(f"{k} {v.replace(' ', '/')}" for k, v in loads))
print(f"- Whole run: {facts['seconds']} s")

for what in ("write", "read"):
    tkey, rkey, pkey = (("tess_write", "raw_write", "torch_save") if what == "write"
                        else ("tess_read", "raw_read", "torch_load"))
    if what == "write":
        print("\n#### Write: save and commit\n")
        print("MiB/s of the state (state MiB / median seconds over all repetitions). raw = one "
              "process write()s the bytes to one file in 64 MiB calls, fsync, close (fsync s: "
              "the fsync alone); Tessera = tess_ckpt_save (HDF5 file with hashes, fsync, rename, "
              "directory fsync, latest pointer); torch = torch.save to an open file, flush, "
              "os.fsync. Ratios (bold: median, in brackets the range): at 1 rank per "
              "repetition against the raw write of the same process, at 2 ranks and against "
              "torch per round. hash s = tess_ckpt_hash_add over the local state alone (round "
              "1), with the hash written (tess-poshash32x-v2; v1 s: format 1's "
              "tess-poshash64-v1, still read); model = raw / (raw + hash): the ratio if the "
              "hash were Tessera's only cost.\n")
        print("| state MiB | ranks | raw MiB/s | fsync s | Tessera MiB/s | Tessera / raw | model | "
              "torch.save MiB/s | Tessera / torch | hash s | v1 s |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    else:
        print("\n#### Read: load, page cache dropped first\n")
        print("MiB/s of the state. raw = pread() of the raw file into the same buffer; Tessera "
              "= tess_ckpt_load into the registry's existing buffers (structure check on rank "
              "0, collective open, independent reads in 2 MiB slabs, each slab hashed on a "
              "worker thread while the next is read, hashes compared; the benchmark then checks "
              "every element, untimed); torch = torch.load (allocates new tensors). Ratios as "
              "above; model = raw / (raw + hash): the ratio if the hash ran after the reads, as "
              "it does without the worker. ranges = pread() of exactly the byte ranges of the "
              "checkpoint that tess_ckpt_load reads, in its order and 2 MiB slabs, without HDF5, "
              "MPI-IO or the hash, in the same process (page cache dropped first): what the "
              "file layout itself costs; Tessera / ranges per repetition.\n")
        print("| state MiB | ranks | raw MiB/s | Tessera MiB/s | Tessera / raw | model | "
              "torch.load MiB/s | Tessera / torch | ranges MiB/s | ranges / raw | "
              "Tessera / ranges | hash s | v1 s |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = {"raw": float("inf"), "torch": float("inf")}
    for m in sizes:
        raw_s = seconds(m, "np1", rkey)
        for side, ranks in (("np1", 1), ("np2", 2)):
            vr = ratios(m, side, tkey, "np1", rkey)
            vt = ratios(m, side, tkey, "torch", pkey)
            worst["raw"] = min(worst["raw"], med(vr))
            worst["torch"] = min(worst["torch"], med(vt))
            h = runs[m, side, 1].get("hash_s")
            cols = [str(m), str(ranks), f"{rate(m, 'np1', rkey):.0f}"]
            if what == "write":
                cols.append(f"{seconds(m, 'np1', 'raw_fsync'):.2f}" if ranks == 1 else "")
            cols += [f"{rate(m, side, tkey):.0f}", cell(vr),
                     f"{raw_s / (raw_s + float(h)):.2f}" if h else "n/a",
                     f"{rate(m, 'torch', pkey):.0f}", cell(vt)]
            if what == "read":
                cols += [f"{rate(m, side, 'range_read'):.0f}",
                         cell(ratios(m, side, "range_read", "np1", rkey)),
                         cell(ratios(m, side, tkey, side, "range_read"))]
            cols += [h or "n/a", runs[m, side, 1].get("hash_v1_s", "n/a")]
            print("| " + " | ".join(cols) + " |")
    ok = lambda v, g: "met" if v >= g else "**not met**"
    print(f"\nGoal Tessera >= 0.8x raw: worst row {worst['raw']:.2f}x, {ok(worst['raw'], 0.8)}. "
          f"Goal Tessera >= 1x torch: worst row {worst['torch']:.2f}x, "
          f"{ok(worst['torch'], 1.0)}.")

print("\n#### Memory\n")
print("Peak extra memory: VmHWM growth across the call (VmHWM reset to VmRSS just before, "
      "through /proc/self/clear_refs), max over ranks, median over repetitions; the goal for a "
      "save is at most the largest single tensor per rank. Written / read: bytes passed to "
      "write() / read() calls during the save / load (/proc/self/io wchar, rchar), summed over "
      "ranks, per state byte. File overhead: checkpoint file bytes - state bytes.\n")
print("| state MiB | ranks | largest local tensor MiB | save growth MiB | save / largest | "
      "load growth MiB | written / state | read / state | file overhead bytes | "
      "torch.save growth MiB | torch.load growth MiB |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
worst = 0.0
for m in sizes:
    for side, ranks in (("np1", 1), ("np2", 2)):
        def col(s, k):
            return med([float(runs[m, s, r][k]) for r in range(1, nrounds[m] + 1)])
        big = float(runs[m, side, 1]["largest_local_tensor_bytes"]) / MIB
        save = col(side, "save_hwm_growth_kib") / 1024
        worst = max(worst, save / big)
        over = int(runs[m, side, 1]["file_bytes"]) - int(runs[m, side, 1]["state_bytes"])
        cols = [str(m), str(ranks), f"{big:.1f}", f"{save:.1f}", f"{save / big:.3f}",
                f"{col(side, 'load_hwm_growth_kib') / 1024:.1f}",
                f"{col(side, 'save_wchar_per_state_byte'):.4f}",
                f"{col(side, 'load_rchar_per_state_byte'):.4f}", str(over)]
        cols += ([f"{col('torch', 'save_hwm_growth_kib') / 1024:.1f}",
                  f"{col('torch', 'load_hwm_growth_kib') / 1024:.1f}"] if ranks == 1 else ["", ""])
        print("| " + " | ".join(cols) + " |")
reset = all(v.get("hwm_reset") == "1" for v in runs.values())
print(f"\nGoal save growth <= largest local tensor: worst {worst:.3f}x, "
      f"{'met' if worst <= 1.0 else '**not met**'}"
      + ("" if reset else " (VmHWM could not be reset: growth includes earlier peaks)") + ".")
EOF
