/* transformer.c - the transformer of transformer.h composed of the pieces: embedding, L blocks,
 * output head and cross-entropy; one arena for every activation, sized by a dry run. */
#include "nn/transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h" /* tess_arena_* */
#include "nn/head.h"    /* tess_nn_embedp_*, tess_nn_lmhead_* */
#include "nn/loss.h"    /* tess_nn_crossentropy_* */

struct tess_tfm {
    tess_tfm_config cfg;
    int64_t max_B;
    tess_registry *reg; /* borrowed */
    tess_nn_embedp emb;
    tess_nn_block **blocks; /* (L) */
    tess_nn_lmhead head;
    tess_nn_block_scratch scr;
    tess_arena arena;
    float **res;                  /* (L+1) pointers to (N,C): residual stream entering layer l */
    float *probs;                 /* (N,V) softmax of the logits */
    float *dres;                  /* (N,C) gradient of the residual stream, in place */
    const int32_t *targets;       /* of the last forward, borrowed until backward */
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
    TESS_REQUIRE(c->make_ffn || c->F >= 1, TESS_ERR_CONFIG, "model.mlp_hidden must be >= 1, got %lld",
                 (long long)c->F);
    TESS_REQUIRE(c->make_ffn || c->mlp == TESS_NN_FFN_SWIGLU || c->mlp == TESS_NN_FFN_GELU,
                 TESS_ERR_CONFIG, "unknown model.mlp kind %d", (int)c->mlp);
    TESS_REQUIRE(c->norm == TESS_NN_NORM_RMS || c->norm == TESS_NN_NORM_LAYER, TESS_ERR_CONFIG,
                 "unknown model.norm kind %d", (int)c->norm);
    TESS_REQUIRE(c->L >= 1, TESS_ERR_CONFIG, "model.layers must be >= 1, got %lld", (long long)c->L);
    TESS_REQUIRE(c->norm_eps > 0.0f, TESS_ERR_CONFIG, "model.norm_eps must be > 0, got %g", (double)c->norm_eps);
    TESS_REQUIRE(c->rope_base > 0.0f, TESS_ERR_CONFIG, "model.rope_base must be > 0, got %g",
                 (double)c->rope_base);
    TESS_REQUIRE(max_B >= 1, TESS_ERR_CONFIG, "batch size must be >= 1, got %lld", (long long)max_B);
    return TESS_OK;
}

/* Init of the matrices and of the residual output projections (GPT-2). */
static double init_std(void) { return 0.02; }
static double init_out_std(const tess_tfm_config *c) { return 0.02 / sqrt(2.0 * (double)c->L); }

/* Create the L blocks and register every parameter in the checkpoint order: tok_emb, layers,
 * norm_f, lm_head. */
static tess_status build_pieces(tess_tfm *m) {
    const tess_tfm_config *c = &m->cfg;
    const tess_nn_block_config bc = {.T = c->T, .C = c->C, .NH = c->NH, .norm = c->norm,
                                     .norm_eps = c->norm_eps, .causal = c->causal, .rope = true,
                                     .rope_base = c->rope_base, .std = init_std(),
                                     .out_std = init_out_std(c)};
    m->emb = (tess_nn_embedp){.V = c->V, .C = c->C, .std = init_std()};
    TESS_CHECK(tess_nn_embedp_add_params(&m->emb, m->reg, "tok_emb"));
    for (int64_t l = 0; l < c->L; l++) {
        tess_nn_ffn *ffn = NULL;
        if (c->make_ffn)
            TESS_CHECK(c->make_ffn(c->ffn_ctx, l, c, &ffn));
        else
            TESS_CHECK(tess_nn_ffn_dense_create(&ffn, c->mlp, c->C, c->F, init_std(),
                                                init_out_std(c)));
        TESS_CHECK(tess_nn_block_create(&m->blocks[l], &bc, m->max_B, ffn));
        char prefix[TESS_REGISTRY_NAME_MAX];
        snprintf(prefix, sizeof prefix, "layers.%lld", (long long)l);
        TESS_CHECK(tess_nn_block_add_params(m->blocks[l], m->reg, prefix));
        tess_nn_block_scratch_fit(&m->scr, m->blocks[l]);
    }
    m->head = (tess_nn_lmhead){.V = c->V, .C = c->C, .max_N = m->max_B * c->T, .std = init_std(),
                               .norm = {.kind = c->norm, .C = c->C, .eps = c->norm_eps}};
    TESS_CHECK(tess_nn_lmhead_add_params(&m->head, m->reg, "norm_f", "lm_head"));
    return TESS_OK;
}

