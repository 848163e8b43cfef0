/* moe.h - a top-k Mixture-of-Experts feed-forward (router, SwiGLU experts, combine) with its
 * auxiliary losses: load balancing, router z-loss, the intra-layer specialization loss R_sp and
 * the cross-layer coupling loss R_cp (Hu et al., "Synergistic Intra- and Cross-Layer
 * Regularization Losses for MoE Expert Specialization", arXiv:2602.14159), every one with a
 * closed-form backward and a naive _ref. docs/moe.md states the equations.
 *
 * Dimension letters: N tokens (rows) on this rank, C model channels, F expert hidden channels,
 * E routed experts, k experts per token; R = N*k routed (token, slot) rows (dropless).
 *
 * Forward of one MoE layer on x (N,C):
 *   h = (x * u) @ w_router^T (N,E), fp32      router logits; u = 1 or, when training with router
 *                                             jitter eps, u ~ U[1 - eps, 1 + eps) per element
 *   p = softmax(h) over all E (N,E)           scores; lse (N) = logsumexp(h)
 *       or sigmoid scores p_e = s(h_e) / sum_j s(h_j), s the logistic function
 *   K_t = top-k of p_t + bias (ties -> lower id); bias (E) is the aux-loss-free selection bias
 *   M_t = sum_{e in K_t} p_{t,e}              top-k mass (N)
 *   g_{t,s} = p_{t,K_t[s]} / M_t              gates (N,k), slots in descending score order
 *   expert e on its rows X_e: z = silu(X_e w_gate_e^T) * (X_e w_up_e^T), y = z w_down_e^T
 *   capacity (optional): each expert keeps at most cap = ceil(N k cf / E) of this rank's
 *   (token, slot) pairs, by score or by position; a dropped pair contributes nothing
 *   out_t = sum_s g_{t,s} y[row_of(t,s)]      combine in slot order (deterministic), kept slots
 *           (+ shared(x_t), a dense SwiGLU expert on every token, when configured)
 * Aux losses (per layer): L_lb = E sum_e f_e P_e, f_e = c_e/(kN), P_e = mean_t p_{t,e};
 *   L_z = mean_t lse_t^2;
 *   R_sp = (1/N) sum_t (1/(k(k-1))) sum_{e != v in K_t} phi(cos(z_t^(e), z_t^(v)));
 *   R_cp between adjacent MoE layers a, b = -(1/N) sum_t M_t^(a) M_t^(b) (cp_detach: M^(b) of
 *   the deeper layer b taken as a constant in backward);
 *   the baselines of Guo et al. (arXiv:2505.22323): L_o = (1/(N k)) sum_t sum_s |P_{t,-s} y_{t,s}|^2,
 *   the squared projection of each selected expert's output onto the span of the token's other
 *   selected outputs, and L_v = mean_t var_e(p_{t,e}) (unbiased), which the objective maximises.
 *
 * The kernels below follow nn/'s convention (docs/nn.md): inputs const, outputs overwritten,
 * backward ADDS into every gradient, no allocation, void. The layer (tess_nn_moe_stack_make_ffn)
 * implements the tess_nn_ffn interface of nn/ffn.h and is not collective (one rank holds every
 * expert). */
#ifndef TESS_NN_MOE_H
#define TESS_NN_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"     /* tess_opt_enum */
#include "core/status.h"     /* tess_status */
#include "nn/ffn.h"          /* tess_nn_ffn */
#include "nn/transformer.h"  /* tess_tfm_config */

/* phi of R_sp: c^2 (orthogonality, default), |c|, or signed c (pushes towards anti-correlation). */
typedef enum {
    TESS_NN_MOE_PHI_SQ = 0,
    TESS_NN_MOE_PHI_ABS,
    TESS_NN_MOE_PHI_SIGNED,
    TESS_NN_MOE_PHI_COUNT
} tess_nn_moe_phi;

static const tess_opt_enum tess_nn_moe_phi_names[] = {
    {"sq", TESS_NN_MOE_PHI_SQ}, {"abs", TESS_NN_MOE_PHI_ABS}, {"signed", TESS_NN_MOE_PHI_SIGNED}};
TESS_OPT_ENUM_TABLE_CHECK(tess_nn_moe_phi_names, TESS_NN_MOE_PHI_COUNT);

/* Router scores: softmax over all E (default), or sigmoid normalised over all E (the gates are
 * renormalised over the top-k either way). */
typedef enum {
    TESS_NN_MOE_SCORE_SOFTMAX = 0,
    TESS_NN_MOE_SCORE_SIGMOID,
    TESS_NN_MOE_SCORE_COUNT
} tess_nn_moe_score;

static const tess_opt_enum tess_nn_moe_score_names[] = {{"softmax", TESS_NN_MOE_SCORE_SOFTMAX},
                                                        {"sigmoid", TESS_NN_MOE_SCORE_SIGMOID}};
TESS_OPT_ENUM_TABLE_CHECK(tess_nn_moe_score_names, TESS_NN_MOE_SCORE_COUNT);

/* Capacity drop policy: none (dropless, default); probs keeps each expert's cap pairs of highest
 * score (ties to the lower token id); position keeps its first cap pairs in token order. */
