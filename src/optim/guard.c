/* guard.c - skip non-finite steps, fail after too many in a row (see guard.h). */
#include "optim/guard.h"

#include <math.h>

#include "par/coll.h" /* tess_par_allreduce_i64 */

tess_status tess_guard_init(tess_guard *g, int max_consecutive, FILE *warn) {
    TESS_REQUIRE(g, TESS_ERR_ARG, "NULL guard");
    TESS_REQUIRE(max_consecutive >= 1, TESS_ERR_ARG, "max_consecutive %d must be >= 1",
                 max_consecutive);
    *g = (tess_guard){.max_consecutive = max_consecutive, .warn = warn};
    return TESS_OK;
}

tess_status tess_guard_check(tess_guard *g, int64_t step, double loss, double grad_norm,
                             bool *skip) {
    if (isfinite(loss) && isfinite(grad_norm)) {
        g->consecutive = 0;
        *skip = false;
        return TESS_OK;
    }
    *skip = true;
    g->consecutive++;
    g->skipped++;
    TESS_REQUIRE(g->consecutive < g->max_consecutive, TESS_ERR_DIVERGED,
                 "step %lld: loss %g, gradient norm %g: %d non-finite steps in a row "
                 "(max_consecutive %d); training diverged",
                 (long long)step, loss, grad_norm, g->consecutive, g->max_consecutive);
    if (g->warn) {
        char line[256];
        snprintf(line, sizeof line,
                 "warning: step %lld: loss %g, gradient norm %g: update skipped "
                 "(%d non-finite in a row, fatal at %d)\n",
                 (long long)step, loss, grad_norm, g->consecutive, g->max_consecutive);
        fputs(line, g->warn);
        fflush(g->warn);
    }
    return TESS_OK;
}

tess_status tess_guard_grads_finite(const tess_registry *reg, const tess_group *g, bool *finite) {
    TESS_REQUIRE(reg && finite, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(tess_registry_is_final(reg), TESS_ERR_ARG, "registry not finalized");
    const float *grads = tess_registry_grads(reg);
    int ok = 1;
    for (int64_t i = 0; i < tess_registry_count(reg) && ok; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (!e->trainable) continue;
        const float *v = grads + e->flat_offset;
        for (int64_t k = 0; k < e->local_count; k++) ok &= isfinite(v[k]) ? 1 : 0;
    }
    int64_t all = ok;
    if (g) TESS_CHECK(tess_par_allreduce_i64(g, &all, 1, TESS_PAR_MIN));
    *finite = all != 0;
    return TESS_OK;
}
