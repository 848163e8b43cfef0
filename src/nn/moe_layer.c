/* moe_layer.c - the MoE feed-forward (a tess_nn_ffn) and the stack of a model's MoE layers that
 * carries the aux losses (moe.h). One rank holds every expert: not collective.
 * Letters as in moe.h: N tokens, C channels, F expert hidden, E experts, k per token, R = N*k. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "core/rng.h"     /* tess_rng_* */
#include "core/team.h"    /* tess_team_* */
#include "core/timer.h"   /* tess_timer_now */
#include "nn/mlp.h"       /* tess_nn_mlp_swiglu_* */
#include "nn/moe.h"
#include "tensor/matmul.h" /* tess_matmul_tiles, tess_matmul_threads, _set_threads */
#include "tensor/tensor.h" /* tess_tensor_axpy, tess_tensor_dot */
#include "par/coll.h"      /* tess_par_allreduce_i64 */
#include "par/dispatch.h"  /* tess_dispatch_* */
#include "par/mesh.h"      /* tess_group */

typedef struct moe_layer moe_layer;

struct tess_nn_moe_stack {
    tess_nn_moe_config cfg;
    float scale;       /* loss scale of the aux gradients */
    bool train;        /* router jitter on (stack_set_step) */
    uint64_t step;     /* the jitter's counter */
    int64_t token0;    /* global index of this rank's first token */
    tess_status status; /* first exchange failure of a layer (TESS_OK if none) */
    double t_exchange; /* wall seconds in the plans and row exchanges of par/dispatch.h */
    double c_exchange; /* the calling thread's CPU seconds in them */
    moe_layer **layer; /* MoE layers in model order, borrowed */
    int64_t n, cap;
    /* Dropless expert parallelism: the expert side's transient buffers (the outputs and the
     * exchange buffer in forward; dY, dX, dZ, the SwiGLU scratch and the exchange buffer in
     * backward) for the layer with the most received rows, shared by the layers (dead between
     * calls), grown on demand from the exchanged counts, never shrunk. */
    float *tbuf;
    int64_t tbuf_floats;
    /* With more than one BLAS thread at create: a team of as many threads that run the local
     * experts side by side, each expert's products on one thread (experts_run); NULL else. */
    tess_team *team;
};

struct moe_layer {
    tess_nn_ffn base;
    tess_nn_moe_stack *stack;
    int64_t idx;                 /* among the stack's MoE layers */
    int64_t E, k, F;
    int64_t P, rank, nle;        /* ep size and rank (1, 0 without ep); local experts E/P */
    tess_dispatch *plan;         /* the step's exchange plan over ep; NULL without ep */
    double std, out_std;
    int64_t i_router, i_gate, i_up, i_down, i_bias; /* registry indices; i_bias -1 without */
    int64_t i_cooc; /* R_cp's chat (E,E) of the pair (previous MoE layer, this one); -1: none */
    int64_t i_guo;  /* the first MoE layer with guo_autoscale: the exponents (2) of the weights
                     * of L_o, L_v; -1 otherwise */
    int64_t *counts, *offs, *pos; /* (E), (E+1), (E): routed pairs per expert (before drops),
                                   * block offsets, scratch (then the blocks' rows) */
    int64_t *kept;               /* (E) pairs kept per expert */
    int64_t *tcounts;            /* (team size, E) each member's routed pairs per expert */
    uint64_t *work;              /* (N k) permutation scratch */
    int64_t Rn, dropped;         /* rows (incl. padding) and dropped pairs of the last forward */
    int64_t *lbc;                /* (E+1): L_lb's counts and token total (over lb_group) */
    int64_t Fs, i_sg, i_su, i_sd; /* shared expert width (0: none) and its registry indices */
    float *s_gate, *s_up, *s_h, *s_out; /* (N,Fs) x3 caches, (N,C) its output */
    /* caches for max_N rows (carve) */
    float *logits, *probs;       /* (N,E) */
    float *noise, *xj;           /* (N,C) with jitter: the factors u and the router input x u */
    float *lse, *mass;           /* (N) */
    float *gates;                /* (N,k) */
    int32_t *topk, *row_of;      /* (N,k): expert of slot s; row of (t,s) in expert order */
    int32_t *row_tok;            /* (Rm): token of each row, -1 padding */
    /* home side, Rm = rows_max(N) rows in expert order (R = N k, or E cap with padding) */
    float *xp, *y;               /* (Rm,C) gathered inputs, outputs */
    float *z;                    /* (Rm,F) the experts' z of this rank's tokens */
    /* expert side, for up to rx_cap received rows in [local expert][source] order; without ep
     * these alias the home side (rx_cap = Rm). With ep and a capacity they are carved for the
     * most the ranks can send (rx_max); dropless (grow) xg, a, b, zg live in xbuf, grown from
     * the exchanged counts, and yg, xt in the stack's tbuf. */
    float *xg, *yg;              /* (rx_cap,C) */
    float *a, *b;                /* (rx_cap,F) */
    float *zg;                   /* (zv_rows(rx_cap),F): the rx_cap rows, with the fast path
                                  * then the home region of R_sp's split rows (zh rows) */
    float *xt;                   /* (rx_cap, max(C,F)) exchange buffer with ep */
    int64_t *rows;               /* (nle) rows of each local expert in the last forward */
    int64_t rx_cap;              /* expert-side rows carved or grown */
    bool grow;                   /* dropless with ep: the expert side is grown (grow_expert) */
    float *xbuf;                 /* xg, a, b, zg when grown (xbuf_floats); owned */
    int64_t grows;               /* times xbuf or the stack's tbuf grew for this layer */
    /* R_sp's co-located fast path (fast: ep over all-to-all, no padding, lambda_sp > 0): a pair
     * of a token's slots whose experts share a rank is computed there; only the z rows in a pair
     * split across ranks travel home (and their gradient back), in point-to-point messages sent
     * from and received into their final rows (split_send, split_recv: the expert side keeps
     * each block's split rows first, gpos), with the co-located sums (forward) and each rank's
     * N (backward) in a small message after them; the token ids ride in two extra columns of the
     * token rows. */
    bool fast;
    MPI_Request *req;            /* (2 P (nle + 1)) the split rows' messages */
    int32_t *grp;                /* (N,k) home: the rank of each slot's expert */
    int32_t *ids;                /* (Rm,2) home rows in expert order: token, and 0 or (for a
                                  * row in a split pair) nonzero: on another rank's expert
                                  * 1 + its row in the home region, on this rank's 1 */
    int32_t *roc;                /* (N,k) home: the row of slot (t,s) in a split pair in the
                                  * view zg (its row of the expert side on this rank's own
                                  * experts, else rx_cap + its row in the home region), else -1 */
    int64_t zh;                  /* rows of the home region after zg's rx_cap rows (and after
                                  * dzg's in backward): this rank's split rows on the other
                                  * ranks' experts in expert order; Rm */
    int64_t *fs, *ho;            /* (E) home: split rows on each other rank's expert (0 for
                                  * this rank's: read in place, roc) and their first row in
                                  * the home region */
    int64_t *ns;                 /* (E) expert side: split rows in block (source q, slot j) */
    int64_t *go, *uo;            /* (E) offsets of block (source q, slot j) in the expert side's
                                  * [slot][source] order and in the [source][slot] order */
    int32_t *gpos;               /* (gpos_cap) expert side: the row in [slot][source] order of
                                  * each received row ([source][slot] order): within a block
                                  * the split rows first, each part in arrival order */
    int64_t gpos_cap;
    int32_t *rid;                /* (rid_cap,2) expert side, [source][slot]: token, split */
    int32_t *rof;                /* (rof_cap) expert side: per source q, a row_of (nq[q], k) of
                                  * its tokens' rows on this rank (grouped positions), -1 else */
    float *rcos;                 /* (rof rows / k, rsp_cache_floats(k)) expert side: the
                                  * co-located pairs' cosines and norms, kept for backward */
    int64_t rid_cap, rof_cap, rcos_cap; /* ints and floats held; grown like xbuf */
    int64_t *nq, *rq;            /* (P) rows of each source's row_of (its largest token + 1),
                                  * their offsets in rof */
    double *vs, *vr;             /* (P, PHI_COUNT) co-located sums per source, sent / per
                                  * expert rank, received */
    double *nsrc;                /* (2P) each source's N (its co-located gradient's 1/N),
                                  * then this rank's N for each rank (sent) */
    float *sp_cos;               /* (N, rsp_cache_floats(k)) home, with lambda_sp > 0: the
                                  * cosines and norms of the pairs computed here, for backward */
    double sp_sums[TESS_NN_MOE_PHI_COUNT]; /* R_sp's sums over this rank's tokens (moe.h) */
    const float *in;             /* (N,C) of the last forward, borrowed */
    int64_t N;                   /* rows of the last forward */
    float lb, zl, sp, ol, vl;    /* aux values of the last forward */
};

static float *P(const moe_layer *m, int64_t i) { return tess_registry_param(m->base.reg, i); }
static float *G(const moe_layer *m, int64_t i) { return tess_registry_grad(m->base.reg, i); }

