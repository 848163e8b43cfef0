/* test_gather.c - gather to rank 0 and scatter back for every layout kind at 1, 2 and 4 ranks:
 * replicated, sharded along each dimension (uneven, some ranks empty, parts in any rank order),
 * block-cyclic on every process grid with a matrix that is not a multiple of the block. The local
 * parts are built here from global-to-local rules, the opposite direction from the library's.
 * Mismatched layouts fail on every rank. Runs with the default and a 5-element message limit. */
#include <stdlib.h>

#include "par/gather.h" /* tess_par_gather_global, tess_par_scatter_global */
#include "par_test.h"

/* The global tensor's value at row-major index k. */
static float gval(int64_t k) { return 0.5f * (float)k + 1.0f; }

/* This rank's part of the global tensor under l, element by element from the global side. */
static void fill_local(const tess_layout *l, int ndim, const int64_t *shape, float *local) {
    int64_t total = 1, mloc = 0;
    for (int i = 0; i < ndim; i++) total *= shape[i];
    if (l->kind == TESS_LAYOUT_BLOCK_CYCLIC)
        mloc = tess_par_numroc(shape[0], l->mb, l->prow, l->nprow);
    for (int64_t k = 0; k < total; k++) {
        int64_t idx[TESS_MAX_DIMS] = {0}, rest = k; /* block-cyclic reads idx[1]: ndim is 2 */
        for (int i = ndim - 1; i >= 0; i--) {
            idx[i] = rest % shape[i];
            rest /= shape[i];
        }
        if (l->kind == TESS_LAYOUT_REPLICATED) {
            local[k] = gval(k);
        } else if (l->kind == TESS_LAYOUT_SHARDED) {
            int64_t n = shape[l->dim], block = (n + l->nparts - 1) / l->nparts;
            if (idx[l->dim] / block != l->part) continue;
            int64_t lk = 0; /* row-major index in the local shape */
            for (int i = 0; i < ndim; i++) {
                int64_t extent = shape[i], at = idx[i];
                if (i == l->dim) {
                    int64_t lo = block * l->part, hi = lo + block < n ? lo + block : n;
                    extent = hi - lo;
                    at -= lo;
                }
                lk = lk * extent + at;
            }
            local[lk] = gval(k);
        } else {
            int64_t gi = idx[0], gj = idx[1];
            if ((gi / l->mb) % l->nprow != l->prow || (gj / l->nb) % l->npcol != l->pcol) continue;
            int64_t li = gi / (l->mb * l->nprow) * l->mb + gi % l->mb;
            int64_t lj = gj / (l->nb * l->npcol) * l->nb + gj % l->nb;
            local[li + lj * mloc] = gval(k);
        }
    }
}

static void round_trip(const tess_group *g, tess_layout l, int ndim, const int64_t *shape,
                       const char *what) {
    int64_t total = 1, nloc = tess_layout_local_count(&l, ndim, shape);
    for (int i = 0; i < ndim; i++) total *= shape[i];
    float *local = malloc((size_t)(nloc + 1) * sizeof *local);
    float *back = malloc((size_t)(nloc + 1) * sizeof *back);
    float *global = malloc((size_t)(total + 1) * sizeof *global);
    for (int64_t i = 0; i <= nloc; i++) local[i] = back[i] = -7.0f;
    for (int64_t i = 0; i <= total; i++) global[i] = -7.0f;
    fill_local(&l, ndim, shape, local);

    DIST_TEST_OK(tess_par_gather_global(g, &l, ndim, shape, local, g->rank == 0 ? global : NULL));
    if (g->rank == 0) {
        int bad = 0;
        for (int64_t k = 0; k < total; k++) bad += global[k] != gval(k);
        bad += global[total] != -7.0f;
        TESS_TEST_CHECK(bad == 0, "gather %s max_count=%lld: %d of %lld wrong", what,
                        (long long)g->max_count, bad, (long long)total);
    }
    DIST_TEST_OK(tess_par_scatter_global(g, &l, ndim, shape, g->rank == 0 ? global : NULL, back));
    int bad = 0;
    for (int64_t i = 0; i < nloc; i++) bad += back[i] != local[i];
    bad += back[nloc] != -7.0f;
    TESS_TEST_CHECK(bad == 0, "scatter %s max_count=%lld: %d of %lld wrong on rank %d", what,
                    (long long)g->max_count, bad, (long long)nloc, g->rank);
    free(local);
    free(back);
    free(global);
}

