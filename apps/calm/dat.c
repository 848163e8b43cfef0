/* dat.c - the dual-axis transformer (dat.h) from the core's sub-blocks and head pieces. */
#include "dat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"    /* tess_arena_* */
#include "nn/block.h"      /* tess_nn_attn_sub_*, tess_nn_ffn_sub_*, tess_nn_block_scratch */
#include "nn/ffn.h"        /* tess_nn_ffn_dense_create */
#include "nn/head.h"       /* tess_nn_embedp_*, tess_nn_lmhead_* */
#include "nn/linear.h"     /* tess_nn_linear_* */
#include "nn/loss.h"       /* tess_nn_crossentropy_* */
#include "tensor/tensor.h" /* tess_tensor_permute_0213* */

typedef struct {
    tess_nn_attn_sub tatt, natt; /* temporal (B*max_N sequences of M), neural (B*M of max_N) */
    tess_nn_ffn_sub ffn;
    bool ffn_init;
    float *t, *p, *q, *f; /* (R, d) each: after tatt, permuted, after natt, after ffn */
} dat_layer;

struct calm_dat {
    calm_dat_config c;
    int64_t max_B;
    tess_registry *reg; /* borrowed */
    tess_nn_embedp tok, unit, sess;
    dat_layer *layers;
    tess_nn_lmhead head, phead; /* token head (K), patch head (ahead P) */
    int64_t win;                /* registry index of W_in (d, P), or -1 */
    int64_t wskip;              /* registry index of W_skip (ahead P, skip P), or -1 */
    tess_nn_block_scratch scr;
    tess_arena arena;
    float **x;                   /* (layers + 1) residual stream entering layer l, (R, d) */
    float *eu, *es;              /* (R, d) unit and session embeddings before the sum */
    float *probs;                /* (R, K) */
    float *da, *db;              /* (R, d) gradients of the residual stream */
    int32_t *uid, *sid, *target; /* (R) per row: unit id, session id, next token or -1 */
    uint8_t *kmask;              /* (B*M, max_N) */
    float *pres, *ppred;         /* (R, ahead P) residual targets x[m+1+j] - x[m, P-1], predictions */
    uint8_t *has_next;           /* (R) the row is a real neuron with a next patch */
    int32_t *nnext;              /* (R) patches after m that exist (at most ahead), 0 if padded */
    float *xc;                   /* (R, skip P) the last skip patches' frames minus the last frame */
    const float *frames;         /* (R, P) of the last forward, borrowed */
    int64_t B, pairs;
    double ce, mse;
};

static bool token_head(const calm_dat *m) { return m->c.head != CALM_HEAD_PATCH; }
static bool patch_head(const calm_dat *m) { return m->c.head != CALM_HEAD_TOKEN; }

static int64_t rows(const calm_dat *m, int64_t B) { return B * m->c.max_N * m->c.M; }