typedef enum {
    TESS_NN_MOE_DROP_NONE = 0,
    TESS_NN_MOE_DROP_PROBS,
    TESS_NN_MOE_DROP_POSITION,
    TESS_NN_MOE_DROP_COUNT
} tess_nn_moe_drop;

static const tess_opt_enum tess_nn_moe_drop_names[] = {{"none", TESS_NN_MOE_DROP_NONE},
                                                       {"probs", TESS_NN_MOE_DROP_PROBS},
                                                       {"position", TESS_NN_MOE_DROP_POSITION}};
TESS_OPT_ENUM_TABLE_CHECK(tess_nn_moe_drop_names, TESS_NN_MOE_DROP_COUNT);

/* The cosine's denominator floor eps_c: c = <u,v> / max(|u||v|, eps_c). */
#define TESS_NN_MOE_COS_EPS 1e-8f

/* ---------- router ---------- */

/* probs (N,E) = the scores of logits (softmax, or sigmoid normalised over E); lse (N) =
 * logsumexp(logits) either way; topk (N,k) expert ids, descending by probs + bias (bias (E) or
 * NULL = 0), ties to the lower id; gates (N,k) = probs / mass; mass (N) = sum of the selected
 * probs. logits (N,E). 1 <= k <= E. */
void tess_nn_moe_router_forward(float *probs, float *lse, int32_t *topk, float *gates, float *mass,
                                const float *logits, const float *bias, int64_t N, int64_t E,
                                int64_t k, tess_nn_moe_score score);
void tess_nn_moe_router_forward_ref(float *probs, float *lse, int32_t *topk, float *gates,
                                    float *mass, const float *logits, const float *bias,
                                    int64_t N, int64_t E, int64_t k, tess_nn_moe_score score);
/* Router logits h (N,E) = x (N,C) W^T, W (E,C): each logit one dot product in a fixed order
 * (16 float lanes added in double), so a row's logits do not depend on N or on the rows around
 * it and the router split over a thread team by token ranges gives the serial values bit for
 * bit. A BLAS sgemm does not promise that: OpenBLAS 0.3.21 on an AMD Zen 4 core sums some
 * elements of a 1024-row call otherwise than the same rows in a 2048-row call. Not collective. */
void tess_nn_moe_router_logits(float *h, const float *x, const float *w, int64_t N, int64_t C,
                               int64_t E);
/* dx (N,C) = beta dx + dlogits (N,E) W (E,C), beta 0 or 1, per row with the E terms added to the
 * row in order e = 0..E-1 (row-split invariant like tess_nn_moe_router_logits). */
void tess_nn_moe_router_input_grad(float *dx, const float *dlogits, const float *w, int64_t N,
                                   int64_t C, int64_t E, float beta);
/* Gate Jacobian: dprobs (N,E) += d/dp of <dgates, gates>: for m in K_t,
 * (dg_m - sum_s g_s dg_s) / M_t; 0 elsewhere. dgates, gates (N,k); mass (N); topk (N,k). */
void tess_nn_moe_gates_backward(float *dprobs, const float *dgates, const float *gates,
                                const float *mass, const int32_t *topk, int64_t N, int64_t E,
                                int64_t k);
/* dprobs (N,E) += dmass_t on the selected experts of token t. dmass (N); topk (N,k). */
void tess_nn_moe_mass_backward(float *dprobs, const float *dmass, const int32_t *topk, int64_t N,
                               int64_t E, int64_t k);
/* Softmax backward: dlogits (N,E) += p (dp - <p, dp>). dprobs, probs (N,E). */
void tess_nn_moe_softmax_backward(float *dlogits, const float *dprobs, const float *probs,
                                  int64_t N, int64_t E);
/* Backward of the sigmoid scores p_j = s(h_j) / sum_e s(h_e): dlogits (N,E) += p_j (1 - s(h_j))
 * (dp_j - <p, dp>). dprobs, probs, logits (N,E). */
void tess_nn_moe_sigmoid_backward(float *dlogits, const float *dprobs, const float *probs,
                                  const float *logits, int64_t N, int64_t E);

/* ---------- capacity and permutation ---------- */

/* Capacity of one expert for N tokens: ceil(N k cf / E). */
int64_t tess_nn_moe_capacity(int64_t N, int64_t E, int64_t k, double cf);
/* The routed (token, slot) pairs of topk (N,k) into expert blocks, rows of a block in token
 * order. cap < 0 or drop NONE: dropless (pad ignored); else each expert keeps at most cap pairs
 * by the policy drop (PROBS ranks a full expert's pairs by probs (N,E), higher kept, ties to the
 * lower token id). Outputs: kept (E) pairs kept per expert; offs (E+1) block starts, block e
 * holding kept[e] rows, or cap rows with pad (its last cap - kept[e] rows are padding); row_of
 * (N,k) the row of pair (t,s), -1 if dropped; row_tok (offs[E]) the token of each row, -1 for
 * padding. Scratch: pos (E), work (N k). Returns the rows offs[E]. */
int64_t tess_nn_moe_permute(int64_t *kept, int64_t *offs, int32_t *row_of, int32_t *row_tok,
                            int64_t *pos, uint64_t *work, const int32_t *topk, const float *probs,
                            int64_t N, int64_t E, int64_t k, int64_t cap, tess_nn_moe_drop drop,
                            bool pad);
