/* block.c - norm piece, attention and feed-forward sub-blocks, and the block (block.h). */
#include "nn/block.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/linear.h"     /* tess_nn_linear_* */
#include "nn/norm.h"       /* tess_nn_rmsnorm_*, tess_nn_layernorm_* */
#include "tensor/matmul.h" /* tess_matmul_tiles */
#include "tensor/tensor.h" /* tess_tensor_residual_add */

/* Register "<prefix>.<leaf>" (leaf may be NULL: the name is prefix) of shape (a[, b]),
 * replicated, with init; index to *idx. */
static tess_status add(tess_registry *reg, const char *prefix, const char *leaf, int ndim,
                       int64_t a, int64_t b, tess_init init, int64_t *idx) {
    char name[TESS_REGISTRY_NAME_MAX];
    const int64_t shape[2] = {a, b};
    const tess_layout rep = tess_layout_replicated();
    int w = leaf ? snprintf(name, sizeof name, "%s.%s", prefix, leaf)
                 : snprintf(name, sizeof name, "%s", prefix);
    TESS_REQUIRE(w > 0 && (size_t)w < sizeof name, TESS_ERR_ARG, "parameter name '%s.%s' is too long",
                 prefix, leaf ? leaf : "");
    TESS_CHECK(tess_registry_add(reg, name, ndim, shape, &rep, idx));
    TESS_CHECK(tess_registry_set_init(reg, *idx, init));
    return TESS_OK;
}

static float *P(const tess_registry *reg, int64_t i) {
    return i < 0 ? NULL : tess_registry_param(reg, i);
}
static float *G(const tess_registry *reg, int64_t i) {
    return i < 0 ? NULL : tess_registry_grad(reg, i);
}

/* ---------- norm piece ---------- */

tess_status tess_nn_normp_add_params(tess_nn_normp *p, tess_registry *reg, const char *name) {
    p->reg = reg;
    p->b = -1;
    TESS_CHECK(add(reg, name, "w", 1, p->C, 0, tess_init_const(1.0), &p->w));
    if (p->kind == TESS_NN_NORM_LAYER)
        TESS_CHECK(add(reg, name, "b", 1, p->C, 0, tess_init_zeros(), &p->b));
    return TESS_OK;
}

tess_status tess_nn_normp_carve(tess_nn_normp *p, tess_arena *a, int64_t max_N) {
    p->mean = NULL;
    TESS_CHECK(tess_arena_floats(a, max_N * p->C, &p->out));
    if (p->kind == TESS_NN_NORM_LAYER) TESS_CHECK(tess_arena_floats(a, max_N, &p->mean));
    TESS_CHECK(tess_arena_floats(a, max_N, &p->rstd));
    return TESS_OK;
}

void tess_nn_normp_forward(tess_nn_normp *p, const float *in, int64_t N) {
    if (p->kind == TESS_NN_NORM_LAYER)
        tess_nn_layernorm_forward(p->out, p->mean, p->rstd, in, P(p->reg, p->w), P(p->reg, p->b),
                                  N, p->C, p->eps);
    else
        tess_nn_rmsnorm_forward(p->out, p->rstd, in, P(p->reg, p->w), N, p->C, p->eps);
}

void tess_nn_normp_backward(tess_nn_normp *p, float *din, const float *dout, const float *in,
                            int64_t N) {
    if (p->kind == TESS_NN_NORM_LAYER)
        tess_nn_layernorm_backward(din, G(p->reg, p->w), G(p->reg, p->b), dout, in,
                                   P(p->reg, p->w), p->mean, p->rstd, N, p->C);
    else
        tess_nn_rmsnorm_backward(din, G(p->reg, p->w), dout, in, P(p->reg, p->w), p->rstd, N,
                                 p->C);
}

/* ---------- config ---------- */