tess_status calm_dat_check(const calm_dat_config *c, int64_t max_B) {
    TESS_REQUIRE(c->K >= 2 && c->K <= INT32_MAX, TESS_ERR_CONFIG, "model.vocab = %lld must be >= 2",
                 (long long)c->K);
    TESS_REQUIRE(c->d >= 2 && c->heads >= 1 && c->d % c->heads == 0 && (c->d / c->heads) % 2 == 0,
                 TESS_ERR_CONFIG,
                 "model.channels = %lld must be a multiple of model.heads = %lld with an even "
                 "head size (RoPE)",
                 (long long)c->d, (long long)c->heads);
    TESS_REQUIRE(c->layers >= 1, TESS_ERR_CONFIG, "model.layers = %lld must be >= 1",
                 (long long)c->layers);
    TESS_REQUIRE(c->ffn >= 1, TESS_ERR_CONFIG, "model.ffn = %lld must be >= 1", (long long)c->ffn);
    TESS_REQUIRE(c->units >= 1 && c->sessions >= 1, TESS_ERR_CONFIG,
                 "the model needs at least one unit and one session (got %lld, %lld)",
                 (long long)c->units, (long long)c->sessions);
    TESS_REQUIRE(c->max_N >= 1, TESS_ERR_CONFIG, "model.max_neurons = %lld must be >= 1",
                 (long long)c->max_N);
    TESS_REQUIRE(c->M >= 2, TESS_ERR_CONFIG, "model.patches = %lld must be >= 2 (next-token pairs)",
                 (long long)c->M);
    TESS_REQUIRE(c->head >= 0 && c->head < CALM_HEAD_COUNT, TESS_ERR_CONFIG,
                 "model.head = %d is not a head kind", (int)c->head);
    TESS_REQUIRE(c->P >= 1 || (!c->patch_input && c->head == CALM_HEAD_TOKEN), TESS_ERR_CONFIG,
                 "the patch input and the patch head need tok.patch >= 1 (got %lld)",
                 (long long)c->P);
    TESS_REQUIRE(c->skip >= 0 && c->skip <= c->M, TESS_ERR_CONFIG,
                 "model.skip = %lld must be in [0, tok.patches = %lld]", (long long)c->skip,
                 (long long)c->M);
    TESS_REQUIRE(c->head == CALM_HEAD_TOKEN || (c->ahead >= 1 && c->ahead < c->M),
                 TESS_ERR_CONFIG, "model.ahead = %lld must be in [1, tok.patches = %lld)",
                 (long long)c->ahead, (long long)c->M);
    TESS_REQUIRE(max_B >= 1, TESS_ERR_CONFIG, "the batch must hold at least one window");
    return TESS_OK;
}