tess_status tess_nn_moe_check_config(const tess_nn_moe_config *c) {
    TESS_REQUIRE(c->E >= 1, TESS_ERR_CONFIG, "moe.experts must be >= 1, got %lld", (long long)c->E);
    TESS_REQUIRE(c->k >= 1 && c->k <= c->E, TESS_ERR_CONFIG,
                 "moe.top_k must be in [1, moe.experts = %lld], got %lld", (long long)c->E,
                 (long long)c->k);
    TESS_REQUIRE(c->k <= 16, TESS_ERR_CONFIG, "moe.top_k must be <= 16, got %lld",
                 (long long)c->k);
    TESS_REQUIRE(c->F >= 1, TESS_ERR_CONFIG, "moe.expert_hidden must be >= 1, got %lld",
                 (long long)c->F);
    TESS_REQUIRE(c->every >= 1, TESS_ERR_CONFIG, "moe.every must be >= 1, got %lld",
                 (long long)c->every);
    TESS_REQUIRE(c->lambda_lb >= 0 && c->lambda_z >= 0 && c->lambda_sp >= 0 && c->lambda_cp >= 0,
                 TESS_ERR_CONFIG,
                 "moe.lambda_lb, lambda_z, lambda_sp, lambda_cp must be >= 0, got %g %g %g %g",
                 c->lambda_lb, c->lambda_z, c->lambda_sp, c->lambda_cp);
    TESS_REQUIRE(!(c->k == 1 && c->lambda_sp > 0), TESS_ERR_CONFIG,
                 "moe.lambda_sp = %g needs moe.top_k >= 2 (R_sp compares co-activated experts), "
                 "got moe.top_k = 1",
                 c->lambda_sp);
    TESS_REQUIRE(c->phi >= 0 && c->phi < TESS_NN_MOE_PHI_COUNT, TESS_ERR_CONFIG,
                 "moe.phi: unknown value %d", (int)c->phi);
    TESS_REQUIRE(c->std >= 0, TESS_ERR_CONFIG, "moe.init_std must be >= 0, got %g", c->std);
    TESS_REQUIRE(c->shared_F >= 0, TESS_ERR_CONFIG, "moe.shared_hidden must be >= 0, got %lld",
                 (long long)c->shared_F);
    TESS_REQUIRE(c->score >= 0 && c->score < TESS_NN_MOE_SCORE_COUNT, TESS_ERR_CONFIG,
                 "moe.score: unknown value %d", (int)c->score);
    TESS_REQUIRE(c->drop >= 0 && c->drop < TESS_NN_MOE_DROP_COUNT, TESS_ERR_CONFIG,
                 "moe.drop: unknown value %d", (int)c->drop);
    TESS_REQUIRE(c->jitter >= 0 && c->jitter < 1, TESS_ERR_CONFIG,
                 "moe.jitter must be in [0, 1), got %g", c->jitter);
    TESS_REQUIRE(c->drop == TESS_NN_MOE_DROP_NONE || c->capacity_factor > 0, TESS_ERR_CONFIG,
                 "moe.capacity_factor must be > 0 with moe.drop = %s, got %g",
                 c->drop == TESS_NN_MOE_DROP_PROBS ? "probs" : "position", c->capacity_factor);
    TESS_REQUIRE(!c->pad || c->drop != TESS_NN_MOE_DROP_NONE, TESS_ERR_CONFIG,
                 "moe.pad pads to the capacity: it needs moe.drop = probs or position, got none");
    TESS_REQUIRE(c->score == TESS_NN_MOE_SCORE_SOFTMAX || c->lambda_z == 0, TESS_ERR_CONFIG,
                 "moe.lambda_z = %g needs moe.score = softmax (the z-loss is the softmax "
                 "router's), got sigmoid",
                 c->lambda_z);
    TESS_REQUIRE(c->lambda_o >= 0 && c->lambda_v >= 0, TESS_ERR_CONFIG,
                 "moe.lambda_ortho, lambda_var must be >= 0, got %g %g", c->lambda_o, c->lambda_v);
    TESS_REQUIRE(!(c->k == 1 && c->lambda_o > 0), TESS_ERR_CONFIG,
                 "moe.lambda_ortho = %g needs moe.top_k >= 2 (it projects co-activated experts' "
                 "outputs), got moe.top_k = 1",
                 c->lambda_o);
    TESS_REQUIRE(!(c->E == 1 && c->lambda_v > 0), TESS_ERR_CONFIG,
                 "moe.lambda_var = %g needs moe.experts >= 2, got 1", c->lambda_v);
    TESS_REQUIRE(!c->guo_autoscale || c->lambda_o > 0 || c->lambda_v > 0, TESS_ERR_CONFIG,
                 "moe.guo_autoscale scales moe.lambda_ortho and moe.lambda_var as targets: set "
                 "one of them > 0 (both are 0)");
    TESS_REQUIRE(!c->cp_identity || c->lambda_cp > 0, TESS_ERR_CONFIG,
                 "moe.cp_identity couples R_cp to expert ids: it needs moe.lambda_cp > 0, got 0");
    TESS_REQUIRE(!c->ep || c->E % c->ep->size == 0, TESS_ERR_CONFIG,
                 "moe.experts = %lld must be divisible by the expert-parallel size %d",
                 (long long)c->E, c->ep ? c->ep->size : 1);
    return TESS_OK;
}

/* ---------- the layer's ffn operations ---------- */

/* Register "<prefix>.<leaf>" under layout l with init; index to *idx. */
static tess_status add(tess_registry *reg, const char *prefix, const char *leaf, int ndim,
                       const int64_t *shape, const tess_layout *l, tess_init init, int64_t *idx) {
    char name[TESS_REGISTRY_NAME_MAX];
    int w = snprintf(name, sizeof name, "%s.%s", prefix, leaf);
    TESS_REQUIRE(w > 0 && (size_t)w < sizeof name, TESS_ERR_ARG, "name '%s.%s' is too long",
                 prefix, leaf);
    TESS_CHECK(tess_registry_add(reg, name, ndim, shape, l, idx));
    TESS_CHECK(tess_registry_set_init(reg, *idx, init));
    return TESS_OK;
}

/* An expert tensor (E, a, b) sharded over ep along experts, reduced over edp. */
static tess_status add_expert(moe_layer *m, tess_registry *reg, const char *prefix,
                              const char *leaf, int64_t a, int64_t b, tess_init init,
                              int64_t *idx) {
    const tess_layout l = m->P > 1 ? tess_layout_sharded(0, (int)m->P, (int)m->rank)
                                   : tess_layout_replicated();
    TESS_CHECK(add(reg, prefix, leaf, 3, (int64_t[]){m->E, a, b}, &l, init, idx));
    TESS_CHECK(tess_registry_set_tags(reg, *idx, TESS_TAG_EXPERT));
    /* backward writes the whole gradient in its weight-gradient products (beta_dw) */
    TESS_CHECK(tess_registry_set_zero_deferred(reg, *idx, true));
    if (m->stack->cfg.edp) TESS_CHECK(tess_registry_set_group(reg, *idx, m->stack->cfg.edp));
    return TESS_OK;
}

static tess_status moe_add_params(tess_nn_ffn *f, tess_registry *reg, const char *prefix) {
    moe_layer *m = (moe_layer *)f;
    const int64_t C = f->C, E = m->E, F = m->F;
    const tess_init w = tess_init_normal(0.0, m->std), wo = tess_init_normal(0.0, m->out_std);
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(add(reg, prefix, "router", 2, (int64_t[]){E, C}, &rep, w, &m->i_router));
    TESS_CHECK(tess_registry_set_tags(reg, m->i_router, TESS_TAG_DENSE));
    TESS_CHECK(add_expert(m, reg, prefix, "w_gate", F, C, w, &m->i_gate));
    TESS_CHECK(add_expert(m, reg, prefix, "w_up", F, C, w, &m->i_up));
    TESS_CHECK(add_expert(m, reg, prefix, "w_down", C, F, wo, &m->i_down));
    if (m->Fs > 0) {
        char sp[TESS_REGISTRY_NAME_MAX];
        int w2 = snprintf(sp, sizeof sp, "%s.shared", prefix);
        TESS_REQUIRE(w2 > 0 && (size_t)w2 < sizeof sp, TESS_ERR_ARG, "name '%s.shared' is too long",
                     prefix);
        TESS_CHECK(add(reg, sp, "w_gate", 2, (int64_t[]){m->Fs, C}, &rep, w, &m->i_sg));
        TESS_CHECK(add(reg, sp, "w_up", 2, (int64_t[]){m->Fs, C}, &rep, w, &m->i_su));
        TESS_CHECK(add(reg, sp, "w_down", 2, (int64_t[]){C, m->Fs}, &rep, wo, &m->i_sd));
        TESS_CHECK(tess_registry_set_tags(reg, m->i_sg, TESS_TAG_DENSE));
        TESS_CHECK(tess_registry_set_tags(reg, m->i_su, TESS_TAG_DENSE));
        TESS_CHECK(tess_registry_set_tags(reg, m->i_sd, TESS_TAG_DENSE));
    }
    m->i_bias = -1;
    if (m->stack->cfg.bias_balance) {
        TESS_CHECK(add(reg, prefix, "bias", 1, (int64_t[]){E}, &rep, tess_init_zeros(),
                       &m->i_bias));
        TESS_CHECK(tess_registry_set_trainable(reg, m->i_bias, false));
        TESS_CHECK(tess_registry_set_decay(reg, m->i_bias, false));
    }
    m->i_guo = -1;
    if (m->stack->cfg.guo_autoscale && m->idx == 0) {
        TESS_CHECK(add(reg, prefix, "guo_log10", 1, (int64_t[]){2}, &rep, tess_init_const(NAN),
                       &m->i_guo));
        TESS_CHECK(tess_registry_set_trainable(reg, m->i_guo, false));
        TESS_CHECK(tess_registry_set_decay(reg, m->i_guo, false));
    }
    m->i_cooc = -1;
    if (m->stack->cfg.cp_identity && m->idx > 0) {
        TESS_CHECK(add(reg, prefix, "cp_cooc", 2, (int64_t[]){E, E}, &rep, tess_init_const(1.0),
                       &m->i_cooc));
        TESS_CHECK(tess_registry_set_trainable(reg, m->i_cooc, false));
        TESS_CHECK(tess_registry_set_decay(reg, m->i_cooc, false));
    }
    return TESS_OK;
}

static tess_status ints(tess_arena *a, int64_t n, int32_t **p) {
    void *v;
    TESS_CHECK(tess_arena_alloc(a, (size_t)n * sizeof(int32_t), &v));
    *p = v;
    return TESS_OK;
}

/* Home-side rows for N tokens: N k, or E cap when blocks are padded to the capacity. */
static int64_t rows_max(const moe_layer *m, int64_t N) {
    const tess_nn_moe_config *c = &m->stack->cfg;
    const int64_t R = N * m->k;
    if (!c->pad) return R;
    const int64_t padded = m->E * tess_nn_moe_capacity(N, m->E, m->k, c->capacity_factor);
    return padded > R ? padded : R;
}

/* Rows of the expert side carved for N tokens per rank (the ranks of ep run the same N) with a
 * capacity: at most E*cap (each of P ranks sends at most cap rows to each of this rank's E/P
 * experts), exactly that with padding. Dropless with ep the expert side is not carved but grown
 * from the exchanged counts (grow_expert); without ep it is the home side (Rm rows). */
static int64_t rx_max(const moe_layer *m, int64_t N) {
    const tess_nn_moe_config *c = &m->stack->cfg;
    const int64_t worst = m->P * rows_max(m, N);
    if (c->drop == TESS_NN_MOE_DROP_NONE) return worst;
    const int64_t bound = m->E * tess_nn_moe_capacity(N, m->E, m->k, c->capacity_factor);
    return bound < worst ? bound : worst;
}

/* The shared expert's caches for N rows. */
static tess_status moe_carve_shared(moe_layer *m, tess_arena *ar, int64_t N) {
    if (m->Fs <= 0) return TESS_OK;
    TESS_CHECK(tess_arena_floats(ar, N * m->Fs, &m->s_gate));
    TESS_CHECK(tess_arena_floats(ar, N * m->Fs, &m->s_up));
    TESS_CHECK(tess_arena_floats(ar, N * m->Fs, &m->s_h));
    TESS_CHECK(tess_arena_floats(ar, N * m->base.C, &m->s_out));
    return TESS_OK;
}

/* Home rows of z and of its gradient dz: with ep, z comes home only for R_sp (lambda_sp > 0);
 * without ep the home side is the expert side. The fast path keeps no z in expert order: its
 * split rows are read where they are (zv_rows). */
static int64_t z_rows(const moe_layer *m, int64_t R) {
    if (m->fast) return 0;
    return !m->plan || m->stack->cfg.lambda_sp > 0 ? R : 0;
}

/* Rows of the expert side's z and dz for rx received rows: rx, and with the fast path the home
 * region after them (zh rows: the split rows that come home and their gradient, compact in expert
 * order: split_exchange), so that R_sp at home reads and writes one view through roc: this rank's
 * own split rows where the experts left them, no copy (moe_layer.zh). */
static int64_t zv_rows(const moe_layer *m, int64_t rx) { return rx + (m->fast ? m->zh : 0); }

/* Width of the home rows sent to the experts: C, and with the fast path two more columns
 * carrying each row's ids (the token, and nonzero when the row is in a split pair) as int32 bit
 * patterns (MPI moves the bytes of a float row unchanged). */
static int64_t xp_width(const moe_layer *m) { return m->base.C + (m->fast ? 2 : 0); }