static void run_layouts(const tess_group *g) {
    int p = g->size, r = g->rank;
    const int64_t mat[2] = {5, 3};
    round_trip(g, tess_layout_replicated(), 2, mat, "replicated 5x3");

    const int64_t lens[] = {0, 1, p + 1, 17};
    for (int k = 0; k < 4; k++) {
        char what[96];
        snprintf(what, sizeof what, "sharded n=%lld", (long long)lens[k]);
        round_trip(g, tess_layout_sharded(0, p, r), 1, &lens[k], what);
    }
    const int64_t cube[3] = {5, 7, 3}, thin[3] = {3, 2, 5};
    for (int dim = 0; dim < 3; dim++) {
        char what[96];
        snprintf(what, sizeof what, "sharded 5x7x3 dim %d", dim);
        round_trip(g, tess_layout_sharded(dim, p, r), 3, cube, what);
        snprintf(what, sizeof what, "sharded 3x2x5 dim %d, parts reversed", dim);
        round_trip(g, tess_layout_sharded(dim, p, p - 1 - r), 3, thin, what);
    }

    const int64_t a[2] = {7, 11}, b[2] = {5, 4}, empty[2] = {0, 5};
    for (int nprow = 1; nprow <= p; nprow++) {
        if (p % nprow) continue;
        int npcol = p / nprow;
        char what[96];
        snprintf(what, sizeof what, "block-cyclic 7x11 (2x3 blocks) on %dx%d", nprow, npcol);
        round_trip(g, tess_layout_block_cyclic(nprow, npcol, r / npcol, r % npcol, 2, 3), 2, a,
                   what);
        snprintf(what, sizeof what, "block-cyclic 5x4 (3x3 blocks) on %dx%d column-major", nprow,
                 npcol);
        round_trip(g, tess_layout_block_cyclic(nprow, npcol, r % nprow, r / nprow, 3, 3), 2, b,
                   what);
        snprintf(what, sizeof what, "block-cyclic 0x5 on %dx%d", nprow, npcol);
        round_trip(g, tess_layout_block_cyclic(nprow, npcol, r / npcol, r % npcol, 2, 2), 2,
                   empty, what);
    }
}

/* Layouts that do not fit the group fail on every rank, and nobody waits. */
static void check_errors(const tess_group *g) {
    float buf[64] = {0}, global[64] = {0};
    int p = g->size, r = g->rank;
    const int64_t vec[1] = {8};
    tess_layout too_many = tess_layout_sharded(0, p + 1, r);
    DIST_TEST_FAILS(tess_par_gather_global(g, &too_many, 1, vec, buf, global), TESS_ERR_ARG,
                    "layout part");
    int64_t mine[1] = {r == 0 ? 9 : 8};
    tess_layout sharded = tess_layout_sharded(0, p, r);
    DIST_TEST_FAILS(tess_par_scatter_global(g, &sharded, 1, mine, global, buf),
                    p == 1 ? TESS_OK : TESS_ERR_ARG, p == 1 ? "" : "global shape[0] differs");
    if (p > 1) {
        tess_layout same = tess_layout_sharded(0, p, 0);
        DIST_TEST_FAILS(tess_par_gather_global(g, &same, 1, vec, buf, global), TESS_ERR_ARG,
                        "hold the same part");
        tess_layout mixed = r == 0 ? tess_layout_replicated() : tess_layout_sharded(0, p, r);
        DIST_TEST_FAILS(tess_par_gather_global(g, &mixed, 1, vec, buf, global), TESS_ERR_ARG,
                        "layout kind differs");
    }
    const int64_t cube[3] = {2, 2, 2};
    tess_layout bc = tess_layout_block_cyclic(1, p, 0, r, 2, 2);
    DIST_TEST_FAILS(tess_par_gather_global(g, &bc, 3, cube, buf, global), TESS_ERR_ARG,
                    "a block-cyclic tensor has 2 dims, not 3");
}

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    tess_group *g = NULL;
    DIST_TEST_OK(tess_group_create(MPI_COMM_WORLD, "gather", &g));
    if (g) {
        run_layouts(g);
        DIST_TEST_OK(tess_group_set_max_count(g, 5));
        run_layouts(g);
        check_errors(g);
    }
    tess_group_destroy(&g);
    int rc = tess_test_finish_mpi("par_gather", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
