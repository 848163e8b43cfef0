/* example.c - a program outside the Tessera tree, built against an installed Tessera with
 * find_package(Tessera) (CMakeLists.txt here) or pkg-config (docs/install.md), run on any number
 * of ranks:
 *
 *   mpiexec -n 2 ./example [--set example.tokens=N] [--version]
 *
 * Rank 0 writes a token stream (HDF5, io/tokens.h) whose token i is i % 97; every rank opens it
 * (parallel HDF5), reads its block of the windows, sums their tokens with one BLAS dot product
 * (tensor/matmul.h) and the sums are all-reduced over a group (par/coll.h). Rank 0 checks the
 * total against a sequential count and prints one line. Exit 0 when they agree.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/config.h"   /* tess_config_* */
#include "core/runtime.h"  /* tess_runtime_* */
#include "core/version.h"  /* tess_version */
#include "io/tokens.h"     /* tess_tokens_* */
#include "par/coll.h"      /* tess_par_agree, tess_par_allreduce_f64 */
#include "par/layout.h"    /* tess_par_block_range */
#include "par/mesh.h"      /* tess_group_* */
#include "tensor/matmul.h" /* tess_matmul */

enum { SEQ = 8 };

static const tess_opt example_opts[] = {
    TESS_OPT_INT("tokens", 1000, 2 * SEQ, 1 << 24, "length of the token stream"),
};

/* Collective on rt->world, except a failed window read, which is this rank's alone: it sets
 * *collective = false so that main aborts every rank instead of waiting for them. */
static tess_status check(const tess_runtime *rt, int64_t n, bool *collective) {
    tess_status written = TESS_OK; /* rank 0 writes the file; every rank learns the verdict */
    if (rt->rank == 0) {
        int32_t *t = malloc((size_t)n * sizeof *t);
        for (int64_t i = 0; t && i < n; i++) t[i] = (int32_t)(i % 97);
        written = t ? tess_tokens_write("example.h5", t, n, 97, "byte", NULL) : TESS_ERR_MEM;
        free(t);
    }
    TESS_CHECK(tess_par_agree(rt->world, written));
    tess_tokens *r = NULL;
    tess_tokens_opts opts = {.seq_len = SEQ, .begin_frac = 0.0, .end_frac = 1.0};
    TESS_CHECK(tess_tokens_create(&r, rt->world, "example.h5", &opts));
    int64_t W = tess_tokens_num_windows(r), lo, hi;
    tess_par_block_range(W, rt->size, rt->rank, &lo, &hi);
    int32_t win[SEQ + 1];
    float x[SEQ + 1], ones[SEQ + 1], dot;
    for (int k = 0; k <= SEQ; k++) ones[k] = 1.0f;
    double local[1] = {0.0};
    for (int64_t w = lo; w < hi; w++) {
        tess_status s = tess_tokens_read(r, w, 1, win);
        *collective = s == TESS_OK;
        TESS_CHECK(s);
        for (int k = 0; k <= SEQ; k++) x[k] = (float)win[k];
        tess_matmul(&dot, x, ones, 1, 1, SEQ + 1, false, false, 1.0f, 0.0f); /* (1,K) @ (K,1) */
        local[0] += dot;
    }
    TESS_CHECK(tess_tokens_destroy(&r));
    TESS_CHECK(tess_par_allreduce_f64(rt->world, local, 1, TESS_PAR_SUM));
    double want = 0.0; /* window w holds tokens w*SEQ .. w*SEQ + SEQ */
    for (int64_t w = 0; w < W; w++)
        for (int k = 0; k <= SEQ; k++) want += (double)((w * SEQ + k) % 97);
    TESS_REQUIRE(local[0] == want, TESS_ERR_INTERNAL, "token sum %.1f over %d ranks, expected %.1f",
                 local[0], rt->size, want);
    if (rt->rank == 0)
        printf("example: Tessera %s, %d ranks, %lld windows, token sum %.0f as expected\n",
               tess_version(), rt->size, (long long)W, local[0]);
    return TESS_OK;
}

static tess_status run(const tess_runtime *rt, int argc, char **argv, bool *collective) {
    const tess_config_section secs[] = {TESS_CONFIG_SECTION("example", example_opts)};
    tess_config *cfg = NULL;
    TESS_CHECK(tess_config_create(&cfg, secs, 1));
    tess_config_action action;
    tess_status s = tess_config_parse_args(cfg, rt->world, argc, argv, &action);
    if (s == TESS_OK && action == TESS_CONFIG_ACTION_RUN)
        s = check(rt, tess_config_int(cfg, "example.tokens"), collective);
    tess_config_destroy(&cfg);
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    bool collective = true;
    if (s == TESS_OK) s = run(&rt, argc, argv, &collective);
    return tess_runtime_finish(&rt, s, collective);
}