/* keep (N,k) = 1 if pair (t,s) is kept, else 0, by the definition: a pair of expert e is kept
 * iff fewer than cap pairs of e precede it (POSITION: a lower pair index t k + s; PROBS: a
 * higher score, or an equal one and a lower index). O((N k)^2). */
void tess_nn_moe_keep_ref(uint8_t *keep, const int32_t *topk, const float *probs, int64_t N,
                          int64_t E, int64_t k, int64_t cap, tess_nn_moe_drop drop);

/* ---------- balancing ---------- */

/* counts (E) = number of (token, slot) pairs routed to each expert. topk (N,k). */
void tess_nn_moe_counts(int64_t *counts, const int32_t *topk, int64_t N, int64_t E, int64_t k);
/* L_lb = E/(k Ntot N) sum_e counts_e sum_t probs_{t,e} over this rank's N tokens, counts (E)
 * constants counted over Ntot tokens: Ntot = N and this rank's counts give the local loss (1 at
 * uniform probs); counts summed over P ranks of N tokens each, Ntot = P N, give a per-rank value
 * whose mean over the ranks is the L_lb of the whole batch. */
float tess_nn_moe_lb_forward(const float *probs, const int64_t *counts, int64_t N, int64_t Ntot,
                             int64_t E, int64_t k);
/* dprobs (N,E) += dloss * E counts_e / (k Ntot N). */
void tess_nn_moe_lb_backward(float *dprobs, float dloss, const int64_t *counts, int64_t N,
                             int64_t Ntot, int64_t E, int64_t k);
/* L_z = mean_t lse_t^2; backward: dlogits (N,E) += dloss * 2 lse_t probs_{t,j} / N. */
float tess_nn_moe_zloss_forward(const float *lse, int64_t N);
void tess_nn_moe_zloss_backward(float *dlogits, float dloss, const float *probs, const float *lse,
                                int64_t N, int64_t E);
/* Rows [t0, t1) of the backward kernels whose factor depends on the token count: the same
 * values as the whole call over N tokens (rows 0 <= t0 <= t1 <= N), so that ranges of tokens run
 * on different threads give the serial result bit for bit. Pointers as in the whole call (row 0
 * of N); rows outside [t0, t1) are not touched. */
void tess_nn_moe_lb_backward_rows(float *dprobs, float dloss, const int64_t *counts, int64_t t0,
                                  int64_t t1, int64_t N, int64_t Ntot, int64_t E, int64_t k);
void tess_nn_moe_zloss_backward_rows(float *dlogits, float dloss, const float *probs,
                                     const float *lse, int64_t t0, int64_t t1, int64_t N,
                                     int64_t E);
/* Aux-loss-free balancing (DeepSeek): bias_e += rate * sign(mean(counts) - counts_e). counts are
 * the counts of every data-parallel replica (all-reduced by the caller), so every rank updates
 * alike. bias, counts (E). */
void tess_nn_moe_bias_update(float *bias, const int64_t *counts, int64_t E, float rate);

/* ---------- R_cp and R_sp ---------- */

/* R_cp of one adjacent pair = -(1/N) sum_t mass_a_t mass_b_t; backward: dmass_a += dloss
 * (-mass_b / N), dmass_b likewise; either gradient may be NULL (detached layer). (N) each. */
float tess_nn_moe_rcp_forward(const float *mass_a, const float *mass_b, int64_t N);
void tess_nn_moe_rcp_backward(float *dmass_a, float *dmass_b, float dloss, const float *mass_a,
                              const float *mass_b, int64_t N);
/* Rows [t0, t1) of N of it (as tess_nn_moe_lb_backward_rows). */
void tess_nn_moe_rcp_backward_rows(float *dmass_a, float *dmass_b, float dloss,
                                   const float *mass_a, const float *mass_b, int64_t t0,
                                   int64_t t1, int64_t N);

/* Identity-coupled R_cp of one adjacent pair (an ablation; R_cp itself does not compare expert
 * ids): -(1/N) sum_t sum_{e in K_t^a} sum_{v in K_t^b} p^a_{t,e} p^b_{t,v} chat_{e,v}, with
 * chat (E,E) a constant, the pair's detached running average of the top-k co-occurrence
 * (tess_nn_moe_cooc_update); chat = 1 everywhere gives tess_nn_moe_rcp_forward's value. probs
 * (N,E) of the two layers, topk (N,k) their selected experts. backward rows [t0, t1) of N (as
 * tess_nn_moe_lb_backward_rows): dprobs_a (N,E) += dloss dR/dp^a on each token's top-k entries,
 * dprobs_b likewise; either may be NULL (detached layer). */
float tess_nn_moe_rcp_id_forward(const float *probs_a, const int32_t *topk_a,
                                 const float *probs_b, const int32_t *topk_b, const float *chat,
                                 int64_t N, int64_t E, int64_t k);
void tess_nn_moe_rcp_id_backward_rows(float *dprobs_a, float *dprobs_b, float dloss,
                                      const float *probs_a, const int32_t *topk_a,
                                      const float *probs_b, const int32_t *topk_b,
                                      const float *chat, int64_t t0, int64_t t1, int64_t N,
                                      int64_t E, int64_t k);
