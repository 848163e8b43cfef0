/* tok.c - the single-neuron tokenizer (tok.h): conv + transformer encoder, cosine codebook,
 * transformer + transposed-conv decoder, composed of nn/conv1d.h, nn/codebook.h, nn/block.h. */
#include "tok.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"      /* tess_arena_* */
#include "nn/activation.h"   /* tess_nn_gelu_* */
#include "nn/block.h"        /* tess_nn_block_* */
#include "nn/conv1d.h"       /* tess_nn_conv1d_*, tess_nn_convt1d_* */
#include "nn/ffn.h"          /* tess_nn_ffn_dense_create */
#include "nn/linear.h"       /* tess_nn_linear_* */
#include "par/coll.h"        /* tess_par_allreduce */
#include "par/layout.h"      /* tess_layout_replicated */
#include "tensor/matmul.h"   /* tess_matmul */
#include "tensor/tensor.h"   /* tess_tensor_logf */

enum { KW = 5 }; /* width of the first and last convolution */

struct calm_tok {
    calm_tok_config c;
    int64_t max_Bn, L;
    tess_registry *reg; /* borrowed */
    /* registry indices */
    int64_t conv1_w, conv1_b, conv2_w, conv2_b, in_w, in_b, out_w, code;
    int64_t din_w, din_b, dout_w, dout_b, convt_w, convt_b, conv3_w, conv3_b;
    tess_nn_block **enc, **dec; /* (nt) each */
    tess_nn_block_scratch scr;
    tess_arena arena;
    /* activations: rows R = Bn L (frames) or Q = Bn M (patches) */
    float *a0, *col1, *g1, *a2;         /* (R,c), (R,KW), (R,c), (Q,c) */
    float **e;                          /* (nt+1) (Q,dt): e[0] = Linear(a2), e[l+1] block l */
    float *zr, *z, *rz;                 /* (Q,Dc), (Q,Dc), (Q) */
    float *E, *rE;                      /* (K,Dc) normalised codebook, (K) */
    float *logits, *y, *G, *q;          /* (Q,K), (Q,K), (Q,K), (Q,Dc) */
    float *p, *pbar, *gram;             /* (Q,K), (K), (K,K) */
    float **h;                          /* (nt+1) (Q,dt): h[0] = Linear(q), h[l+1] block l */
    float *u0, *u, *gu, *xh;            /* (Q,c), (R,c), (R,c), (R) */
    const float *x;                     /* input of the last forward, borrowed */
    /* gradients and scratch */
    float *dxh, *dgu, *du0, *dh, *dq, *dz, *dzr, *de, *da2, *dg1;
    float *dlogits, *dE, *work, *kwork, *cwork; /* cwork: the patch and last convs' scratch */
    int32_t *ids;
    int64_t Bn;
    tess_nn_codebook_mode mode;
    float tau_g;
    double commit;                      /* VQ commitment of the last forward */
    /* codebook upkeep (calm_tok_codes_update): state, then scratch */
    float *ema_count, *ema_sum;         /* (K), (K,Dc) */
    int64_t *idle, restarts;            /* (K), total */
    float *nk, *sk, *rows;              /* (K), (K,Dc), (K,Dc) */
    int64_t *dead;                      /* (K) */
};

tess_status calm_tok_check(const calm_tok_config *c, int64_t max_Bn) {
    TESS_REQUIRE(c->P >= 1 && c->M >= 1, TESS_ERR_CONFIG,
                 "tok.patch = %lld and tok.patches = %lld must be >= 1", (long long)c->P,
                 (long long)c->M);
    TESS_REQUIRE(c->c >= 1 && c->nt >= 1 && c->Dc >= 2 && c->K >= 2 && c->K <= 65535,
                 TESS_ERR_CONFIG,
                 "tok.channels, tok.layers must be >= 1, tok.code_dim >= 2, tok.codes in [2, 65535]");
    TESS_REQUIRE(c->dt >= 2 && c->heads >= 1 && c->dt % c->heads == 0 &&
                     (c->dt / c->heads) % 2 == 0,
                 TESS_ERR_CONFIG,
                 "tok.width = %lld must be a multiple of tok.heads = %lld with an even head size",
                 (long long)c->dt, (long long)c->heads);
    TESS_REQUIRE(c->tau_cos > 0.0f, TESS_ERR_CONFIG, "tok.tau_cos must be > 0");
    TESS_REQUIRE(c->quant >= 0 && c->quant < CALM_QUANT_COUNT, TESS_ERR_CONFIG,
                 "tok.quantizer = %d is not a quantiser", (int)c->quant);
    TESS_REQUIRE(c->ema_decay >= 0.0f && c->ema_decay < 1.0f && c->beta >= 0.0f, TESS_ERR_CONFIG,
                 "tok.ema_decay = %g must be in [0, 1) and the commitment weight %g >= 0",
                 (double)c->ema_decay, (double)c->beta);
    TESS_REQUIRE(max_Bn >= 1, TESS_ERR_CONFIG, "the tokenizer batch must hold one trace");
    return TESS_OK;
}

