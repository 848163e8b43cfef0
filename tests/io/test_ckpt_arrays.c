/* test_ckpt_arrays - 1-D float32/float64/int64 state entries in a checkpoint without a registry
 * (tess_state_add): bitwise round trip at the writer's rank count, loads at other rank counts
 * (argv: "write PATH" at P ranks, then "read PATH" at Q), the same hashes whatever the writer
 * count, and the load's refusals (TESS_ERR_DATA naming dataset, expected and found) for a wrong
 * dtype, a wrong length, a missing array and one flipped float64 element.
 *
 * Arrays: "a/x" float64 of 37 split into blocks over all ranks; "a/y" float64 of 10 split over
 * min(2, ranks) blocks, each block held by several ranks (replicas); "a/c" int64 of 5 replicated
 * with values above 2^53; "s" float32 of 3 replicated. Values are functions of the global index. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_tamper.h"
#include "core/runtime.h" /* tess_runtime_* */
#include "par/layout.h"  /* tess_par_block_range */
#include "io/ckpt.h"      /* tess_ckpt_* */
#include "tess_test.h"

enum { NX = 37, NY = 10, NC = 5, NS = 3, NARR = 4 };

static double xval(int64_t i) { return sin((double)i) * 1e3 + (double)i * 1e-9; }
static double yval(int64_t i) { return -1.0 / (double)(i + 3); }
static int64_t cval(int64_t i) { return ((int64_t)1 << 60) + 12345 * i - 7; }
static float sval(int64_t i) { return (float)i * 0.1f - 1.0f; }

typedef struct {
    double x[NX], y[NY];
    int64_t c[NC];
    float s[NS];
    tess_state *entries;
    tess_ckpt_state st;
} state;

/* Entry k of the state (a/x, a/y, a/c, s) with dtype and length changed (k < 0: none). */
typedef struct {
    int k;
    tess_dtype dtype;
    int64_t n_global;
    void *data;
} change;

/* This rank's ranges; fill: the reference values, else a poison pattern. Entry ch.k is replaced
 * by a replicated one of ch's dtype and length. */
static void build(state *z, int rank, int size, bool fill, change ch) {
    memset(z, 0, sizeof *z);
    int64_t xlo, xhi, ylo, yhi;
    tess_par_block_range(NX, size, rank, &xlo, &xhi);
    const int ny = size < 2 ? 1 : 2; /* y: ny blocks, block b held by ranks with rank % ny == b */
    tess_par_block_range(NY, ny, rank % ny, &ylo, &yhi);
    for (int64_t i = xlo; i < xhi; i++) z->x[i - xlo] = fill ? xval(i) : NAN;
    for (int64_t i = ylo; i < yhi; i++) z->y[i - ylo] = fill ? yval(i) : NAN;
    for (int64_t i = 0; i < NC; i++) z->c[i] = fill ? cval(i) : -1;
    for (int64_t i = 0; i < NS; i++) z->s[i] = fill ? sval(i) : NAN;
    const tess_layout rep = tess_layout_replicated(), xl = tess_layout_sharded(0, size, rank),
                      yl = tess_layout_sharded(0, ny, rank % ny);
    struct {
        const char *name;
        tess_dtype dtype;
        int64_t n;
        const tess_layout *l;
        void *data;
    } e[NARR] = {{"a/x", TESS_F64, NX, &xl, z->x},
                 {"a/y", TESS_F64, NY, &yl, z->y},
                 {"a/c", TESS_I64, NC, &rep, z->c},
                 {"s", TESS_F32, NS, &rep, z->s}};
    TESS_TEST_CHECK(tess_state_create(&z->entries) == TESS_OK, "state: %s", tess_error_text());
    for (int k = 0; k < NARR; k++) {
        const bool changed = k == ch.k;
        TESS_TEST_CHECK(tess_state_add(z->entries, e[k].name, changed ? ch.dtype : e[k].dtype, 1,
                                       changed ? &ch.n_global : &e[k].n, changed ? &rep : e[k].l,
                                       changed ? ch.data : e[k].data) == TESS_OK,
                        "add %s: %s", e[k].name, tess_error_text());
    }
    z->st = (tess_ckpt_state){.state = z->entries, .step = 7, .seed = 99,
                              .app = "test_ckpt_arrays"};
}

static void unbuild(state *z) { tess_state_destroy(&z->entries); }

static const change unchanged = {.k = -1};

/* Every local element equals its reference, bit for bit. */
static void check_values(const state *z, int rank, int size, const char *label) {
    int64_t xlo, xhi, ylo, yhi, bad = 0;
    tess_par_block_range(NX, size, rank, &xlo, &xhi);
    tess_par_block_range(NY, size < 2 ? 1 : 2, rank % (size < 2 ? 1 : 2), &ylo, &yhi);
    for (int64_t i = xlo; i < xhi; i++) {
        double v = xval(i);
        bad += memcmp(&z->x[i - xlo], &v, sizeof v) != 0;
    }
    for (int64_t i = ylo; i < yhi; i++) {
        double v = yval(i);
        bad += memcmp(&z->y[i - ylo], &v, sizeof v) != 0;
    }
    for (int64_t i = 0; i < NC; i++) bad += z->c[i] != cval(i);
    for (int64_t i = 0; i < NS; i++) {
        float v = sval(i);
        bad += memcmp(&z->s[i], &v, sizeof v) != 0;
    }
    TESS_TEST_CHECK(bad == 0, "%s: %lld elements differ on rank %d", label, (long long)bad, rank);
    TESS_TEST_CHECK(z->st.step == 7 && z->st.seed == 99, "%s: step %lld seed %llu", label,
                    (long long)z->st.step, (unsigned long long)z->st.seed);
}

