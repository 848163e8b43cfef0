/* transformer.c - the transformer model of transformer.h: parameter registration, activation
 * layout in one arena, forward and hand-written backward through the nn layers. */
#include "nn/transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"     /* tess_arena_* */
#include "core/rng.h"       /* tess_rng_fill_normal */
#include "nn/attention.h"   /* tess_nn_attention_* */
#include "nn/embedding.h"   /* tess_nn_embedding_* */
#include "nn/linear.h"      /* tess_nn_linear_* */
#include "nn/loss.h"        /* tess_nn_crossentropy_* */
#include "nn/mlp.h"         /* tess_nn_mlp_* */
#include "nn/norm.h"        /* tess_nn_rmsnorm_*, tess_nn_layernorm_* */
#include "tensor/tensor.h"  /* tess_tensor_residual_add* */

/* Registry indices of one layer's parameters; -1 where the variant has none. The MLP weights
 * are w1 (F,C): gate or fc; w3 (F,C): up (SwiGLU only); w2 (C,F): down or proj; b1 (F), b2 (C):
 * GELU biases. */
typedef struct {
    int64_t norm1_w, norm1_b, w_qkv, w_o, norm2_w, norm2_b, w1, w3, w2, b1, b2;
} layer_params;

/* One layer's activations, all for N = max_B*T rows. mean1/mean2 are LayerNorm only; c3 is
 * SwiGLU only (SwiGLU caches gate, up, h = c1, c3, c2; GELU caches pre, act = c1, c2). */
typedef struct {
    float *n1, *mean1, *rstd1; /* (N,C), (N), (N): norm1 output and stats */
    float *qkv;                /* (N,3C) */
    float *att_cache;          /* tess_nn_attention_cache_size */
    float *atty;               /* (N,C) attention output before w_o */
    float *mid;                /* (N,C) residual stream after attention */
    float *n2, *mean2, *rstd2; /* (N,C), (N), (N) */
    float *c1, *c2, *c3;       /* (N,F) MLP caches */
} layer_acts;

struct tess_tfm {
    tess_tfm_config cfg;
    int64_t max_B;
    tess_registry *reg; /* borrowed */
    int64_t tok_emb, lm_head, normf_w, normf_b;
    layer_params *lp; /* (L) */
    layer_acts *la;   /* (L) */
    tess_nn_attention_dims att; /* B = max_B; lowered per call */
    tess_arena arena;
    /* shared activations and scratch */
    float **res;                  /* (L+1) pointers to (N,C): residual stream entering layer l */
    float *nf, *meanf, *rstdf;    /* (N,C), (N), (N): final norm */
    float *logits;                /* (N,V); backward reuses it for dlogits */
    float *probs;                 /* (N,V) */
    float *tmp;                   /* (N,C) block outputs before the residual add */
    float *dres, *dtmp, *dtmp2;   /* (N,C) each */
    float *dqkv;                  /* (N,3C) */
    float *mlp_scratch;           /* tess_nn_mlp_scratch_size(N, F) */
    float *att_scratch;           /* tess_nn_attention_scratch_size */
    const int32_t *ids, *targets; /* of the last forward, borrowed until backward */
    tess_tfm_grad_hook hook;      /* optional: told of each finished gradient range */
    void *hook_ctx;
    int64_t B;                    /* of the last forward */
};

