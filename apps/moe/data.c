/* data.c - the synthetic multi-domain token source (data.h). */
#include "data.h"

#include <math.h>

/* successor j of token a in domain dom: a hash of (seed, dom, a, j) through Philox, counter
 * (DATA, 1000) kept apart from the sample counters */
static int32_t successor(const moe_data *d, int64_t dom, int64_t a, int64_t j) {
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 1000);
    const uint64_t idx = ((uint64_t)dom * (uint64_t)d->V + (uint64_t)a) * (uint64_t)d->branch +
                         (uint64_t)j;
    return (int32_t)(tess_rng_u64(d->key, ctr, idx) % (uint64_t)d->V);
}

/* index j of the successor picked by u in [0,1) under weights 1/(j+1) */
static int64_t pick(double u, int64_t branch) {
    double z = 0.0;
    for (int64_t j = 0; j < branch; j++) z += 1.0 / (double)(j + 1);
    double c = 0.0;
    for (int64_t j = 0; j < branch; j++) {
        c += 1.0 / ((double)(j + 1) * z);
        if (u < c) return j;
    }
    return branch - 1;
}

void moe_data_batch(const moe_data *d, int split, int64_t first, int64_t B, int32_t *ids,
                    int32_t *targets, int32_t *domain) {
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)split);
    const int64_t T = d->T, stride = T + 2;
    for (int64_t b = 0; b < B; b++) {
        const uint64_t base = (uint64_t)((first + b) * stride);
        const int64_t dom = (int64_t)(tess_rng_u64(d->key, ctr, base) % (uint64_t)d->D);
        int32_t tok = (int32_t)(tess_rng_u64(d->key, ctr, base + 1) % (uint64_t)d->V);
        for (int64_t t = 0; t < T; t++) {
            const double u = tess_rng_uniform(d->key, ctr, base + 2 + (uint64_t)t, 0.0, 1.0);
            const int32_t next = successor(d, dom, tok, pick(u, d->branch));
            ids[b * T + t] = tok;
            targets[b * T + t] = next;
            if (domain) domain[b * T + t] = (int32_t)dom;
            tok = next;
        }
    }
}

double moe_data_step_entropy(const moe_data *d) {
    double z = 0.0, h = 0.0;
    for (int64_t j = 0; j < d->branch; j++) z += 1.0 / (double)(j + 1);
    for (int64_t j = 0; j < d->branch; j++) {
        const double w = 1.0 / ((double)(j + 1) * z);
        h -= w * log(w);
    }
    return h;
}