static void load_ok(const tess_group *g, int rank, int size, const char *path, const char *label) {
    state z;
    build(&z, rank, size, false, unchanged);
    tess_error_clear();
    tess_status s = tess_ckpt_load(g, path, &z.st);
    TESS_TEST_CHECK(s == TESS_OK, "%s: load: %s", label, tess_error_text());
    if (s == TESS_OK) check_values(&z, rank, size, label);
    unbuild(&z);
    TESS_TEST_CHECK(tess_ckpt_verify(g, path, NULL) == TESS_OK, "%s: verify: %s", label,
                    tess_error_text());
}

/* Load with entry k changed to dtype and n_global (or a damaged file, k < 0); expect
 * TESS_ERR_DATA with the needles. */
static void load_bad(const tess_group *g, int rank, int size, const char *path, int k,
                     tess_dtype dtype, int64_t n_global, const char *label,
                     const char *needle1, const char *needle2) {
    state z;
    double buf[64];
    build(&z, rank, size, false, (change){k, dtype, n_global, buf});
    tess_error_clear();
    tess_status s = tess_ckpt_load(g, path, &z.st);
    const char *t = tess_error_text();
    TESS_TEST_CHECK(s == TESS_ERR_DATA, "%s: status %s, expected TESS_ERR_DATA:\n%s", label,
                    tess_status_name(s), t);
    TESS_TEST_CHECK(strstr(t, needle1), "%s: no '%s' in:\n%s", label, needle1, t);
    TESS_TEST_CHECK(!needle2 || strstr(t, needle2), "%s: no '%s' in:\n%s", label, needle2, t);
    tess_error_clear();
    unbuild(&z);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL; /* the checkpoint functions' group */
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;
    MPI_Comm comm = rt.comm;
    const int rank = rt.rank, size = rt.size;
    const char *mode = argc > 2 ? argv[1] : "all", *path = argc > 2 ? argv[2] : "arrays.h5";
    if (strcmp(mode, "read") != 0) {
        state z;
        build(&z, rank, size, true, unchanged);
        TESS_TEST_CHECK(tess_ckpt_write(g, path, &z.st) == TESS_OK, "write: %s",
                        tess_error_text());
        unbuild(&z);
    }
    load_ok(g, rank, size, path, strcmp(mode, "read") == 0 ? "reshard" : "round trip");
    if (strcmp(mode, "all") == 0) {
        load_bad(g, rank, size, path, 1, TESS_I64, NY, "wrong dtype",
                 "dataset /a/y has type float64, expected int64", NULL);
        load_bad(g, rank, size, path, 2, TESS_I64, NC + 1, "wrong length",
                 "dataset /a/c has shape [5], expected [6]", NULL);
        state z;
        build(&z, rank, size, false, unchanged);
        double extra[2];
        const int64_t two = 2;
        const tess_layout rep = tess_layout_replicated();
        TESS_TEST_CHECK(tess_state_add(z.entries, "b/z", TESS_F64, 1, &two, &rep, extra) ==
                            TESS_OK,
                        "add b/z: %s", tess_error_text());
        tess_error_clear();
        tess_status s = tess_ckpt_load(g, path, &z.st);
        TESS_TEST_CHECK(s == TESS_ERR_DATA && strstr(tess_error_text(), "dataset /b/z is missing "
                                                                        "(expected float64 [2])"),
                        "missing entry: %s", tess_error_text());
        tess_error_clear();
        unbuild(&z);
        /* an entry the state does not list: the dataset is extra */
        build(&z, rank, size, false, unchanged);
        tess_state_destroy(&z.entries);
        const int64_t ns = NS;
        TESS_TEST_CHECK(tess_state_create(&z.entries) == TESS_OK &&
                            tess_state_add(z.entries, "s", TESS_F32, 1, &ns, &rep, z.s) == TESS_OK,
                        "state: %s", tess_error_text());
        z.st.state = z.entries;
        s = tess_ckpt_load(g, path, &z.st);
        TESS_TEST_CHECK(s == TESS_ERR_DATA && strstr(tess_error_text(), "3 problems") &&
                            strstr(tess_error_text(), "dataset /a/x is not in the state"),
                        "extra datasets: %s", tess_error_text());
        tess_error_clear();
        unbuild(&z);
        /* one flipped byte of one float64 element: the load and verify refuse it */
        int ok = 1;
        if (rank == 0)
            ok = tamper_copy(path, "bad.h5") == 0 &&
                 tamper_flip_dataset("bad.h5", "/a/x", 8 * 20 + 3) == 0;
        MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
        TESS_TEST_CHECK(ok, "tampering failed");
        load_bad(g, rank, size, "bad.h5", -1, TESS_F64, 0, "flipped element",
                 "dataset /a/x does not match its hash", "corrupt checkpoint 'bad.h5'");
        tess_error_clear();
        s = tess_ckpt_verify(g, "bad.h5", NULL);
        TESS_TEST_CHECK(s == TESS_ERR_DATA && strstr(tess_error_text(), "/a/x does not match"),
                        "verify of the flipped file: %s", tess_error_text());
        tess_error_clear();
    }
    int rc = tess_test_finish_mpi("test_ckpt_arrays", comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