/* Floats of the expert side's exchange buffer xt for rx received rows: rows of width max(C, F)
 * (y, z, dy, dx), with the fast path the token rows with their ids (C + 2). */
static int64_t xt_floats(const moe_layer *m, int64_t rx) {
    const int64_t C = m->base.C, F = m->F;
    const int64_t n = rx * (C > F ? C : F), a = rx * (C + 2);
    return m->fast && a > n ? a : n;
}

static tess_status moe_carve(tess_nn_ffn *f, tess_arena *ar, int64_t max_N) {
    moe_layer *m = (moe_layer *)f;
    const int64_t N = max_N, E = m->E, k = m->k, R = rows_max(m, max_N), C = f->C, F = m->F;
    TESS_CHECK(tess_arena_floats(ar, N * E, &m->logits));
    TESS_CHECK(tess_arena_floats(ar, N * E, &m->probs));
    TESS_CHECK(tess_arena_floats(ar, N, &m->lse));
    TESS_CHECK(tess_arena_floats(ar, N, &m->mass));
    TESS_CHECK(tess_arena_floats(ar, N * k, &m->gates));
    TESS_CHECK(ints(ar, N * k, &m->topk));
    TESS_CHECK(ints(ar, N * k, &m->row_of));
    TESS_CHECK(ints(ar, R, &m->row_tok));
    void *w;
    TESS_CHECK(tess_arena_alloc(ar, (size_t)(N * k) * sizeof(uint64_t), &w));
    m->work = w;
    if (m->stack->cfg.jitter > 0) {
        TESS_CHECK(tess_arena_floats(ar, N * C, &m->noise));
        TESS_CHECK(tess_arena_floats(ar, N * C, &m->xj));
    }
    TESS_CHECK(tess_arena_floats(ar, R * xp_width(m), &m->xp));
    TESS_CHECK(tess_arena_floats(ar, R * C, &m->y));
    TESS_CHECK(tess_arena_floats(ar, z_rows(m, R) * F, &m->z));
    m->zh = m->fast ? R : 0;
    if (m->stack->cfg.lambda_sp > 0)
        TESS_CHECK(tess_arena_floats(ar, N * tess_nn_moe_rsp_cache_floats(k), &m->sp_cos));
    if (m->fast) {
        TESS_CHECK(ints(ar, N * k, &m->grp));
        TESS_CHECK(ints(ar, 2 * R, &m->ids));
        TESS_CHECK(ints(ar, N * k, &m->roc));
    }
    if (m->grow) return moe_carve_shared(m, ar, max_N); /* the expert side: grow_expert */
    const int64_t Rx = rx_max(m, max_N);
    m->rx_cap = Rx;
    if (m->plan) {
        TESS_CHECK(tess_arena_floats(ar, Rx * C, &m->xg));
        TESS_CHECK(tess_arena_floats(ar, Rx * C, &m->yg));
        TESS_CHECK(tess_arena_floats(ar, zv_rows(m, Rx) * F, &m->zg));
        TESS_CHECK(tess_arena_floats(ar, xt_floats(m, Rx), &m->xt));
    } else {
        m->xg = m->xp, m->yg = m->y, m->zg = m->z;
    }
    TESS_CHECK(tess_arena_floats(ar, Rx * F, &m->a));
    TESS_CHECK(tess_arena_floats(ar, Rx * F, &m->b));
    return moe_carve_shared(m, ar, max_N);
}


/* Backward scratch: dgates (N,k), dprobs, dlogits (N,E), dmass (N); home side dy, dxp (Rm,C),
 * dz (z_rows,F); expert side (Rx rows, carved with a capacity; grown: in the stack's tbuf) dyg,
 * dxg (Rx,C), db (Rx,F), dzg (zv_rows(Rx),F); then, with jitter, the router's input gradient
 * (N,C); the shared expert's MLP scratch (2 N Fs). */
static int64_t scratch_head(const moe_layer *m, int64_t N) {
    const int64_t R = rows_max(m, N), C = m->base.C, F = m->F;
    const int64_t Rx = m->grow ? 0 : rx_max(m, N), ex = m->grow ? 0 : zv_rows(m, Rx) * F;
    return N * (m->k + 2 * m->E + 1) + R * 2 * C + z_rows(m, R) * F + Rx * (2 * C + F) + ex +
           (m->stack->cfg.jitter > 0 ? N * C : 0);
}

static int64_t moe_scratch_floats(const tess_nn_ffn *f, int64_t max_N) {
    const moe_layer *m = (const moe_layer *)f;
    return scratch_head(m, max_N) + (m->Fs > 0 ? tess_nn_mlp_scratch_size(max_N, m->Fs) : 0);
}

/* y (n) = alpha x, in blocks of a known trip count (vectorised at -O2, as tess_tensor_axpy). */
static inline void scale_block(float *restrict y, float alpha, const float *restrict x, int64_t m) {
    for (int64_t i = 0; i < m; i++) y[i] = alpha * x[i];
}
static void scale_copy(float *y, float alpha, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) scale_block(y + i, alpha, x + i, 16);
    scale_block(y + i, alpha, x + i, n - i);
}

/* The calling thread's CPU seconds. */
static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Add the wall and CPU seconds since (t0, c0) to the stack's exchange time. */
static void exchanged(moe_layer *m, double t0, double c0) {
    m->stack->t_exchange += tess_timer_now() - t0;
    m->stack->c_exchange += thread_cpu() - c0;
}

/* Keep the first failure of an exchange. */
static void keep(moe_layer *m, tess_status st) {
    if (st != TESS_OK && m->stack->status == TESS_OK) m->stack->status = st;
}

/* Rows of width w in arrival order ([source][slot]) -> the expert side's order (regroup), and
 * back (ungroup): par/dispatch.h's [slot][source] order, with the fast path each block's split
 * rows first (gpos). */
static void regroup(const moe_layer *m, const float *in, float *out, int64_t w, bool back) {
    if (!m->fast) {
        (back ? tess_dispatch_ungroup : tess_dispatch_regroup)(m->plan, in, out, w);
        return;
    }
    const int64_t rx = tess_dispatch_recv_rows(m->plan);
    for (int64_t u = 0; u < rx; u++)
        if (back)
            memcpy(out + u * w, in + (int64_t)m->gpos[u] * w, (size_t)w * sizeof(float));
        else
            memcpy(out + (int64_t)m->gpos[u] * w, in + u * w, (size_t)w * sizeof(float));
}

/* Home rows (expert order) -> expert side [local expert][source]: exchange into tmp, regroup. */
static void to_experts(moe_layer *m, const float *home, float *tmp, float *grp, int64_t w) {
    const double t0 = tess_timer_now(), c0 = thread_cpu();
    keep(m, tess_dispatch_forward(m->plan, home, tmp, w));
    exchanged(m, t0, c0);
    regroup(m, tmp, grp, w, false);
}
/* Expert side -> home rows: ungroup into tmp, reverse exchange. */
static void to_home(moe_layer *m, const float *grp, float *tmp, float *home, int64_t w) {
    regroup(m, grp, tmp, w, true);
    const double t0 = tess_timer_now(), c0 = thread_cpu();
    keep(m, tess_dispatch_reverse(m->plan, tmp, home, w));
    exchanged(m, t0, c0);
}

/* Floats of the stack's tbuf for rx expert-side rows: forward yg (rx,C) and xt; backward dyg,
 * dxg (rx,C), db (rx,F), dzg (zv_rows(rx),F) and xt (xt_floats). */
static int64_t tbuf_floats(const moe_layer *m, int64_t rx) {
    const int64_t C = m->base.C, F = m->F;
    return rx * (2 * C + F) + zv_rows(m, rx) * F + xt_floats(m, rx);
}

/* Floats of a layer's grown expert side for cap rows: xg (cap,C), a, b (cap,F), zg. */
static int64_t xbuf_floats(const moe_layer *m, int64_t cap) {
    return cap * (m->base.C + 2 * m->F) + zv_rows(m, cap) * m->F;
}

/* Dropless with ep, after the count exchange: the expert side for rx received rows. It grows (to
 * rx plus 1/8, so that routing that varies from step to step settles after a few steps) only when
 * rx exceeds what it holds; the steady state allocates nothing. Points xg, a, b, zg into xbuf and
 * yg, xt into the stack's tbuf. TESS_ERR_MEM if an allocation fails. */
static tess_status grow_expert(moe_layer *m, int64_t rx) {
    const int64_t C = m->base.C, F = m->F;
    if (rx > m->rx_cap || !m->xbuf) {
        const int64_t cap = rx + rx / 8 + 1;
        free(m->xbuf);
        m->xbuf = malloc((size_t)xbuf_floats(m, cap) * sizeof(float));
        m->rx_cap = m->xbuf ? cap : 0;
        TESS_REQUIRE(m->xbuf, TESS_ERR_MEM,
                     "moe: cannot grow the expert side to %lld received rows (%lld floats)",
                     (long long)cap, (long long)xbuf_floats(m, cap));
        m->grows++;
    }
    const int64_t cap = m->rx_cap, need = tbuf_floats(m, cap);
    tess_nn_moe_stack *st = m->stack;
    if (need > st->tbuf_floats) {
        free(st->tbuf);
        st->tbuf = malloc((size_t)need * sizeof(float));
        st->tbuf_floats = st->tbuf ? need : 0;
        TESS_REQUIRE(st->tbuf, TESS_ERR_MEM,
                     "moe: cannot grow the expert side's scratch to %lld floats", (long long)need);
        m->grows++;
    }
    m->xg = m->xbuf;
    m->a = m->xg + cap * C;
    m->b = m->a + cap * F;
    m->zg = m->b + cap * F;
    m->yg = st->tbuf;
    m->xt = m->yg + cap * C;
    return TESS_OK;
}

/* Grow an int buffer to n ints (plus 1/8) when it holds fewer; TESS_ERR_MEM. */
static tess_status grow_ints(moe_layer *m, int32_t **p, int64_t *cap, int64_t n) {
    if (n <= *cap && *p) return TESS_OK;
    const int64_t c = n + n / 8 + 1;
    free(*p);
    *p = malloc((size_t)c * sizeof(int32_t));
    *cap = *p ? c : 0;
    TESS_REQUIRE(*p, TESS_ERR_MEM, "moe: cannot grow R_sp's token ids to %lld", (long long)c);
    m->grows++;
    return TESS_OK;
}

/* The same for R_sp's expert-side cosines: n floats (plus 1/8); TESS_ERR_MEM. */
static tess_status grow_cos(moe_layer *m, int64_t n) {
    if (n <= m->rcos_cap && m->rcos) return TESS_OK;
    const int64_t c = n + n / 8 + 1;
    free(m->rcos);
    m->rcos = malloc((size_t)c * sizeof(float));
    m->rcos_cap = m->rcos ? c : 0;
    TESS_REQUIRE(m->rcos, TESS_ERR_MEM, "moe: cannot grow R_sp's cosines to %lld floats",
                 (long long)c);
    m->grows++;
    return TESS_OK;
}

/* Fast path, home side, before the row exchange: grp, and ids of the Rn rows in expert order
 * (token, and for a row in a pair split across ranks nonzero: on another rank's expert 1 + its
 * row in the home region, else 1; not in a split pair 0); fs = the other ranks' such rows per
 * expert (= per (rank, slot) of the plan) and ho, their first row in the home region, which
 * holds them in expert order; this rank's own split rows stay on its expert side (fs 0, roc:
 * fast_roc). The ids travel in two extra columns of the token rows (xp_width). */
