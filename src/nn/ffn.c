/* ffn.c - the feed-forward dispatchers and the dense SwiGLU / GELU implementation (ffn.h). */
#include "nn/ffn.h"

#include <stdio.h>
#include <stdlib.h>

#include "nn/mlp.h" /* tess_nn_mlp_* */

tess_status tess_nn_ffn_add_params(tess_nn_ffn *f, tess_registry *reg, const char *prefix) {
    f->reg = reg;
    TESS_CHECK(f->ops->add_params(f, reg, prefix));
    return TESS_OK;
}

tess_status tess_nn_ffn_carve(tess_nn_ffn *f, tess_arena *a, int64_t max_N) {
    TESS_CHECK(f->ops->carve(f, a, max_N));
    return TESS_OK;
}

int64_t tess_nn_ffn_activation_bytes(tess_nn_ffn *f, int64_t max_N) {
    tess_arena m;
    tess_arena_init_measure(&m);
    /* A measuring arena hands out NULL and never fails; the pointers are carved again later. */
    if (f->ops->carve(f, &m, max_N) != TESS_OK) return -1;
    return (int64_t)tess_arena_high_water(&m);
}

int64_t tess_nn_ffn_scratch_floats(const tess_nn_ffn *f, int64_t max_N) {
    return f->ops->scratch_floats(f, max_N);
}

void tess_nn_ffn_forward(tess_nn_ffn *f, float *out, const float *in, int64_t N) {
    f->ops->forward(f, out, in, N);
}

void tess_nn_ffn_backward(tess_nn_ffn *f, float *din, float *scratch, const float *dout,
                          int64_t N) {
    f->ops->backward(f, din, scratch, dout, N);
}

double tess_nn_ffn_matmul_params_per_token(const tess_nn_ffn *f) {
    return f->ops->matmul_params_per_token(f);
}

void tess_nn_ffn_destroy(tess_nn_ffn **f) {
    if (!f || !*f) return;
    (*f)->ops->destroy(*f);
    *f = NULL;
}

/* ---------- dense MLP ---------- */

typedef struct {
    tess_nn_ffn base;
    tess_nn_ffn_kind kind;
    int64_t F;
    double std, out_std;
    int64_t w1, w3, w2, b1, b2; /* registry indices; w3 SwiGLU only, b1/b2 GELU only (else -1) */
    float *c1, *c2, *c3;        /* (max_N,F) caches: SwiGLU gate, h, up; GELU pre, act */
    const float *in;            /* (N,C) of the last forward, borrowed */
} dense_ffn;

static float *P(const dense_ffn *d, int64_t i) {
    return i < 0 ? NULL : tess_registry_param(d->base.reg, i);
}
static float *G(const dense_ffn *d, int64_t i) {
    return i < 0 ? NULL : tess_registry_grad(d->base.reg, i);
}

/* Register "<prefix>.<leaf>" of shape (a[, b]), replicated, with init; index to *idx. */
static tess_status add(tess_registry *reg, const char *prefix, const char *leaf, int ndim,
                       int64_t a, int64_t b, tess_init init, int64_t *idx) {
    char name[TESS_REGISTRY_NAME_MAX];
    const int64_t shape[2] = {a, b};
    const tess_layout rep = tess_layout_replicated();
    int w = snprintf(name, sizeof name, "%s.%s", prefix, leaf);
    TESS_REQUIRE(w > 0 && (size_t)w < sizeof name, TESS_ERR_ARG, "name '%s.%s' is too long",
                 prefix, leaf);
    TESS_CHECK(tess_registry_add(reg, name, ndim, shape, &rep, idx));
    TESS_CHECK(tess_registry_set_init(reg, *idx, init));
    return TESS_OK;
}

static tess_status dense_add_params(tess_nn_ffn *f, tess_registry *reg, const char *prefix) {
    dense_ffn *d = (dense_ffn *)f;
    const int64_t C = f->C, F = d->F;
    const tess_init w = tess_init_normal(0.0, d->std), wo = tess_init_normal(0.0, d->out_std);
    d->w3 = d->b1 = d->b2 = -1;
    if (d->kind == TESS_NN_FFN_SWIGLU) {
        TESS_CHECK(add(reg, prefix, "w_gate", 2, F, C, w, &d->w1));
        TESS_CHECK(add(reg, prefix, "w_up", 2, F, C, w, &d->w3));
        TESS_CHECK(add(reg, prefix, "w_down", 2, C, F, wo, &d->w2));
    } else {
        TESS_CHECK(add(reg, prefix, "w_fc", 2, F, C, w, &d->w1));
        TESS_CHECK(add(reg, prefix, "b_fc", 1, F, 0, tess_init_zeros(), &d->b1));
        TESS_CHECK(add(reg, prefix, "w_proj", 2, C, F, wo, &d->w2));
        TESS_CHECK(add(reg, prefix, "b_proj", 1, C, 0, tess_init_zeros(), &d->b2));
    }
    return TESS_OK;
}

