/* gather.c - tensors to rank 0 and back for any layout (see gather.h).
 *
 * Steps, each ending in a verdict every rank shares: (1) check the local layout and agree on it
 * with one all-reduce of the fields that must match (max of v and of -v gives max and min);
 * (2) all-gather each rank's part index or grid position and check they form a permutation;
 * (3) rank 0 allocates its staging buffer and broadcasts whether that worked; (4) move the data. */
#include "par/gather.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "par/coll.h"     /* tess_par_bcast, tess_par_int, TESS_PAR_TAG */

/* The fields that must agree: bad flag, kind, dim, nparts, nprow, npcol, mb, nb, ndim, shape. */
enum { AGREE_FIELDS = 9 + TESS_MAX_DIMS };

static const char *const agree_names[AGREE_FIELDS] = {
    "invalid layout", "layout kind", "sharded dim", "nparts",   "nprow", "npcol", "mb", "nb",
    "ndim",           "global shape[0]", "global shape[1]", "global shape[2]", "global shape[3]"};

static tess_status check_local(const tess_group *g, const tess_layout *l, int ndim,
                               const int64_t *shape) {
    TESS_REQUIRE(l && (shape || ndim == 0), TESS_ERR_ARG, "layout or global shape is NULL");
    TESS_REQUIRE(ndim >= 0 && ndim <= TESS_MAX_DIMS, TESS_ERR_ARG, "ndim %d outside [0, %d]", ndim,
                 TESS_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        TESS_REQUIRE(shape[i] >= 0, TESS_ERR_ARG, "global shape[%d] = %lld < 0", i,
                     (long long)shape[i]);
    switch (l->kind) {
    case TESS_LAYOUT_REPLICATED: return TESS_OK;
    case TESS_LAYOUT_SHARDED:
        TESS_REQUIRE(l->dim >= 0 && l->dim < ndim, TESS_ERR_ARG,
                     "sharded dim %d of a %d-dim tensor", l->dim, ndim);
        TESS_REQUIRE(l->nparts == g->size && l->part >= 0 && l->part < l->nparts, TESS_ERR_ARG,
                     "layout part %d of %d on group '%s' of %d ranks", l->part, l->nparts,
                     g->name, g->size);
        return TESS_OK;
    case TESS_LAYOUT_BLOCK_CYCLIC:
        TESS_REQUIRE(ndim == 2, TESS_ERR_ARG, "a block-cyclic tensor has 2 dims, not %d", ndim);
        TESS_REQUIRE(l->mb >= 1 && l->nb >= 1, TESS_ERR_ARG, "block %lld x %lld",
                     (long long)l->mb, (long long)l->nb);
        TESS_REQUIRE(l->nprow >= 1 && l->npcol >= 1 && l->nprow * l->npcol == g->size,
                     TESS_ERR_ARG, "process grid %d x %d on group '%s' of %d ranks", l->nprow,
                     l->npcol, g->name, g->size);
        TESS_REQUIRE(l->prow >= 0 && l->prow < l->nprow && l->pcol >= 0 && l->pcol < l->npcol,
                     TESS_ERR_ARG, "grid position (%d, %d) outside %d x %d", l->prow, l->pcol,
                     l->nprow, l->npcol);
        return TESS_OK;
    }
    return tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__, "unknown layout kind %d",
                           (int)l->kind);
}

/* (1): TESS_OK on every rank, or TESS_ERR_ARG on every rank. */
static tess_status agree_layout(const tess_group *g, const tess_layout *l, int ndim,
                                const int64_t *shape) {
    tess_status local = check_local(g, l, ndim, shape);
    int64_t v[2 * AGREE_FIELDS] = {0}, r[2 * AGREE_FIELDS];
    v[0] = local != TESS_OK;
    if (local == TESS_OK) {
        int64_t f[] = {(int64_t)l->kind, l->dim, l->nparts, l->nprow, l->npcol, l->mb, l->nb,
                       ndim};
        /* Fields a kind does not use are zero, so stale values in them never disagree. */
        int used[] = {1, l->kind == TESS_LAYOUT_SHARDED, l->kind == TESS_LAYOUT_SHARDED,
                      l->kind == TESS_LAYOUT_BLOCK_CYCLIC, l->kind == TESS_LAYOUT_BLOCK_CYCLIC,
                      l->kind == TESS_LAYOUT_BLOCK_CYCLIC, l->kind == TESS_LAYOUT_BLOCK_CYCLIC, 1};
        for (int i = 0; i < 8; i++) v[1 + i] = used[i] ? f[i] : 0;
        for (int i = 0; i < ndim; i++) v[9 + i] = shape[i];
    }
    for (int i = 0; i < AGREE_FIELDS; i++) v[AGREE_FIELDS + i] = -v[i];
    TESS_MPI_CHECK(MPI_Allreduce(v, r, 2 * AGREE_FIELDS, MPI_INT64_T, MPI_MAX, g->comm));
    if (local != TESS_OK) return tess_error_push(local, __FILE__, __LINE__, __func__,
                                                 "layout check on group '%s'", g->name);
    TESS_REQUIRE(r[0] == 0, TESS_ERR_ARG, "group '%s': another rank has an invalid layout",
                 g->name);
    for (int i = 1; i < AGREE_FIELDS; i++)
        TESS_REQUIRE(r[i] == -r[AGREE_FIELDS + i], TESS_ERR_ARG,
                     "group '%s': %s differs between ranks (from %lld to %lld)", g->name,
                     agree_names[i], (long long)-r[AGREE_FIELDS + i], (long long)r[i]);
    return TESS_OK;
}