static tess_status param(calm_tok *t, const char *name, int ndim, const int64_t *shape,
                         tess_init init, int64_t *idx) {
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(tess_registry_add(t->reg, name, ndim, shape, &rep, idx));
    TESS_CHECK(tess_registry_set_init(t->reg, *idx, init));
    return TESS_OK;
}

static tess_status blocks(calm_tok *t, tess_nn_block **b, bool causal, const char *prefix) {
    const calm_tok_config *c = &t->c;
    const tess_nn_block_config bc = {.T = c->M, .C = c->dt, .NH = c->heads,
                                     .norm = TESS_NN_NORM_LAYER, .norm_eps = 1e-5f,
                                     .causal = causal, .rope = true, .rope_base = 10000.0f,
                                     .std = 0.02, .out_std = 0.02 / sqrt(2.0 * (double)c->nt)};
    for (int64_t l = 0; l < c->nt; l++) {
        tess_nn_ffn *ffn = NULL;
        TESS_CHECK(tess_nn_ffn_dense_create(&ffn, TESS_NN_FFN_GELU, c->dt, 4 * c->dt, bc.std,
                                            bc.out_std));
        TESS_CHECK(tess_nn_block_create(&b[l], &bc, t->max_Bn, ffn));
        char name[TESS_REGISTRY_NAME_MAX];
        snprintf(name, sizeof name, "%s.%lld", prefix, (long long)l);
        TESS_CHECK(tess_nn_block_add_params(b[l], t->reg, name));
        tess_nn_block_scratch_fit(&t->scr, b[l]);
    }
    return TESS_OK;
}

static tess_status build_pieces(calm_tok *t) {
    const calm_tok_config *c = &t->c;
    const int64_t C = c->c, P = c->P, dt = c->dt, Dc = c->Dc;
    const tess_init zero = tess_init_zeros();
    TESS_CHECK(param(t, "tok.enc.conv1.w", 3, (int64_t[]){C, 1, KW},
                     tess_init_normal(0, 1.0 / sqrt((double)KW)), &t->conv1_w));
    TESS_CHECK(param(t, "tok.enc.conv1.b", 1, (int64_t[]){C}, zero, &t->conv1_b));
    TESS_CHECK(param(t, "tok.enc.conv2.w", 3, (int64_t[]){C, C, P},
                     tess_init_normal(0, 1.0 / sqrt((double)(C * P))), &t->conv2_w));
    TESS_CHECK(param(t, "tok.enc.conv2.b", 1, (int64_t[]){C}, zero, &t->conv2_b));
    TESS_CHECK(param(t, "tok.enc.in.w", 2, (int64_t[]){dt, C},
                     tess_init_normal(0, 1.0 / sqrt((double)C)), &t->in_w));
    TESS_CHECK(param(t, "tok.enc.in.b", 1, (int64_t[]){dt}, zero, &t->in_b));
    TESS_CHECK(blocks(t, t->enc, true, "tok.enc.layers"));
    TESS_CHECK(param(t, "tok.enc.out.w", 2, (int64_t[]){Dc, dt},
                     tess_init_normal(0, 1.0 / sqrt((double)dt)), &t->out_w));
    TESS_CHECK(param(t, "tok.codebook", 2, (int64_t[]){c->K, Dc}, tess_init_normal(0, 1.0),
                     &t->code));
    TESS_CHECK(param(t, "tok.dec.in.w", 2, (int64_t[]){dt, Dc},
                     tess_init_normal(0, 1.0 / sqrt((double)Dc)), &t->din_w));
    TESS_CHECK(param(t, "tok.dec.in.b", 1, (int64_t[]){dt}, zero, &t->din_b));
    TESS_CHECK(blocks(t, t->dec, false, "tok.dec.layers"));
    TESS_CHECK(param(t, "tok.dec.out.w", 2, (int64_t[]){C, dt},
                     tess_init_normal(0, 1.0 / sqrt((double)dt)), &t->dout_w));
    TESS_CHECK(param(t, "tok.dec.out.b", 1, (int64_t[]){C}, zero, &t->dout_b));
    TESS_CHECK(param(t, "tok.dec.convt.w", 3, (int64_t[]){C, C, P},
                     tess_init_normal(0, 1.0 / sqrt((double)C)), &t->convt_w));
    TESS_CHECK(param(t, "tok.dec.convt.b", 1, (int64_t[]){C}, zero, &t->convt_b));
    TESS_CHECK(param(t, "tok.dec.conv3.w", 3, (int64_t[]){1, C, KW},
                     tess_init_normal(0, 1.0 / sqrt((double)(C * KW))), &t->conv3_w));
    TESS_CHECK(param(t, "tok.dec.conv3.b", 1, (int64_t[]){1}, zero, &t->conv3_b));
    return TESS_OK;
}

