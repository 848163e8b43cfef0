/* clip.c - global-norm gradient clipping (see clip.h). */
#include "optim/clip.h"

#include <math.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */

/* MPI_Comm is a pointer in Open MPI: accept NULL as well as MPI_COMM_NULL for "local". */
static bool comm_is_local(MPI_Comm comm) { return comm == MPI_COMM_NULL || comm == (MPI_Comm)0; }

static bool is_partitioned(const tess_layout *l) { return l->kind != TESS_LAYOUT_REPLICATED; }

static int layout_group_size(const tess_layout *l) {
    return l->kind == TESS_LAYOUT_SHARDED ? l->nparts : l->nprow * l->npcol;
}

tess_status tess_clip_grad_norm(tess_registry *reg, double max_norm, MPI_Comm comm, double *norm) {
    TESS_REQUIRE(reg && norm, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(tess_registry_is_final(reg), TESS_ERR_ARG, "registry not finalized");
    const bool local = comm_is_local(comm);
    int size = 1;
    if (!local) TESS_MPI_CHECK(MPI_Comm_size(comm, &size));
    double sq_part = 0.0, sq_repl = 0.0;
    const float *grads = tess_registry_grads(reg);
    const int64_t count = tess_registry_count(reg);
    for (int64_t i = 0; i < count; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (!e->trainable) continue;
        const bool part = is_partitioned(&e->layout);
        TESS_REQUIRE(local || !part || layout_group_size(&e->layout) == size, TESS_ERR_ARG,
                     "'%s': partitioned over %d ranks, but the clipping group has %d", e->name,
                     layout_group_size(&e->layout), size);
        const float *g = grads + e->flat_offset;
        double sq = 0.0;
        for (int64_t k = 0; k < e->local_count; k++) sq += (double)g[k] * (double)g[k];
        if (part) sq_part += sq;
        else sq_repl += sq;
    }
    if (!local) TESS_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &sq_part, 1, MPI_DOUBLE, MPI_SUM, comm));
    *norm = sqrt(sq_part + sq_repl);
    if (!(max_norm > 0.0) || !isfinite(*norm)) return TESS_OK;
    const double coef_d = max_norm / (*norm + 1e-6);
    if (coef_d >= 1.0) return TESS_OK;
    const float coef = (float)coef_d;
    float *gw = tess_registry_grads(reg);
    for (int64_t i = 0; i < count; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (!e->trainable) continue;
        float *g = gw + e->flat_offset;
        for (int64_t k = 0; k < e->local_count; k++) g[k] *= coef;
    }
    return TESS_OK;
}
