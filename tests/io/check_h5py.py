#!/usr/bin/env python3
"""check_h5py.py CKPT - a Tessera checkpoint reads cleanly outside Tessera.

h5py reads every dataset and every attribute; text attributes come back as str and numbers as
numpy integers; the config (a fixed-length UTF-8 string dataset) reads as str through .asstr();
every dataset's stored hash is recomputed here, independently of the C code, from the definition
in io/ckpt.h (tess-poshash64-v1); h5dump and h5ls read the whole file. Exits 77 (skipped) when
h5py is not installed.
"""
import shutil
import subprocess
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"check_h5py: skipped: {e}")
    sys.exit(77)

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix(z):
    """SplitMix64's finaliser on a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def poshash(bits, count):
    """tess-poshash64-v1 of a flat uint64 array of element bit patterns (global order)."""
    with np.errstate(over="ignore"):
        i = np.arange(len(bits), dtype=np.uint64)
        terms = mix(mix(i + np.uint64(0x9E3779B97F4A7C15)) ^ bits)
        s = int(np.sum(terms, dtype=np.uint64))
        return int(mix(np.array([s ^ count], dtype=np.uint64))[0])


def dataset_bits(ds):
    if ds.dtype.kind == "S":  # fixed-length strings: hashed as bytes
        raw = ds[()]
        width = ds.dtype.itemsize
        rows = [raw] if ds.shape == () else list(raw)
        data = b"".join(r.ljust(width, b"\0") for r in rows)
        return np.frombuffer(data, dtype=np.uint8).astype(np.uint64)
    arr = np.ascontiguousarray(ds[()]).reshape(-1)
    view = {4: np.uint32, 8: np.uint64, 1: np.uint8}[arr.dtype.itemsize]
    return arr.view(view).astype(np.uint64)


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


path = sys.argv[1]
with h5py.File(path, "r") as f:
    text_attrs = ["format", "tessera_version", "app", "created_utc", "model_digest",
                  "hash_algorithm", "rng"]
    int_attrs = ["format_version", "step", "data_cursor", "world_size", "seed"]
    for name in text_attrs:
        check(isinstance(f.attrs.get(name), str), f"root attribute {name} is a str")
    for name in int_attrs:
        check(isinstance(f.attrs.get(name), np.integer), f"root attribute {name} is an integer")
    check(f.attrs["format"] == "tessera-checkpoint", "format")
    check(f.attrs["hash_algorithm"] == "tess-poshash64-v1", "hash algorithm")
    config = f["config"].asstr()[()]
    check(isinstance(config, str) and config.startswith("[run]"), "config reads as str")
    manifest = list(f["manifest"].asstr()[:])
    check(len(manifest) > 0, "manifest is not empty")
    check(isinstance(f["optim"].attrs["step_count"], np.integer), "optim step_count counter")

    seen = {"datasets": 0, "attributes": 0}

    def visit(name, obj):
        for key, value in obj.attrs.items():  # reads every attribute
            seen["attributes"] += 1
            check(isinstance(value, (str, np.integer)), f"/{name} attribute {key}: {type(value)}")
        if isinstance(obj, h5py.Dataset):
            seen["datasets"] += 1
            obj[()]  # reads every dataset
    visit("", f)
    f.visititems(visit)
    print(f"read {seen['datasets']} datasets and {seen['attributes']} attributes")

    for p in manifest + ["/config", "/manifest"]:
        ds = f[p]
        if p in manifest:
            check(ds.dtype == np.dtype("<f4"), f"{p} is little-endian float32")
            check(isinstance(ds.attrs["layout"], str), f"{p} layout is a str")
        bits = dataset_bits(ds)
        stored = int(ds.attrs["hash"])
        mine = poshash(bits, len(bits))
        check(mine == stored, f"{p}: stored hash {stored:016x}, recomputed {mine:016x}")
    print(f"recomputed {len(manifest) + 2} hashes")

for tool, args in (("h5dump", []), ("h5dump", ["-A"]), ("h5ls", ["-r", "-v"])):
    exe = shutil.which(tool)
    if not exe:
        print(f"{tool} not installed: not checked")
        continue
    r = subprocess.run([exe] + args + [path], capture_output=True, text=True)
    check(r.returncode == 0 and "error" not in r.stderr.lower(),
          f"{tool} {' '.join(args)} exit {r.returncode}: {r.stderr[:500]}")
    if tool == "h5dump" and not args:
        check("tessera-checkpoint" in r.stdout and "/params/emb.w" in r.stdout,
              "h5dump shows the format and the datasets")

if failures:
    print(f"check_h5py: {len(failures)} failed")
    sys.exit(1)
print("check_h5py: all passed")