static tess_status carve(calm_tok *t, tess_arena *a) {
    const calm_tok_config *c = &t->c;
    const int64_t R = t->max_Bn * t->L, Q = t->max_Bn * c->M, C = c->c, K = c->K;
    const int64_t cw_patch = tess_nn_conv1d_patch_work_size(&(tess_nn_conv1d_dims){
                      .C = C, .OC = C, .K = c->P}), /* conv2 and convt: the same size */
                  cw_last = tess_nn_conv1d_direct_work_size(&(tess_nn_conv1d_dims){
                      .C = C, .OC = 1, .K = KW}),
                  cw = cw_patch > cw_last ? cw_patch : cw_last;
    const struct {
        float **ptr;
        int64_t n;
    } bufs[] = {
        {&t->a0, R * C},        {&t->col1, R * KW},       {&t->g1, R * C},
        {&t->a2, Q * C},        {&t->zr, Q * c->Dc},      {&t->z, Q * c->Dc},
        {&t->rz, Q},            {&t->E, K * c->Dc},       {&t->rE, K},
        {&t->logits, Q * K},    {&t->y, Q * K},           {&t->G, Q * K},
        {&t->q, Q * c->Dc},     {&t->p, Q * K},           {&t->pbar, K},
        {&t->gram, K * K},      {&t->u0, Q * C},          {&t->u, R * C},
        {&t->gu, R * C},        {&t->xh, R},              {&t->cwork, cw},
        {&t->dxh, R},           {&t->dgu, R * C},         {&t->du0, Q * C},
        {&t->dh, Q * c->dt},    {&t->dq, Q * c->Dc},      {&t->dz, Q * c->Dc},
        {&t->dzr, Q * c->Dc},   {&t->de, Q * c->dt},      {&t->da2, Q * C},
        {&t->dg1, R * C},       {&t->dlogits, Q * K},     {&t->dE, K * c->Dc},
        {&t->work, Q * K},      {&t->kwork, K * K},       {&t->ema_count, K},
        {&t->ema_sum, K * c->Dc}, {&t->nk, K},            {&t->sk, K * c->Dc},
        {&t->rows, K * c->Dc}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        TESS_CHECK(tess_arena_floats(a, bufs[i].n, bufs[i].ptr));
    for (int64_t l = 0; l <= c->nt; l++) {
        TESS_CHECK(tess_arena_floats(a, Q * c->dt, &t->e[l]));
        TESS_CHECK(tess_arena_floats(a, Q * c->dt, &t->h[l]));
    }
    TESS_CHECK(tess_arena_alloc(a, (size_t)Q * sizeof(int32_t), (void **)&t->ids));
    TESS_CHECK(tess_arena_alloc(a, (size_t)K * sizeof(int64_t), (void **)&t->idle));
    TESS_CHECK(tess_arena_alloc(a, (size_t)K * sizeof(int64_t), (void **)&t->dead));
    for (int64_t l = 0; l < c->nt; l++) {
        TESS_CHECK(tess_nn_block_carve(t->enc[l], a));
        TESS_CHECK(tess_nn_block_carve(t->dec[l], a));
    }
    TESS_CHECK(tess_nn_block_scratch_carve(&t->scr, a));
    return TESS_OK;
}

tess_status calm_tok_create(calm_tok **out, const calm_tok_config *c, int64_t max_Bn,
                            tess_registry *reg) {
    *out = NULL;
    TESS_CHECK(calm_tok_check(c, max_Bn));
    calm_tok *t = calloc(1, sizeof *t);
    TESS_REQUIRE(t, TESS_ERR_MEM, "cannot allocate the tokenizer");
    t->c = *c;
    t->max_Bn = max_Bn;
    t->L = c->M * c->P;
    t->reg = reg;
    t->enc = calloc((size_t)c->nt, sizeof *t->enc);
    t->dec = calloc((size_t)c->nt, sizeof *t->dec);
    t->e = calloc((size_t)c->nt + 1, sizeof *t->e);
    t->h = calloc((size_t)c->nt + 1, sizeof *t->h);
    tess_status s = t->enc && t->dec && t->e && t->h ? build_pieces(t) : TESS_ERR_MEM;
    if (s == TESS_OK) {
        tess_arena measure;
        tess_arena_init_measure(&measure);
        s = carve(t, &measure);
        if (s == TESS_OK) s = tess_arena_init(&t->arena, tess_arena_high_water(&measure));
        if (s == TESS_OK) s = carve(t, &t->arena);
    }
    if (s == TESS_OK) { /* the upkeep state starts at zero (the arena is not cleared) */
        memset(t->ema_count, 0, (size_t)c->K * sizeof(float));
        memset(t->ema_sum, 0, (size_t)(c->K * c->Dc) * sizeof(float));
        memset(t->idle, 0, (size_t)c->K * sizeof(int64_t));
    }
    if (s != TESS_OK) {
        calm_tok_destroy(&t);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "building the tokenizer");
    }
    *out = t;
    return TESS_OK;
}