/* counts (E,E) += the co-occurrence of two layers' top-k: entry (e, v) counts the tokens with e
 * among topk_a's and v among topk_b's k experts (each token adds k^2). */
void tess_nn_moe_cooc_counts(int64_t *counts, const int32_t *topk_a, const int32_t *topk_b,
                             int64_t N, int64_t E, int64_t k);
/* chat (E,E) = decay chat + (1 - decay) E^2 counts / sum(counts): a running average of the
 * co-occurrence scaled to mean 1 over the entries (1 everywhere when the two layers route
 * independently and uniformly); unchanged when every count is 0. counts are every
 * data-parallel replica's (all-reduced by the caller), so every rank updates alike. */
void tess_nn_moe_cooc_update(float *chat, const int64_t *counts, int64_t E, float decay);

/* R_sp of one layer: z (rows, F) holds the experts' SwiGLU intermediates in any row order;
 * row_of (N,k) gives the row of token t's slot s, so pairs are matched by token id; a slot with
 * row -1 (dropped) takes part in no pair.
 * R_sp = (1/N) sum_t (1/(k(k-1))) sum_{s != s'} phi(c_t(s, s')), c with denominator
 * max(|u||v|, TESS_NN_MOE_COS_EPS). k >= 2. backward: dz (rows, F) += dloss * dR_sp/dz. */
float tess_nn_moe_rsp_forward(const float *z, const int32_t *row_of, int64_t N, int64_t k,
                              int64_t F, tess_nn_moe_phi phi);
void tess_nn_moe_rsp_backward(float *dz, float dloss, const float *z, const int32_t *row_of,
                              int64_t N, int64_t k, int64_t F, tess_nn_moe_phi phi);
float tess_nn_moe_rsp_forward_ref(const float *z, const int32_t *row_of, int64_t N, int64_t k,
                                  int64_t F, tess_nn_moe_phi phi);
void tess_nn_moe_rsp_backward_ref(float *dz, float dloss, const float *z, const int32_t *row_of,
                                  int64_t N, int64_t k, int64_t F, tess_nn_moe_phi phi);
/* R_sp split by groups, for expert parallelism (the co-located fast path): grp (N,k) or NULL
 * gives each slot a group (the rank of its expert); with grp only the pairs whose slots are in
 * DIFFERENT groups count, so the pairs of one group can be computed elsewhere (on the rank that
 * holds both experts) and the parts add up to R_sp. Unnormalised sums for every phi at once:
 * sums[phi] = sum_t (1/(k(k-1))) sum_{s != s', a pair} phi(c_t(s, s')), so R_sp = sums[phi] / N
 * with grp NULL. cache (N, tess_nn_moe_rsp_cache_floats(k)) or NULL: the norms and cosines of
 * every token's pairs, kept for the backward (no recomputation). backward_grp: dz (rows, F) +=
 * dloss * d/dz of (1/N) times that sum for phi (grp NULL: tess_nn_moe_rsp_backward); cache: the
 * one rsp_sums wrote for the same z, row_of and grp, or NULL to compute the cosines again.
 * The dot products run in single-precision lanes, added in double (relative error near 1e-7
 * for F in the hundreds). k >= 2. */
static inline int64_t tess_nn_moe_rsp_cache_floats(int64_t k) { return k + k * (k - 1) / 2; }
void tess_nn_moe_rsp_sums(double sums[TESS_NN_MOE_PHI_COUNT], float *cache, const float *z,
                          const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k,
                          int64_t F);
void tess_nn_moe_rsp_backward_grp(float *dz, float dloss, const float *cache, const float *z,
                                  const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k,
                                  int64_t F, tess_nn_moe_phi phi);
/* rsp_sums with a cache in two parts, for tokens split over threads: rsp_cache writes the cache
 * rows of tokens [t0, t1) (their norms and cosines, independent per token), rsp_sums_cached sums
 * phi over a filled cache of N tokens in token order. Together: rsp_sums's sums and cache bit for
 * bit (it is implemented so). rsp_backward_rows: rows [t0, t1) of N of rsp_backward_grp (it
 * writes only the dz rows of those tokens' slots, so disjoint token ranges can run at once). */
void tess_nn_moe_rsp_cache(float *cache, const float *z, const int32_t *row_of,
                           const int32_t *grp, int64_t t0, int64_t t1, int64_t k, int64_t F);
void tess_nn_moe_rsp_sums_cached(double sums[TESS_NN_MOE_PHI_COUNT], const float *cache,
                                 const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k);
void tess_nn_moe_rsp_backward_rows(float *dz, float dloss, const float *cache, const float *z,
                                   const int32_t *row_of, const int32_t *grp, int64_t t0,
                                   int64_t t1, int64_t N, int64_t k, int64_t F,
                                   tess_nn_moe_phi phi);
/* rsp_backward_rows that overwrites instead of adding: the dz rows of the kept slots of tokens
 * [t0, t1) are R_sp's gradient (zeros for a kept slot in no pair), the same values as zeroing
 * those rows first and then rsp_backward_rows (zeros may differ in sign), without reading dz:
 * one pass over the rows less. */
void tess_nn_moe_rsp_backward_rows_set(float *dz, float dloss, const float *cache,
                                       const float *z, const int32_t *row_of, const int32_t *grp,
                                       int64_t t0, int64_t t1, int64_t N, int64_t k, int64_t F,
                                       tess_nn_moe_phi phi);