static tess_status build_pieces(calm_dat *m) {
    const calm_dat_config *c = &m->c;
    const double std = 0.02, out_std = 0.02 / sqrt(2.0 * (double)c->layers);
    tess_nn_block_config tc = {.T = c->M, .C = c->d, .NH = c->heads, .norm = TESS_NN_NORM_LAYER,
                               .norm_eps = 1e-5f, .causal = true, .rope = true,
                               .rope_base = 10000.0f, .std = std, .out_std = out_std};
    tess_nn_block_config nc = tc;
    nc.T = c->max_N;
    nc.causal = false;
    nc.rope = false;
    m->tok = (tess_nn_embedp){.V = c->K, .C = c->d, .std = std};
    m->unit = (tess_nn_embedp){.V = c->units, .C = c->d, .std = std};
    m->sess = (tess_nn_embedp){.V = c->sessions, .C = c->d, .std = std};
    TESS_CHECK(tess_nn_embedp_add_params(&m->tok, m->reg, "dat.tok_emb"));
    TESS_CHECK(tess_nn_embedp_add_params(&m->unit, m->reg, "dat.unit_emb"));
    TESS_CHECK(tess_nn_embedp_add_params(&m->sess, m->reg, "dat.sess_emb"));
    const int64_t R = rows(m, m->max_B);
    for (int64_t l = 0; l < c->layers; l++) {
        dat_layer *L = &m->layers[l];
        char a[TESS_REGISTRY_NAME_MAX], b[TESS_REGISTRY_NAME_MAX];
        TESS_CHECK(tess_nn_attn_sub_init(&L->tatt, &tc, m->max_B * c->max_N));
        snprintf(a, sizeof a, "dat.layers.%lld.tnorm", (long long)l);
        snprintf(b, sizeof b, "dat.layers.%lld.tattn", (long long)l);
        TESS_CHECK(tess_nn_attn_sub_add_params(&L->tatt, m->reg, a, b));
        TESS_CHECK(tess_nn_attn_sub_init(&L->natt, &nc, m->max_B * c->M));
        snprintf(a, sizeof a, "dat.layers.%lld.nnorm", (long long)l);
        snprintf(b, sizeof b, "dat.layers.%lld.nattn", (long long)l);
        TESS_CHECK(tess_nn_attn_sub_add_params(&L->natt, m->reg, a, b));
        tess_nn_ffn *ffn = NULL;
        TESS_CHECK(tess_nn_ffn_dense_create(&ffn, TESS_NN_FFN_GELU, c->d, c->ffn, std, out_std));
        L->ffn_init = true;
        TESS_CHECK(tess_nn_ffn_sub_init(&L->ffn, &tc, R, ffn));
        snprintf(a, sizeof a, "dat.layers.%lld.fnorm", (long long)l);
        snprintf(b, sizeof b, "dat.layers.%lld.mlp", (long long)l);
        TESS_CHECK(tess_nn_ffn_sub_add_params(&L->ffn, m->reg, a, b));
        int64_t natt = tess_nn_attention_scratch_size(&L->tatt.att),
                natt2 = tess_nn_attention_scratch_size(&L->natt.att),
                nffn = tess_nn_ffn_scratch_floats(L->ffn.ffn, R);
        m->scr.natt = natt > m->scr.natt ? natt : m->scr.natt;
        m->scr.natt = natt2 > m->scr.natt ? natt2 : m->scr.natt;
        m->scr.nffn = nffn > m->scr.nffn ? nffn : m->scr.nffn;
    }
    m->scr.nc = R * c->d;
    m->win = -1;
    if (c->patch_input) {
        const int64_t shape[2] = {c->d, c->P};
        const tess_layout rep = tess_layout_replicated();
        TESS_CHECK(tess_registry_add(m->reg, "dat.patch_in", 2, shape, &rep, &m->win));
        TESS_CHECK(tess_registry_set_init(m->reg, m->win, tess_init_normal(0.0, std)));
    }
    m->wskip = -1;
    if (c->skip > 0 && patch_head(m)) { /* zeros: the head starts at copy-last exactly */
        const int64_t shape[2] = {c->ahead * c->P, c->skip * c->P};
        const tess_layout rep = tess_layout_replicated();
        TESS_CHECK(tess_registry_add(m->reg, "dat.patch_skip", 2, shape, &rep, &m->wskip));
        TESS_CHECK(tess_registry_set_init(m->reg, m->wskip, tess_init_zeros()));
    }
    const tess_nn_normp norm = {.kind = TESS_NN_NORM_LAYER, .C = c->d, .eps = 1e-5f};
    if (token_head(m)) {
        m->head = (tess_nn_lmhead){.V = c->K, .C = c->d, .max_N = R, .std = std, .norm = norm};
        TESS_CHECK(tess_nn_lmhead_add_params(&m->head, m->reg, "dat.norm_f", "dat.head"));
    }
    if (patch_head(m)) {
        m->phead = (tess_nn_lmhead){.V = c->ahead * c->P, .C = c->d, .max_N = R, .std = std,
                                    .norm = norm};
        TESS_CHECK(tess_nn_lmhead_add_params(&m->phead, m->reg, "dat.pnorm_f", "dat.phead"));
    }
    return TESS_OK;
}