void calm_tok_destroy(calm_tok **pt) {
    if (!pt || !*pt) return;
    calm_tok *t = *pt;
    for (int64_t l = 0; l < t->c.nt; l++) {
        if (t->enc) tess_nn_block_destroy(&t->enc[l]);
        if (t->dec) tess_nn_block_destroy(&t->dec[l]);
    }
    tess_arena_free(&t->arena);
    free(t->enc), free(t->dec), free(t->e), free(t->h);
    free(t);
    *pt = NULL;
}

static float *W(const calm_tok *t, int64_t i) { return tess_registry_param(t->reg, i); }
static float *dW(const calm_tok *t, int64_t i) { return tess_registry_grad(t->reg, i); }

static tess_nn_conv1d_dims dims1(const calm_tok *t) { /* first conv: 1 -> c, causal */
    return (tess_nn_conv1d_dims){.B = t->Bn, .L = t->L, .C = 1, .OC = t->c.c, .K = KW, .stride = 1,
                                 .pad = KW - 1};
}
/* patch conv: c -> c, k = stride = P; it and the transposed one run as one GEMM on the
 * sequences themselves (nn/conv1d.h, patch convolutions) */
static tess_nn_conv1d_dims dims2(const calm_tok *t) {
    return (tess_nn_conv1d_dims){.B = t->Bn, .L = t->L, .C = t->c.c, .OC = t->c.c, .K = t->c.P,
                                 .stride = t->c.P, .pad = 0};
}
static tess_nn_conv1d_dims dimst(const calm_tok *t) { /* transposed patch conv: M -> L */
    return (tess_nn_conv1d_dims){.B = t->Bn, .L = t->c.M, .C = t->c.c, .OC = t->c.c, .K = t->c.P,
                                 .stride = t->c.P};
}
/* last conv: c -> 1, causal; direct (nn/conv1d.h: with one output channel the GEMM on an
 * unfolded (R, c KW) matrix is a matrix-vector product that streams that matrix through memory) */
static tess_nn_conv1d_dims dims3(const calm_tok *t) {
    return (tess_nn_conv1d_dims){.B = t->Bn, .L = t->L, .C = t->c.c, .OC = 1, .K = KW, .stride = 1,
                                 .pad = KW - 1};
}