static tess_status dense_carve(tess_nn_ffn *f, tess_arena *a, int64_t max_N) {
    dense_ffn *d = (dense_ffn *)f;
    d->c3 = NULL;
    TESS_CHECK(tess_arena_floats(a, max_N * d->F, &d->c1));
    TESS_CHECK(tess_arena_floats(a, max_N * d->F, &d->c2));
    if (d->kind == TESS_NN_FFN_SWIGLU) TESS_CHECK(tess_arena_floats(a, max_N * d->F, &d->c3));
    return TESS_OK;
}

static int64_t dense_scratch_floats(const tess_nn_ffn *f, int64_t max_N) {
    return tess_nn_mlp_scratch_size(max_N, ((const dense_ffn *)f)->F);
}

static void dense_forward(tess_nn_ffn *f, float *out, const float *in, int64_t N) {
    dense_ffn *d = (dense_ffn *)f;
    d->in = in;
    if (d->kind == TESS_NN_FFN_SWIGLU)
        tess_nn_mlp_swiglu_forward(out, d->c1, d->c3, d->c2, in, P(d, d->w1), P(d, d->w3),
                                   P(d, d->w2), N, f->C, d->F);
    else
        tess_nn_mlp_gelu_forward(out, d->c1, d->c2, in, P(d, d->w1), P(d, d->b1), P(d, d->w2),
                                 P(d, d->b2), N, f->C, d->F);
}

static void dense_backward(tess_nn_ffn *f, float *din, float *scratch, const float *dout,
                           int64_t N) {
    dense_ffn *d = (dense_ffn *)f;
    if (d->kind == TESS_NN_FFN_SWIGLU)
        tess_nn_mlp_swiglu_backward(din, G(d, d->w1), G(d, d->w3), G(d, d->w2), scratch, dout,
                                    d->in, P(d, d->w1), P(d, d->w3), P(d, d->w2), d->c1, d->c3,
                                    d->c2, N, f->C, d->F);
    else
        tess_nn_mlp_gelu_backward(din, G(d, d->w1), G(d, d->b1), G(d, d->w2), G(d, d->b2),
                                  scratch, dout, d->in, P(d, d->w1), P(d, d->w2), d->c1, d->c2, N,
                                  f->C, d->F);
}

static double dense_matmul_params(const tess_nn_ffn *f) {
    const dense_ffn *d = (const dense_ffn *)f;
    return (d->kind == TESS_NN_FFN_SWIGLU ? 3.0 : 2.0) * (double)d->F * (double)f->C;
}

static void dense_destroy(tess_nn_ffn *f) { free(f); }

static const tess_nn_ffn_ops dense_ops = {
    .add_params = dense_add_params,
    .carve = dense_carve,
    .scratch_floats = dense_scratch_floats,
    .forward = dense_forward,
    .backward = dense_backward,
    .matmul_params_per_token = dense_matmul_params,
    .destroy = dense_destroy,
};

tess_status tess_nn_ffn_dense_create(tess_nn_ffn **f, tess_nn_ffn_kind kind, int64_t C, int64_t F,
                                     double std, double out_std) {
    *f = NULL;
    TESS_REQUIRE(kind == TESS_NN_FFN_SWIGLU || kind == TESS_NN_FFN_GELU, TESS_ERR_ARG,
                 "unknown dense feed-forward kind %d", (int)kind);
    TESS_REQUIRE(C >= 1 && F >= 1, TESS_ERR_ARG, "feed-forward sizes must be >= 1: C=%lld F=%lld",
                 (long long)C, (long long)F);
    TESS_REQUIRE(std >= 0.0 && out_std >= 0.0, TESS_ERR_ARG,
                 "feed-forward init std must be >= 0: std=%g out_std=%g", std, out_std);
    dense_ffn *d = calloc(1, sizeof *d);
    TESS_REQUIRE(d, TESS_ERR_MEM, "cannot allocate a feed-forward");
    *d = (dense_ffn){.base = {.ops = &dense_ops, .C = C}, .kind = kind, .F = F, .std = std,
                     .out_std = out_std, .w1 = -1, .w3 = -1, .w2 = -1, .b1 = -1, .b2 = -1};
    *f = &d->base;
    return TESS_OK;
}
