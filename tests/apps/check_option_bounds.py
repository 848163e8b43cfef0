#!/usr/bin/env python3
"""check_option_bounds.py EXE [ARG...] - every option's declared range is the range the app accepts.

Reads the app's options from `EXE --print-options` (JSON: key, type, default, min, max, choices)
and, with `--check` (parse, validate, run the set-up, exit), walks them one at a time, the others
at their defaults plus the ARGs given:
  - an int or real option at its min and at its max must pass (exit 0); exit 71 (out of memory)
    is accepted only with a message that says so, and exit 78 (or 65, data that does not fit the
    options, or 66, a file that another option names is missing) only with a message naming
    another option or the number of ranks (a relation, e.g. "model.channels (2) must be a
    multiple of model.heads (4)", not a range that lies); both are listed;
  - a choice or enum option at each of its names, and a bool at the value it does not default to,
    must pass too;
  - every int and real option just outside its range (min - 1, max + 1; the next double below
    min and above max) and every choice option at a name it does not list must be refused with
    exit 78 and a message naming the key (batched: the parser reports up to 20 errors a run).
Each run is limited to RUN_SECONDS and, outside sanitizer builds, to an address space of
LIMIT_GIB, so an absurd max fails as "out of memory" instead of taking the machine's memory.
Prints one line per failure, the five slowest runs inside the ranges and a summary; exit 1 if
any failed.
"""
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

RUN_SECONDS = 120
LIMIT_GIB = 4
EXIT_OK, EXIT_DATA, EXIT_NOINPUT, EXIT_SOFTWARE_MEM, EXIT_CONFIG = 0, 65, 66, 71, 78
BATCH = 20


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check_option_bounds.py EXE [ARG...]")
    exe, base = sys.argv[1], sys.argv[2:]
    sanitized = b"__asan_init" in open(exe, "rb").read()
    # Every run is one process that parses, sets up and exits without communicating, so Open MPI's
    # singleton start-up can skip what only multi-process runs need: the isolated singleton starts
    # no runtime daemon and ob1 does not initialise UCX (0.51 s -> 0.09 s a run, ~100-180 runs an
    # app). What a run checks (options, set-up) does not depend on the MPI transport. Isolated
    # singletons all take job id 0, so concurrent ones (two checks under ctest -j) would share one
    # session directory and remove it under each other: each check gets its own.
    session = tempfile.TemporaryDirectory(prefix="check_option_bounds.")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMPI_MCA_ess_singleton_isolated="1", OMPI_MCA_pml="ob1",
               OMPI_MCA_orte_tmpdir_base=session.name)
    if sanitized:  # ASan reserves terabytes of address space: limit allocations instead
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + \
            ":allocator_may_return_null=1:max_allocation_size_mb=%d" % (LIMIT_GIB * 1024)

    def limit():
        if not sanitized:
            lim = LIMIT_GIB << 30
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    def run(args):
        try:
            p = subprocess.run([exe] + base + args, env=env, preexec_fn=limit, timeout=RUN_SECONDS,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            return p.returncode, p.stdout
        except subprocess.TimeoutExpired as t:
            out = t.stdout.decode() if isinstance(t.stdout, bytes) else (t.stdout or "")
            return None, out

    rc, out = run(["--print-options"])
    if rc != 0:
        sys.exit("check_option_bounds: FAIL: %s --print-options exited %s:\n%s" % (exe, rc, out))
    opts = json.loads(out)["options"]
    name = os.path.basename(exe)
    keys = [o["key"] for o in opts]
    failures, notes, inside, outside = [], [], 0, []
    seconds = []  # (wall seconds, "key=value") of the runs inside the ranges

    def fmt(x):
        return repr(float(x)) if isinstance(x, float) else str(x)

    def inside_run(key, value, what):
        nonlocal inside
        inside += 1
        t0 = time.monotonic()
        rc, out = run(["--check", "--set", "%s=%s" % (key, value)])
        seconds.append((time.monotonic() - t0, "%s=%s" % (key, value)))
        last = out.strip().splitlines()[-3:] if out.strip() else ["(no output)"]
        if rc == EXIT_OK:
            return
        if rc == EXIT_SOFTWARE_MEM and ("cannot allocate" in out or "out of memory" in out):
            notes.append("%s=%s (%s): out of memory within %d GiB (exit 71)" %
                         (key, value, what, LIMIT_GIB))
            return
        others = [k for k in keys if k != key and k in out]
        if "ranks" in out:  # a relation with the run's size, which no option declares
            others.append("the number of ranks")
        if rc in (EXIT_CONFIG, EXIT_DATA, EXIT_NOINPUT) and others:
            notes.append("%s=%s (%s): refused with %s at its default (exit %d)" %
                         (key, value, what, ", ".join(others), rc))
            return
        why = "timed out after %ds" % RUN_SECONDS if rc is None else "exit %d" % rc
        failures.append("%s %s=%s (%s): %s: %s" % (name, key, value, what, why, " | ".join(last)))

    for o in opts:
        key, t = o["key"], o["type"]
        if t in ("int", "real"):
            lo, hi = o["min"], o["max"]
            inside_run(key, fmt(lo), "min")
            if hi != lo:
                inside_run(key, fmt(hi), "max")
            if t == "int":
                if lo > -2**63:
                    outside.append((key, str(lo - 1)))
                if hi < 2**63 - 1:
                    outside.append((key, str(hi + 1)))
            else:
                outside.append((key, repr(math.nextafter(float(lo), -math.inf))))
                outside.append((key, repr(math.nextafter(float(hi), math.inf))))
        elif t in ("choice", "enum"):
            for c in o["choices"]:
                if c != o["default"]:
                    inside_run(key, c, "choice")
            outside.append((key, "not-a-choice"))
        elif t == "bool":
            inside_run(key, "false" if o["default"] else "true", "bool")

    # Outside the range: refused by the parser (before any set-up), batched.
    for i in range(0, len(outside), BATCH):
        batch = outside[i:i + BATCH]
        args = ["--check"]
        for key, value in batch:
            args += ["--set", "%s=%s" % (key, value)]
        rc, out = run(args)
        if rc != EXIT_CONFIG:
            failures.append("%s: %d values outside their ranges: exit %s, expected 78:\n%s" %
                            (name, len(batch), rc, out))
            continue
        for key, value in batch:
            if ("'%s': '%s'" % (key, value)) not in out:
                failures.append("%s %s=%s (outside): exit 78 but no message naming the key and "
                                "value" % (name, key, value))

    for f in failures:
        print("check_option_bounds: FAIL: " + f)
    for n in notes:
        print("check_option_bounds: note: %s %s" % (name, n))
    slowest = sorted(seconds, reverse=True)[:5]
    print("check_option_bounds: %s: slowest runs: %s" %
          (name, ", ".join("%s %.1f s" % (kv, t) for t, kv in slowest)))
    print("check_option_bounds: %s: %d options, %d runs inside the ranges, %d values outside, "
          "%d failures" % (name, len(opts), inside, len(outside), len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