/* rsp_backward_grp with the gradient written, not added: rsp_backward_rows_set over all tokens,
 * except that a row of no pair is not touched; so the caller need not zero the rows first (the
 * expert-parallel fast path's split rows at home). */
void tess_nn_moe_rsp_backward_set(float *dz, float dloss, const float *cache, const float *z,
                                  const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k,
                                  int64_t F, tess_nn_moe_phi phi);
void tess_nn_moe_rsp_sums_ref(double sums[TESS_NN_MOE_PHI_COUNT], const float *z,
                              const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k,
                              int64_t F);
void tess_nn_moe_rsp_backward_grp_ref(float *dz, float dloss, const float *z,
                                      const int32_t *row_of, const int32_t *grp, int64_t N,
                                      int64_t k, int64_t F, tess_nn_moe_phi phi);

/* ---------- the baselines of Guo et al. ---------- */

/* The ridge of the orthogonality loss's normal equations (in double). */
#define TESS_NN_MOE_ORTHO_EPS 1e-12

/* Orthogonality loss of one layer: y (rows, C) the experts' outputs before the gates, row_of
 * (N,k) as for R_sp (-1: dropped, in no projection). For token t and kept slot s with A the
 * (C, m) matrix of the token's other kept outputs: f = b^T (A^T A + eps I)^-1 b, b = A^T y_s (the
 * squared length of the orthogonal projection of y_s onto span A, which Guo et al. build by
 * Gram-Schmidt), L_o = (1/(N k)) sum_t sum_s f. backward: dy (rows, C) += dloss dL_o/dy, with
 * w = (A^T A + eps I)^-1 b: df/dy_s = 2 A w, df/da_j = 2 w_j (y_s - A w). 2 <= k <= 16. */
float tess_nn_moe_ortho_forward(const float *y, const int32_t *row_of, int64_t N, int64_t k,
                                int64_t C);
void tess_nn_moe_ortho_backward(float *dy, float dloss, const float *y, const int32_t *row_of,
                                int64_t N, int64_t k, int64_t C);
/* The same value by modified Gram-Schmidt of the other outputs (in double, no ridge; a vector
 * whose residual is below 1e-12 of its length adds no direction). */
float tess_nn_moe_ortho_forward_ref(const float *y, const int32_t *row_of, int64_t N, int64_t k,
                                    int64_t C);
/* Variance loss: L_v = (1/N) sum_t var_e(probs_t), the unbiased variance over E >= 2 scores;
 * backward: dprobs (N,E) += dloss 2 (p_{t,e} - mean_t) / ((E - 1) N). */
float tess_nn_moe_variance_forward(const float *probs, int64_t N, int64_t E);
void tess_nn_moe_variance_backward(float *dprobs, float dloss, const float *probs, int64_t N,
                                   int64_t E);
/* Rows [t0, t1) of N of it (as tess_nn_moe_lb_backward_rows). */
void tess_nn_moe_variance_backward_rows(float *dprobs, float dloss, const float *probs,
                                        int64_t t0, int64_t t1, int64_t N, int64_t E);

/* ---------- one SwiGLU expert on its n rows ---------- */

/* y (n,C) = z @ w_down^T; caches a = x @ w_gate^T, b = x @ w_up^T, z = silu(a) * b, all (n,F);
 * x (n,C); w_gate, w_up (F,C); w_down (C,F). The products run on tess_matmul_tiles
 * (tensor/matmul.h, AVX-512 register tiles; OpenBLAS without AVX-512) on the calling thread:
 * each output row depends only on its input row. */
void tess_nn_moe_expert_forward(float *y, float *a, float *b, float *z, const float *x,
                                const float *w_gate, const float *w_up, const float *w_down,
                                int64_t n, int64_t C, int64_t F);
/* dx (n,C) = beta_dx dx + the input gradient, or NULL; dw_gate, dw_up (F,C), dw_down (C,F) =
 * beta_dw times themselves + their gradients (beta_dw = 0: written, not read; also for n = 0).
 * dz (n,F): on entry, with beta_dz = 1, an extra gradient of z (R_sp's); with beta_dz = 0 not
 * read (no zeroing needed); clobbered. Each beta 0 or 1. db (n,F) scratch. dy (n,C);
 * the rest as forward. The products run on tess_matmul_tiles (tensor/matmul.h): one thread,
 * each row of dx and each weight-gradient element summed in a fixed order. */
void tess_nn_moe_expert_backward(float *dx, float *dw_gate, float *dw_up, float *dw_down,
                                 float *dz, float *db, const float *dy, const float *x,
                                 const float *w_gate, const float *w_up, const float *w_down,
                                 const float *a, const float *b, const float *z, int64_t n,
                                 int64_t C, int64_t F, float beta_dx, float beta_dz,
                                 float beta_dw);
void tess_nn_moe_expert_forward_ref(float *y, float *a, float *b, float *z, const float *x,
                                    const float *w_gate, const float *w_up, const float *w_down,
                                    int64_t n, int64_t C, int64_t F);