/* (2): the layout of every rank, from the agreed fields and the gathered positions. *pos is the
 * group's int64 scratch: pos[2r], pos[2r+1] = part (or prow, pcol) of rank r. */
static tess_status gather_positions(const tess_group *g, const tess_layout *l, int64_t **pos) {
    int64_t mine[2] = {l->kind == TESS_LAYOUT_SHARDED ? l->part : l->prow, l->pcol};
    if (l->kind == TESS_LAYOUT_SHARDED) mine[1] = 0;
    int64_t *all = g->lscratch;
    TESS_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, g->comm));
    int *owner = g->iscratch;
    for (int i = 0; i < g->size; i++) owner[i] = -1;
    for (int r = 0; r < g->size; r++) {
        int64_t slot = all[2 * r];
        if (l->kind == TESS_LAYOUT_BLOCK_CYCLIC) slot = slot * l->npcol + all[2 * r + 1];
        TESS_REQUIRE(owner[slot] < 0, TESS_ERR_ARG,
                     "group '%s': ranks %d and %d hold the same part (%lld, %lld) of a %s layout",
                     g->name, owner[slot], r, (long long)all[2 * r], (long long)all[2 * r + 1],
                     tess_layout_kind_name(l->kind));
        owner[slot] = r;
    }
    *pos = all;
    return TESS_OK;
}

static tess_layout layout_of_rank(const tess_layout *l, const int64_t *pos, int r) {
    tess_layout x = *l;
    if (l->kind == TESS_LAYOUT_SHARDED) {
        x.part = (int)pos[2 * r];
    } else {
        x.prow = (int)pos[2 * r];
        x.pcol = (int)pos[2 * r + 1];
    }
    return x;
}

/* Global index of local index i of a block-cyclic dimension (ScaLAPACK's INDXL2G, source 0). */
static int64_t local_to_global(int64_t i, int64_t nb, int iproc, int nprocs) {
    return (i / nb) * nb * nprocs + (int64_t)iproc * nb + i % nb;
}

/* Copy the part of layout l between its local storage and the global row-major array:
 * to_global: dst = global, src = local; otherwise dst = local, src = global. */
static void copy_part(const tess_layout *l, int ndim, const int64_t *shape, const float *src,
                      float *dst, bool to_global) {
    if (l->kind == TESS_LAYOUT_SHARDED) {
        int64_t outer = 1, inner = 1, lo, hi;
        for (int i = 0; i < l->dim; i++) outer *= shape[i];
        for (int i = l->dim + 1; i < ndim; i++) inner *= shape[i];
        tess_par_block_range(shape[l->dim], l->nparts, l->part, &lo, &hi);
        int64_t len = (hi - lo) * inner;
        if (len == 0) return;
        for (int64_t o = 0; o < outer; o++) {
            int64_t goff = (o * shape[l->dim] + lo) * inner, loff = o * len;
            memcpy(dst + (to_global ? goff : loff), src + (to_global ? loff : goff),
                   (size_t)len * sizeof *dst);
        }
    } else if (l->kind == TESS_LAYOUT_BLOCK_CYCLIC) {
        int64_t n = shape[1], loc[2];
        tess_layout_local_shape(l, 2, shape, loc, NULL);
        for (int64_t j = 0; j < loc[1]; j++) {
            int64_t gj = local_to_global(j, l->nb, l->pcol, l->npcol);
            for (int64_t i = 0; i < loc[0]; i++) {
                int64_t gidx = local_to_global(i, l->mb, l->prow, l->nprow) * n + gj;
                int64_t lidx = j * loc[0] + i;
                if (to_global) dst[gidx] = src[lidx];
                else dst[lidx] = src[gidx];
            }
        }
    } else {
        int64_t count = tess_layout_local_count(l, ndim, shape);
        if (count > 0) memcpy(dst, src, (size_t)count * sizeof *dst);
    }
}

static tess_status send_chunks(const tess_group *g, const float *x, int64_t n, int dest) {
    for (int64_t off = 0; off < n; off += g->max_count) {
        int len = tess_par_int(n - off < g->max_count ? n - off : g->max_count);
        TESS_MPI_CHECK(MPI_Send(x + off, len, MPI_FLOAT, dest, TESS_PAR_TAG, g->comm));
    }
    return TESS_OK;
}

