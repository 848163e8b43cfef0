/* adamw.c - AdamW over the registry's flat views (see adamw.h). */
#include "optim/adamw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tess_adamw {
    tess_registry *reg;
    tess_adamw_config cfg;
    float *m, *v; /* (local_total) each */
    int64_t t;    /* steps taken */
};

tess_adamw_config tess_adamw_config_default(void) {
    return (tess_adamw_config){.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
}

tess_status tess_adamw_create(tess_adamw **opt, tess_registry *reg, const tess_adamw_config *cfg) {
    TESS_REQUIRE(opt && reg && cfg, TESS_ERR_ARG, "NULL argument");
    *opt = NULL;
    TESS_REQUIRE(tess_registry_is_final(reg), TESS_ERR_ARG, "registry not finalized");
    TESS_REQUIRE(cfg->beta1 >= 0.0f && cfg->beta1 < 1.0f && cfg->beta2 >= 0.0f &&
                     cfg->beta2 < 1.0f,
                 TESS_ERR_ARG, "betas (%g, %g) must be in [0, 1)", (double)cfg->beta1,
                 (double)cfg->beta2);
    TESS_REQUIRE(isfinite(cfg->eps) && cfg->eps > 0.0f, TESS_ERR_ARG, "eps %g must be > 0",
                 (double)cfg->eps);
    TESS_REQUIRE(isfinite(cfg->weight_decay) && cfg->weight_decay >= 0.0f, TESS_ERR_ARG,
                 "weight_decay %g must be >= 0", (double)cfg->weight_decay);
    tess_adamw *o = calloc(1, sizeof *o);
    TESS_REQUIRE(o, TESS_ERR_MEM, "out of memory allocating AdamW");
    o->reg = reg;
    o->cfg = *cfg;
    tess_status s = tess_registry_alloc_state(reg, &o->m);
    if (s == TESS_OK) s = tess_registry_alloc_state(reg, &o->v);
    if (s != TESS_OK) {
        tess_adamw_destroy(&o);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "AdamW moment buffers");
    }
    *opt = o;
    return TESS_OK;
}

void tess_adamw_destroy(tess_adamw **opt) {
    if (!opt || !*opt) return;
    free((*opt)->m);
    free((*opt)->v);
    free(*opt);
    *opt = NULL;
}

void tess_adamw_step(tess_adamw *opt, float lr) {
    opt->t++;
    const float b1 = opt->cfg.beta1, b2 = opt->cfg.beta2, eps = opt->cfg.eps;
    const double t = (double)opt->t;
    const float step_size = (float)((double)lr / (1.0 - pow((double)b1, t)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)b2, t));
    float *params = tess_registry_params(opt->reg);
    const float *grads = tess_registry_grads(opt->reg);
    for (int64_t i = 0; i < tess_registry_count(opt->reg); i++) {
        const tess_registry_entry *e = tess_registry_get(opt->reg, i);
        if (!e->trainable) continue;
        const float shrink = e->decay ? 1.0f - lr * opt->cfg.weight_decay : 1.0f;
        float *p = params + e->flat_offset;
        float *m = opt->m + e->flat_offset, *v = opt->v + e->flat_offset;
        const float *g = grads + e->flat_offset;
        const int64_t n = e->local_count;
        for (int64_t k = 0; k < n; k++) {
            m[k] = b1 * m[k] + (1.0f - b1) * g[k];
            v[k] = b2 * v[k] + (1.0f - b2) * g[k] * g[k];
            p[k] = p[k] * shrink - step_size * m[k] / (sqrtf(v[k]) / bc2_sqrt + eps);
        }
    }
}

int64_t tess_adamw_step_count(const tess_adamw *opt) { return opt->t; }

void tess_adamw_reset(tess_adamw *opt) {
    const size_t n = (size_t)tess_registry_local_total(opt->reg) * sizeof(float);
    memset(opt->m, 0, n);
    memset(opt->v, 0, n);
    opt->t = 0;
}

static tess_status adamw_describe(tess_adamw *opt, tess_state *st, const char *prefix,
                                  bool private_to_rank) {
    TESS_REQUIRE(opt && st && prefix, TESS_ERR_ARG, "NULL argument");
    char name[TESS_STATE_NAME_MAX];
    const char *parts[3] = {"m", "v", "step_count"};
    for (int k = 0; k < 3; k++) {
        const int n = snprintf(name, sizeof name, "%s/%s", prefix, parts[k]);
        TESS_REQUIRE(n > 0 && n < (int)sizeof name, TESS_ERR_ARG,
                     "AdamW state '%s/%s': name longer than %d bytes", prefix, parts[k],
                     TESS_STATE_NAME_MAX - 1);
        if (k < 2) {
            TESS_CHECK(tess_state_add_like(st, name, opt->reg, k == 0 ? opt->m : opt->v,
                                           private_to_rank));
        } else if (private_to_rank) {
            const int64_t one[1] = {1};
            TESS_CHECK(tess_state_add_private(st, name, TESS_I64, 1, one, &opt->t));
        } else {
            TESS_CHECK(tess_state_add_i64(st, name, &opt->t));
        }
    }
    return TESS_OK;
}

tess_status tess_adamw_describe(tess_adamw *opt, tess_state *st, const char *prefix) {
    return adamw_describe(opt, st, prefix, false);
}

tess_status tess_adamw_describe_private(tess_adamw *opt, tess_state *st, const char *prefix) {
    return adamw_describe(opt, st, prefix, true);
}