static tess_status carve(calm_dat *m, tess_arena *a) {
    const calm_dat_config *c = &m->c;
    const int64_t R = rows(m, m->max_B), Rd = R * c->d;
    for (int64_t l = 0; l <= c->layers; l++) TESS_CHECK(tess_arena_floats(a, Rd, &m->x[l]));
    for (int64_t l = 0; l < c->layers; l++) {
        dat_layer *L = &m->layers[l];
        TESS_CHECK(tess_nn_attn_sub_carve(&L->tatt, a));
        TESS_CHECK(tess_nn_attn_sub_carve(&L->natt, a));
        TESS_CHECK(tess_nn_ffn_sub_carve(&L->ffn, a));
        TESS_CHECK(tess_arena_floats(a, Rd, &L->t));
        TESS_CHECK(tess_arena_floats(a, Rd, &L->p));
        TESS_CHECK(tess_arena_floats(a, Rd, &L->q));
        TESS_CHECK(tess_arena_floats(a, Rd, &L->f));
    }
    if (token_head(m)) {
        TESS_CHECK(tess_nn_lmhead_carve(&m->head, a));
        TESS_CHECK(tess_arena_floats(a, R * c->K, &m->probs));
    }
    if (patch_head(m)) {
        TESS_CHECK(tess_nn_lmhead_carve(&m->phead, a));
        TESS_CHECK(tess_arena_floats(a, R * c->ahead * c->P, &m->pres));
        TESS_CHECK(tess_arena_floats(a, R * c->ahead * c->P, &m->ppred));
        TESS_CHECK(tess_arena_floats(a, R * (c->skip > 0 ? c->skip : 1) * c->P, &m->xc));
    }
    TESS_CHECK(tess_arena_floats(a, Rd, &m->eu));
    TESS_CHECK(tess_arena_floats(a, Rd, &m->es));
    TESS_CHECK(tess_arena_floats(a, Rd, &m->da));
    TESS_CHECK(tess_arena_floats(a, Rd, &m->db));
    TESS_CHECK(tess_arena_alloc(a, (size_t)R * sizeof(int32_t), (void **)&m->uid));
    TESS_CHECK(tess_arena_alloc(a, (size_t)R * sizeof(int32_t), (void **)&m->sid));
    TESS_CHECK(tess_arena_alloc(a, (size_t)R * sizeof(int32_t), (void **)&m->target));
    TESS_CHECK(tess_arena_alloc(a, (size_t)(m->max_B * c->M * c->max_N), (void **)&m->kmask));
    TESS_CHECK(tess_arena_alloc(a, (size_t)R, (void **)&m->has_next));
    TESS_CHECK(tess_arena_alloc(a, (size_t)R * sizeof(int32_t), (void **)&m->nnext));
    TESS_CHECK(tess_nn_block_scratch_carve(&m->scr, a));
    return TESS_OK;
}

static tess_status build(calm_dat *m) {
    m->layers = calloc((size_t)m->c.layers, sizeof *m->layers);
    m->x = calloc((size_t)m->c.layers + 1, sizeof *m->x);
    TESS_REQUIRE(m->layers && m->x, TESS_ERR_MEM, "cannot allocate %lld layers",
                 (long long)m->c.layers);
    TESS_CHECK(build_pieces(m));
    tess_arena measure;
    tess_arena_init_measure(&measure);
    TESS_CHECK(carve(m, &measure));
    TESS_CHECK(tess_arena_init(&m->arena, tess_arena_high_water(&measure)));
    TESS_CHECK(carve(m, &m->arena));
    return TESS_OK;
}

tess_status calm_dat_create(calm_dat **out, const calm_dat_config *c, int64_t max_B,
                            tess_registry *reg) {
    *out = NULL;
    TESS_CHECK(calm_dat_check(c, max_B));
    calm_dat *m = calloc(1, sizeof *m);
    TESS_REQUIRE(m, TESS_ERR_MEM, "cannot allocate the model");
    m->c = *c;
    m->max_B = max_B;
    m->reg = reg;
    tess_status s = build(m);
    if (s != TESS_OK) {
        calm_dat_destroy(&m);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "building the dual-axis transformer");
    }
    *out = m;
    return TESS_OK;
}

void calm_dat_destroy(calm_dat **pm) {
    if (!pm || !*pm) return;
    calm_dat *m = *pm;
    for (int64_t l = 0; m->layers && l < m->c.layers; l++)
        if (m->layers[l].ffn_init) tess_nn_ffn_sub_destroy(&m->layers[l].ffn);
    tess_arena_free(&m->arena);
    free(m->layers);
    free(m->x);
    free(m);
    *pm = NULL;
}

/* The patch head's loss: predictions (the last observed frame added back), residual targets of
 * the nnext[r] existing patches after row r, and the summed per-pair MSE (the squared errors of
 * those frames divided by ahead P) into m->mse. */