tess_status tess_nn_block_config_check(const tess_nn_block_config *c, int64_t max_B) {
    TESS_REQUIRE(c->T >= 1, TESS_ERR_CONFIG, "block: sequence length T must be >= 1, got %lld",
                 (long long)c->T);
    TESS_REQUIRE(c->C >= 1 && c->NH >= 1 && c->C % c->NH == 0, TESS_ERR_CONFIG,
                 "block: channels C=%lld must be a positive multiple of heads NH=%lld",
                 (long long)c->C, (long long)c->NH);
    TESS_REQUIRE(!c->rope || (c->C / c->NH) % 2 == 0, TESS_ERR_CONFIG,
                 "block: head size C/NH = %lld must be even for RoPE",
                 (long long)(c->C / c->NH));
    TESS_REQUIRE(!c->rope || c->rope_base > 0.0f, TESS_ERR_CONFIG,
                 "block: rope_base must be > 0, got %g", (double)c->rope_base);
    TESS_REQUIRE(c->norm == TESS_NN_NORM_RMS || c->norm == TESS_NN_NORM_LAYER, TESS_ERR_CONFIG,
                 "unknown norm kind %d", (int)c->norm);
    TESS_REQUIRE(c->norm_eps > 0.0f, TESS_ERR_CONFIG, "block: norm_eps must be > 0, got %g",
                 (double)c->norm_eps);
    TESS_REQUIRE(c->std >= 0.0 && c->out_std >= 0.0, TESS_ERR_CONFIG,
                 "init std must be >= 0: std=%g out_std=%g", c->std, c->out_std);
    TESS_REQUIRE(max_B >= 1, TESS_ERR_CONFIG, "block: batch size must be >= 1, got %lld",
                 (long long)max_B);
    return TESS_OK;
}

static tess_nn_normp norm_of(const tess_nn_block_config *c) {
    return (tess_nn_normp){.kind = c->norm, .C = c->C, .eps = c->norm_eps, .w = -1, .b = -1};
}

/* ---------- attention sub-block ---------- */

tess_status tess_nn_attn_sub_init(tess_nn_attn_sub *s, const tess_nn_block_config *cfg,
                                  int64_t max_B) {
    TESS_CHECK(tess_nn_block_config_check(cfg, max_B));
    *s = (tess_nn_attn_sub){.cfg = *cfg, .max_B = max_B, .norm = norm_of(cfg), .w_qkv = -1,
                            .w_o = -1};
    TESS_CHECK(tess_nn_attention_dims_init(&s->att, max_B, cfg->T, cfg->C, cfg->NH, cfg->causal,
                                           cfg->rope));
    if (cfg->rope) s->att.rope_base = cfg->rope_base;
    TESS_CHECK(tess_nn_attention_dims_check(&s->att));
    return TESS_OK;
}

tess_status tess_nn_attn_sub_add_params(tess_nn_attn_sub *s, tess_registry *reg,
                                        const char *norm_name, const char *attn_prefix) {
    const int64_t C = s->cfg.C;
    s->reg = reg;
    TESS_CHECK(tess_nn_normp_add_params(&s->norm, reg, norm_name));
    TESS_CHECK(add(reg, attn_prefix, "w_qkv", 2, 3 * C, C, tess_init_normal(0.0, s->cfg.std),
                   &s->w_qkv));
    TESS_CHECK(add(reg, attn_prefix, "w_o", 2, C, C, tess_init_normal(0.0, s->cfg.out_std),
                   &s->w_o));
    return TESS_OK;
}

tess_status tess_nn_attn_sub_carve(tess_nn_attn_sub *s, tess_arena *a) {
    const int64_t N = s->max_B * s->cfg.T, C = s->cfg.C;
    TESS_CHECK(tess_nn_normp_carve(&s->norm, a, N));
    TESS_CHECK(tess_arena_floats(a, N * 3 * C, &s->qkv));
    TESS_CHECK(tess_arena_floats(a, tess_nn_attention_cache_size(&s->att), &s->cache));
    TESS_CHECK(tess_arena_floats(a, N * C, &s->atty));
    return TESS_OK;
}

void tess_nn_attn_sub_forward(tess_nn_attn_sub *s, float *out, const float *in,
                              const uint8_t *kmask, int64_t B, const tess_nn_block_scratch *scr) {
    TESS_ASSERT(B >= 1 && B <= s->max_B);
    const int64_t N = B * s->cfg.T, C = s->cfg.C;
    tess_nn_attention_dims att = s->att;
    att.B = B;
    s->in = in;
    s->B = B;
    tess_nn_normp_forward(&s->norm, in, N);
    tess_nn_linear_tiles_forward(s->qkv, s->norm.out, P(s->reg, s->w_qkv), NULL, N, C, 3 * C);
    tess_nn_attention_forward(s->atty, s->cache, scr->att, s->qkv, kmask, &att);
    tess_nn_linear_tiles_forward(scr->tmp, s->atty, P(s->reg, s->w_o), NULL, N, C, C);
    tess_tensor_residual_add(out, in, scr->tmp, N * C);
}

