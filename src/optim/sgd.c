/* sgd.c - SGD with momentum over the registry's flat views (see sgd.h). */
#include "optim/sgd.h"

#include <math.h>
#include <stdlib.h>

struct tess_sgd {
    tess_registry *reg;
    tess_sgd_config cfg;
    float *buf; /* (local_total) momentum, NULL when momentum == 0 */
};

tess_status tess_sgd_create(tess_sgd **opt, tess_registry *reg, const tess_sgd_config *cfg) {
    TESS_REQUIRE(opt && reg && cfg, TESS_ERR_ARG, "NULL argument");
    *opt = NULL;
    TESS_REQUIRE(tess_registry_is_final(reg), TESS_ERR_ARG, "registry not finalized");
    TESS_REQUIRE(isfinite(cfg->momentum) && cfg->momentum >= 0.0f, TESS_ERR_ARG,
                 "momentum %g must be >= 0", (double)cfg->momentum);
    TESS_REQUIRE(isfinite(cfg->weight_decay) && cfg->weight_decay >= 0.0f, TESS_ERR_ARG,
                 "weight_decay %g must be >= 0", (double)cfg->weight_decay);
    TESS_REQUIRE(!cfg->nesterov || cfg->momentum > 0.0f, TESS_ERR_ARG,
                 "nesterov needs momentum > 0, got %g", (double)cfg->momentum);
    tess_sgd *o = calloc(1, sizeof *o);
    TESS_REQUIRE(o, TESS_ERR_MEM, "out of memory allocating SGD");
    o->reg = reg;
    o->cfg = *cfg;
    if (cfg->momentum > 0.0f) {
        tess_status s = tess_registry_alloc_state(reg, &o->buf);
        if (s != TESS_OK) {
            free(o);
            return tess_error_push(s, __FILE__, __LINE__, __func__, "SGD momentum buffer");
        }
    }
    *opt = o;
    return TESS_OK;
}

void tess_sgd_destroy(tess_sgd **opt) {
    if (!opt || !*opt) return;
    free((*opt)->buf);
    free(*opt);
    *opt = NULL;
}

void tess_sgd_step(tess_sgd *opt, float lr) {
    const float mu = opt->cfg.momentum;
    const bool nesterov = opt->cfg.nesterov;
    float *params = tess_registry_params(opt->reg);
    const float *grads = tess_registry_grads(opt->reg);
    for (int64_t i = 0; i < tess_registry_count(opt->reg); i++) {
        const tess_registry_entry *e = tess_registry_get(opt->reg, i);
        if (!e->trainable) continue;
        const float wd = e->decay ? opt->cfg.weight_decay : 0.0f;
        float *p = params + e->flat_offset;
        const float *g = grads + e->flat_offset;
        const int64_t n = e->local_count;
        if (!opt->buf) {
            for (int64_t k = 0; k < n; k++) p[k] -= lr * (g[k] + wd * p[k]);
            continue;
        }
        float *b = opt->buf + e->flat_offset;
        for (int64_t k = 0; k < n; k++) {
            float d = g[k] + wd * p[k];
            b[k] = mu * b[k] + d;
            p[k] -= lr * (nesterov ? d + mu * b[k] : b[k]);
        }
    }
}

tess_status tess_sgd_describe(tess_sgd *opt, tess_state *st, const char *prefix) {
    TESS_REQUIRE(opt && st && prefix, TESS_ERR_ARG, "NULL argument");
    if (!opt->buf) return TESS_OK;
    char name[TESS_STATE_NAME_MAX];
    const int n = snprintf(name, sizeof name, "%s/momentum", prefix);
    TESS_REQUIRE(n > 0 && n < (int)sizeof name, TESS_ERR_ARG,
                 "SGD state '%s/momentum': name longer than %d bytes", prefix,
                 TESS_STATE_NAME_MAX - 1);
    TESS_CHECK(tess_state_add_like(st, name, opt->reg, opt->buf, false));
    return TESS_OK;
}
