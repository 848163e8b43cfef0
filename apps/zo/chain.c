/* chain.c - Markov noise sources (see chain.h). */
#include "chain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

tess_status zoapp_chain_init(zoapp_chain *c, zoapp_chain_kind kind, int64_t nstates, double tau,
                             tess_rng_key key, int64_t cap) {
    TESS_REQUIRE(c, TESS_ERR_ARG, "chain is NULL");
    *c = (zoapp_chain){0};
    TESS_REQUIRE(isfinite(tau) && tau >= 1.0, TESS_ERR_CONFIG,
                 "chain.tau = %g: the mixing time must be >= 1", tau);
    TESS_REQUIRE(nstates >= 1 && nstates <= INT32_MAX, TESS_ERR_CONFIG,
                 "problem.states = %lld must be in 1..2^31-1", (long long)nstates);
    TESS_REQUIRE(kind == ZOAPP_CHAIN_STICKY || kind == ZOAPP_CHAIN_AR1, TESS_ERR_CONFIG,
                 "unknown chain kind %d", (int)kind);
    TESS_REQUIRE(cap >= 1, TESS_ERR_ARG, "chain segment capacity %lld < 1", (long long)cap);
    c->kind = kind;
    c->nstates = nstates;
    c->tau = tau;
    c->p = 1.0 - pow(4.0, -1.0 / tau);
    c->rho = pow(4.0, -1.0 / tau);
    c->key = key;
    c->cap = cap;
    c->seg = malloc((size_t)cap * sizeof *c->seg);
    TESS_REQUIRE(c->seg, TESS_ERR_MEM, "cannot allocate a chain segment of %lld states",
                 (long long)cap);
    zoapp_chain_reset(c);
    return TESS_OK;
}

void zoapp_chain_free(zoapp_chain *c) {
    if (!c) return;
    free(c->seg);
    c->seg = NULL;
}

void zoapp_chain_reset(zoapp_chain *c) {
    c->t = 0;
    c->z = 0;
    c->y = 0.0;
    c->seg_t0 = 0;
    c->seg_n = 0;
}

/* Sticky: one Philox block per step; half 0 decides the redraw, half 1 is the new state. */
static int64_t sticky_step(const zoapp_chain *c, int64_t t, int64_t prev) {
    uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_NOISE, 0);
    double u = tess_rng_uniform(c->key, ctr, 2 * (uint64_t)t, 0.0, 1.0);
    if (t > 0 && u >= c->p) return prev;
    double v = tess_rng_uniform(c->key, ctr, 2 * (uint64_t)t + 1, 0.0, 1.0);
    int64_t z = (int64_t)(v * (double)c->nstates);
    return z < c->nstates ? z : c->nstates - 1;
}

static int64_t ar1_step(zoapp_chain *c, int64_t t) {
    double w = tess_rng_normal(c->key, tess_rng_ctr(TESS_RNG_PURPOSE_NOISE, 1), (uint64_t)t, 0.0,
                               1.0);
    c->y = t == 0 ? w : c->rho * c->y + sqrt(1.0 - c->rho * c->rho) * w;
    double phi = 0.5 * erfc(-c->y / sqrt(2.0));
    int64_t z = (int64_t)(phi * (double)c->nstates);
    return z < 0 ? 0 : (z < c->nstates ? z : c->nstates - 1);
}

void zoapp_chain_advance(zoapp_chain *c, int64_t m) {
    TESS_ASSERT(m >= 0 && m <= c->cap);
    c->seg_t0 = c->t;
    c->seg_n = m;
    for (int64_t i = 0; i < m; i++) {
        int64_t t = c->t + i;
        c->z = c->kind == ZOAPP_CHAIN_STICKY ? sticky_step(c, t, c->z) : ar1_step(c, t);
        c->seg[i] = (int32_t)c->z;
    }
    c->t += m;
}

int64_t zoapp_chain_next(zoapp_chain *c) {
    zoapp_chain_advance(c, 1);
    return c->z;
}

int64_t zoapp_chain_sticky_at(const zoapp_chain *c, int64_t t) {
    uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_NOISE, 0);
    int64_t s = t;
    while (s > 0 && tess_rng_uniform(c->key, ctr, 2 * (uint64_t)s, 0.0, 1.0) >= c->p) s--;
    return sticky_step(c, s, 0);
}

int64_t zoapp_chain_sticky_tau(double p) {
    int64_t k = 0;
    double r = 1.0;
    while (r > 0.25 * (1.0 + 1e-12)) {
        r *= 1.0 - p;
        k++;
    }
    return k;
}

tess_status zoapp_chain_describe(zoapp_chain *c, tess_state *st, const char *prefix) {
    char name[TESS_STATE_NAME_MAX];
    snprintf(name, sizeof name, "%s/t", prefix);
    TESS_CHECK(tess_state_add_i64(st, name, &c->t));
    snprintf(name, sizeof name, "%s/z", prefix);
    TESS_CHECK(tess_state_add_i64(st, name, &c->z));
    snprintf(name, sizeof name, "%s/y", prefix);
    TESS_CHECK(tess_state_add_f64(st, name, &c->y));
    return TESS_OK;
}