/* Carve every activation from a (measuring or real) arena; the same code sizes and allocates. */
static tess_status carve_activations(tess_tfm *m, tess_arena *a) {
    const tess_tfm_config *c = &m->cfg;
    const int64_t N = m->max_B * c->T;
    for (int64_t l = 0; l <= c->L; l++) TESS_CHECK(tess_arena_floats(a, N * c->C, &m->res[l]));
    for (int64_t l = 0; l < c->L; l++) TESS_CHECK(tess_nn_block_carve(m->blocks[l], a));
    TESS_CHECK(tess_nn_lmhead_carve(&m->head, a));
    TESS_CHECK(tess_arena_floats(a, N * c->V, &m->probs));
    TESS_CHECK(tess_arena_floats(a, N * c->C, &m->dres));
    TESS_CHECK(tess_nn_block_scratch_carve(&m->scr, a));
    return TESS_OK;
}

static tess_status build(tess_tfm *m) {
    const tess_tfm_config *c = &m->cfg;
    m->blocks = calloc((size_t)c->L, sizeof *m->blocks);
    m->res = calloc((size_t)c->L + 1, sizeof *m->res);
    TESS_REQUIRE(m->blocks && m->res, TESS_ERR_MEM, "cannot allocate model tables for %lld layers",
                 (long long)c->L);
    TESS_CHECK(build_pieces(m));
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
    for (int64_t l = 0; m->blocks && l < m->cfg.L; l++) tess_nn_block_destroy(&m->blocks[l]);
    free(m->blocks);
    free(m->res);
    free(m);
    *model = NULL;
}

/* Flat offset of entry i in the registry's buffers. */
static int64_t flat(const tess_tfm *m, int64_t i) { return tess_registry_get(m->reg, i)->flat_offset; }

/* Report gradients [lo, hi) as final to the hook, if any. */
static void grads_ready(const tess_tfm *m, int64_t lo, int64_t hi) {
    if (m->hook) m->hook(m->hook_ctx, lo, hi);
}

float tess_tfm_forward(tess_tfm *m, const int32_t *ids, const int32_t *targets, int64_t B) {
    TESS_ASSERT(B >= 1 && B <= m->max_B);
    TESS_ASSERT(tess_registry_is_final(m->reg));
    const tess_tfm_config *c = &m->cfg;
    const int64_t N = B * c->T;
    m->targets = targets;
    m->B = B;
    tess_nn_embedp_forward(&m->emb, m->res[0], ids, N);
    for (int64_t l = 0; l < c->L; l++)
        tess_nn_block_forward(m->blocks[l], m->res[l + 1], m->res[l], NULL, B, &m->scr);
    tess_nn_lmhead_forward(&m->head, m->res[c->L], N);
    if (!targets) return 0.0f;
    return tess_nn_crossentropy_forward(m->probs, m->head.logits, targets, N, c->V);
}

void tess_tfm_backward(tess_tfm *m, float loss_scale) {
    TESS_ASSERT(m->targets != NULL);
    const tess_tfm_config *c = &m->cfg;
    const int64_t N = m->B * c->T;
    const tess_registry_entry *last = tess_registry_get(m->reg, m->head.w);

    float *dlogits = m->head.logits; /* the logits are dead after the loss: reuse their buffer */
    memset(dlogits, 0, (size_t)(N * c->V) * sizeof(float));
    tess_nn_crossentropy_backward(dlogits, m->probs, m->targets, N, c->V, loss_scale);
    memset(m->dres, 0, (size_t)(N * c->C) * sizeof(float));
    tess_nn_lmhead_backward(&m->head, m->dres, m->scr.dtmp, dlogits);
    grads_ready(m, flat(m, m->head.norm.w), last->flat_offset + last->local_count);

    for (int64_t l = c->L - 1; l >= 0; l--) {
        tess_nn_block_backward(m->blocks[l], m->dres, &m->scr);
        int64_t next = l + 1 < c->L ? flat(m, tess_nn_block_first_param(m->blocks[l + 1]))
                                    : flat(m, m->head.norm.w);
        grads_ready(m, flat(m, tess_nn_block_first_param(m->blocks[l])), next);
    }
    tess_nn_embedp_backward(&m->emb, m->dres);
    grads_ready(m, flat(m, m->emb.table), flat(m, tess_nn_block_first_param(m->blocks[0])));
}

void tess_tfm_set_grad_hook(tess_tfm *m, tess_tfm_grad_hook fn, void *ctx) {
    m->hook = fn;
    m->hook_ctx = ctx;
}

const float *tess_tfm_logits(const tess_tfm *m) { return m->head.logits; }

int64_t tess_tfm_activation_bytes(const tess_tfm *m) { return (int64_t)m->arena.capacity; }

double tess_tfm_train_flops(const tess_tfm *m, int64_t B) {
    const tess_tfm_config *c = &m->cfg;
    double matmul_params = (double)c->V * (double)c->C;
    for (int64_t l = 0; l < c->L; l++)
        matmul_params += tess_nn_block_matmul_params_per_token(m->blocks[l]);
    double tokens = (double)B * (double)c->T;
    /* PaLM's convention: 6 FLOPs per matmul parameter per token, plus 12*L*C*T per token for
     * the attention scores and values (forward + backward, masked half included). */
    return 6.0 * matmul_params * tokens + 12.0 * (double)c->L * (double)c->C * (double)c->T * tokens;
}