/* Encoder and quantiser: t->z, logits, y, q, ids for Bn traces x (Bn, L). */
static void encode(calm_tok *t, const float *x, int64_t Bn, tess_rng_key key, int64_t step,
                   int64_t first, float tau_g, tess_nn_codebook_mode mode) {
    TESS_ASSERT(Bn >= 1 && Bn <= t->max_Bn && tess_registry_is_final(t->reg));
    const calm_tok_config *c = &t->c;
    const int64_t M = c->M, R = Bn * t->L, Q = Bn * M, C = c->c, K = c->K, Dc = c->Dc;
    t->x = x, t->Bn = Bn, t->mode = mode, t->tau_g = tau_g > 0.0f ? tau_g : 1.0f;
    tess_nn_conv1d_dims d1 = dims1(t), d2 = dims2(t);
    tess_nn_conv1d_forward(t->a0, t->col1, x, W(t, t->conv1_w), W(t, t->conv1_b), &d1);
    tess_nn_gelu_forward(t->g1, t->a0, R * C);
    tess_nn_conv1d_patch_forward(t->a2, t->cwork, t->g1, W(t, t->conv2_w), W(t, t->conv2_b), &d2);
    tess_nn_linear_forward(t->e[0], t->a2, W(t, t->in_w), W(t, t->in_b), Q, C, c->dt);
    for (int64_t l = 0; l < c->nt; l++)
        tess_nn_block_forward(t->enc[l], t->e[l + 1], t->e[l], NULL, Bn, &t->scr);
    tess_nn_linear_forward(t->zr, t->e[c->nt], W(t, t->out_w), NULL, Q, c->dt, Dc);
    tess_nn_l2norm_forward(t->z, t->rz, t->zr, Q, Dc, 1e-6f);
    tess_nn_l2norm_forward(t->E, t->rE, W(t, t->code), K, Dc, 1e-6f);
    if (c->quant == CALM_QUANT_VQ) { /* ids = argmax logits, q = E[ids]; logits for the usage */
        t->commit = tess_nn_codebook_vq_forward(t->q, t->ids, t->z, t->E, Q, K, Dc);
        tess_matmul(t->logits, t->z, t->E, Q, K, Dc, false, true, 1.0f / c->tau_cos, 0.0f);
        return;
    }
    const bool noise = tau_g > 0.0f;
    if (noise) {
        const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_NOISE, (uint64_t)step);
        /* G = -log(-log U) in float with the vectorisable tess_tensor_logf (the double log,
         * then libm's scalar logf were the step's hot spots); U in [1e-12, 1) rounded to float
         * may reach 1, which is kept just below it (on the bits: positive floats order as
         * their bits, and an integer compare keeps the loop vectorisable) */
        /* drawn and transformed NOISE_ROWS rows at a time, so the transform reads them from
         * cache (the draws are a function of the element index: bitwise as one draw) */
        enum { NOISE_ROWS = 16 };
        for (int64_t r0 = 0; r0 < Q; r0 += NOISE_ROWS) {
            const int64_t n = (Q - r0 < NOISE_ROWS ? Q - r0 : NOISE_ROWS) * K;
            float *g = t->G + r0 * K;
            tess_rng_fill_uniform(key, ctr, (first * M + r0) * K, n, g, 1e-12f, 1.0f);
            for (int64_t i = 0; i < n; i++) {
                uint32_t b;
                memcpy(&b, &g[i], sizeof b);
                b = b < 0x3F7FFFFFu ? b : 0x3F7FFFFFu; /* 0x1.fffffep-1f */
                float u;
                memcpy(&u, &b, sizeof u);
                g[i] = -tess_tensor_logf(-tess_tensor_logf(u));
            }
        }
    }
    tess_nn_codebook_dims cd = {Q, K, Dc, c->tau_cos, t->tau_g, mode};
    tess_nn_codebook_forward(t->q, t->logits, t->y, t->ids, t->z, t->E, noise ? t->G : NULL, &cd);
}