tess_status tess_tfm_check_config(const tess_tfm_config *c, int64_t max_B) {
    TESS_REQUIRE(c->V >= 2, TESS_ERR_CONFIG, "model.vocab must be >= 2, got %lld", (long long)c->V);
    TESS_REQUIRE(c->T >= 1, TESS_ERR_CONFIG, "model.seq_len must be >= 1, got %lld", (long long)c->T);
    TESS_REQUIRE(c->C >= 1 && c->NH >= 1 && c->C % c->NH == 0, TESS_ERR_CONFIG,
                 "model.channels (%lld) must be a positive multiple of model.heads (%lld)",
                 (long long)c->C, (long long)c->NH);
    TESS_REQUIRE((c->C / c->NH) % 2 == 0, TESS_ERR_CONFIG,
                 "head size model.channels/model.heads = %lld must be even for RoPE",
                 (long long)(c->C / c->NH));
    TESS_REQUIRE(c->F >= 1, TESS_ERR_CONFIG, "model.mlp_hidden must be >= 1, got %lld", (long long)c->F);
    TESS_REQUIRE(c->L >= 1, TESS_ERR_CONFIG, "model.layers must be >= 1, got %lld", (long long)c->L);
    TESS_REQUIRE(c->norm_eps > 0.0f, TESS_ERR_CONFIG, "model.norm_eps must be > 0, got %g", (double)c->norm_eps);
    TESS_REQUIRE(max_B >= 1, TESS_ERR_CONFIG, "batch size must be >= 1, got %lld", (long long)max_B);
    return TESS_OK;
}

/* Register name with shape (a[, b]) replicated; *idx receives the index. */
static tess_status add_param(tess_registry *reg, const char *name, int ndim, int64_t a, int64_t b,
                             int64_t *idx) {
    const int64_t shape[2] = {a, b};
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(tess_registry_add(reg, name, ndim, shape, &rep, idx));
    return TESS_OK;
}

static tess_status add_layer_param(tess_registry *reg, int64_t l, const char *leaf, int ndim,
                                   int64_t a, int64_t b, int64_t *idx) {
    char name[TESS_REGISTRY_NAME_MAX];
    snprintf(name, sizeof name, "layers.%lld.%s", (long long)l, leaf);
    TESS_CHECK(add_param(reg, name, ndim, a, b, idx));
    return TESS_OK;
}

static tess_status register_params(tess_tfm *m) {
    const tess_tfm_config *c = &m->cfg;
    bool ln = c->norm == TESS_TFM_NORM_LAYER, swiglu = c->mlp == TESS_TFM_MLP_SWIGLU;
    TESS_CHECK(add_param(m->reg, "tok_emb", 2, c->V, c->C, &m->tok_emb));
    for (int64_t l = 0; l < c->L; l++) {
        layer_params *p = &m->lp[l];
        p->norm1_b = p->norm2_b = p->w3 = p->b1 = p->b2 = -1;
        TESS_CHECK(add_layer_param(m->reg, l, "norm1.w", 1, c->C, 0, &p->norm1_w));
        if (ln) TESS_CHECK(add_layer_param(m->reg, l, "norm1.b", 1, c->C, 0, &p->norm1_b));
        TESS_CHECK(add_layer_param(m->reg, l, "attn.w_qkv", 2, 3 * c->C, c->C, &p->w_qkv));
        TESS_CHECK(add_layer_param(m->reg, l, "attn.w_o", 2, c->C, c->C, &p->w_o));
        TESS_CHECK(add_layer_param(m->reg, l, "norm2.w", 1, c->C, 0, &p->norm2_w));
        if (ln) TESS_CHECK(add_layer_param(m->reg, l, "norm2.b", 1, c->C, 0, &p->norm2_b));
        if (swiglu) {
            TESS_CHECK(add_layer_param(m->reg, l, "mlp.w_gate", 2, c->F, c->C, &p->w1));
            TESS_CHECK(add_layer_param(m->reg, l, "mlp.w_up", 2, c->F, c->C, &p->w3));
            TESS_CHECK(add_layer_param(m->reg, l, "mlp.w_down", 2, c->C, c->F, &p->w2));
        } else {
            TESS_CHECK(add_layer_param(m->reg, l, "mlp.w_fc", 2, c->F, c->C, &p->w1));
            TESS_CHECK(add_layer_param(m->reg, l, "mlp.b_fc", 1, c->F, 0, &p->b1));
            TESS_CHECK(add_layer_param(m->reg, l, "mlp.w_proj", 2, c->C, c->F, &p->w2));
            TESS_CHECK(add_layer_param(m->reg, l, "mlp.b_proj", 1, c->C, 0, &p->b2));
        }
    }
    m->normf_b = -1;
    TESS_CHECK(add_param(m->reg, "norm_f.w", 1, c->C, 0, &m->normf_w));
    if (ln) TESS_CHECK(add_param(m->reg, "norm_f.b", 1, c->C, 0, &m->normf_b));
    TESS_CHECK(add_param(m->reg, "lm_head", 2, c->V, c->C, &m->lm_head));
    return TESS_OK;
}