void tess_nn_attn_sub_backward(tess_nn_attn_sub *s, float *dx, const tess_nn_block_scratch *scr) {
    const int64_t N = s->B * s->cfg.T, C = s->cfg.C;
    const size_t rowsC = (size_t)(N * C) * sizeof(float);
    tess_nn_attention_dims att = s->att;
    att.B = s->B;
    /* out = in + attn(norm(in)) @ w_o^T: dx flows to in unchanged and through the branch. The
     * input gradients of the two projections are written by their products (beta 0: nothing to
     * zero first), the weight gradients added by tess_nn_linear_backward. */
    tess_matmul_tiles(scr->dtmp, C, dx, C, P(s->reg, s->w_o), C, N, C, C, false, false, 1.0f,
                      0.0f, NULL);
    tess_nn_linear_tiles_backward(NULL, G(s->reg, s->w_o), NULL, dx, s->atty, P(s->reg, s->w_o),
                                  N, C, C);
    memset(scr->dqkv, 0, 3 * rowsC);
    tess_nn_attention_backward(scr->dqkv, scr->att, scr->dtmp, s->qkv, s->cache, &att);
    tess_matmul_tiles(scr->dtmp2, C, scr->dqkv, 3 * C, P(s->reg, s->w_qkv), C, N, C, 3 * C,
                      false, false, 1.0f, 0.0f, NULL);
    tess_nn_linear_tiles_backward(NULL, G(s->reg, s->w_qkv), NULL, scr->dqkv, s->norm.out,
                                  P(s->reg, s->w_qkv), N, C, 3 * C);
    tess_nn_normp_backward(&s->norm, dx, scr->dtmp2, s->in, N);
}

/* ---------- feed-forward sub-block ---------- */

tess_status tess_nn_ffn_sub_init(tess_nn_ffn_sub *s, const tess_nn_block_config *cfg,
                                 int64_t max_N, tess_nn_ffn *ffn) {
    *s = (tess_nn_ffn_sub){.C = cfg->C, .max_N = max_N, .norm = norm_of(cfg), .ffn = ffn};
    TESS_REQUIRE(ffn && ffn->C == cfg->C, TESS_ERR_CONFIG,
                 "the feed-forward's width (%lld) must equal the block's channels (%lld)",
                 ffn ? (long long)ffn->C : -1LL, (long long)cfg->C);
    return TESS_OK;
}

tess_status tess_nn_ffn_sub_add_params(tess_nn_ffn_sub *s, tess_registry *reg,
                                       const char *norm_name, const char *ffn_prefix) {
    TESS_CHECK(tess_nn_normp_add_params(&s->norm, reg, norm_name));
    TESS_CHECK(tess_nn_ffn_add_params(s->ffn, reg, ffn_prefix));
    return TESS_OK;
}

tess_status tess_nn_ffn_sub_carve(tess_nn_ffn_sub *s, tess_arena *a) {
    TESS_CHECK(tess_nn_normp_carve(&s->norm, a, s->max_N));
    TESS_CHECK(tess_nn_ffn_carve(s->ffn, a, s->max_N));
    return TESS_OK;
}

void tess_nn_ffn_sub_forward(tess_nn_ffn_sub *s, float *out, const float *in, int64_t N,
                             const tess_nn_block_scratch *scr) {
    TESS_ASSERT(N >= 1 && N <= s->max_N);
    s->in = in;
    s->N = N;
    tess_nn_normp_forward(&s->norm, in, N);
    tess_nn_ffn_forward(s->ffn, scr->tmp, s->norm.out, N);
    tess_tensor_residual_add(out, in, scr->tmp, N * s->C);
}

void tess_nn_ffn_sub_backward(tess_nn_ffn_sub *s, float *dx, const tess_nn_block_scratch *scr) {
    memset(scr->dtmp, 0, (size_t)(s->N * s->C) * sizeof(float));
    tess_nn_ffn_backward(s->ffn, scr->dtmp, scr->ffn, dx, s->N);
    tess_nn_normp_backward(&s->norm, dx, scr->dtmp, s->in, s->N);
}

void tess_nn_ffn_sub_destroy(tess_nn_ffn_sub *s) { tess_nn_ffn_destroy(&s->ffn); }

/* ---------- the block ---------- */

struct tess_nn_block {
    tess_nn_attn_sub attn;
    tess_nn_ffn_sub ffn;
    float *mid; /* (N,C) residual stream between the sub-blocks */
};