/* Decoder: t->xh (Bn, L) from t->q (Bn M, Dc). */
static void decode(calm_tok *t) {
    const calm_tok_config *c = &t->c;
    const int64_t Bn = t->Bn, Q = Bn * c->M, R = Bn * t->L, C = c->c;
    tess_nn_conv1d_dims dtt = dimst(t), d3 = dims3(t);
    tess_nn_linear_forward(t->h[0], t->q, W(t, t->din_w), W(t, t->din_b), Q, c->Dc, c->dt);
    for (int64_t l = 0; l < c->nt; l++)
        tess_nn_block_forward(t->dec[l], t->h[l + 1], t->h[l], NULL, Bn, &t->scr);
    tess_nn_linear_forward(t->u0, t->h[c->nt], W(t, t->dout_w), W(t, t->dout_b), Q, c->dt, C);
    tess_nn_convt1d_patch_forward(t->u, t->cwork, t->u0, W(t, t->convt_w), W(t, t->convt_b),
                                  &dtt);
    tess_nn_gelu_forward(t->gu, t->u, R * C);
    tess_nn_conv1d_direct_forward(t->xh, t->cwork, t->gu, W(t, t->conv3_w), W(t, t->conv3_b), &d3);
}

calm_tok_loss calm_tok_forward(calm_tok *t, const float *x, int64_t Bn, int32_t *ids,
                               tess_rng_key key, int64_t step, int64_t first, float tau_g,
                               tess_nn_codebook_mode mode) {
    const calm_tok_config *c = &t->c;
    const int64_t L = t->L, R = Bn * L, Q = Bn * c->M, K = c->K;
    encode(t, x, Bn, key, step, first, tau_g, mode);
    memcpy(ids, t->ids, (size_t)Q * sizeof(int32_t));
    calm_tok_loss loss = {0};
    loss.entropy = tess_nn_codebook_entropy_forward(t->p, t->pbar, t->logits, Q, K);
    loss.orth = tess_nn_codebook_orth_forward(t->gram, t->E, K, c->Dc);
    decode(t);
    double se = 0.0, sd = 0.0;
    for (int64_t i = 0; i < R; i++) se += pow((double)t->xh[i] - x[i], 2);
    for (int64_t b = 0; b < Bn; b++)
        for (int64_t j = 0; j + 1 < L; j++) {
            int64_t i = b * L + j;
            sd += pow(((double)t->xh[i + 1] - t->xh[i]) - ((double)x[i + 1] - x[i]), 2);
        }
    loss.mse = se / (double)R;
    loss.dmse = L > 1 ? sd / (double)(Bn * (L - 1)) : 0.0;
    loss.commit = c->quant == CALM_QUANT_VQ ? t->commit : 0.0;
    loss.total = loss.mse + c->lambda_d * loss.dmse + c->lambda_orth * loss.orth +
                 c->lambda_h * loss.entropy + c->beta * loss.commit;
    return loss;
}

void calm_tok_encode(calm_tok *t, const float *x, int64_t Bn, int32_t *ids) {
    encode(t, x, Bn, (tess_rng_key){0, 0}, 0, 0, 0.0f, TESS_NN_CODEBOOK_HARD_ST);
    memcpy(ids, t->ids, (size_t)(Bn * t->c.M) * sizeof(int32_t));
}

const float *calm_tok_decode(calm_tok *t, const int32_t *ids, int64_t Bn) {
    TESS_ASSERT(Bn >= 1 && Bn <= t->max_Bn && tess_registry_is_final(t->reg));
    const int64_t Q = Bn * t->c.M, Dc = t->c.Dc;
    t->Bn = Bn;
    tess_nn_l2norm_forward(t->E, t->rE, W(t, t->code), t->c.K, Dc, 1e-6f);
    for (int64_t i = 0; i < Q; i++) {
        TESS_ASSERT(ids[i] >= 0 && ids[i] < t->c.K);
        memcpy(t->q + i * Dc, t->E + ids[i] * Dc, (size_t)Dc * sizeof(float));
    }
    decode(t);
    return t->xh;
}