static void patch_loss(calm_dat *m, int64_t R) {
    const int64_t P = m->c.P, AP = m->c.ahead * P;
    float *y = m->phead.logits;
    if (m->wskip >= 0) { /* y += W_skip xc, through ppred as scratch */
        const int64_t S = m->c.skip, SP = S * P;
        for (int64_t r = 0; r < R; r++) {
            /* patches t - S + 1 .. t of the row's neuron (t = r mod M), before patch 0: zeros */
            const int64_t t = r % m->c.M;
            const float last = m->frames[r * P + P - 1];
            for (int64_t j = 0; j < S; j++) {
                const int64_t back = S - 1 - j; /* patches before t */
                for (int64_t i = 0; i < P; i++)
                    m->xc[r * SP + j * P + i] =
                        back <= t ? m->frames[(r - back) * P + i] - last : 0.0f;
            }
        }
        tess_nn_linear_forward(m->ppred, m->xc, tess_registry_param(m->reg, m->wskip), NULL, R, SP,
                               AP);
        for (int64_t i = 0; i < R * AP; i++) y[i] += m->ppred[i];
    }
    m->mse = 0.0;
    for (int64_t r = 0; r < R; r++) {
        const float last = m->frames[r * P + P - 1];
        for (int64_t i = 0; i < AP; i++) m->ppred[r * AP + i] = last + y[r * AP + i];
        double e = 0.0;
        for (int64_t i = 0; i < m->nnext[r] * P; i++) {
            m->pres[r * AP + i] = m->frames[(r + 1) * P + i] - last;
            e += pow((double)y[r * AP + i] - m->pres[r * AP + i], 2);
        }
        m->mse += e / (double)AP;
    }
}

double calm_dat_forward(calm_dat *m, const int32_t *tokens, const float *frames,
                        const int32_t *unit, const int32_t *session, const int32_t *count,
                        int64_t B, int64_t *pairs) {
    TESS_ASSERT(B >= 1 && B <= m->max_B && tess_registry_is_final(m->reg));
    const calm_dat_config *c = &m->c;
    const int64_t N = c->max_N, M = c->M, d = c->d, R = rows(m, B);
    TESS_ASSERT(frames || (!c->patch_input && !patch_head(m)));
    m->B = B;
    m->pairs = 0;
    m->frames = frames;
    m->ce = m->mse = 0.0;
    for (int64_t b = 0; b < B; b++) {
        TESS_ASSERT(count[b] >= 0 && count[b] <= N);
        for (int64_t n = 0; n < N; n++)
            for (int64_t t = 0; t < M; t++) {
                int64_t r = (b * N + n) * M + t;
                m->uid[r] = unit[b * N + n];
                m->sid[r] = session[b];
                bool real = n < count[b] && t + 1 < M;
                m->target[r] = real ? tokens[r + 1] : -1;
                m->has_next[r] = real;
                const int64_t left = M - 1 - t;
                m->nnext[r] = n < count[b] ? (int32_t)(left < c->ahead ? left : c->ahead) : 0;
                m->pairs += real;
            }
        for (int64_t t = 0; t < M; t++)
            for (int64_t n = 0; n < N; n++) m->kmask[(b * M + t) * N + n] = n < count[b];
    }
    float *x0 = m->x[0];
    tess_nn_embedp_forward(&m->tok, x0, tokens, R);
    tess_nn_embedp_forward(&m->unit, m->eu, m->uid, R);
    tess_nn_embedp_forward(&m->sess, m->es, m->sid, R);
    for (int64_t i = 0; i < R * d; i++) x0[i] += m->eu[i] + m->es[i];
    if (c->patch_input) { /* x0 += frames W_in^T, through eu as scratch */
        tess_nn_linear_forward(m->eu, frames, tess_registry_param(m->reg, m->win), NULL, R, c->P,
                               d);
        for (int64_t i = 0; i < R * d; i++) x0[i] += m->eu[i];
    }
    for (int64_t l = 0; l < c->layers; l++) {
        dat_layer *L = &m->layers[l];
        tess_nn_attn_sub_forward(&L->tatt, L->t, m->x[l], NULL, B * N, &m->scr);
        tess_tensor_permute_0213(L->p, L->t, B, N, M, d);
        tess_nn_attn_sub_forward(&L->natt, L->q, L->p, m->kmask, B * M, &m->scr);
        tess_nn_ffn_sub_forward(&L->ffn, L->f, L->q, R, &m->scr);
        tess_tensor_permute_0213(m->x[l + 1], L->f, B, M, N, d);
    }
    *pairs = m->pairs;
    if (token_head(m)) {
        tess_nn_lmhead_forward(&m->head, m->x[c->layers], R);
        if (m->pairs > 0)
            m->ce = (double)tess_nn_crossentropy_forward(m->probs, m->head.logits, m->target, R,
                                                         c->K) *
                    (double)m->pairs;
    }
    if (patch_head(m)) {
        tess_nn_lmhead_forward(&m->phead, m->x[c->layers], R);
        patch_loss(m, R);
    }
    return m->ce + m->mse;
}