/* Carve every activation from a (measuring or real) arena; the same code sizes and allocates. */
static tess_status carve_activations(tess_tfm *m, tess_arena *a) {
    const tess_tfm_config *c = &m->cfg;
    const int64_t N = m->max_B * c->T, C = c->C, F = c->F, V = c->V;
    bool ln = c->norm == TESS_TFM_NORM_LAYER;
    for (int64_t l = 0; l <= c->L; l++) TESS_CHECK(tess_arena_floats(a, N * C, &m->res[l]));
    for (int64_t l = 0; l < c->L; l++) {
        layer_acts *s = &m->la[l];
        s->mean1 = s->mean2 = s->c3 = NULL;
        TESS_CHECK(tess_arena_floats(a, N * C, &s->n1));
        if (ln) TESS_CHECK(tess_arena_floats(a, N, &s->mean1));
        TESS_CHECK(tess_arena_floats(a, N, &s->rstd1));
        TESS_CHECK(tess_arena_floats(a, N * 3 * C, &s->qkv));
        TESS_CHECK(tess_arena_floats(a, tess_nn_attention_cache_size(&m->att), &s->att_cache));
        TESS_CHECK(tess_arena_floats(a, N * C, &s->atty));
        TESS_CHECK(tess_arena_floats(a, N * C, &s->mid));
        TESS_CHECK(tess_arena_floats(a, N * C, &s->n2));
        if (ln) TESS_CHECK(tess_arena_floats(a, N, &s->mean2));
        TESS_CHECK(tess_arena_floats(a, N, &s->rstd2));
        TESS_CHECK(tess_arena_floats(a, N * F, &s->c1));
        TESS_CHECK(tess_arena_floats(a, N * F, &s->c2));
        if (c->mlp == TESS_TFM_MLP_SWIGLU) TESS_CHECK(tess_arena_floats(a, N * F, &s->c3));
    }
    m->meanf = NULL;
    TESS_CHECK(tess_arena_floats(a, N * C, &m->nf));
    if (ln) TESS_CHECK(tess_arena_floats(a, N, &m->meanf));
    TESS_CHECK(tess_arena_floats(a, N, &m->rstdf));
    TESS_CHECK(tess_arena_floats(a, N * V, &m->logits));
    TESS_CHECK(tess_arena_floats(a, N * V, &m->probs));
    TESS_CHECK(tess_arena_floats(a, N * C, &m->tmp));
    TESS_CHECK(tess_arena_floats(a, N * C, &m->dres));
    TESS_CHECK(tess_arena_floats(a, N * C, &m->dtmp));
    TESS_CHECK(tess_arena_floats(a, N * C, &m->dtmp2));
    TESS_CHECK(tess_arena_floats(a, N * 3 * C, &m->dqkv));
    TESS_CHECK(tess_arena_floats(a, tess_nn_mlp_scratch_size(N, F), &m->mlp_scratch));
    TESS_CHECK(tess_arena_floats(a, tess_nn_attention_scratch_size(&m->att), &m->att_scratch));
    return TESS_OK;
}

static tess_status build(tess_tfm *m) {
    const tess_tfm_config *c = &m->cfg;
    m->lp = calloc((size_t)c->L, sizeof *m->lp);
    m->la = calloc((size_t)c->L, sizeof *m->la);
    m->res = calloc((size_t)c->L + 1, sizeof *m->res);
    TESS_REQUIRE(m->lp && m->la && m->res, TESS_ERR_MEM, "cannot allocate model tables for %lld layers",
                 (long long)c->L);
    TESS_CHECK(register_params(m));
    TESS_CHECK(tess_registry_finalize(m->reg));
    TESS_CHECK(tess_nn_attention_dims_init(&m->att, m->max_B, c->T, c->C, c->NH, c->causal, true));
    m->att.rope_base = c->rope_base;
    TESS_CHECK(tess_nn_attention_dims_check(&m->att));
    tess_arena measure;
    tess_arena_init_measure(&measure);
    TESS_CHECK(carve_activations(m, &measure));
    TESS_CHECK(tess_arena_init(&m->arena, tess_arena_high_water(&measure)));
    TESS_CHECK(carve_activations(m, &m->arena));
    return TESS_OK;
}