void tess_nn_moe_expert_backward_ref(float *dx, float *dw_gate, float *dw_up, float *dw_down,
                                     float *dz, float *db, const float *dy, const float *x,
                                     const float *w_gate, const float *w_up, const float *w_down,
                                     const float *a, const float *b, const float *z, int64_t n,
                                     int64_t C, int64_t F, float beta_dx, float beta_dz,
                                     float beta_dw);

/* ---------- the layer and the stack of a model's MoE layers ---------- */

typedef struct {
    int64_t E, k, F;   /* routed experts, experts per token, expert hidden width */
    int64_t every;     /* MoE in layers l with (l + 1) % every == 0: 1 every layer, 2 every other */
    int64_t shared_F;  /* hidden width of a shared SwiGLU expert on every token (DeepSeekMoE), 0: none */
    double lambda_lb, lambda_z, lambda_sp, lambda_cp; /* weights of sum_l L_lb, L_z, R_sp, R_cp */
    tess_nn_moe_phi phi;
    bool bias_balance; /* aux-loss-free selection bias (registered, updated by the caller) */
    double std;        /* init std of the router and of w_gate, w_up (w_down: the model's) */
    /* Expert parallelism: ep is the group the experts are sharded over (rank r of P holds
     * experts [r E/P, (r+1) E/P)), edp the expert-data-parallel group their gradients are
     * reduced over (the ranks holding the same experts). Both borrowed, NULL: every expert on
     * this rank. With ep, forward and backward are collective on ep. */
    const struct tess_group *ep, *edp;
    /* With ep: exchange through the all-gather dispatcher (par/dispatch.h, the correctness
     * oracle: same results, P times the traffic) instead of the all-to-all one. */
    bool ep_allgather;
    /* L_lb's counts and token total summed over this group (borrowed; collective on it in
     * forward), e.g. every data-parallel rank: the global-batch L_lb, so the objective does not
     * depend on how the batch is split over ranks. NULL: each rank's own (the per-micro-batch
     * variant). */
    const struct tess_group *lb_group;
    tess_nn_moe_score score; /* router scores, softmax (default) or sigmoid */
    double jitter;           /* router input jitter eps in [0, 1), 0: off; see stack_set_step */
    uint64_t seed;           /* the jitter's Philox seed */
    /* Capacity: with drop != NONE each expert takes at most ceil(N k capacity_factor / E) of a
     * rank's N tokens' pairs (before the exchange); pad fills every block to that capacity
     * with zero rows (fixed-size expert GEMMs). L_lb and the bias use the counts before drops. */
    tess_nn_moe_drop drop;
    double capacity_factor;
    bool pad;
    /* Guo et al.'s baselines: weights of sum_l L_o (added) and sum_l L_v (subtracted: the
     * variance of the scores is maximised); fixed, or with guo_autoscale the targets of their
     * automatic scaling (tess_nn_moe_stack_guo_autoscale) */
    double lambda_o, lambda_v;
    /* Guo et al.'s automatic scaling: the weights in effect are powers of ten set once, at the
     * first training step, from lambda_o and lambda_v as targets and the losses' values then;
     * the first MoE layer registers them as "<prefix>.guo_log10" (2: their exponents, NaN
     * until set; not trainable), so a checkpoint keeps them. Needs lambda_o or lambda_v > 0. */
    bool guo_autoscale;
    /* R_cp ablation: its gradient flows into the shallower layer of each adjacent pair only, the
     * deeper layer's top-k mass a constant (a detached "teacher"); the value is unchanged */
    bool cp_detach;
    /* R_cp ablation: identity-coupled (tess_nn_moe_rcp_id_forward) instead of the product of the
     * top-k masses; each MoE layer after the first registers its pair's chat (E,E) as
     * "<prefix>.cp_cooc", rows the previous MoE layer's experts, columns its own, = 1 at init,
     * not trainable, updated by the caller (tess_nn_moe_stack_cooc_counts, _cooc_update).
     * Needs lambda_cp > 0. */
    bool cp_identity;
} tess_nn_moe_config;

/* TESS_ERR_CONFIG naming the field: E < 1, k outside [1, E], F < 1, every < 1, a negative lambda,
 * k = 1 with lambda_sp > 0 (R_sp needs two co-activated experts), an unknown phi, score or drop,
 * std < 0, E not divisible by the size of ep, jitter outside [0, 1), capacity_factor <= 0 with a
 * drop policy, pad without one, lambda_z > 0 with sigmoid scores (the z-loss is defined on the
 * softmax router), lambda_o > 0 with k = 1, lambda_v > 0 with E = 1, a negative lambda_o or
 * lambda_v, cp_identity with lambda_cp = 0, guo_autoscale with lambda_o = lambda_v = 0. */
tess_status tess_nn_moe_check_config(const tess_nn_moe_config *cfg);

/* The auxiliary terms of the last forward, summed over the MoE layers (unweighted), and the
 * weighted total that is added to the training loss. */
typedef struct {
    int64_t layers;          /* MoE layers */
    double lb, z, sp, cp;    /* sum_l L_lb, sum_l L_z, sum_l R_sp (0 when lambda_sp = 0), R_cp */
    double o, v;             /* sum_l L_o (0 when lambda_o = 0), sum_l L_v */
    double total;            /* lambda_lb lb + lambda_z z + lambda_sp sp + lambda_cp cp
                              * + lambda_o o - lambda_v v */
    double dropped;          /* dropped (token, slot) pairs / routed pairs, over the layers */
} tess_nn_moe_aux;

