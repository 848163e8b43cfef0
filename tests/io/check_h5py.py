#!/usr/bin/env python3
"""check_h5py.py CKPT - a Tessera checkpoint reads cleanly outside Tessera.

h5py reads every dataset and every attribute; text attributes come back as str and numbers as
numpy integers; the config (a fixed-length UTF-8 string dataset) reads as str through .asstr();
every dataset's stored hash is recomputed here, independently of the C code, from the definitions
in io/ckpt.h (tess-poshash64-v1 for format_version 1, tess-poshash32x-v2 for 2 and 3); h5dump and
h5ls read the whole file. Exits 77 (skipped) when h5py is not installed.

python3 check_h5py.py --pins prints the hash values pinned in test_ckpt_hash.c.
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


def final(s, count):
    return int(mix(np.array([s ^ count], dtype=np.uint64))[0])


def poshash_v1(bits, count, first=0):
    """tess-poshash64-v1 of a flat uint64 array of element bit patterns (global order)."""
    with np.errstate(over="ignore"):
        i = np.arange(first, first + len(bits), dtype=np.uint64)
        terms = mix(mix(i + np.uint64(0x9E3779B97F4A7C15)) ^ bits)
        return final(int(np.sum(terms, dtype=np.uint64)), count)


def fmix32(h):
    """murmur3's 32-bit finaliser on a uint32 array (wrapping arithmetic)."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def poshash_v2(words, count, first_word=0):
    """tess-poshash32x-v2 of a flat uint32 array of 32-bit words (global order) from word index
    first_word; count is the element count."""
    with np.errstate(over="ignore"):
        k = np.arange(first_word, first_word + len(words), dtype=np.uint64)
        lo = (k & np.uint64(0xFFFFFFFF)).astype(np.uint32) * np.uint32(0x9E3779B1)
        hi = (k >> np.uint64(32)).astype(np.uint32) * np.uint32(0x85EBCA77)
        terms = fmix32(words ^ lo ^ hi).astype(np.uint64)
        return final(int(np.sum(terms, dtype=np.uint64)), count)


def words_v2(arr):
    """The 32-bit words of v2: float32 as is, 8-byte elements low word then high, bytes widened."""
    arr = np.ascontiguousarray(arr).reshape(-1)
    if arr.dtype.itemsize == 1:
        return arr.view(np.uint8).astype(np.uint32)
    if arr.dtype.itemsize == 4:
        return arr.view(np.uint32).astype(np.uint32)
    u = arr.view(np.uint64).astype(np.uint64)
    w = np.empty(2 * len(u), dtype=np.uint32)
    w[0::2] = (u & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    w[1::2] = (u >> np.uint64(32)).astype(np.uint32)
    return w


def poshash(arr, version):
    """The hash of a flat array of elements (uint8 for strings) under format_version's scheme."""
    arr = np.ascontiguousarray(arr).reshape(-1)
    if version == 1:
        view = {4: np.uint32, 8: np.uint64, 1: np.uint8}[arr.dtype.itemsize]
        return poshash_v1(arr.view(view).astype(np.uint64), len(arr))
    return poshash_v2(words_v2(arr), len(arr))


if len(sys.argv) > 1 and sys.argv[1] == "--pins":
    three = np.array([1.0, -2.5, 3.25], dtype="<f4")
    two = np.array([1.5, -0.0], dtype="<f8")
    text = np.frombuffer(b"tessera", dtype=np.uint8)
    print(f"v1 float32 {poshash(three, 1):016x}")
    print(f"v1 bytes   {poshash(text, 1):016x}")
    print(f"v1 float64 from 10 {poshash_v1(two.view(np.uint64), 2, 10):016x}")
    print(f"v2 float32 {poshash(three, 2):016x}")
    print(f"v2 bytes   {poshash(text, 2):016x}")
    print(f"v2 float64 from 10 {poshash_v2(words_v2(two), 2, 20):016x}")
    ramp = (np.arange(40, dtype=np.uint32) * np.uint32(2654435761)).view("<f4")
    print(f"v2 float32 ramp of 40 from 2^32-17 {poshash_v2(words_v2(ramp), 40, 2**32 - 17):016x}")
    sys.exit(0)


def dataset_elems(ds):
    if ds.dtype.kind == "S":  # fixed-length strings: hashed as bytes
        raw = ds[()]
        width = ds.dtype.itemsize
        rows = [raw] if ds.shape == () else list(raw)
        data = b"".join(r.ljust(width, b"\0") for r in rows)
        return np.frombuffer(data, dtype=np.uint8)
    return np.ascontiguousarray(ds[()]).reshape(-1)


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
    version = int(f.attrs["format_version"])
    expected = {1: "tess-poshash64-v1", 2: "tess-poshash32x-v2",
                3: "tess-poshash32x-v2"}.get(version)
    check(f.attrs["hash_algorithm"] == expected,
          f"hash algorithm {f.attrs['hash_algorithm']} for format_version {version}")
    config = f["config"].asstr()[()]
    check(isinstance(config, str) and config.startswith("[run]"), "config reads as str")
    manifest = list(f["manifest"].asstr()[:])
    check(len(manifest) > 0, "manifest is not empty")
    if version >= 3:  # counters are 1-element int64 datasets
        counter = f["optim/step_count"]
        check(counter.dtype == np.dtype("<i8") and counter.shape == (1,),
              "optim/step_count is an int64 [1] dataset")
    else:  # formats 1 and 2: an attribute of the group
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
            check(ds.dtype in (np.dtype("<f4"), np.dtype("<f8"), np.dtype("<i8")),
                  f"{p} is little-endian float32, float64 or int64")
            check(isinstance(ds.attrs["layout"], str), f"{p} layout is a str")
        stored = int(ds.attrs["hash"])
        mine = poshash(dataset_elems(ds), version)
        check(mine == stored, f"{p}: stored hash {stored:016x}, recomputed {mine:016x}")
    print(f"recomputed {len(manifest) + 2} hashes (format_version {version}, {expected})")

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