static tess_status recv_chunks(const tess_group *g, float *x, int64_t n, int src) {
    for (int64_t off = 0; off < n; off += g->max_count) {
        int len = tess_par_int(n - off < g->max_count ? n - off : g->max_count);
        TESS_MPI_CHECK(MPI_Recv(x + off, len, MPI_FLOAT, src, TESS_PAR_TAG, g->comm,
                                MPI_STATUS_IGNORE));
    }
    return TESS_OK;
}

/* (1)-(3) for a distributed layout: positions of all ranks and, on rank 0, a staging buffer
 * for the largest part of another rank (NULL if none is needed). */
static tess_status prepare(const tess_group *g, const tess_layout *l, int ndim,
                           const int64_t *shape, int64_t **pos, float **staging) {
    *staging = NULL;
    TESS_CHECK(gather_positions(g, l, pos));
    int ok = 1;
    if (g->rank == 0) {
        int64_t most = 0;
        for (int r = 1; r < g->size; r++) {
            tess_layout lr = layout_of_rank(l, *pos, r);
            int64_t c = tess_layout_local_count(&lr, ndim, shape);
            if (c > most) most = c;
        }
        if (most > 0) {
            *staging = malloc((size_t)most * sizeof **staging);
            ok = *staging != NULL;
        }
    }
    tess_status s = tess_par_bcast_bytes(g, &ok, sizeof ok, 0);
    if (s == TESS_OK && !ok)
        s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                            "rank 0 of '%s' could not allocate its staging buffer", g->name);
    if (s != TESS_OK) {
        free(*staging);
        *staging = NULL;
    }
    return s;
}

static tess_status gather_parts(const tess_group *g, const tess_layout *l, int ndim,
                                const int64_t *shape, const int64_t *pos, const float *local,
                                float *global, float *staging) {
    if (g->rank != 0)
        return send_chunks(g, local, tess_layout_local_count(l, ndim, shape), 0);
    copy_part(l, ndim, shape, local, global, true);
    for (int r = 1; r < g->size; r++) {
        tess_layout lr = layout_of_rank(l, pos, r);
        TESS_CHECK(recv_chunks(g, staging, tess_layout_local_count(&lr, ndim, shape), r));
        copy_part(&lr, ndim, shape, staging, global, true);
    }
    return TESS_OK;
}

static tess_status scatter_parts(const tess_group *g, const tess_layout *l, int ndim,
                                 const int64_t *shape, const int64_t *pos, const float *global,
                                 float *local, float *staging) {
    if (g->rank != 0)
        return recv_chunks(g, local, tess_layout_local_count(l, ndim, shape), 0);
    copy_part(l, ndim, shape, global, local, false);
    for (int r = 1; r < g->size; r++) {
        tess_layout lr = layout_of_rank(l, pos, r);
        copy_part(&lr, ndim, shape, global, staging, false);
        TESS_CHECK(send_chunks(g, staging, tess_layout_local_count(&lr, ndim, shape), r));
    }
    return TESS_OK;
}

tess_status tess_par_gather_global(const tess_group *g, const tess_layout *l, int ndim,
                                    const int64_t *global_shape, const float *local,
                                    float *global_on_root) {
    TESS_REQUIRE(g, TESS_ERR_ARG, "group is NULL");
    TESS_CHECK(agree_layout(g, l, ndim, global_shape));
    if (l->kind == TESS_LAYOUT_REPLICATED) {
        if (g->rank == 0) copy_part(l, ndim, global_shape, local, global_on_root, true);
        return TESS_OK;
    }
    int64_t *pos;
    float *staging;
    TESS_CHECK(prepare(g, l, ndim, global_shape, &pos, &staging));
    tess_status s = gather_parts(g, l, ndim, global_shape, pos, local, global_on_root, staging);
    free(staging);
    TESS_CHECK(s);
    return TESS_OK;
}

tess_status tess_par_scatter_global(const tess_group *g, const tess_layout *l, int ndim,
                                     const int64_t *global_shape, const float *global_on_root,
                                     float *local) {
    TESS_REQUIRE(g, TESS_ERR_ARG, "group is NULL");
    TESS_CHECK(agree_layout(g, l, ndim, global_shape));
    if (l->kind == TESS_LAYOUT_REPLICATED) {
        int64_t n = tess_layout_local_count(l, ndim, global_shape);
        if (g->rank == 0) copy_part(l, ndim, global_shape, global_on_root, local, false);
        TESS_CHECK(tess_par_bcast(g, local, n, 0));
        return TESS_OK;
    }
    int64_t *pos;
    float *staging;
    TESS_CHECK(prepare(g, l, ndim, global_shape, &pos, &staging));
    tess_status s = scatter_parts(g, l, ndim, global_shape, pos, global_on_root, local, staging);
    free(staging);
    TESS_CHECK(s);
    return TESS_OK;
}
