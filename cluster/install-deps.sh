#!/usr/bin/env bash
# install-deps.sh - install exactly the Debian 12 packages Tessera needs. Idempotent: packages
# already present are not reinstalled, and nothing is fetched when all are there.
#
# usage: cluster/install-deps.sh [--bench] [--slurm] [--fuzz] [--text]
#   (no flag)  build + test dependencies: compiler, CMake, Open MPI, parallel HDF5 (openmpi),
#              ScaLAPACK (openmpi), OpenBLAS, libinih, jansson, Random123, NLopt, gnuplot, h5py, NumPy
#   --bench    also python3-torch (the PyTorch CPU peer in bench/)
#   --slurm    also a local Slurm (slurmctld, slurmd, slurm-client, munge) for the slurm tests
#   --fuzz     also clang and its runtimes (libFuzzer, ASan, UBSan) for the fuzz preset
#   --text     also SentencePiece and the Debian text packages of the moe corpus (jobs/moe-text.sh):
#              sentencepiece libsentencepiece-dev bible-kjv bible-kjv-text fortunes dict-gcide
#              dict-foldoc dict-jargon
# Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools
  libscalapack-openmpi-dev libopenblas-dev
  libinih-dev librandom123-dev libnlopt-dev libjansson-dev
  gnuplot-nox python3 python3-numpy python3-h5py
)
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(python3-torch) ;;
    --slurm) packages+=(slurmctld slurmd slurm-client munge) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    --text) packages+=(sentencepiece libsentencepiece-dev bible-kjv bible-kjv-text fortunes
                       dict-gcide dict-foldoc dict-jargon) ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$arg' (expected --bench, --slurm, --fuzz or --text)" >&2; exit 64 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