/* From m->da = d/d h^L (clobbered) through the layers and the embeddings into the registry. */
static void backbone_backward(calm_dat *m) {
    const calm_dat_config *c = &m->c;
    const int64_t B = m->B, N = c->max_N, M = c->M, d = c->d, R = rows(m, B);
    for (int64_t l = c->layers - 1; l >= 0; l--) {
        dat_layer *L = &m->layers[l];
        /* da: d/d x[l+1] (B,N,M,d) -> db: d/d f (B,M,N,d); the backward of a permutation is
         * the inverse permutation, written (not added) into the dead buffer */
        tess_tensor_permute_0213(m->db, m->da, B, N, M, d);
        tess_nn_ffn_sub_backward(&L->ffn, m->db, &m->scr);
        tess_nn_attn_sub_backward(&L->natt, m->db, &m->scr);
        tess_tensor_permute_0213(m->da, m->db, B, M, N, d);
        tess_nn_attn_sub_backward(&L->tatt, m->da, &m->scr);
    }
    tess_nn_embedp_backward(&m->tok, m->da);
    tess_nn_embedp_backward(&m->unit, m->da);
    tess_nn_embedp_backward(&m->sess, m->da);
    if (c->patch_input)
        tess_nn_linear_backward(NULL, tess_registry_grad(m->reg, m->win), NULL, m->da, m->frames,
                                tess_registry_param(m->reg, m->win), R, c->P, d);
}

void calm_dat_backward(calm_dat *m, float scale) {
    const calm_dat_config *c = &m->c;
    const int64_t d = c->d, R = rows(m, m->B);
    memset(m->da, 0, (size_t)(R * d) * sizeof(float));
    if (token_head(m)) {
        float *dlogits = m->head.logits; /* dead after the loss */
        memset(dlogits, 0, (size_t)(R * c->K) * sizeof(float));
        if (m->pairs > 0)
            tess_nn_crossentropy_backward(dlogits, m->probs, m->target, R, c->K,
                                          scale * (float)m->pairs);
        tess_nn_lmhead_backward(&m->head, m->da, m->scr.dtmp, dlogits);
    }
    if (patch_head(m)) { /* d/dy of scale * sum over pairs of mean_i (y - res)^2, in place */
        const int64_t AP = c->ahead * c->P;
        float *dy = m->phead.logits;
        const float k = 2.0f * scale / (float)AP;
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < AP; i++)
                dy[r * AP + i] = i < m->nnext[r] * c->P ? k * (dy[r * AP + i] - m->pres[r * AP + i])
                                                         : 0.0f;
        if (m->wskip >= 0)
            tess_nn_linear_backward(NULL, tess_registry_grad(m->reg, m->wskip), NULL, dy, m->xc,
                                    tess_registry_param(m->reg, m->wskip), R, c->skip * c->P, AP);
        tess_nn_lmhead_backward(&m->phead, m->da, m->scr.dtmp, dy);
    }
    backbone_backward(m);
}

void calm_dat_backward_hidden(calm_dat *m, const float *dh) {
    memcpy(m->da, dh, (size_t)(rows(m, m->B) * m->c.d) * sizeof(float));
    backbone_backward(m);
}

void calm_dat_loss_parts(const calm_dat *m, double *ce, double *mse) {
    *ce = m->ce;
    *mse = m->mse;
}

const float *calm_dat_logits(const calm_dat *m) {
    TESS_ASSERT(token_head(m));
    return m->head.logits;
}

const float *calm_dat_patch_pred(const calm_dat *m) {
    TESS_ASSERT(patch_head(m));
    return m->ppred;
}

const float *calm_dat_hidden(const calm_dat *m) { return m->x[m->c.layers]; }
