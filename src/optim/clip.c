/* clip.c - global-norm gradient clipping (see clip.h). */
#include "optim/clip.h"

#include <math.h>

#include "par/coll.h" /* tess_par_allreduce_f64 */

/* Number of parts a layout splits a tensor into (1: replicated). */
static int layout_parts(const tess_layout *l) {
    switch (l->kind) {
    case TESS_LAYOUT_SHARDED: return l->nparts;
    case TESS_LAYOUT_BLOCK_CYCLIC: return l->nprow * l->npcol;
    case TESS_LAYOUT_REPLICATED: break;
    }
    return 1;
}

tess_status tess_clip_grad_norm(tess_registry *reg, double max_norm, const tess_group *g,
                                double *norm) {
    TESS_REQUIRE(reg && norm, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(tess_registry_is_final(reg), TESS_ERR_ARG, "registry not finalized");
    double sq_part = 0.0, sq_repl = 0.0; /* weighted squares of partitioned entries; replicated */
    const float *grads = tess_registry_grads(reg);
    const int64_t count = tess_registry_count(reg);
    for (int64_t i = 0; i < count; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (!e->trainable) continue;
        const int parts = layout_parts(&e->layout);
        TESS_REQUIRE(!g || (parts >= 1 && g->size % parts == 0), TESS_ERR_ARG,
                     "'%s': partitioned over %d ranks, which does not divide the %d ranks of the "
                     "clipping group '%s'",
                     e->name, parts, g ? g->size : 1, g ? g->name : "");
        const float *x = grads + e->flat_offset;
        double sq = 0.0;
        for (int64_t k = 0; k < e->local_count; k++) sq += (double)x[k] * (double)x[k];
        if (parts == 1 || !g) sq_repl += sq;
        else sq_part += sq * ((double)parts / (double)g->size);
    }
    if (g) TESS_CHECK(tess_par_allreduce_f64(g, &sq_part, 1, TESS_PAR_SUM));
    *norm = sqrt(sq_part + sq_repl);
    if (!(max_norm > 0.0) || !isfinite(*norm)) return TESS_OK;
    const double coef_d = max_norm / (*norm + 1e-6);
    if (coef_d >= 1.0) return TESS_OK;
    const float coef = (float)coef_d;
    float *gw = tess_registry_grads(reg);
    for (int64_t i = 0; i < count; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (!e->trainable) continue;
        float *x = gw + e->flat_offset;
        for (int64_t k = 0; k < e->local_count; k++) x[k] *= coef;
    }
    return TESS_OK;
}
