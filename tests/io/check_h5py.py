#!/usr/bin/env python3
"""check_h5py.py CKPT - a Tessera checkpoint reads cleanly outside Tessera.

h5py reads every dataset and every attribute; text attributes come back as str (formats 1-3,
variable-length) or numpy bytes (format 4, fixed-length) and numbers as numpy integers; the config
(a fixed-length UTF-8 string dataset) reads as str through .asstr(); every dataset's stored hash
is recomputed here, independently of the C code, from the definitions in io/ckpt.h
(tess-poshash64-v1 for format_version 1, tess-poshash32x-v2 for 2 to 4), and so is format 4's
integrity record (io/ckpt_seal.c: its fields, its data extents against h5py's dataset offsets,
its digest); h5dump and h5ls read the whole file. Exits 77 (skipped) when h5py is not installed.

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


def text(v):
    """A text attribute as str: variable-length ones are str, fixed-length ones numpy bytes."""
    return v.decode("utf-8") if isinstance(v, (bytes, np.bytes_)) else v


def check_record(path, f, manifest):
    """Format 4: the integrity record at the file's start, recomputed from the raw bytes."""
    raw = np.fromfile(path, dtype=np.uint8)
    head = raw[:128].tobytes()
    check(head[:8] == b"TESSCKPT", "record magic")
    fields = np.frombuffer(head[16:88], dtype="<i8")
    version, userblock, nbytes, step, cursor, seed, world, next = (int(x) for x in fields[:8])
    digest = int(np.frombuffer(head[80:88], dtype="<u8")[0])
    check(version == 4 and nbytes == len(raw), f"record: format {version}, {nbytes} bytes")
    check(userblock == f.userblock_size, f"record user block {userblock}, h5py {f.userblock_size}")
    check((step, cursor, world) == (int(f.attrs["step"]), int(f.attrs["data_cursor"]),
                                    int(f.attrs["world_size"])), "record step, cursor, ranks")
    check(np.uint64(seed) == f.attrs["seed"].astype(np.uint64), "record seed")
    ext = np.frombuffer(raw[128:128 + 16 * next].tobytes(), dtype="<i8").reshape(-1, 2)
    mine = sorted((f[p].id.get_offset(), f[p].id.get_storage_size()) for p in manifest
                  if f[p].id.get_storage_size() > 0)
    check([tuple(int(v) for v in e) for e in ext] == mine, "record extents = dataset offsets")
    keep = np.ones(len(raw), dtype=bool)
    keep[80:88] = False  # the digest field itself
    for off, length in ext:
        keep[off:off + length] = False
    idx = np.nonzero(keep)[0]
    with np.errstate(over="ignore"):  # word k = the byte at file offset k
        k = idx.astype(np.uint64)
        lo = (k & np.uint64(0xFFFFFFFF)).astype(np.uint32) * np.uint32(0x9E3779B1)
        hi = (k >> np.uint64(32)).astype(np.uint32) * np.uint32(0x85EBCA77)
        terms = fmix32(raw[idx].astype(np.uint32) ^ lo ^ hi).astype(np.uint64)
        got = final(int(np.sum(terms, dtype=np.uint64)), len(idx))
    check(got == digest, f"record digest stored {digest:016x}, recomputed {got:016x}")
    print(f"integrity record: {next} data extents, digest over {len(idx)} bytes matches")


path = sys.argv[1]
with h5py.File(path, "r") as f:
    text_attrs = ["format", "tessera_version", "app", "created_utc", "model_digest",
                  "hash_algorithm", "rng"]
    int_attrs = ["format_version", "step", "data_cursor", "world_size", "seed"]
    for name in text_attrs:
        check(isinstance(text(f.attrs.get(name)), str), f"root attribute {name} is text")
    for name in int_attrs:
        check(isinstance(f.attrs.get(name), np.integer), f"root attribute {name} is an integer")
    check(text(f.attrs["format"]) == "tessera-checkpoint", "format")
    version = int(f.attrs["format_version"])
    expected = {1: "tess-poshash64-v1", 2: "tess-poshash32x-v2", 3: "tess-poshash32x-v2",
                4: "tess-poshash32x-v2"}.get(version)
    check(text(f.attrs["hash_algorithm"]) == expected,
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
            check(isinstance(text(value), (str, np.integer)),
                  f"/{name} attribute {key}: {type(value)}")
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
            check(isinstance(text(ds.attrs["layout"]), str), f"{p} layout is text")
        stored = int(ds.attrs["hash"])
        mine = poshash(dataset_elems(ds), version)
        check(mine == stored, f"{p}: stored hash {stored:016x}, recomputed {mine:016x}")
    print(f"recomputed {len(manifest) + 2} hashes (format_version {version}, {expected})")
    if version >= 4:
        check_record(path, f, manifest)

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