void calm_tok_backward(calm_tok *t, float scale) {
    const calm_tok_config *c = &t->c;
    const int64_t Bn = t->Bn, L = t->L, M = c->M, R = Bn * L, Q = Bn * M, C = c->c, K = c->K,
                  Dc = c->Dc;
    tess_nn_conv1d_dims d1 = dims1(t), d2 = dims2(t), dtt = dimst(t), d3 = dims3(t);
    const float *x = t->x;
    /* d loss / d xh: MSE and MSE of the first differences */
    const float gm = scale * 2.0f / (float)R;
    const float gd = L > 1 ? scale * c->lambda_d * 2.0f / (float)(Bn * (L - 1)) : 0.0f;
    for (int64_t i = 0; i < R; i++) t->dxh[i] = gm * (t->xh[i] - x[i]);
    for (int64_t b = 0; b < Bn; b++)
        for (int64_t j = 0; j + 1 < L; j++) {
            int64_t i = b * L + j;
            float e = (t->xh[i + 1] - t->xh[i]) - (x[i + 1] - x[i]);
            t->dxh[i + 1] += gd * e;
            t->dxh[i] -= gd * e;
        }
    /* decoder */
    memset(t->dgu, 0, (size_t)(R * C) * sizeof(float));
    tess_nn_conv1d_direct_backward(t->dgu, dW(t, t->conv3_w), dW(t, t->conv3_b), t->cwork, t->dxh,
                                   t->gu, W(t, t->conv3_w), &d3);
    tess_nn_gelu_backward_inplace(t->dgu, t->u, R * C); /* dgu becomes d loss / d u */
    memset(t->du0, 0, (size_t)(Q * C) * sizeof(float));
    tess_nn_convt1d_patch_backward(t->du0, dW(t, t->convt_w), dW(t, t->convt_b), t->cwork, t->dgu,
                                   t->u0, W(t, t->convt_w), &dtt);
    memset(t->dh, 0, (size_t)(Q * c->dt) * sizeof(float));
    tess_nn_linear_backward(t->dh, dW(t, t->dout_w), dW(t, t->dout_b), t->du0, t->h[c->nt],
                            W(t, t->dout_w), Q, c->dt, C);
    for (int64_t l = c->nt - 1; l >= 0; l--) tess_nn_block_backward(t->dec[l], t->dh, &t->scr);
    memset(t->dq, 0, (size_t)(Q * Dc) * sizeof(float));
    tess_nn_linear_backward(t->dq, dW(t, t->din_w), dW(t, t->din_b), t->dh, t->q,
                            W(t, t->din_w), Q, Dc, c->dt);
    /* codebook: the quantiser (soft path), the usage entropy on the logits, orthogonality */
    memset(t->dlogits, 0, (size_t)(Q * K) * sizeof(float));
    tess_nn_codebook_entropy_backward(t->dlogits, t->work, scale * c->lambda_h, t->p, t->pbar, Q,
                                      K);
    memset(t->dz, 0, (size_t)(Q * Dc) * sizeof(float));
    if (c->quant == CALM_QUANT_VQ) { /* straight-through + commitment; usage via logits = z E^T / tau */
        tess_nn_codebook_vq_backward(t->dz, t->dq, scale * c->beta, t->z, t->q, Q, Dc);
        tess_matmul(t->dz, t->dlogits, t->E, Q, Dc, K, false, false, 1.0f / c->tau_cos, 1.0f);
    } else {
        memset(t->dE, 0, (size_t)(K * Dc) * sizeof(float));
        tess_nn_codebook_dims cd = {Q, K, Dc, c->tau_cos, t->tau_g, t->mode};
        tess_nn_codebook_backward(t->dz, t->dE, t->work, t->dq, t->dlogits, t->z, t->E, t->y, &cd);
        tess_nn_codebook_orth_backward(t->dE, t->kwork, scale * c->lambda_orth, t->gram, t->E, K,
                                       Dc);
        tess_nn_l2norm_backward(dW(t, t->code), t->dE, t->E, t->rE, W(t, t->code), K, Dc, 1e-6f);
    }
    /* encoder */
    memset(t->dzr, 0, (size_t)(Q * Dc) * sizeof(float));
    tess_nn_l2norm_backward(t->dzr, t->dz, t->z, t->rz, t->zr, Q, Dc, 1e-6f);
    memset(t->de, 0, (size_t)(Q * c->dt) * sizeof(float));
    tess_nn_linear_backward(t->de, dW(t, t->out_w), NULL, t->dzr, t->e[c->nt], W(t, t->out_w), Q,
                            c->dt, Dc);
    for (int64_t l = c->nt - 1; l >= 0; l--) tess_nn_block_backward(t->enc[l], t->de, &t->scr);
    memset(t->da2, 0, (size_t)(Q * C) * sizeof(float));
    tess_nn_linear_backward(t->da2, dW(t, t->in_w), dW(t, t->in_b), t->de, t->a2, W(t, t->in_w), Q,
                            C, c->dt);
    memset(t->dg1, 0, (size_t)(R * C) * sizeof(float));
    tess_nn_conv1d_patch_backward(t->dg1, dW(t, t->conv2_w), dW(t, t->conv2_b), t->cwork, t->da2,
                                  t->g1, W(t, t->conv2_w), &d2);
    tess_nn_gelu_backward_inplace(t->dg1, t->a0, R * C); /* dg1 becomes d loss / d a0 */
    tess_nn_conv1d_backward(NULL, dW(t, t->conv1_w), dW(t, t->conv1_b), NULL, t->dg1, t->col1,
                            W(t, t->conv1_w), &d1); /* no din: dcol is not read */
}

