/* layout.c - ownership arithmetic for tess_layout (see layout.h). */
#include "par/layout.h"

#include "core/status.h" /* TESS_ASSERT */

tess_layout tess_layout_replicated(void) {
    return (tess_layout){.kind = TESS_LAYOUT_REPLICATED, .nparts = 1};
}

tess_layout tess_layout_sharded(int dim, int nparts, int part) {
    return (tess_layout){.kind = TESS_LAYOUT_SHARDED, .dim = dim, .nparts = nparts, .part = part};
}

tess_layout tess_layout_block_cyclic(int nprow, int npcol, int prow, int pcol, int64_t mb,
                                     int64_t nb) {
    return (tess_layout){.kind = TESS_LAYOUT_BLOCK_CYCLIC, .nprow = nprow, .npcol = npcol,
                         .prow = prow, .pcol = pcol, .mb = mb, .nb = nb};
}

void tess_par_block_range(int64_t n, int p, int r, int64_t *lo, int64_t *hi) {
    TESS_ASSERT(n >= 0 && p >= 1 && r >= 0 && r < p);
    int64_t block = (n + p - 1) / p;
    int64_t a = block * r, b = a + block;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

int64_t tess_par_numroc(int64_t n, int64_t nb, int iproc, int nprocs) {
    TESS_ASSERT(n >= 0 && nb >= 1 && nprocs >= 1 && iproc >= 0 && iproc < nprocs);
    int64_t nblocks = n / nb;
    int64_t count = (nblocks / nprocs) * nb;
    int64_t extra = nblocks % nprocs;
    if (iproc < extra) count += nb;
    else if (iproc == extra) count += n % nb;
    return count;
}

void tess_layout_local_shape(const tess_layout *l, int ndim, const int64_t *global, int64_t *local,
                             int64_t *offset) {
    TESS_ASSERT(ndim >= 0 && ndim <= TESS_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        local[i] = global[i];
        if (offset) offset[i] = 0;
    }
    if (l->kind == TESS_LAYOUT_SHARDED) {
        int64_t lo, hi;
        tess_par_block_range(global[l->dim], l->nparts, l->part, &lo, &hi);
        local[l->dim] = hi - lo;
        if (offset) offset[l->dim] = lo;
    } else if (l->kind == TESS_LAYOUT_BLOCK_CYCLIC) {
        local[0] = tess_par_numroc(global[0], l->mb, l->prow, l->nprow);
        local[1] = tess_par_numroc(global[1], l->nb, l->pcol, l->npcol);
    }
}

int64_t tess_layout_local_count(const tess_layout *l, int ndim, const int64_t *global) {
    int64_t local[TESS_MAX_DIMS], count = 1;
    tess_layout_local_shape(l, ndim, global, local, 0);
    for (int i = 0; i < ndim; i++) count *= local[i];
    return count;
}

const char *tess_layout_kind_name(tess_layout_kind k) {
    switch (k) {
    case TESS_LAYOUT_REPLICATED: return "replicated";
    case TESS_LAYOUT_SHARDED: return "sharded";
    case TESS_LAYOUT_BLOCK_CYCLIC: return "block_cyclic";
    }
    return "unknown";
}

tess_status tess_layout_check(const char *what, int ndim, const int64_t *shape,
                              const tess_layout *l) {
    TESS_REQUIRE(ndim >= 1 && ndim <= TESS_MAX_DIMS, TESS_ERR_ARG, "%s: ndim %d not in 1..%d",
                 what, ndim, TESS_MAX_DIMS);
    for (int d = 0; d < ndim; d++)
        TESS_REQUIRE(shape[d] > 0, TESS_ERR_ARG, "%s: dimension %d is %lld, must be > 0", what, d,
                     (long long)shape[d]);
    switch (l->kind) {
    case TESS_LAYOUT_REPLICATED: return TESS_OK;
    case TESS_LAYOUT_SHARDED:
        TESS_REQUIRE(l->dim >= 0 && l->dim < ndim && l->nparts >= 1 && l->part >= 0 &&
                         l->part < l->nparts,
                     TESS_ERR_ARG, "%s: bad sharded layout (dim %d of %d, part %d of %d)", what,
                     l->dim, ndim, l->part, l->nparts);
        return TESS_OK;
    case TESS_LAYOUT_BLOCK_CYCLIC:
        TESS_REQUIRE(ndim == 2, TESS_ERR_ARG, "%s: block-cyclic layout needs 2 dims, got %d", what,
                     ndim);
        TESS_REQUIRE(l->nprow >= 1 && l->npcol >= 1 && l->prow >= 0 && l->prow < l->nprow &&
                         l->pcol >= 0 && l->pcol < l->npcol && l->mb >= 1 && l->nb >= 1,
                     TESS_ERR_ARG,
                     "%s: bad block-cyclic layout (grid %dx%d, coords (%d,%d), blocks %lldx%lld)",
                     what, l->nprow, l->npcol, l->prow, l->pcol, (long long)l->mb,
                     (long long)l->nb);
        return TESS_OK;
    }
    return tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                           "%s: unknown layout kind %d", what, (int)l->kind);
}