tess_status tess_tfm_create(tess_tfm **model, const tess_tfm_config *cfg, int64_t max_B,
                            tess_registry *reg) {
    *model = NULL;
    TESS_CHECK(tess_tfm_check_config(cfg, max_B));
    tess_tfm *m = calloc(1, sizeof *m);
    TESS_REQUIRE(m, TESS_ERR_MEM, "cannot allocate the model");
    m->cfg = *cfg;
    m->max_B = max_B;
    m->reg = reg;
    tess_status s = build(m);
    if (s != TESS_OK) {
        tess_tfm_destroy(&m);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "building the transformer");
    }
    *model = m;
    return TESS_OK;
}

void tess_tfm_destroy(tess_tfm **model) {
    if (!model || !*model) return;
    tess_tfm *m = *model;
    tess_arena_free(&m->arena);
    free(m->lp);
    free(m->la);
    free(m->res);
    free(m);
    *model = NULL;
}

/* Parameter and gradient pointers by registry index (NULL for -1). */
static float *P(const tess_tfm *m, int64_t i) { return i < 0 ? NULL : tess_registry_param(m->reg, i); }
static float *G(const tess_tfm *m, int64_t i) { return i < 0 ? NULL : tess_registry_grad(m->reg, i); }

/* Flat offset of entry i in the registry's buffers. */
static int64_t flat(const tess_tfm *m, int64_t i) { return tess_registry_get(m->reg, i)->flat_offset; }

/* Report gradients [lo, hi) as final to the hook, if any. */
static void grads_ready(const tess_tfm *m, int64_t lo, int64_t hi) {
    if (m->hook) m->hook(m->hook_ctx, lo, hi);
}

void tess_tfm_init_params(tess_tfm *m, uint64_t seed) {
    const tess_rng_key key = {.seed = (uint32_t)seed, .stream = (uint32_t)(seed >> 32)};
    const double std = 0.02, std_out = 0.02 / sqrt(2.0 * (double)m->cfg.L);
    for (int64_t i = 0; i < tess_registry_count(m->reg); i++) {
        const tess_registry_entry *e = tess_registry_get(m->reg, i);
        float *p = tess_registry_param(m->reg, i);
        bool residual_out = strstr(e->name, "attn.w_o") || strstr(e->name, "mlp.w_down") ||
                            strstr(e->name, "mlp.w_proj");
        if (e->ndim >= 2) {
            /* element j of the whole tensor is draw j of counter (INIT, entry index) */
            tess_rng_fill_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_INIT, (uint64_t)i), 0,
                                 e->local_count, p, 0.0f, (float)(residual_out ? std_out : std));
        } else {
            bool gain = strstr(e->name, "norm") && e->name[strlen(e->name) - 1] == 'w';
            for (int64_t j = 0; j < e->local_count; j++) p[j] = gain ? 1.0f : 0.0f;
        }
    }
}

/* out = norm(in) with the configured norm; mean is NULL for RMSNorm. */
static void norm_forward(const tess_tfm *m, float *out, float *mean, float *rstd, const float *in,
                         int64_t w, int64_t b, int64_t N) {
    if (m->cfg.norm == TESS_TFM_NORM_LAYER)
        tess_nn_layernorm_forward(out, mean, rstd, in, P(m, w), P(m, b), N, m->cfg.C, m->cfg.norm_eps);
    else
        tess_nn_rmsnorm_forward(out, rstd, in, P(m, w), N, m->cfg.C, m->cfg.norm_eps);
}