typedef struct tess_nn_moe_stack tess_nn_moe_stack;

/* A stack shares the config and the aux-loss plumbing of a model's MoE layers (R_cp couples
 * adjacent ones). It owns none of the layers (the model does); use it only while they live.
 * Memory: the layers carve their caches (nn/ffn.h), with one exception: dropless with ep the
 * rows a rank's experts receive are known only after the count exchange (up to every rank's
 * N k rows), so each layer's expert side (the received rows, their SwiGLU caches) and the
 * stack's expert-side scratch (outputs, exchange buffer, backward gradients; one for all
 * layers) are heap buffers grown in forward from the exchanged counts, never shrunk: memory
 * follows the rows received, and a step allocates only when a layer receives more rows than
 * ever before (tess_nn_moe_stack_expert_cap). A failed allocation is kept like an exchange
 * failure (TESS_ERR_MEM).
 * With expert parallelism each layer exchanges token rows over ep (par/dispatch.h): one count
 * exchange and two row exchanges in forward (rows out, outputs back), two and one in backward
 * (dY out, dX back). R_sp stays exact across ranks: a pair of a token's slots whose experts live
 * on one rank is computed there (co-located), a pair split across ranks on the token's rank, so
 * with lambda_sp > 0 the token ids travel with the rows (two more columns of the token rows),
 * only the z rows in a split pair come back (and their gradient goes out in backward),
 * point-to-point from and into their final rows, followed by the co-located pairs' sums (and
 * each rank's N, for their gradient's 1/N): no collective beyond the dropless layer's. The cosines and norms of
 * forward are kept for backward on both sides. With padding or the all-gather
 * dispatcher (the oracle) z of every row comes back and R_sp is computed at home. With pad (every
 * expert's block padded to the capacity) there is no count exchange: the blocks have a fixed
 * size, exchanged by MPI_Alltoall; the capacity is a function of N, so every rank of ep must
 * run its forward with the same N (a training batch split evenly over the ranks). The feed-forward
 * interface cannot return a status, so an MPI failure is kept: check tess_nn_moe_stack_status
 * after each forward and backward. Gradient convention with ep of size P: every rank's loss is
 * its own tokens' (dense gradients are each rank's, averaged over the data-parallel ranks by
 * the gradient sync); an expert's gradient is the sum over the rows it received from all P ranks
 * divided by P, so that its mean over edp is the same mean over every rank (not P times it). */
tess_status tess_nn_moe_stack_create(tess_nn_moe_stack **s, const tess_nn_moe_config *cfg);
void tess_nn_moe_stack_destroy(tess_nn_moe_stack **s);
/* A tess_tfm_make_ffn (ctx = the stack): an MoE layer where the config puts one, else the model's
 * dense feed-forward. Layers must be made in model order (tess_tfm_create does). The MoE layer
 * registers "<prefix>.router" (E,C) ~ N(0,std), "<prefix>.w_gate", "<prefix>.w_up" (E,F,C)
 * ~ N(0,std), "<prefix>.w_down" (E,C,F) ~ N(0, 0.02/sqrt(2L)) (the model's residual output
 * init; dense layers get the model's dense feed-forward with the same init), and with
 * bias_balance "<prefix>.bias" (E) = 0, not trainable; with shared_F > 0 the shared expert
 * "<prefix>.shared.w_gate", ".w_up" (shared_F, C) ~ N(0,std), ".w_down" (C, shared_F) ~ N(0,
 * out_std), replicated, added to every token's output (not part of R_sp). */
tess_status tess_nn_moe_stack_make_ffn(void *ctx, int64_t layer, const tess_tfm_config *cfg,
                                       tess_nn_ffn **ffn);
/* TESS_OK, or the first failure of an exchange or a growth in a layer's forward or backward
 * (its record is the error text); the layers' outputs are then undefined, and every later
 * forward and backward of the stack's layers returns at once (no further collective: the caller
 * ends the run). */
tess_status tess_nn_moe_stack_status(const tess_nn_moe_stack *s);
/* Threads the stack runs its local experts on: the BLAS thread count at tess_nn_moe_stack_create
 * when above 1 (a core/team.h team; each expert's products run on one thread, OpenBLAS set to
 * one thread for the team's phases and restored after them), else 1 (in order). With a single
 * local expert it runs on the calling thread alone. */
int tess_nn_moe_stack_threads(const tess_nn_moe_stack *s);
/* Wall seconds this rank spent in the expert exchanges of every MoE layer (the plans and the row
 * exchanges of par/dispatch.h, waiting for the other ranks of ep included; not the local
 * regrouping) since the stack was made or last reset; 0 without ep. *cpu (may be NULL): the
 * calling thread's CPU seconds in them (MPI's polling while it waits counts; time descheduled by
 * other processes does not). reset: start both again at 0. */
double tess_nn_moe_stack_exchange_seconds(tess_nn_moe_stack *s, bool reset, double *cpu);
/* The aux gradients added by each layer's backward are scaled like the main loss: set the
 * model's loss_scale here before tess_tfm_backward (default 1). */