static void fast_ids(moe_layer *m, int64_t N) {
    const int64_t k = m->k, E = m->E, S = m->nle, me = m->rank;
    for (int64_t i = 0; i < N * k; i++) m->grp[i] = m->topk[i] / (int32_t)S;
    for (int64_t r = 0; r < m->Rn; r++) m->ids[2 * r] = m->row_tok[r], m->ids[2 * r + 1] = 0;
    for (int64_t t = 0; t < N; t++)
        for (int64_t s = 0; s < k; s++) {
            const int32_t rs = m->row_of[t * k + s];
            if (rs < 0) continue;
            for (int64_t u = 0; u < k; u++)
                if (m->row_of[t * k + u] >= 0 && m->grp[t * k + u] != m->grp[t * k + s])
                    m->ids[2 * rs + 1] = 1;
        }
    int64_t c = 0; /* rows of the home region: the other ranks' (expert order) */
    for (int64_t e = 0; e < E; e++) {
        m->fs[e] = 0;
        m->ho[e] = c;
        if (e / S == me) continue; /* the flag 1 stays */
        for (int64_t r = m->offs[e]; r < m->offs[e + 1]; r++)
            if (m->ids[2 * r + 1]) m->ids[2 * r + 1] = (int32_t)(1 + c++), m->fs[e]++;
    }
}

/* Fast path, home side, once the expert side's row map (gpos) and rx_cap are known: roc, the
 * row in the view zg of each slot in a split pair: on this rank's own expert e (slot j) its row
 * on the expert side (gpos of its arrival position: a block arrives in the sender's order), on
 * another rank's rx_cap + its row in the home region; -1 for every other slot. */
static void fast_roc(moe_layer *m, int64_t N) {
    const int64_t k = m->k, S = m->nle, me = m->rank;
    for (int64_t i = 0; i < N * k; i++) {
        const int32_t r = m->row_of[i];
        if (r < 0 || !m->ids[2 * r + 1]) {
            m->roc[i] = -1;
            continue;
        }
        const int64_t e = m->topk[i];
        m->roc[i] = e / S == me ? m->gpos[m->uo[me * S + e % S] + (r - m->offs[e])]
                                : (int32_t)(m->rx_cap + m->ids[2 * r + 1] - 1);
    }
}

/* Fast path, expert side, after the token rows arrived in xt ((rx, C + 2) in [source][slot]
 * order): their ids into rid; the offsets go, uo; the split rows per (source, slot) ns; the
 * position gpos of each row in the grouped order (block (q, j) at go, its split rows first, so
 * that they go home and their gradient comes back in one message per block); the rows into xg
 * there; each source's row_of (rof) of its rows here, in the grouped order of xg and zg. */
static tess_status fast_unpack(moe_layer *m) {
    const int64_t k = m->k, S = m->nle, P = m->P, C = m->base.C, w = C + 2;
    const int64_t rx = tess_dispatch_recv_rows(m->plan);
    const int64_t *rc = tess_dispatch_recv_counts(m->plan);
    TESS_CHECK(grow_ints(m, &m->rid, &m->rid_cap, 2 * rx));
    TESS_CHECK(grow_ints(m, &m->gpos, &m->gpos_cap, rx));
    int64_t u = 0, rows = 0;
    for (int64_t q = 0; q < P; q++)
        for (int64_t j = 0; j < S; j++) {
            m->uo[q * S + j] = u;
            u += rc[q * S + j];
        }
    for (int64_t j = 0, g = 0; j < S; j++)
        for (int64_t q = 0; q < P; q++) {
            m->go[q * S + j] = g;
            g += rc[q * S + j];
        }
    for (int64_t b = 0; b < P * S; b++) {
        m->ns[b] = 0;
        for (int64_t i = m->uo[b]; i < m->uo[b] + rc[b]; i++) {
            memcpy(m->rid + 2 * i, m->xt + i * w + C, 2 * sizeof(int32_t));
            m->ns[b] += m->rid[2 * i + 1] != 0;
        }
        for (int64_t i = 0, sp = 0, ot = m->ns[b]; i < rc[b]; i++) {
            const int64_t g = m->go[b] + (m->rid[2 * (m->uo[b] + i) + 1] ? sp++ : ot++);
            m->gpos[m->uo[b] + i] = (int32_t)g;
            memcpy(m->xg + g * C, m->xt + (m->uo[b] + i) * w, (size_t)C * sizeof(float));
        }
    }
    for (int64_t q = 0; q < P; q++) {
        int32_t top = -1;
        for (int64_t i = m->uo[q * S]; i < (q + 1 < P ? m->uo[(q + 1) * S] : rx); i++)
            top = m->rid[2 * i] > top ? m->rid[2 * i] : top;
        m->nq[q] = top + 1;
        m->rq[q] = rows;
        rows += (top + 1) * k;
    }
    TESS_CHECK(grow_ints(m, &m->rof, &m->rof_cap, rows));
    TESS_CHECK(grow_cos(m, rows / k * tess_nn_moe_rsp_cache_floats(k)));
    for (int64_t i = 0; i < rows; i++) m->rof[i] = -1;
    for (int64_t q = 0; q < P; q++)
        for (int64_t i = m->uo[q * S]; i < (q + 1 < P ? m->uo[(q + 1) * S] : rx); i++) {
            int32_t *slot = m->rof + m->rq[q] + (int64_t)m->rid[2 * i] * k;
            int64_t n = 0;
            while (slot[n] >= 0) n++; /* a token has at most k rows here */
            TESS_ASSERT(n < k);
            slot[n] = m->gpos[i];
        }
    return TESS_OK;
}

/* Fast path: the split rows (F floats each) between the expert side's zg or dzg (ex: block
 * (q, j)'s ns split rows at its go, source q) and the home region (home: expert e's fs rows at
 * ho[e]), one message per nonempty block, then nd doubles of side-information per rank pair:
 * to_home (forward), ex -> home and xd (P, nd; entry q for source q) -> hd (P, nd; entry r from
 * expert rank r); else the reverse. Each side posts its receives, then its sends, then waits:
 * no copy on either side (MPI's own transfer aside). This rank's own rows are not sent (they
 * are read in place). Collective over ep (point-to-point among its ranks). */
static tess_status split_exchange(moe_layer *m, float *ex, float *home, double *xd, double *hd,
                                  int64_t nd, bool to_home_side) {
    const int64_t F = m->F, S = m->nle, P = m->P, me = m->rank;
    const MPI_Comm comm = m->stack->cfg.ep->comm;
    enum { TAG = 7313 };
    int n = 0;
    for (int pass = 0; pass < 2; pass++) { /* 0: receives, 1: sends */
        const bool ex_side = (pass == 0) != to_home_side; /* this pass's buffers are the experts' */
        for (int64_t r = 0; r < P; r++) {
            if (r == me) continue;
            for (int64_t j = 0; j < S; j++) {
                const int64_t cnt = ex_side ? m->ns[r * S + j] : m->fs[r * S + j];
                float *p = ex_side ? ex + m->go[r * S + j] * F : home + m->ho[r * S + j] * F;
                if (cnt == 0) continue;
                TESS_ASSERT(cnt * F < INT32_MAX);
                if (pass == 0)
                    TESS_MPI_CHECK(MPI_Irecv(p, (int)(cnt * F), MPI_FLOAT, (int)r, TAG, comm,
                                             &m->req[n++]));
                else
                    TESS_MPI_CHECK(MPI_Isend(p, (int)(cnt * F), MPI_FLOAT, (int)r, TAG, comm,
                                             &m->req[n++]));
            }
            double *d = (ex_side ? xd : hd) + r * nd;
            if (pass == 0)
                TESS_MPI_CHECK(MPI_Irecv(d, (int)nd, MPI_DOUBLE, (int)r, TAG, comm, &m->req[n++]));
            else
                TESS_MPI_CHECK(MPI_Isend(d, (int)nd, MPI_DOUBLE, (int)r, TAG, comm, &m->req[n++]));
        }
    }
    TESS_MPI_CHECK(MPI_Waitall(n, m->req, MPI_STATUSES_IGNORE));
    return TESS_OK;
}

/* Fast path, after the experts' forward: R_sp's co-located sums of each source's tokens
 * computed here (their cosines kept in rcos), then the other ranks' split rows' z and the sums
 * back home (split_exchange) into the home region after zg's rx_cap rows, this rank's sums copied; sp_sums = the split pairs' sums
 * at home (on zg through roc: this rank's own split rows read where its experts wrote them;
 * their cosines kept in sp_cos) + the returned ones. */
static tess_status fast_forward(moe_layer *m, int64_t N) {
    const int64_t k = m->k, F = m->F, P = m->P, cw = tess_nn_moe_rsp_cache_floats(k);
    float *home = m->zg + m->rx_cap * F;
    for (int64_t q = 0; q < P; q++)
        tess_nn_moe_rsp_sums(m->vs + q * TESS_NN_MOE_PHI_COUNT, m->rcos + m->rq[q] / k * cw,
                             m->zg, m->rof + m->rq[q], NULL, m->nq[q], k, F);
    const double t0 = tess_timer_now(), c0 = thread_cpu();
    const tess_status st = split_exchange(m, m->zg, home, m->vs, m->vr, TESS_NN_MOE_PHI_COUNT,
                                          true);
    exchanged(m, t0, c0);
    TESS_CHECK(st);
    memcpy(m->vr + m->rank * TESS_NN_MOE_PHI_COUNT, m->vs + m->rank * TESS_NN_MOE_PHI_COUNT,
           TESS_NN_MOE_PHI_COUNT * sizeof(double));
    tess_nn_moe_rsp_sums(m->sp_sums, m->sp_cos, m->zg, m->roc, m->grp, N, k, F);
    for (int64_t q = 0; q < P; q++)
        for (int p = 0; p < TESS_NN_MOE_PHI_COUNT; p++)
            m->sp_sums[p] += m->vr[q * TESS_NN_MOE_PHI_COUNT + p];
    return TESS_OK;
}

/* Fast path, backward, into dzg (zv_rows(rx_cap), F: the expert side's rows, then the home
 * region): R_sp's gradient of the split rows at home written (not added: no zeroing) through
 * roc from the forward's cosines, this rank's own split rows straight into their expert-side
 * rows, the others into the home region, which goes to the other ranks' experts straight into
 * their expert-side rows (split_exchange) with this rank's N; then the co-located pairs'
 * gradient from rcos, each source's with its own 1/N. With k = 2 a row is in one pair, split
 * or co-located, so the co-located gradient is written too and only the rows in no pair (a
 * dropped partner) are zeroed; with k > 2 a row can be in both, so every row in no split pair
 * is zeroed and the co-located gradient added. dloss = the loss scale times lambda_sp. */
