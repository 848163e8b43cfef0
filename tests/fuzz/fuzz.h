/* fuzz.h - what the fuzz targets share: MPI started once on one rank, a private scratch
 * directory for the files a target writes, a byte cursor that decodes an input into a structure
 * (structure-aware targets), and the oracle failure.
 *
 * Every target defines LLVMFuzzerInitialize and LLVMFuzzerTestOneInput. Under the fuzz preset
 * (clang, -fsanitize=fuzzer,address,undefined) libFuzzer supplies main(); in every other build
 * tests/fuzz/replay.c does (it replays corpus and regression files through the same two
 * functions), so an input saved in tests/fuzz/regress/<target>/ stays a test without clang.
 *
 * A target either returns 0 (the input was handled: accepted or refused with a status) or calls
 * fuzz_fail (a property the library promises did not hold), which aborts: libFuzzer saves the
 * input as a crash, the replay driver exits non-zero. Header-only; one target per program.
 */
#ifndef TESS_FUZZ_H
#define TESS_FUZZ_H

#include <dirent.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/runtime.h" /* tess_runtime */
#include "core/status.h"  /* tess_error_*, tess_set_abort_hook */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process-wide state a target sets up once. */
static struct {
    tess_runtime rt;   /* MPI on this one process; rt.world is the group targets pass */
    char dir[256];     /* private scratch directory, removed at exit */
    int started;
    int verbose;       /* TESS_FUZZ_VERBOSE set: fuzz_verdict prints each input's outcome */
} fuzz_env;

/* At exit: empty and remove the scratch directory (flat: targets write files only), then end
 * MPI (mpiexec reports a process that exits without MPI_Finalize as failed). */
static inline void fuzz_cleanup(void) {
    DIR *d = fuzz_env.dir[0] ? opendir(fuzz_env.dir) : NULL;
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        char p[512];
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            snprintf(p, sizeof p, "%s/%s", fuzz_env.dir, e->d_name) < (int)sizeof p)
            unlink(p);
    }
    if (d) {
        closedir(d);
        rmdir(fuzz_env.dir);
    }
    (void)tess_runtime_finish(&fuzz_env.rt, TESS_OK, true);
}

/* A property did not hold: print why and abort (a crash for libFuzzer and the replay driver). */
static inline void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FUZZ ORACLE FAILED: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fprintf(stderr, "error record:\n%s", tess_error_text());
    abort();
}

/* Once per process: MPI_Init (a singleton when not under mpiexec; 1 rank either way), the runtime
 * and a scratch directory under $TMPDIR (default /tmp). Returns 0; aborts if anything fails. */
static inline int fuzz_start(int *argc, char ***argv) {
    if (fuzz_env.started) return 0;
    fuzz_env.started = 1;
    /* MPI_Init may install its own handlers of fatal signals (Open MPI prints a backtrace and
     * exits): put back the ones before it (the sanitizers', libFuzzer's), so that a crash or a
     * failed property is reported, and saved as an input, by them. */
    static const int fatal[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    struct sigaction before[sizeof fatal / sizeof fatal[0]];
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) sigaction(fatal[i], NULL, &before[i]);
    MPI_Init(argc, argv);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) sigaction(fatal[i], &before[i], NULL);
    if (tess_runtime_start(&fuzz_env.rt, MPI_COMM_WORLD) != TESS_OK)
        fuzz_fail("tess_runtime_start failed");
    tess_set_abort_hook(NULL, NULL); /* a failed TESS_ASSERT aborts (a crash), not MPI_Abort */
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 1) fuzz_fail("fuzz targets run on 1 rank, not %d", size);
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_env.dir, sizeof fuzz_env.dir, "%s/tess_fuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fuzz_env.dir)) fuzz_fail("cannot create a scratch directory in %s", fuzz_env.dir);
    atexit(fuzz_cleanup);
    fuzz_env.verbose = getenv("TESS_FUZZ_VERBOSE") != NULL;
    return 0;
}

/* With TESS_FUZZ_VERBOSE set (to see what a corpus reaches): print what the library said about
 * this input, "<what>: OK" or the status and its error record. */
static inline void fuzz_verdict(const char *what, tess_status s) {
    if (!fuzz_env.verbose) return;
    fprintf(stderr, "%s: %s\n%s", what, s == TESS_OK ? "OK" : tess_status_name(s),
            s == TESS_OK ? "" : tess_error_text());
}

/* "<scratch>/name" into buf (n bytes). */
static inline void fuzz_path(char *buf, size_t n, const char *name) {
    if (snprintf(buf, n, "%s/%s", fuzz_env.dir, name) >= (int)n) fuzz_fail("path too long");
}

/* Write bytes to path (replacing it). */
static inline void fuzz_write_file(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(bytes, 1, n, f) != n) || fclose(f) != 0)
        fuzz_fail("cannot write scratch file %s", path);
}

/* A cursor over the input: each take consumes bytes; past the end every take yields 0, so any
 * input decodes to some structure and a shorter input is a simpler one. */
typedef struct {
    const uint8_t *p;
    size_t n, at;
} fuzz_bytes;

static inline uint8_t fuzz_u8(fuzz_bytes *b) { return b->at < b->n ? b->p[b->at++] : 0; }

/* A value in [0, k) (1 <= k <= 255) from one byte. */
static inline int fuzz_pick(fuzz_bytes *b, int k) { return (int)(fuzz_u8(b) % (uint8_t)k); }

static inline uint64_t fuzz_u64(fuzz_bytes *b) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)fuzz_u8(b) << (8 * i);
    return v;
}

/* A double: mostly small integers and simple fractions (what real files hold, so checks past
 * the value test are reached), sometimes any bit pattern (NaN, infinities, denormals). */
static inline double fuzz_real(fuzz_bytes *b) {
    uint8_t k = fuzz_u8(b);
    if (k < 200) return (double)((int)fuzz_u8(b) - 100) / (double)(1 + k % 8);
    uint64_t bits = fuzz_u64(b);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

#endif