void tess_nn_moe_stack_set_loss_scale(tess_nn_moe_stack *s, float scale);
/* The next forwards train (router jitter on, when configured) or evaluate (off, the default).
 * The jitter of MoE layer i is tess_rng_fill_uniform with key (cfg->seed, i), counter
 * (TESS_RNG_PURPOSE_JITTER, step), element (token0 + t) C + c: token0 is the global index of
 * this rank's first token, so the noise does not depend on how a batch is split over ranks. */
void tess_nn_moe_stack_set_step(tess_nn_moe_stack *s, bool train, uint64_t step, int64_t token0);
/* The aux terms of the last forward of every MoE layer. */
void tess_nn_moe_stack_aux(const tess_nn_moe_stack *s, tess_nn_moe_aux *aux);
int64_t tess_nn_moe_stack_layers(const tess_nn_moe_stack *s);
/* MoE layer i (0-based among the MoE layers) of the last forward: counts (E) of routed rows,
 * probs (N,E), topk (N,k), z rows and row_of (for metrics). Valid until the next forward. */
const int64_t *tess_nn_moe_stack_counts(const tess_nn_moe_stack *s, int64_t i);
const float *tess_nn_moe_stack_probs(const tess_nn_moe_stack *s, int64_t i, int64_t *N);
const int32_t *tess_nn_moe_stack_topk(const tess_nn_moe_stack *s, int64_t i);
/* (token, slot) pairs MoE layer i dropped in its last forward (0 when dropless). */
int64_t tess_nn_moe_stack_dropped(const tess_nn_moe_stack *s, int64_t i);
/* Rows (padding included) this rank's experts processed in MoE layer i's last forward: summed
 * over the ep group, the rows its ranks sent (count conservation). */
int64_t tess_nn_moe_stack_expert_rows(const tess_nn_moe_stack *s, int64_t i);
/* Rows the expert side of MoE layer i holds: dropless with ep, grown from the exchanged counts
 * (the most rows received in one forward so far, plus 1/8); otherwise the carved bound. *grows
 * (may be NULL): how many times its buffers grew (0 when carved). */
int64_t tess_nn_moe_stack_expert_cap(const tess_nn_moe_stack *s, int64_t i, int64_t *grows);
/* Bytes of the buffers grown after carve (dropless with ep: every layer's expert side and the
 * stack's shared expert-side scratch); 0 otherwise. */
int64_t tess_nn_moe_stack_grown_bytes(const tess_nn_moe_stack *s);
/* Top-k mass (N) of MoE layer i's last forward. */
const float *tess_nn_moe_stack_mass(const tess_nn_moe_stack *s, int64_t i);
/* R_sp's statistic of MoE layer i's last forward with the given phi, whatever lambda_sp is:
 * PHI_SQ the mean squared cosine of co-activated experts' z, PHI_SIGNED the mean cosine.
 * NAN when k = 1, or with ep and lambda_sp = 0 (z then stays on the experts' ranks). */
double tess_nn_moe_stack_cosine(const tess_nn_moe_stack *s, int64_t i, tess_nn_moe_phi phi);
/* Guo et al.'s orthogonality loss L_o of MoE layer i's last forward, whatever lambda_o is (the
 * outputs y are on the token's rank in every mode); NAN when k = 1. */
double tess_nn_moe_stack_ortho(const tess_nn_moe_stack *s, int64_t i);
/* Guo et al.'s automatic scaling (cfg.guo_autoscale; call once, after the first training
 * forward and before its backward): the weight of L_o becomes 10^round(log10(lambda_o / L_o))
 * and that of L_v 10^round(log10(lambda_v / L_v)), the config's weights being the targets and
 * L_o, L_v the losses' values then (the caller's choice, e.g. their mean over the MoE layers and
 * the data-parallel ranks: every rank must pass the same). A weight whose target is 0 stays 0.
 * Stored as the exponents in "<first MoE layer>.guo_log10". TESS_ERR_DIVERGED naming the loss
 * when a positive target meets a value that is not finite and > 0. */
tess_status tess_nn_moe_stack_guo_autoscale(tess_nn_moe_stack *s, double L_o, double L_v);
/* true while guo_autoscale's weights are not set (the run's first step, unless a checkpoint
 * restored them); false without guo_autoscale. */
bool tess_nn_moe_stack_guo_pending(const tess_nn_moe_stack *s);
/* The weights of L_o and L_v in effect: the config's, or guo_autoscale's (NaN while pending). */
void tess_nn_moe_stack_guo_weights(const tess_nn_moe_stack *s, double *lambda_o,
                                   double *lambda_v);
/* The selection bias (E) of MoE layer i, or NULL without bias_balance. */
float *tess_nn_moe_stack_bias(tess_nn_moe_stack *s, int64_t i);
/* With cp_identity: the co-occurrence average chat (E,E) of MoE layers i - 1 and i (registered by
 * layer i), or NULL (i = 0, or without cp_identity). */
float *tess_nn_moe_stack_cooc(tess_nn_moe_stack *s, int64_t i);
/* counts (E,E) += the top-k co-occurrence of MoE layers i - 1 and i in the last forward on this
 * rank's tokens (tess_nn_moe_cooc_counts); i >= 1. */
void tess_nn_moe_stack_cooc_counts(const tess_nn_moe_stack *s, int64_t i, int64_t *counts);

#endif