static tess_status fast_backward(moe_layer *m, float *dzg, float dloss, int64_t N) {
    const int64_t k = m->k, F = m->F, P = m->P;
    const int64_t cw = tess_nn_moe_rsp_cache_floats(k);
    const tess_nn_moe_phi phi = m->stack->cfg.phi;
    const int64_t rx = tess_dispatch_recv_rows(m->plan);
    float *home = dzg + m->rx_cap * F;
    const bool one_pair = k == 2;
    tess_nn_moe_rsp_backward_set(dzg, dloss, m->sp_cos, m->zg, m->roc, m->grp, N, k, F, phi);
    for (int64_t q = 0; q < P; q++) m->nsrc[P + q] = (double)N; /* sent to every rank */
    const double t0 = tess_timer_now(), c0 = thread_cpu();
    const tess_status st = split_exchange(m, dzg, home, m->nsrc, m->nsrc + P, 1, false);
    exchanged(m, t0, c0);
    TESS_CHECK(st);
    m->nsrc[m->rank] = (double)N;
    for (int64_t q = 0; q < P; q++) {
        const int64_t u0 = m->uo[q * m->nle], u1 = q + 1 < P ? m->uo[(q + 1) * m->nle] : rx;
        for (int64_t i = u0; i < u1; i++) {
            if (m->rid[2 * i + 1] != 0) continue; /* split: written above or received */
            const int32_t *pr = m->rof + m->rq[q] + (int64_t)m->rid[2 * i] * k;
            if (!one_pair || pr[0] < 0 || pr[1] < 0) /* zeroed unless its partner is here */
                memset(dzg + (int64_t)m->gpos[i] * F, 0, (size_t)F * sizeof(float));
        }
    }
    for (int64_t q = 0; q < P; q++) {
        if (m->nq[q] <= 0 || m->nsrc[q] <= 0) continue;
        const float w = (float)((double)dloss * (double)m->nq[q] / m->nsrc[q]);
        const float *cos = m->rcos + m->rq[q] / k * cw;
        if (one_pair)
            tess_nn_moe_rsp_backward_set(dzg, w, cos, m->zg, m->rof + m->rq[q], NULL, m->nq[q],
                                         k, F, phi);
        else
            tess_nn_moe_rsp_backward_grp(dzg, w, cos, m->zg, m->rof + m->rq[q], NULL, m->nq[q],
                                         k, F, phi);
    }
    return TESS_OK;
}

/* The local experts' forward (bwd false) or backward on the rows of the last forward: the
 * expert side's buffers, and in backward dxg (overwritten by the experts' first products, not
 * read), dzg (in: R_sp's gradient of z when dz_in, else not read; clobbered), db (scratch)
 * and dyg, all in the layer's [expert][rows] order; the expert weights' gradients dwg, dwu,
 * dwd (taken by take_expert_grads) are written (beta_dw = 0) or added to (1). */
typedef struct {
    moe_layer *m;
    bool bwd, dz_in;
    float *dxg, *dzg, *db;
    const float *dyg;
    float *dwg, *dwu, *dwd;
    float beta_dw;
} expert_job;

/* Member `member` of n runs the experts j whose middle row (by the rows before j plus half of
 * j's) falls in its n-th of all rows: contiguous runs of experts with about equal rows, the same
 * split in forward and backward. n = 1: every expert. Each expert's products, SwiGLU loops and
 * weight gradients touch only its own rows and weights, so members never write the same memory
 * and each expert's results are those of the serial loop, bit for bit. */
static void expert_part(void *ctx, int member, int n) {
    const expert_job *jb = ctx;
    moe_layer *m = jb->m;
    const int64_t C = m->base.C, F = m->F;
    int64_t total = 0;
    for (int64_t j = 0; j < m->nle; j++) total += m->rows[j];
    const float *wg = P(m, m->i_gate), *wu = P(m, m->i_up), *wd = P(m, m->i_down);
    float *dwg = jb->dwg, *dwu = jb->dwu, *dwd = jb->dwd;
    for (int64_t j = 0, o = 0; j < m->nle; o += m->rows[j], j++) {
        const int64_t mid2 = 2 * o + m->rows[j]; /* twice the middle row */
        const int64_t owner = total > 0 ? mid2 * n / (2 * total) : 0; /* n for an empty last */
        if ((owner < n ? owner : n - 1) != member) continue;
        if (!jb->bwd) {
            tess_nn_moe_expert_forward(m->yg + o * C, m->a + o * F, m->b + o * F, m->zg + o * F,
                                       m->xg + o * C, wg + j * F * C, wu + j * F * C,
                                       wd + j * C * F, m->rows[j], C, F);
        } else {
            tess_nn_moe_expert_backward(jb->dxg + o * C, dwg + j * F * C, dwu + j * F * C,
                                        dwd + j * C * F, jb->dzg + o * F, jb->db + o * F,
                                        jb->dyg + o * C, m->xg + o * C, wg + j * F * C,
                                        wu + j * F * C, wd + j * C * F, m->a + o * F,
                                        m->b + o * F, m->zg + o * F, m->rows[j], C, F, 0.0f,
                                        jb->dz_in ? 1.0f : 0.0f, jb->beta_dw);
        }
    }
}

/* Takes the three expert weight gradients into jb for the experts' backward, on the calling
 * thread: beta_dw = 0 if all three hold pending zeros (the products write them), else 1 (they
 * add), with the zeros of any that held them written here. */
static void take_expert_grads(moe_layer *m, expert_job *jb) {
    const int64_t idx[3] = {m->i_gate, m->i_up, m->i_down};
    float **dw[3] = {&jb->dwg, &jb->dwu, &jb->dwd}, beta[3];
    jb->beta_dw = 0.0f;
    for (int i = 0; i < 3; i++) {
        *dw[i] = tess_registry_grad_overwrite(m->base.reg, idx[i], &beta[i]);
        if (beta[i] > jb->beta_dw) jb->beta_dw = beta[i];
    }
    for (int i = 0; i < 3 && jb->beta_dw > 0.0f; i++) {
        const tess_registry_entry *e = tess_registry_get(m->base.reg, idx[i]);
        if (beta[i] == 0.0f) memset(*dw[i], 0, (size_t)e->local_count * sizeof(float));
    }
}

/* fn on the stack's team with OpenBLAS at one thread for the run (the team's threads take the
 * cores, and a member may call BLAS on its part), or fn(ctx, 0, 1) on the calling thread
 * without a team (BLAS threads as they are). */
static void team_run(moe_layer *m, tess_team_fn fn, void *ctx) {
    tess_team *t = m->stack->team;
    if (!t) {
        fn(ctx, 0, 1);
        return;
    }
    const int th = tess_matmul_threads();
    tess_matmul_set_threads(1);
    tess_team_run(t, fn, ctx);
    tess_matmul_set_threads(th);
}

/* The local experts on the stack's team when there is one and two or more experts; else in
 * order on the calling thread with the BLAS threads as they are. */
static void experts_run(moe_layer *m, expert_job *jb) {
    if (m->nle < 2)
        expert_part(jb, 0, 1);
    else
        team_run(m, expert_part, jb);
}

/* The home side's per-row and per-token loops, split over the stack's team by ranges of
 * [0, n) (every member writes only its own rows or tokens, so the results do not depend on the
 * split): GATHER the Rn home rows xp from in (N,C) (zeros for padding; with the fast path the
 * ids in the two extra columns); COMBINE out (N,C) = sum over token t's kept slots in slot
 * order of g y_row; COMBINE_BWD from dout (in): dgates (N,k) = <dout_t, y_row> (0 for a dropped
 * slot) and dy (out) rows = g dout_t; UNPERMUTE din (out, N,C) += the kept slots' dxp (in) rows
 * in slot order. */
typedef enum { ROWS_GATHER, ROWS_COMBINE, ROWS_COMBINE_BWD, ROWS_UNPERMUTE } rows_kind;

typedef struct {
    moe_layer *m;
    rows_kind kind;
    int64_t n;         /* rows (GATHER) or tokens */
    const float *in;
    float *out, *dgates;
    /* R_sp at home (not the fast path), on the same tokens: COMBINE with rsp also writes their
     * cosines and norms into sp_cos; COMBINE_BWD with dz (Rm,F) writes R_sp's gradient into
     * their kept rows of dz (zeros for a kept slot in no pair; dloss: the loss scale times
     * lambda_sp) */
    bool rsp;
    float *dz;
    float dloss;
} rows_job;

static void rows_part(void *ctx, int member, int n) {
    const rows_job *jb = ctx;
    const moe_layer *m = jb->m;
    const int64_t C = m->base.C, k = m->k, F = m->F, xw = xp_width(m);
    const int64_t lo = jb->n * member / n, hi = jb->n * (member + 1) / n;
    for (int64_t t = lo; t < hi; t++) { /* a home row (GATHER) or a token */
        const int32_t *rows = m->row_of + (jb->kind == ROWS_GATHER ? 0 : t * k);
        bool first = true;
        switch (jb->kind) {
        case ROWS_GATHER:
            if (m->row_tok[t] >= 0)
                memcpy(m->xp + t * xw, jb->in + (int64_t)m->row_tok[t] * C,
                       (size_t)C * sizeof(float));
            else
                memset(m->xp + t * xw, 0, (size_t)C * sizeof(float));
            if (m->fast) memcpy(m->xp + t * xw + C, m->ids + 2 * t, 2 * sizeof(int32_t));
            break;
        case ROWS_COMBINE:
            for (int64_t s = 0; s < k; s++) {
                if (rows[s] < 0) continue;
                const float g = m->gates[t * k + s], *yr = m->y + (int64_t)rows[s] * C;
                if (first)
                    scale_copy(jb->out + t * C, g, yr, C);
                else
                    tess_tensor_axpy(jb->out + t * C, g, yr, C);
                first = false;
            }
            if (first) memset(jb->out + t * C, 0, (size_t)C * sizeof(float));
            break;
        case ROWS_COMBINE_BWD:
            for (int64_t s = 0; s < k; s++) {
                if (rows[s] < 0) {
                    jb->dgates[t * k + s] = 0.0f;
                    continue;
                }
                const float *d = jb->in + t * C;
                jb->dgates[t * k + s] = (float)tess_tensor_dot(d, m->y + (int64_t)rows[s] * C, C);
                scale_copy(jb->out + (int64_t)rows[s] * C, m->gates[t * k + s], d, C);
            }
            break;
        case ROWS_UNPERMUTE:
            for (int64_t s = 0; s < k; s++)
                if (rows[s] >= 0)
                    tess_tensor_axpy(jb->out + t * C, 1.0f, jb->in + (int64_t)rows[s] * C, C);
            break;
        }
    }
    if (jb->kind == ROWS_COMBINE && jb->rsp)
        tess_nn_moe_rsp_cache(m->sp_cos, m->z, m->row_of, NULL, lo, hi, k, F);
    if (jb->kind == ROWS_COMBINE_BWD && jb->dz) /* writes every kept row of these tokens */
        tess_nn_moe_rsp_backward_rows_set(jb->dz, jb->dloss, m->sp_cos, m->z, m->row_of, NULL,
                                          lo, hi, jb->n, k, F, m->stack->cfg.phi);
}

/* rows_part on the stack's team, or on the calling thread without one. No BLAS inside. */
static void rows_run(moe_layer *m, rows_job *jb) {
    if (m->stack->team)
        tess_team_run(m->stack->team, rows_part, jb);
    else
        rows_part(jb, 0, 1);
}

/* The router split over the stack's team by tokens: member `member` of n routes tokens
 * [N member / n, N (member + 1) / n): their logits rin W_r^T (tess_nn_moe_router_logits, row
 * by row), scores, top-k, gates and mass, and counts its routed pairs per expert into its row of
 * tcounts. Every token's values are the serial ones (per-row products and loops). */