static void norm_backward(const tess_tfm *m, float *din, const float *dout, const float *in,
                          const float *mean, const float *rstd, int64_t w, int64_t b, int64_t N) {
    if (m->cfg.norm == TESS_TFM_NORM_LAYER)
        tess_nn_layernorm_backward(din, G(m, w), G(m, b), dout, in, P(m, w), mean, rstd, N, m->cfg.C);
    else
        tess_nn_rmsnorm_backward(din, G(m, w), dout, in, P(m, w), rstd, N, m->cfg.C);
}

static void mlp_forward(const tess_tfm *m, float *out, layer_acts *s, const layer_params *p,
                        int64_t N) {
    const int64_t C = m->cfg.C, F = m->cfg.F;
    if (m->cfg.mlp == TESS_TFM_MLP_SWIGLU)
        tess_nn_mlp_swiglu_forward(out, s->c1, s->c3, s->c2, s->n2, P(m, p->w1), P(m, p->w3),
                                   P(m, p->w2), N, C, F);
    else
        tess_nn_mlp_gelu_forward(out, s->c1, s->c2, s->n2, P(m, p->w1), P(m, p->b1), P(m, p->w2),
                                 P(m, p->b2), N, C, F);
}

static void mlp_backward(const tess_tfm *m, float *din, const float *dout, const layer_acts *s,
                         const layer_params *p, int64_t N) {
    const int64_t C = m->cfg.C, F = m->cfg.F;
    if (m->cfg.mlp == TESS_TFM_MLP_SWIGLU)
        tess_nn_mlp_swiglu_backward(din, G(m, p->w1), G(m, p->w3), G(m, p->w2), m->mlp_scratch,
                                    dout, s->n2, P(m, p->w1), P(m, p->w3), P(m, p->w2), s->c1,
                                    s->c3, s->c2, N, C, F);
    else
        tess_nn_mlp_gelu_backward(din, G(m, p->w1), G(m, p->b1), G(m, p->w2), G(m, p->b2),
                                  m->mlp_scratch, dout, s->n2, P(m, p->w1), P(m, p->w2), s->c1,
                                  s->c2, N, C, F);
}

float tess_tfm_forward(tess_tfm *m, const int32_t *ids, const int32_t *targets, int64_t B) {
    TESS_ASSERT(B >= 1 && B <= m->max_B);
    const tess_tfm_config *c = &m->cfg;
    const int64_t N = B * c->T, C = c->C;
    tess_nn_attention_dims att = m->att;
    att.B = B;
    m->ids = ids;
    m->targets = targets;
    m->B = B;

    tess_nn_embedding_forward(m->res[0], ids, P(m, m->tok_emb), N, c->V, C);
    for (int64_t l = 0; l < c->L; l++) {
        const layer_params *p = &m->lp[l];
        layer_acts *s = &m->la[l];
        norm_forward(m, s->n1, s->mean1, s->rstd1, m->res[l], p->norm1_w, p->norm1_b, N);
        tess_nn_linear_forward(s->qkv, s->n1, P(m, p->w_qkv), NULL, N, C, 3 * C);
        tess_nn_attention_forward(s->atty, s->att_cache, m->att_scratch, s->qkv, &att);
        tess_nn_linear_forward(m->tmp, s->atty, P(m, p->w_o), NULL, N, C, C);
        tess_tensor_residual_add(s->mid, m->res[l], m->tmp, N * C);
        norm_forward(m, s->n2, s->mean2, s->rstd2, s->mid, p->norm2_w, p->norm2_b, N);
        mlp_forward(m, m->tmp, s, p, N);
        tess_tensor_residual_add(m->res[l + 1], s->mid, m->tmp, N * C);
    }
    norm_forward(m, m->nf, m->meanf, m->rstdf, m->res[c->L], m->normf_w, m->normf_b, N);
    tess_nn_linear_forward(m->logits, m->nf, P(m, m->lm_head), NULL, N, C, c->V);
    if (!targets) return 0.0f;
    return tess_nn_crossentropy_forward(m->probs, m->logits, targets, N, c->V);
}

