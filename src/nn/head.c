/* head.c - the embedding and output-head pieces (head.h). */
#include "nn/head.h"

#include <string.h>

#include "nn/embedding.h" /* tess_nn_embedding_* */
#include "nn/linear.h"    /* tess_nn_linear_* */

static tess_status add_matrix(tess_registry *reg, const char *name, int64_t a, int64_t b,
                              double std, int64_t *idx) {
    const int64_t shape[2] = {a, b};
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(tess_registry_add(reg, name, 2, shape, &rep, idx));
    TESS_CHECK(tess_registry_set_init(reg, *idx, tess_init_normal(0.0, std)));
    return TESS_OK;
}

tess_status tess_nn_embedp_add_params(tess_nn_embedp *e, tess_registry *reg, const char *name) {
    e->reg = reg;
    TESS_CHECK(add_matrix(reg, name, e->V, e->C, e->std, &e->table));
    return TESS_OK;
}

void tess_nn_embedp_forward(tess_nn_embedp *e, float *out, const int32_t *ids, int64_t N) {
    e->ids = ids;
    e->N = N;
    tess_nn_embedding_forward(out, ids, tess_registry_param(e->reg, e->table), N, e->V, e->C);
}

void tess_nn_embedp_backward(tess_nn_embedp *e, const float *dout) {
    tess_nn_embedding_backward(tess_registry_grad(e->reg, e->table), dout, e->ids, e->N, e->V,
                               e->C);
}

tess_status tess_nn_lmhead_add_params(tess_nn_lmhead *h, tess_registry *reg,
                                      const char *norm_name, const char *proj_name) {
    h->reg = reg;
    TESS_CHECK(tess_nn_normp_add_params(&h->norm, reg, norm_name));
    TESS_CHECK(add_matrix(reg, proj_name, h->V, h->C, h->std, &h->w));
    return TESS_OK;
}

tess_status tess_nn_lmhead_carve(tess_nn_lmhead *h, tess_arena *a) {
    TESS_CHECK(tess_nn_normp_carve(&h->norm, a, h->max_N));
    TESS_CHECK(tess_arena_floats(a, h->max_N * h->V, &h->logits));
    return TESS_OK;
}

void tess_nn_lmhead_forward(tess_nn_lmhead *h, const float *in, int64_t N) {
    TESS_ASSERT(N >= 1 && N <= h->max_N);
    h->in = in;
    h->N = N;
    tess_nn_normp_forward(&h->norm, in, N);
    tess_nn_linear_tiles_forward(h->logits, h->norm.out, tess_registry_param(h->reg, h->w), NULL,
                                 N, h->C, h->V);
}

void tess_nn_lmhead_backward(tess_nn_lmhead *h, float *dx, float *dtmp, const float *dlogits) {
    memset(dtmp, 0, (size_t)(h->N * h->C) * sizeof(float));
    tess_nn_linear_tiles_backward(dtmp, tess_registry_grad(h->reg, h->w), NULL, dlogits,
                                  h->norm.out, tess_registry_param(h->reg, h->w), h->N, h->C,
                                  h->V);
    tess_nn_normp_backward(&h->norm, dx, dtmp, h->in, h->N);
}