typedef struct {
    moe_layer *m;
    const float *rin, *bias; /* router input (N,C); selection bias (E) or NULL */
    int64_t N;
} route_job;

static void route_part(void *ctx, int member, int n) {
    const route_job *jb = ctx;
    moe_layer *m = jb->m;
    const int64_t C = m->base.C, E = m->E, k = m->k;
    const int64_t lo = jb->N * member / n, hi = jb->N * (member + 1) / n, nr = hi - lo;
    tess_nn_moe_router_logits(m->logits + lo * E, jb->rin + lo * C, P(m, m->i_router), nr, C, E);
    tess_nn_moe_router_forward(m->probs + lo * E, m->lse + lo, m->topk + lo * k, m->gates + lo * k,
                               m->mass + lo, m->logits + lo * E, jb->bias, nr, E, k,
                               m->stack->cfg.score);
    tess_nn_moe_counts(m->tcounts + member * E, m->topk + lo * k, nr, E, k);
}

/* The router's backward split over the stack's team by tokens, every step per token row:
 * dprobs (N,E) = the gates', L_lb's, L_v's and (through the top-k mass, dmass (N)) R_cp's
 * gradients; dlogits (N,E) = the scores' backward of it plus the z-loss's; din (N,C) += dlogits
 * W_r (times the jitter factors u, through dxr (N,C), with jitter). The router weight's gradient
 * (a sum over tokens) is left to the caller. */
typedef struct {
    moe_layer *m;
    int64_t N;
    const float *dgates;
    float *dprobs, *dlogits, *dmass, *din, *dxr;
    double lambda_v; /* L_v's weight in effect (tess_nn_moe_stack_guo_weights) */
} router_bwd_job;

static void router_bwd_part(void *ctx, int member, int n) {
    const router_bwd_job *jb = ctx;
    moe_layer *m = jb->m;
    const tess_nn_moe_config *cfg = &m->stack->cfg;
    const int64_t C = m->base.C, E = m->E, k = m->k, N = jb->N;
    const int64_t lo = N * member / n, hi = N * (member + 1) / n, nr = hi - lo;
    const float sc = m->stack->scale;
    float *dprobs = jb->dprobs + lo * E, *dlogits = jb->dlogits + lo * E;
    memset(dprobs, 0, (size_t)(nr * E) * sizeof(float));
    tess_nn_moe_gates_backward(dprobs, jb->dgates + lo * k, m->gates + lo * k, m->mass + lo,
                               m->topk + lo * k, nr, E, k);
    if (cfg->lambda_lb > 0)
        tess_nn_moe_lb_backward_rows(jb->dprobs, sc * (float)cfg->lambda_lb, m->lbc, lo, hi, N,
                                     m->lbc[E], E, k);
    if (cfg->lambda_v > 0) /* maximised */
        tess_nn_moe_variance_backward_rows(jb->dprobs, -sc * (float)jb->lambda_v, m->probs, lo,
                                           hi, N, E);
    const moe_layer *prev = m->idx > 0 && !cfg->cp_detach ? m->stack->layer[m->idx - 1] : NULL;
    const moe_layer *next = m->idx + 1 < m->stack->n ? m->stack->layer[m->idx + 1] : NULL;
    if (cfg->lambda_cp > 0 && cfg->cp_identity) { /* into the top-k entries of dprobs */
        const float dl = sc * (float)cfg->lambda_cp;
        if (prev) /* this layer is the pair's deeper one */
            tess_nn_moe_rcp_id_backward_rows(NULL, jb->dprobs, dl, prev->probs, prev->topk,
                                             m->probs, m->topk, P(m, m->i_cooc), lo, hi, N, E,
                                             k);
        if (next)
            tess_nn_moe_rcp_id_backward_rows(jb->dprobs, NULL, dl, m->probs, m->topk,
                                             next->probs, next->topk, P(next, next->i_cooc), lo,
                                             hi, N, E, k);
    } else if (cfg->lambda_cp > 0 && m->stack->n > 1) {
        memset(jb->dmass + lo, 0, (size_t)nr * sizeof(float));
        const float dl = sc * (float)cfg->lambda_cp;
        if (prev) /* this layer is the pair's deeper one */
            tess_nn_moe_rcp_backward_rows(jb->dmass, NULL, dl, m->mass, prev->mass, lo, hi, N);
        if (next)
            tess_nn_moe_rcp_backward_rows(jb->dmass, NULL, dl, m->mass, next->mass, lo, hi, N);
        tess_nn_moe_mass_backward(dprobs, jb->dmass + lo, m->topk + lo * k, nr, E, k);
    }
    memset(dlogits, 0, (size_t)(nr * E) * sizeof(float));
    if (cfg->score == TESS_NN_MOE_SCORE_SIGMOID)
        tess_nn_moe_sigmoid_backward(dlogits, dprobs, m->probs + lo * E, m->logits + lo * E, nr,
                                     E);
    else
        tess_nn_moe_softmax_backward(dlogits, dprobs, m->probs + lo * E, nr, E);
    if (cfg->lambda_z > 0)
        tess_nn_moe_zloss_backward_rows(jb->dlogits, sc * (float)cfg->lambda_z, m->probs, m->lse,
                                        lo, hi, N, E);
    const float *w = P(m, m->i_router);
    if (!m->noise) {
        tess_nn_moe_router_input_grad(jb->din + lo * C, dlogits, w, nr, C, E, 1.0f);
        return;
    }
    /* jitter: the router saw x u, so din += (dlogits W_r) u */
    tess_nn_moe_router_input_grad(jb->dxr + lo * C, dlogits, w, nr, C, E, 0.0f);
    for (int64_t i = lo * C; i < hi * C; i++) jb->din[i] += jb->dxr[i] * m->noise[i];
}

/* The router weight's gradient dW_r (E,C) += dlogits (N,E)^T rin (N,C), member `member` of n
 * taking the columns [c0, c1) (cut at multiples of 16): one tess_matmul_tiles call, whose
 * elements each sum their N products in a fixed order that does not depend on the columns
 * around them, so the split gives the serial values bit for bit. That holds for the AVX-512
 * tiles; without AVX-512 tess_matmul_tiles is OpenBLAS, which does not promise it, and member
 * 0 takes every column. */
#if defined(__AVX512F__)
enum { WGRAD_SPLIT = 1 };
#else
enum { WGRAD_SPLIT = 0 };
#endif

typedef struct {
    moe_layer *m;
    int64_t N;
    const float *dlogits, *rin;
} router_wgrad_job;

static void router_wgrad_part(void *ctx, int member, int n) {
    const router_wgrad_job *jb = ctx;
    const moe_layer *m = jb->m;
    const int64_t C = m->base.C, E = m->E;
    if (!WGRAD_SPLIT) member = member == 0 ? 0 : n, n = 1; /* member 0: [0, C); others none */
    if (member >= n) return;
    const int64_t c0 = member == 0 ? 0 : C * member / n / 16 * 16;
    const int64_t c1 = member == n - 1 ? C : C * (member + 1) / n / 16 * 16;
    if (c1 > c0)
        tess_matmul_tiles(G(m, m->i_router) + c0, C, jb->dlogits, E, jb->rin + c0, C, E, c1 - c0,
                          jb->N, true, false, 1.0f, 1.0f, NULL);
}

static void moe_forward(tess_nn_ffn *f, float *out, const float *in, int64_t N) {
    moe_layer *m = (moe_layer *)f;
    const int64_t C = f->C, E = m->E, k = m->k, F = m->F, R = N * k;
    const tess_nn_moe_config *cfg = &m->stack->cfg;
    /* after a failure no further exchange: its peers may be stuck in an earlier one */
    if (m->stack->status != TESS_OK) return;
    m->in = in;
    m->N = N;
    /* route, on the jittered input when training with jitter */
    const float *rin = in;
    if (m->noise && m->stack->train) {
        const tess_rng_key key = {.seed = (uint32_t)cfg->seed, .stream = (uint32_t)m->idx};
        tess_rng_fill_uniform(key, tess_rng_ctr(TESS_RNG_PURPOSE_JITTER, m->stack->step),
                              m->stack->token0 * C, N * C, m->noise, (float)(1.0 - cfg->jitter),
                              (float)(1.0 + cfg->jitter));
        for (int64_t i = 0; i < N * C; i++) m->xj[i] = in[i] * m->noise[i];
        rin = m->xj;
    } else if (m->noise) {
        for (int64_t i = 0; i < N * C; i++) m->noise[i] = 1.0f;
        memcpy(m->xj, in, (size_t)(N * C) * sizeof(float));
    }
    team_run(m, route_part,
             &(route_job){.m = m, .rin = rin, .bias = m->i_bias >= 0 ? P(m, m->i_bias) : NULL,
                          .N = N});
    const int nt = tess_nn_moe_stack_threads(m->stack);
    for (int64_t e = 0; e < E; e++) {
        m->counts[e] = 0;
        for (int i = 0; i < nt; i++) m->counts[e] += m->tcounts[i * E + e];
    }
    /* permute: the kept (token, slot) pairs into expert blocks, in token order */
    const int64_t cap = cfg->drop != TESS_NN_MOE_DROP_NONE
                            ? tess_nn_moe_capacity(N, E, k, cfg->capacity_factor)
                            : -1;
    m->Rn = tess_nn_moe_permute(m->kept, m->offs, m->row_of, m->row_tok, m->pos, m->work,
                                m->topk, m->probs, N, E, k, cap, cfg->drop, cfg->pad);
    m->dropped = R;
    for (int64_t e = 0; e < E; e++) m->dropped -= m->kept[e];
    if (m->fast) fast_ids(m, N);
    const int64_t xw = xp_width(m);
    rows_run(m, &(rows_job){.m = m, .kind = ROWS_GATHER, .n = m->Rn, .in = in});
    for (int64_t e = 0; e < E; e++) m->pos[e] = m->offs[e + 1] - m->offs[e]; /* block rows */
    /* to the experts' ranks: rows in expert order are already grouped by rank */
    if (m->plan) {
        /* padded: every rank sends cap rows per expert, so fixed-size blocks and no count
         * exchange (the ranks of ep run the same N, so the same cap: moe.h) */
        const double t0 = tess_timer_now(), c0 = thread_cpu();
        keep(m, cfg->pad ? tess_dispatch_plan_fixed(m->plan, cap)
                         : tess_dispatch_plan(m->plan, m->pos));
        exchanged(m, t0, c0);
        if (m->grow) keep(m, grow_expert(m, tess_dispatch_recv_rows(m->plan)));
        if (m->stack->status != TESS_OK) return;
        TESS_ASSERT(tess_dispatch_recv_rows(m->plan) <= m->rx_cap);
        if (m->fast) { /* the token rows with their ids, then split apart */
            const double t1 = tess_timer_now(), c1 = thread_cpu();
            const tess_status st = tess_dispatch_forward(m->plan, m->xp, m->xt, xw);
            exchanged(m, t1, c1);
            keep(m, st);
            if (st == TESS_OK) keep(m, fast_unpack(m));
            if (m->stack->status != TESS_OK) return;
            fast_roc(m, N);
        } else {
            to_experts(m, m->xp, m->xt, m->xg, C);
        }
        for (int64_t j = 0; j < m->nle; j++) m->rows[j] = tess_dispatch_slot_rows(m->plan, j);
    } else {
        for (int64_t j = 0; j < m->nle; j++) m->rows[j] = m->pos[j];
    }
    /* local experts on their contiguous rows */
    experts_run(m, &(expert_job){.m = m});
    /* back home; z too when R_sp needs it (exact R_sp: every pair meets on the token's rank) */
    if (m->plan) {
        to_home(m, m->yg, m->xt, m->y, C);
        if (m->fast)
            keep(m, fast_forward(m, N));
        else if (cfg->lambda_sp > 0)
            to_home(m, m->zg, m->xt, m->z, F);
    }
    /* combine the kept slots in slot order; R_sp's cosines at home (not the fast path's) for
     * every pair, kept for backward, summed below */
    const bool rsp_home = cfg->lambda_sp > 0 && !m->fast;
    rows_run(m, &(rows_job){.m = m, .kind = ROWS_COMBINE, .n = N, .out = out, .rsp = rsp_home});
    if (m->Fs > 0) {
        tess_nn_mlp_swiglu_forward(m->s_out, m->s_gate, m->s_up, m->s_h, in, P(m, m->i_sg),
                                   P(m, m->i_su), P(m, m->i_sd), N, C, m->Fs);
        for (int64_t i = 0; i < N * C; i++) out[i] += m->s_out[i];
    }
    /* aux values */
    memcpy(m->lbc, m->counts, (size_t)E * sizeof *m->lbc);
    m->lbc[E] = N;
    if (cfg->lb_group) keep(m, tess_par_allreduce_i64(cfg->lb_group, m->lbc, E + 1, TESS_PAR_SUM));
    m->lb = tess_nn_moe_lb_forward(m->probs, m->lbc, N, m->lbc[E], E, k);
    m->zl = tess_nn_moe_zloss_forward(m->lse, N);
    if (rsp_home) tess_nn_moe_rsp_sums_cached(m->sp_sums, m->sp_cos, m->row_of, NULL, N, k);
    m->sp = cfg->lambda_sp > 0 ? (float)(m->sp_sums[cfg->phi] / (double)N) : 0;
    m->ol = cfg->lambda_o > 0 ? tess_nn_moe_ortho_forward(m->y, m->row_of, N, k, C) : 0;
    m->vl = E >= 2 ? tess_nn_moe_variance_forward(m->probs, N, E) : 0;
}