void tess_tfm_backward(tess_tfm *m, float loss_scale) {
    TESS_ASSERT(m->targets != NULL);
    const tess_tfm_config *c = &m->cfg;
    const int64_t N = m->B * c->T, C = c->C;
    tess_nn_attention_dims att = m->att;
    att.B = m->B;
    const size_t rowsC = (size_t)(N * C) * sizeof(float);

    float *dlogits = m->logits; /* the logits are dead after the loss: reuse their buffer */
    memset(dlogits, 0, (size_t)(N * c->V) * sizeof(float));
    tess_nn_crossentropy_backward(dlogits, m->probs, m->targets, N, c->V, loss_scale);
    memset(m->dtmp, 0, rowsC);
    tess_nn_linear_backward(m->dtmp, G(m, m->lm_head), NULL, dlogits, m->nf, P(m, m->lm_head), N,
                            C, c->V);
    memset(m->dres, 0, rowsC);
    norm_backward(m, m->dres, m->dtmp, m->res[c->L], m->meanf, m->rstdf, m->normf_w, m->normf_b, N);
    grads_ready(m, flat(m, m->normf_w), tess_registry_local_total(m->reg));

    for (int64_t l = c->L - 1; l >= 0; l--) {
        const layer_params *p = &m->lp[l];
        const layer_acts *s = &m->la[l];
        /* res[l+1] = mid + mlp(norm2(mid)): dres flows to mid unchanged and through the MLP */
        memset(m->dtmp, 0, rowsC);
        mlp_backward(m, m->dtmp, m->dres, s, p, N);
        norm_backward(m, m->dres, m->dtmp, s->mid, s->mean2, s->rstd2, p->norm2_w, p->norm2_b, N);
        /* mid = res[l] + attn(norm1(res[l])) @ w_o^T */
        memset(m->dtmp, 0, rowsC);
        tess_nn_linear_backward(m->dtmp, G(m, p->w_o), NULL, m->dres, s->atty, P(m, p->w_o), N, C, C);
        memset(m->dqkv, 0, 3 * rowsC);
        tess_nn_attention_backward(m->dqkv, m->att_scratch, m->dtmp, s->att_cache, &att);
        memset(m->dtmp2, 0, rowsC);
        tess_nn_linear_backward(m->dtmp2, G(m, p->w_qkv), NULL, m->dqkv, s->n1, P(m, p->w_qkv), N,
                                C, 3 * C);
        norm_backward(m, m->dres, m->dtmp2, m->res[l], s->mean1, s->rstd1, p->norm1_w, p->norm1_b, N);
        int64_t next = l + 1 < c->L ? flat(m, m->lp[l + 1].norm1_w) : flat(m, m->normf_w);
        grads_ready(m, flat(m, p->norm1_w), next);
    }
    tess_nn_embedding_backward(G(m, m->tok_emb), m->dres, m->ids, N, c->V, C);
    grads_ready(m, 0, flat(m, m->lp[0].norm1_w));
}

void tess_tfm_set_grad_hook(tess_tfm *m, tess_tfm_grad_hook fn, void *ctx) {
    m->hook = fn;
    m->hook_ctx = ctx;
}

const float *tess_tfm_logits(const tess_tfm *m) { return m->logits; }

int64_t tess_tfm_activation_bytes(const tess_tfm *m) { return (int64_t)m->arena.capacity; }

double tess_tfm_train_flops(const tess_tfm *m, int64_t B) {
    const tess_tfm_config *c = &m->cfg;
    double mlp_mats = c->mlp == TESS_TFM_MLP_SWIGLU ? 3.0 : 2.0;
    double per_layer = 4.0 * (double)c->C * (double)c->C + mlp_mats * (double)c->F * (double)c->C;
    double matmul_params = (double)c->L * per_layer + (double)c->V * (double)c->C;
    double tokens = (double)B * (double)c->T;
    /* PaLM's convention: 6 FLOPs per matmul parameter per token, plus 12*L*C*T per token for
     * the attention scores and values (forward + backward, masked half included). */
    return 6.0 * matmul_params * tokens + 12.0 * (double)c->L * (double)c->C * (double)c->T * tokens;
}