const float *calm_tok_recon(const calm_tok *t) { return t->xh; }

float *calm_tok_code_usage(calm_tok *t) { return t->pbar; }

double calm_tok_usage_loss(const calm_tok *t) {
    double h = 0.0;
    for (int64_t k = 0; k < t->c.K; k++)
        if (t->pbar[k] > 0.0f) h -= (double)t->pbar[k] * log((double)t->pbar[k]);
    return log((double)t->c.K) - h;
}

tess_status calm_tok_codes_update(calm_tok *t, const tess_group *g, tess_rng_key key,
                                  int64_t step, int64_t first, int64_t global_Bn, int64_t window,
                                  int64_t *restarted) {
    const calm_tok_config *c = &t->c;
    const int64_t K = c->K, Dc = c->Dc, M = c->M, Q = t->Bn * M;
    *restarted = 0;
    tess_nn_codebook_ema_stats(t->nk, t->sk, t->z, t->ids, Q, K, Dc);
    TESS_CHECK(tess_par_allreduce(g, t->nk, K, TESS_PAR_SUM));
    float *E = W(t, t->code);
    if (c->quant == CALM_QUANT_VQ) {
        TESS_CHECK(tess_par_allreduce(g, t->sk, K * Dc, TESS_PAR_SUM));
        tess_nn_codebook_ema_apply(E, t->ema_count, t->ema_sum, t->nk, t->sk, K, Dc, c->ema_decay);
    }
    if (window < 1) return TESS_OK;
    const int64_t n = tess_nn_codebook_dead(t->dead, t->idle, t->nk, K, window);
    if (n == 0) return TESS_OK; /* the same n on every rank: the counts are global */
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)step);
    memset(t->rows, 0, (size_t)(n * Dc) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        const int64_t j = (int64_t)(tess_rng_u64(key, ctr, (uint64_t)t->dead[i]) %
                                    (uint64_t)(global_Bn * M)) - first * M;
        if (j >= 0 && j < Q) memcpy(t->rows + i * Dc, t->z + j * Dc, (size_t)Dc * sizeof(float));
    }
    TESS_CHECK(tess_par_allreduce(g, t->rows, n * Dc, TESS_PAR_SUM));
    for (int64_t i = 0; i < n; i++) {
        const int64_t k = t->dead[i];
        memcpy(E + k * Dc, t->rows + i * Dc, (size_t)Dc * sizeof(float));
        if (c->quant == CALM_QUANT_VQ) {
            t->ema_count[k] = 1.0f;
            memcpy(t->ema_sum + k * Dc, t->rows + i * Dc, (size_t)Dc * sizeof(float));
        }
    }
    t->restarts += n;
    *restarted = n;
    return TESS_OK;
}

const float *calm_tok_code_counts(const calm_tok *t) { return t->nk; }

int64_t calm_tok_restarts(const calm_tok *t) { return t->restarts; }

tess_status calm_tok_describe(calm_tok *t, tess_state *st, const char *prefix) {
    const tess_layout rep = tess_layout_replicated();
    const int64_t K = t->c.K, shape[2] = {K, t->c.Dc};
    char name[TESS_STATE_NAME_MAX];
    snprintf(name, sizeof name, "%s/ema_count", prefix);
    TESS_CHECK(tess_state_add(st, name, TESS_F32, 1, &K, &rep, t->ema_count));
    snprintf(name, sizeof name, "%s/ema_sum", prefix);
    TESS_CHECK(tess_state_add(st, name, TESS_F32, 2, shape, &rep, t->ema_sum));
    snprintf(name, sizeof name, "%s/idle", prefix);
    TESS_CHECK(tess_state_add(st, name, TESS_I64, 1, &K, &rep, t->idle));
    snprintf(name, sizeof name, "%s/restarts", prefix);
    TESS_CHECK(tess_state_add_i64(st, name, &t->restarts));
    return TESS_OK;
}