static void moe_backward(tess_nn_ffn *f, float *din, float *scratch, const float *dout,
                         int64_t N) {
    moe_layer *m = (moe_layer *)f;
    const int64_t C = f->C, E = m->E, k = m->k, F = m->F, R = rows_max(m, N), Rn = m->Rn;
    const tess_nn_moe_config *cfg = &m->stack->cfg;
    const float sc = m->stack->scale;
    if (m->stack->status != TESS_OK) return; /* as in forward */
    float *dgates = scratch, *dprobs = dgates + N * k, *dlogits = dprobs + N * E;
    float *dmass = dlogits + N * E, *dy = dmass + N, *dxp = dy + R * C, *dz = dxp + R * C;
    /* the expert side: after the home side in the scratch, or (grown) in the stack's tbuf */
    const int64_t Rx = m->grow ? m->rx_cap : rx_max(m, N);
    float *dyg = m->grow ? m->stack->tbuf : dz + z_rows(m, R) * F;
    float *dxg = dyg + Rx * C, *db = dxg + Rx * C, *dzg = db + Rx * F;
    if (m->grow) m->xt = dzg + zv_rows(m, Rx) * F;
    if (!m->plan) dyg = dy, dxg = dxp, dzg = dz; /* the expert side is the home side */
    /* combine: dg_{t,s} = <dout_t, y_row>, dy_row = g_{t,s} dout_t; 0 for dropped slots and
     * padding rows; with R_sp at home (not the fast path) its gradient of z, dz: padding rows
     * zeroed here, the kept rows written with R_sp's gradient per token by the team */
    float *dzh = !m->fast && cfg->lambda_sp > 0 ? dz : NULL;
    for (int64_t r = 0; r < Rn; r++)
        if (m->row_tok[r] < 0) {
            memset(dy + r * C, 0, (size_t)C * sizeof(float));
            if (dzh) memset(dzh + r * F, 0, (size_t)F * sizeof(float));
        }
    rows_run(m, &(rows_job){.m = m, .kind = ROWS_COMBINE_BWD, .n = N, .in = dout, .out = dy,
                            .dgates = dgates, .dz = dzh, .dloss = sc * (float)cfg->lambda_sp});
    /* the orthogonality loss's gradient of the outputs y, at home */
    double lambda_o, lambda_v;
    tess_nn_moe_stack_guo_weights(m->stack, &lambda_o, &lambda_v);
    if (cfg->lambda_o > 0)
        tess_nn_moe_ortho_backward(dy, sc * (float)lambda_o, m->y, m->row_of, N, k, C);
    /* dy and R_sp's dz to the experts' ranks (fast path: R_sp's gradient of the rows in a split
     * pair only, in fast_backward) */
    int64_t rx = Rn;
    if (m->plan) {
        to_experts(m, dy, m->xt, dyg, C);
        if (m->fast) /* with the 1/P below folded into R_sp's weight */
            keep(m, fast_backward(m, dzg, sc * (float)cfg->lambda_sp / (float)m->P, N));
        else if (cfg->lambda_sp > 0)
            to_experts(m, dz, m->xt, dzg, F);
        rx = tess_dispatch_recv_rows(m->plan);
        /* This rank's experts see the rows of all P ranks of ep, so their weight gradients
         * would be the SUM of P ranks' losses, while dense gradients are each rank's own, made
         * a mean over the ranks by the gradient sync (expert ones over edp, P times fewer
         * ranks). Scaling the rows by 1/P makes the expert gradients that same mean; the input
         * gradients are scaled back by P below, as they belong to each row's own rank. */
        const float inv = 1.0f / (float)m->P;
        for (int64_t i = 0; i < rx * C; i++) dyg[i] *= inv;
        if (cfg->lambda_sp > 0 && !m->fast)
            for (int64_t i = 0; i < rx * F; i++) dzg[i] *= inv;
    }
    /* dxg, and dzg without R_sp, are written by each expert's first product (beta = 0); the
     * expert weights' gradients too when their zeros are pending */
    expert_job xb = {.m = m, .bwd = true, .dxg = dxg, .dzg = dzg, .db = db, .dyg = dyg,
                     .dz_in = cfg->lambda_sp > 0};
    take_expert_grads(m, &xb);
    experts_run(m, &xb);
    if (m->plan) {
        const float p = (float)m->P;
        for (int64_t i = 0; i < rx * C; i++) dxg[i] *= p;
        to_home(m, dxg, m->xt, dxp, C);
    }
    /* un-permute: din_t += sum over the kept slots in order */
    rows_run(m, &(rows_job){.m = m, .kind = ROWS_UNPERMUTE, .n = N, .in = dxp, .out = din});
    if (m->Fs > 0) {
        float *ms = dgates + scratch_head(m, N);
        tess_nn_mlp_swiglu_backward(din, G(m, m->i_sg), G(m, m->i_su), G(m, m->i_sd), ms, dout,
                                    m->in, P(m, m->i_sg), P(m, m->i_su), P(m, m->i_sd),
                                    m->s_gate, m->s_up, m->s_h, N, C, m->Fs);
    }
    /* router: gates, LB, L_v, R_cp through the top-k mass, the scores, z-loss, per token on the
     * team; then its weight gradient dlogits^T (x u), split over the team by columns */
    float *dxr = m->noise ? dgates + scratch_head(m, N) - N * C : NULL;
    team_run(m, router_bwd_part,
             &(router_bwd_job){.m = m, .N = N, .dgates = dgates, .dprobs = dprobs,
                               .dlogits = dlogits, .dmass = dmass, .din = din, .dxr = dxr,
                               .lambda_v = lambda_v});
    team_run(m, router_wgrad_part,
             &(router_wgrad_job){.m = m, .N = N, .dlogits = dlogits,
                                 .rin = m->noise ? m->xj : m->in});
}

static double moe_matmul_params(const tess_nn_ffn *f) {
    const moe_layer *m = (const moe_layer *)f;
    return (double)m->E * (double)f->C +
           3.0 * ((double)m->k * (double)m->F + (double)m->Fs) * (double)f->C;
}

static void moe_destroy(tess_nn_ffn *f) {
    moe_layer *m = (moe_layer *)f;
    free(m->counts);
    free(m->offs);
    free(m->pos);
    free(m->rows);
    free(m->lbc);
    free(m->kept);
    free(m->tcounts);
    free(m->xbuf);
    free(m->fs), free(m->ho), free(m->ns), free(m->go), free(m->uo), free(m->nq), free(m->rq);
    free(m->vs), free(m->vr), free(m->nsrc), free(m->rid), free(m->gpos), free(m->rof);
    free(m->rcos), free(m->req);
    tess_dispatch_destroy(&m->plan);
    free(m);
}

static const tess_nn_ffn_ops moe_ops = {
    .add_params = moe_add_params,
    .carve = moe_carve,
    .scratch_floats = moe_scratch_floats,
    .forward = moe_forward,
    .backward = moe_backward,
    .matmul_params_per_token = moe_matmul_params,
    .destroy = moe_destroy,
};

/* ---------- the stack ---------- */

tess_status tess_nn_moe_stack_create(tess_nn_moe_stack **s, const tess_nn_moe_config *cfg) {
    *s = NULL;
    TESS_CHECK(tess_nn_moe_check_config(cfg));
    tess_nn_moe_stack *st = calloc(1, sizeof *st);
    TESS_REQUIRE(st, TESS_ERR_MEM, "cannot allocate an MoE stack");
    st->cfg = *cfg;
    st->scale = 1.0f;
    const int th = tess_matmul_threads();
    if (th > 1) {
        const tess_status ts = tess_team_create(&st->team, th);
        if (ts != TESS_OK) free(st);
        TESS_CHECK(ts);
    }
    *s = st;
    return TESS_OK;
}

int tess_nn_moe_stack_threads(const tess_nn_moe_stack *s) {
    return s->team ? tess_team_size(s->team) : 1;
}

void tess_nn_moe_stack_destroy(tess_nn_moe_stack **s) {
    if (!s || !*s) return;
    tess_team_destroy(&(*s)->team);
    free((*s)->layer);
    free((*s)->tbuf);
    free(*s);
    *s = NULL;
}

static double model_out_std(const tess_tfm_config *c) { return 0.02 / sqrt(2.0 * (double)c->L); }