tess_status tess_nn_block_create(tess_nn_block **b, const tess_nn_block_config *cfg,
                                 int64_t max_B, tess_nn_ffn *ffn) {
    *b = NULL;
    tess_nn_block *k = calloc(1, sizeof *k);
    if (!k) tess_nn_ffn_destroy(&ffn);
    TESS_REQUIRE(k, TESS_ERR_MEM, "cannot allocate a block");
    tess_status s = tess_nn_ffn_sub_init(&k->ffn, cfg, max_B * cfg->T, ffn);
    if (s == TESS_OK) s = tess_nn_attn_sub_init(&k->attn, cfg, max_B);
    if (s != TESS_OK) {
        tess_nn_block_destroy(&k);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "creating a block");
    }
    *b = k;
    return TESS_OK;
}

void tess_nn_block_destroy(tess_nn_block **b) {
    if (!b || !*b) return;
    tess_nn_ffn_sub_destroy(&(*b)->ffn);
    free(*b);
    *b = NULL;
}

tess_status tess_nn_block_add_params(tess_nn_block *b, tess_registry *reg, const char *prefix) {
    char n1[TESS_REGISTRY_NAME_MAX], at[TESS_REGISTRY_NAME_MAX], n2[TESS_REGISTRY_NAME_MAX],
        mlp[TESS_REGISTRY_NAME_MAX];
    snprintf(n1, sizeof n1, "%s.norm1", prefix);
    snprintf(at, sizeof at, "%s.attn", prefix);
    snprintf(n2, sizeof n2, "%s.norm2", prefix);
    snprintf(mlp, sizeof mlp, "%s.mlp", prefix);
    TESS_CHECK(tess_nn_attn_sub_add_params(&b->attn, reg, n1, at));
    TESS_CHECK(tess_nn_ffn_sub_add_params(&b->ffn, reg, n2, mlp));
    return TESS_OK;
}

int64_t tess_nn_block_first_param(const tess_nn_block *b) { return b->attn.norm.w; }

tess_status tess_nn_block_carve(tess_nn_block *b, tess_arena *a) {
    TESS_CHECK(tess_nn_attn_sub_carve(&b->attn, a));
    TESS_CHECK(tess_arena_floats(a, b->ffn.max_N * b->ffn.C, &b->mid));
    TESS_CHECK(tess_nn_ffn_sub_carve(&b->ffn, a));
    return TESS_OK;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

void tess_nn_block_scratch_fit(tess_nn_block_scratch *s, const tess_nn_block *b) {
    s->nc = max64(s->nc, b->ffn.max_N * b->ffn.C);
    s->natt = max64(s->natt, tess_nn_attention_scratch_size(&b->attn.att));
    s->nffn = max64(s->nffn, tess_nn_ffn_scratch_floats(b->ffn.ffn, b->ffn.max_N));
}

tess_status tess_nn_block_scratch_carve(tess_nn_block_scratch *s, tess_arena *a) {
    TESS_CHECK(tess_arena_floats(a, s->nc, &s->tmp));
    TESS_CHECK(tess_arena_floats(a, s->nc, &s->dtmp));
    TESS_CHECK(tess_arena_floats(a, s->nc, &s->dtmp2));
    TESS_CHECK(tess_arena_floats(a, 3 * s->nc, &s->dqkv));
    TESS_CHECK(tess_arena_floats(a, s->natt, &s->att));
    TESS_CHECK(tess_arena_floats(a, s->nffn, &s->ffn));
    return TESS_OK;
}

void tess_nn_block_forward(tess_nn_block *b, float *out, const float *in, const uint8_t *kmask,
                           int64_t B, const tess_nn_block_scratch *scr) {
    tess_nn_attn_sub_forward(&b->attn, b->mid, in, kmask, B, scr);
    tess_nn_ffn_sub_forward(&b->ffn, out, b->mid, B * b->attn.cfg.T, scr);
}

void tess_nn_block_backward(tess_nn_block *b, float *dx, const tess_nn_block_scratch *scr) {
    tess_nn_ffn_sub_backward(&b->ffn, dx, scr);
    tess_nn_attn_sub_backward(&b->attn, dx, scr);
}

double tess_nn_block_matmul_params_per_token(const tess_nn_block *b) {
    const double C = (double)b->attn.cfg.C;
    return 4.0 * C * C + tess_nn_ffn_matmul_params_per_token(b->ffn.ffn);
}