tess_status tess_nn_moe_stack_make_ffn(void *ctx, int64_t layer, const tess_tfm_config *tcfg,
                                       tess_nn_ffn **ffn) {
    tess_nn_moe_stack *st = ctx;
    const tess_nn_moe_config *cfg = &st->cfg;
    *ffn = NULL;
    if ((layer + 1) % cfg->every != 0) {
        TESS_CHECK(tess_nn_ffn_dense_create(ffn, tcfg->mlp, tcfg->C, tcfg->F, 0.02,
                                            model_out_std(tcfg)));
        return TESS_OK;
    }
    TESS_REQUIRE(tcfg->C >= 1, TESS_ERR_CONFIG, "model channels must be >= 1, got %lld",
                 (long long)tcfg->C);
    if (st->n == st->cap) {
        int64_t cap = st->cap ? 2 * st->cap : 8;
        moe_layer **l = realloc(st->layer, (size_t)cap * sizeof *l);
        TESS_REQUIRE(l, TESS_ERR_MEM, "cannot grow the MoE stack to %lld layers", (long long)cap);
        st->layer = l;
        st->cap = cap;
    }
    moe_layer *m = calloc(1, sizeof *m);
    TESS_REQUIRE(m, TESS_ERR_MEM, "cannot allocate an MoE layer");
    *m = (moe_layer){.base = {.ops = &moe_ops, .C = tcfg->C}, .stack = st, .idx = st->n,
                     .E = cfg->E, .k = cfg->k, .F = cfg->F, .std = cfg->std,
                     .out_std = model_out_std(tcfg), .i_bias = -1, .i_cooc = -1,
                     .Fs = cfg->shared_F, .i_sg = -1, .i_su = -1, .i_sd = -1};
    m->P = cfg->ep ? cfg->ep->size : 1;
    m->rank = cfg->ep ? cfg->ep->rank : 0;
    m->nle = cfg->E / m->P;
    m->grow = cfg->ep && cfg->drop == TESS_NN_MOE_DROP_NONE;
    m->counts = calloc((size_t)cfg->E, sizeof *m->counts);
    m->offs = calloc((size_t)cfg->E + 1, sizeof *m->offs);
    m->pos = calloc((size_t)cfg->E, sizeof *m->pos);
    m->rows = calloc((size_t)m->nle, sizeof *m->rows);
    m->lbc = calloc((size_t)cfg->E + 1, sizeof *m->lbc);
    m->kept = calloc((size_t)cfg->E, sizeof *m->kept);
    m->tcounts = calloc((size_t)(cfg->E * tess_nn_moe_stack_threads(st)), sizeof *m->tcounts);
    if (!m->counts || !m->offs || !m->pos || !m->rows || !m->lbc || !m->kept || !m->tcounts) {
        moe_destroy(&m->base);
        TESS_REQUIRE(false, TESS_ERR_MEM, "cannot allocate an MoE layer's counts (E=%lld)",
                     (long long)cfg->E);
    }
    if (cfg->ep) {
        const tess_status ps = cfg->ep_allgather
                                   ? tess_dispatch_create_allgather(&m->plan, cfg->ep, m->nle)
                                   : tess_dispatch_create(&m->plan, cfg->ep, m->nle);
        if (ps != TESS_OK) {
            moe_destroy(&m->base);
            return ps;
        }
    }
    m->fast = cfg->ep && !cfg->ep_allgather && !cfg->pad && cfg->lambda_sp > 0;
    if (m->fast) {
        const size_t E = (size_t)cfg->E, P = (size_t)m->P, np = TESS_NN_MOE_PHI_COUNT;
        m->fs = calloc(E, sizeof *m->fs), m->ho = calloc(E, sizeof *m->ho);
        m->ns = calloc(E, sizeof *m->ns);
        m->go = calloc(E, sizeof *m->go), m->uo = calloc(E, sizeof *m->uo);
        m->nq = calloc(P, sizeof *m->nq), m->rq = calloc(P, sizeof *m->rq);
        m->vs = calloc(P * np, sizeof *m->vs), m->vr = calloc(P * np, sizeof *m->vr);
        m->nsrc = calloc(2 * P, sizeof *m->nsrc); /* received, then sent (fast_backward) */
        m->req = malloc(2 * P * ((size_t)m->nle + 1) * sizeof *m->req);
        if (!m->fs || !m->ho || !m->ns || !m->go || !m->uo || !m->nq || !m->rq || !m->vs ||
            !m->vr || !m->nsrc || !m->req) {
            moe_destroy(&m->base);
            TESS_REQUIRE(false, TESS_ERR_MEM, "cannot allocate an MoE layer's R_sp fast path");
        }
    }
    st->layer[st->n++] = m;
    *ffn = &m->base;
    return TESS_OK;
}

void tess_nn_moe_stack_set_loss_scale(tess_nn_moe_stack *s, float scale) { s->scale = scale; }

void tess_nn_moe_stack_set_step(tess_nn_moe_stack *s, bool train, uint64_t step, int64_t token0) {
    s->train = train;
    s->step = step;
    s->token0 = token0;
}

tess_status tess_nn_moe_stack_status(const tess_nn_moe_stack *s) { return s->status; }

double tess_nn_moe_stack_exchange_seconds(tess_nn_moe_stack *s, bool reset, double *cpu) {
    const double t = s->t_exchange;
    if (cpu) *cpu = s->c_exchange;
    if (reset) s->t_exchange = s->c_exchange = 0.0;
    return t;
}

void tess_nn_moe_stack_aux(const tess_nn_moe_stack *s, tess_nn_moe_aux *aux) {
    *aux = (tess_nn_moe_aux){.layers = s->n};
    const tess_nn_moe_config *c = &s->cfg;
    double routed = 0.0;
    for (int64_t i = 0; i < s->n; i++) {
        const moe_layer *m = s->layer[i];
        aux->dropped += (double)m->dropped;
        routed += (double)(m->N * m->k);
        aux->lb += m->lb;
        aux->z += m->zl;
        aux->sp += m->sp;
        aux->o += m->ol;
        aux->v += m->vl;
        const moe_layer *n = i + 1 < s->n ? s->layer[i + 1] : NULL; /* the pair's deeper one */
        if (n)
            aux->cp += c->cp_identity ? tess_nn_moe_rcp_id_forward(m->probs, m->topk, n->probs,
                                                                   n->topk, P(n, n->i_cooc),
                                                                   m->N, m->E, m->k)
                                      : tess_nn_moe_rcp_forward(m->mass, n->mass, m->N);
    }
    aux->dropped = routed > 0 ? aux->dropped / routed : 0.0;
    double lambda_o, lambda_v;
    tess_nn_moe_stack_guo_weights(s, &lambda_o, &lambda_v);
    aux->total = c->lambda_lb * aux->lb + c->lambda_z * aux->z + c->lambda_sp * aux->sp +
                 c->lambda_cp * aux->cp + lambda_o * aux->o - lambda_v * aux->v;
}

/* The exponents of guo_autoscale's weights (2), or NULL without it. */
static float *guo_log10(const tess_nn_moe_stack *s) {
    return s->n > 0 && s->layer[0]->i_guo >= 0 ? P(s->layer[0], s->layer[0]->i_guo) : NULL;
}

tess_status tess_nn_moe_stack_guo_autoscale(tess_nn_moe_stack *s, double L_o, double L_v) {
    float *e = guo_log10(s);
    TESS_REQUIRE(e, TESS_ERR_ARG, "guo_autoscale: the stack has no MoE layer with it on");
    const double target[2] = {s->cfg.lambda_o, s->cfg.lambda_v}, value[2] = {L_o, L_v};
    static const char *const name[2] = {"L_o (orthogonality)", "L_v (routing variance)"};
    for (int i = 0; i < 2; i++) {
        if (target[i] <= 0) {
            e[i] = -INFINITY; /* 10^-inf = 0: the loss stays off */
            continue;
        }
        TESS_REQUIRE(isfinite(value[i]) && value[i] > 0, TESS_ERR_DIVERGED,
                     "moe.guo_autoscale: %s = %g at the first step, cannot scale its weight "
                     "towards the target %g (needs a finite value > 0)",
                     name[i], value[i], target[i]);
        e[i] = (float)round(log10(target[i] / value[i]));
    }
    return TESS_OK;
}

bool tess_nn_moe_stack_guo_pending(const tess_nn_moe_stack *s) {
    const float *e = guo_log10(s);
    return e && (isnan(e[0]) || isnan(e[1]));
}

void tess_nn_moe_stack_guo_weights(const tess_nn_moe_stack *s, double *lambda_o,
                                   double *lambda_v) {
    const float *e = guo_log10(s);
    *lambda_o = e ? pow(10.0, (double)e[0]) : s->cfg.lambda_o;
    *lambda_v = e ? pow(10.0, (double)e[1]) : s->cfg.lambda_v;
}

int64_t tess_nn_moe_stack_layers(const tess_nn_moe_stack *s) { return s->n; }

const int64_t *tess_nn_moe_stack_counts(const tess_nn_moe_stack *s, int64_t i) {
    return s->layer[i]->counts;
}

const float *tess_nn_moe_stack_probs(const tess_nn_moe_stack *s, int64_t i, int64_t *N) {
    if (N) *N = s->layer[i]->N;
    return s->layer[i]->probs;
}

const int32_t *tess_nn_moe_stack_topk(const tess_nn_moe_stack *s, int64_t i) {
    return s->layer[i]->topk;
}

float *tess_nn_moe_stack_bias(tess_nn_moe_stack *s, int64_t i) {
    const moe_layer *m = s->layer[i];
    return m->i_bias >= 0 ? P(m, m->i_bias) : NULL;
}

float *tess_nn_moe_stack_cooc(tess_nn_moe_stack *s, int64_t i) {
    const moe_layer *m = s->layer[i];
    return m->i_cooc >= 0 ? P(m, m->i_cooc) : NULL;
}

void tess_nn_moe_stack_cooc_counts(const tess_nn_moe_stack *s, int64_t i, int64_t *counts) {
    TESS_ASSERT(i >= 1 && i < s->n);
    const moe_layer *a = s->layer[i - 1], *b = s->layer[i];
    tess_nn_moe_cooc_counts(counts, a->topk, b->topk, b->N, b->E, b->k);
}

int64_t tess_nn_moe_stack_dropped(const tess_nn_moe_stack *s, int64_t i) {
    return s->layer[i]->dropped;
}

int64_t tess_nn_moe_stack_expert_rows(const tess_nn_moe_stack *s, int64_t i) {
    const moe_layer *m = s->layer[i];
    int64_t n = 0;
    for (int64_t j = 0; j < m->nle; j++) n += m->rows[j];
    return n;
}

int64_t tess_nn_moe_stack_expert_cap(const tess_nn_moe_stack *s, int64_t i, int64_t *grows) {
    const moe_layer *m = s->layer[i];
    if (grows) *grows = m->grows;
    return m->rx_cap;
}

int64_t tess_nn_moe_stack_grown_bytes(const tess_nn_moe_stack *s) {
    int64_t floats = s->tbuf_floats;
    for (int64_t i = 0; i < s->n; i++)
        if (s->layer[i]->xbuf) floats += xbuf_floats(s->layer[i], s->layer[i]->rx_cap);
    return floats * (int64_t)sizeof(float);
}

const float *tess_nn_moe_stack_mass(const tess_nn_moe_stack *s, int64_t i) {
    return s->layer[i]->mass;
}

double tess_nn_moe_stack_cosine(const tess_nn_moe_stack *s, int64_t i, tess_nn_moe_phi phi) {
    const moe_layer *m = s->layer[i];
    if (m->k < 2 || (m->plan && s->cfg.lambda_sp <= 0)) return NAN; /* z is not at home */
    if (m->fast) return m->sp_sums[phi] / (double)m->N; /* the co-located pairs' z are not */
    return tess_nn_moe_rsp_forward(m->z, m->row_of, m->N, m->k, m->F, phi);
}

double tess_nn_moe_stack_ortho(const tess_nn_moe_stack *s, int64_t i) {
    const moe_layer *m = s->layer[i];
    if (m->k < 2) return NAN;
    return tess_nn_moe_ortho_forward(m->y, m->row_of, m->N, m->k, m->base.C);
}
