/* moe.c - the Mixture-of-Experts kernels, their references and the MoE feed-forward (moe.h).
 * Letters as in moe.h: N tokens, C channels, F expert hidden, E experts, k per token, R = N*k. */
#include "nn/moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/activation.h" /* tess_nn_swiglu_gate_* */
#include "nn/linear.h"     /* tess_nn_linear_* */
#include "tensor/matmul.h" /* tess_matmul_tiles */
#include "tensor/tensor.h" /* tess_tensor_expf */

/* ---------- router ---------- */

/* Top-k of score (E) + bias into ids (k), descending, ties to the lower id: insertion into a
 * sorted list of k, a candidate displacing an entry only when strictly larger. */
static void topk_select(int32_t *ids, const float *score, const float *bias, int64_t E,
                        int64_t k) {
    int64_t n = 0;
    for (int64_t e = 0; e < E; e++) {
        float v = score[e] + (bias ? bias[e] : 0.0f);
        if (n == k) {
            int32_t last = ids[k - 1];
            if (!(v > score[last] + (bias ? bias[last] : 0.0f))) continue;
            n--;
        }
        int64_t j = n;
        while (j > 0) {
            int32_t prev = ids[j - 1];
            if (!(v > score[prev] + (bias ? bias[prev] : 0.0f))) break;
            ids[j] = prev;
            j--;
        }
        ids[j] = (int32_t)e;
        n++;
    }
}

/* p (E) = the scores of h (E); returns logsumexp(h). */
static float scores(float *p, const float *h, int64_t E, tess_nn_moe_score score) {
    float mx = h[0];
    for (int64_t e = 1; e < E; e++) mx = h[e] > mx ? h[e] : mx;
    double sum = 0.0;
    if (score == TESS_NN_MOE_SCORE_SOFTMAX) {
        for (int64_t e = 0; e < E; e++) {
            p[e] = tess_tensor_expf(h[e] - mx);
            sum += p[e];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t e = 0; e < E; e++) p[e] *= inv;
        return mx + (float)log(sum);
    }
    double ssum = 0.0;
    for (int64_t e = 0; e < E; e++) {
        sum += tess_tensor_expf(h[e] - mx);
        p[e] = 1.0f / (1.0f + tess_tensor_expf(-h[e]));
        ssum += p[e];
    }
    const float inv = (float)(1.0 / ssum);
    for (int64_t e = 0; e < E; e++) p[e] *= inv;
    return mx + (float)log(sum);
}

void tess_nn_moe_router_forward(float *probs, float *lse, int32_t *topk, float *gates, float *mass,
                                const float *logits, const float *bias, int64_t N, int64_t E,
                                int64_t k, tess_nn_moe_score score) {
    /* probs (N,E), lse (N), topk (N,k), gates (N,k), mass (N); logits (N,E); bias (E) or NULL */
    TESS_ASSERT(k >= 1 && k <= E);
    for (int64_t t = 0; t < N; t++) {
        float *p = probs + t * E;
        lse[t] = scores(p, logits + t * E, E, score);
        int32_t *ids = topk + t * k;
        topk_select(ids, p, bias, E, k);
        double m = 0.0;
        for (int64_t s = 0; s < k; s++) m += p[ids[s]];
        mass[t] = (float)m;
        for (int64_t s = 0; s < k; s++) gates[t * k + s] = (float)(p[ids[s]] / m);
    }
}

void tess_nn_moe_router_forward_ref(float *probs, float *lse, int32_t *topk, float *gates,
                                    float *mass, const float *logits, const float *bias,
                                    int64_t N, int64_t E, int64_t k, tess_nn_moe_score score) {
    /* Scores in double; top-k by k passes of "largest, lowest id among equals, not yet taken". */
    for (int64_t t = 0; t < N; t++) {
        const float *h = logits + t * E;
        double mx = h[0], sum = 0.0, ssum = 0.0;
        for (int64_t e = 1; e < E; e++) mx = fmax(mx, h[e]);
        for (int64_t e = 0; e < E; e++) {
            sum += exp((double)h[e] - mx);
            ssum += 1.0 / (1.0 + exp(-(double)h[e]));
        }
        for (int64_t e = 0; e < E; e++)
            probs[t * E + e] = score == TESS_NN_MOE_SCORE_SOFTMAX
                                   ? (float)(exp((double)h[e] - mx) / sum)
                                   : (float)(1.0 / (1.0 + exp(-(double)h[e])) / ssum);
        lse[t] = (float)(mx + log(sum));
        for (int64_t s = 0; s < k; s++) {
            int64_t best = -1;
            for (int64_t e = 0; e < E; e++) {
                bool taken = false;
                for (int64_t q = 0; q < s; q++) taken |= topk[t * k + q] == e;
                if (taken) continue;
                float v = probs[t * E + e] + (bias ? bias[e] : 0.0f);
                if (best < 0 || v > probs[t * E + best] + (bias ? bias[best] : 0.0f)) best = e;
            }
            topk[t * k + s] = (int32_t)best;
        }
        double m = 0.0;
        for (int64_t s = 0; s < k; s++) m += probs[t * E + topk[t * k + s]];
        mass[t] = (float)m;
        for (int64_t s = 0; s < k; s++)
            gates[t * k + s] = (float)(probs[t * E + topk[t * k + s]] / m);
    }
}

void tess_nn_moe_gates_backward(float *dprobs, const float *dgates, const float *gates,
                                const float *mass, const int32_t *topk, int64_t N, int64_t E,
                                int64_t k) {
    /* g_s = p_s / M: dg_s/dp_m = (delta_sm - g_s) / M for m in K. */
    for (int64_t t = 0; t < N; t++) {
        const float *dg = dgates + t * k, *g = gates + t * k;
        double gdg = 0.0;
        for (int64_t s = 0; s < k; s++) gdg += (double)g[s] * dg[s];
        const double invm = 1.0 / mass[t];
        for (int64_t s = 0; s < k; s++)
            dprobs[t * E + topk[t * k + s]] += (float)((dg[s] - gdg) * invm);
    }
}

void tess_nn_moe_mass_backward(float *dprobs, const float *dmass, const int32_t *topk, int64_t N,
                               int64_t E, int64_t k) {
    for (int64_t t = 0; t < N; t++)
        for (int64_t s = 0; s < k; s++) dprobs[t * E + topk[t * k + s]] += dmass[t];
}

void tess_nn_moe_softmax_backward(float *dlogits, const float *dprobs, const float *probs,
                                  int64_t N, int64_t E) {
    for (int64_t t = 0; t < N; t++) {
        const float *p = probs + t * E, *dp = dprobs + t * E;
        double pdp = 0.0;
        for (int64_t e = 0; e < E; e++) pdp += (double)p[e] * dp[e];
        for (int64_t e = 0; e < E; e++) dlogits[t * E + e] += p[e] * (float)(dp[e] - pdp);
    }
}

void tess_nn_moe_sigmoid_backward(float *dlogits, const float *dprobs, const float *probs,
                                  const float *logits, int64_t N, int64_t E) {
    /* p_j = s_j / S: dp_e/ds_j = (delta_ej - p_e) / S, ds_j/dh_j = s_j (1 - s_j) = S p_j (1 - s_j) */
    for (int64_t t = 0; t < N; t++) {
        const float *p = probs + t * E, *dp = dprobs + t * E, *h = logits + t * E;
        double pdp = 0.0;
        for (int64_t e = 0; e < E; e++) pdp += (double)p[e] * dp[e];
        for (int64_t e = 0; e < E; e++) {
            const float sg = 1.0f / (1.0f + tess_tensor_expf(-h[e]));
            dlogits[t * E + e] += p[e] * (1.0f - sg) * (float)(dp[e] - pdp);
        }
    }
}

/* ---------- capacity and permutation ---------- */

int64_t tess_nn_moe_capacity(int64_t N, int64_t E, int64_t k, double cf) {
    return (int64_t)ceil((double)N * (double)k * cf / (double)E);
}

/* Sort key of pair i with score p in [0, 1]: ascending keys = descending p, then ascending i
 * (the bits of a non-negative float order like the float). */
static uint64_t rank_key(float p, int64_t i) {
    uint32_t b;
    memcpy(&b, &p, sizeof b);
    return ((uint64_t)(UINT32_MAX - b) << 32) | (uint64_t)(uint32_t)i;
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int64_t tess_nn_moe_permute(int64_t *kept, int64_t *offs, int32_t *row_of, int32_t *row_tok,
                            int64_t *pos, uint64_t *work, const int32_t *topk, const float *probs,
                            int64_t N, int64_t E, int64_t k, int64_t cap, tess_nn_moe_drop drop,
                            bool pad) {
    const int64_t R = N * k;
    const bool capped = cap >= 0 && drop != TESS_NN_MOE_DROP_NONE;
    /* mark: row_of 0 kept, -1 dropped; kept (E) counts the kept pairs */
    memset(kept, 0, (size_t)E * sizeof *kept);
    for (int64_t i = 0; i < R; i++) {
        const int32_t e = topk[i];
        row_of[i] = 0;
        if (capped && drop == TESS_NN_MOE_DROP_POSITION && kept[e] >= cap)
            row_of[i] = -1;
        else
            kept[e]++;
    }
    if (capped && drop == TESS_NN_MOE_DROP_PROBS)
        for (int64_t e = 0; e < E; e++) {
            if (kept[e] <= cap) continue;
            int64_t n = 0;
            for (int64_t i = 0; i < R; i++)
                if (topk[i] == e) work[n++] = rank_key(probs[(i / k) * E + e], i);
            qsort(work, (size_t)n, sizeof *work, cmp_u64);
            for (int64_t j = cap; j < n; j++) row_of[work[j] & UINT32_MAX] = -1;
            kept[e] = cap;
        }
    /* blocks; a stable counting sort of the kept pairs into them */
    offs[0] = 0;
    for (int64_t e = 0; e < E; e++) offs[e + 1] = offs[e] + (capped && pad ? cap : kept[e]);
    memcpy(pos, offs, (size_t)E * sizeof *pos);
    for (int64_t i = 0; i < R; i++) {
        if (row_of[i] < 0) continue;
        const int64_t r = pos[topk[i]]++;
        row_of[i] = (int32_t)r;
        row_tok[r] = (int32_t)(i / k);
    }
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = pos[e]; r < offs[e + 1]; r++) row_tok[r] = -1;
    return offs[E];
}

void tess_nn_moe_keep_ref(uint8_t *keep, const int32_t *topk, const float *probs, int64_t N,
                          int64_t E, int64_t k, int64_t cap, tess_nn_moe_drop drop) {
    const int64_t R = N * k;
    for (int64_t i = 0; i < R; i++) {
        const int32_t e = topk[i];
        const float pi = probs[(i / k) * E + e];
        int64_t ahead = 0;
        for (int64_t j = 0; j < R; j++) {
            if (j == i || topk[j] != e) continue;
            const float pj = probs[(j / k) * E + e];
            ahead += drop == TESS_NN_MOE_DROP_POSITION ? j < i : (pj > pi || (pj == pi && j < i));
        }
        keep[i] = drop == TESS_NN_MOE_DROP_NONE || cap < 0 || ahead < cap;
    }
}

/* ---------- balancing ---------- */

void tess_nn_moe_counts(int64_t *counts, const int32_t *topk, int64_t N, int64_t E, int64_t k) {
    memset(counts, 0, (size_t)E * sizeof *counts);
    for (int64_t i = 0; i < N * k; i++) counts[topk[i]]++;
}

float tess_nn_moe_lb_forward(const float *probs, const int64_t *counts, int64_t N, int64_t Ntot,
                             int64_t E, int64_t k) {
    double l = 0.0;
    for (int64_t e = 0; e < E; e++) {
        double P = 0.0;
        for (int64_t t = 0; t < N; t++) P += probs[t * E + e];
        l += (double)counts[e] * P;
    }
    return (float)(l * (double)E / ((double)k * (double)Ntot * (double)N));
}

void tess_nn_moe_lb_backward(float *dprobs, float dloss, const int64_t *counts, int64_t N,
                             int64_t Ntot, int64_t E, int64_t k) {
    tess_nn_moe_lb_backward_rows(dprobs, dloss, counts, 0, N, N, Ntot, E, k);
}

void tess_nn_moe_lb_backward_rows(float *dprobs, float dloss, const int64_t *counts, int64_t t0,
                                  int64_t t1, int64_t N, int64_t Ntot, int64_t E, int64_t k) {
    const double s = (double)dloss * (double)E / ((double)k * (double)Ntot * (double)N);
    for (int64_t t = t0; t < t1; t++)
        for (int64_t e = 0; e < E; e++) dprobs[t * E + e] += (float)(s * (double)counts[e]);
}

float tess_nn_moe_zloss_forward(const float *lse, int64_t N) {
    double l = 0.0;
    for (int64_t t = 0; t < N; t++) l += (double)lse[t] * lse[t];
    return (float)(l / (double)N);
}

void tess_nn_moe_zloss_backward(float *dlogits, float dloss, const float *probs, const float *lse,
                                int64_t N, int64_t E) {
    tess_nn_moe_zloss_backward_rows(dlogits, dloss, probs, lse, 0, N, N, E);
}

void tess_nn_moe_zloss_backward_rows(float *dlogits, float dloss, const float *probs,
                                     const float *lse, int64_t t0, int64_t t1, int64_t N,
                                     int64_t E) {
    for (int64_t t = t0; t < t1; t++) {
        const float s = (float)(2.0 * dloss * lse[t] / (double)N);
        for (int64_t e = 0; e < E; e++) dlogits[t * E + e] += s * probs[t * E + e];
    }
}

void tess_nn_moe_bias_update(float *bias, const int64_t *counts, int64_t E, float rate) {
    double mean = 0.0;
    for (int64_t e = 0; e < E; e++) mean += (double)counts[e];
    mean /= (double)E;
    for (int64_t e = 0; e < E; e++) {
        double d = mean - (double)counts[e];
        bias[e] += d > 0 ? rate : (d < 0 ? -rate : 0.0f);
    }
}

/* ---------- R_cp ---------- */

float tess_nn_moe_rcp_forward(const float *mass_a, const float *mass_b, int64_t N) {
    double j = 0.0;
    for (int64_t t = 0; t < N; t++) j += (double)mass_a[t] * mass_b[t];
    return (float)(-j / (double)N);
}

void tess_nn_moe_rcp_backward(float *dmass_a, float *dmass_b, float dloss, const float *mass_a,
                              const float *mass_b, int64_t N) {
    tess_nn_moe_rcp_backward_rows(dmass_a, dmass_b, dloss, mass_a, mass_b, 0, N, N);
}

void tess_nn_moe_rcp_backward_rows(float *dmass_a, float *dmass_b, float dloss,
                                   const float *mass_a, const float *mass_b, int64_t t0,
                                   int64_t t1, int64_t N) {
    const float s = (float)(-(double)dloss / (double)N);
    for (int64_t t = t0; t < t1; t++) {
        if (dmass_a) dmass_a[t] += s * mass_b[t];
        if (dmass_b) dmass_b[t] += s * mass_a[t];
    }
}

/* The pair terms of one token: sum_{e in K^a} sum_{v in K^b} p^a_e p^b_v chat_ev in double. */
static double token_rcp_id(const float *pa, const int32_t *ka, const float *pb,
                           const int32_t *kb, const float *chat, int64_t E, int64_t k) {
    double j = 0.0;
    for (int64_t s = 0; s < k; s++) {
        double row = 0.0; /* sum_v p^b_v chat_ev for e = ka[s] */
        for (int64_t r = 0; r < k; r++) row += (double)pb[kb[r]] * chat[ka[s] * E + kb[r]];
        j += (double)pa[ka[s]] * row;
    }
    return j;
}

float tess_nn_moe_rcp_id_forward(const float *probs_a, const int32_t *topk_a,
                                 const float *probs_b, const int32_t *topk_b, const float *chat,
                                 int64_t N, int64_t E, int64_t k) {
    double j = 0.0;
    for (int64_t t = 0; t < N; t++)
        j += token_rcp_id(probs_a + t * E, topk_a + t * k, probs_b + t * E, topk_b + t * k, chat,
                          E, k);
    return (float)(-j / (double)N);
}

void tess_nn_moe_rcp_id_backward_rows(float *dprobs_a, float *dprobs_b, float dloss,
                                      const float *probs_a, const int32_t *topk_a,
                                      const float *probs_b, const int32_t *topk_b,
                                      const float *chat, int64_t t0, int64_t t1, int64_t N,
                                      int64_t E, int64_t k) {
    const double s = -(double)dloss / (double)N;
    for (int64_t t = t0; t < t1; t++) {
        const float *pa = probs_a + t * E, *pb = probs_b + t * E;
        const int32_t *ka = topk_a + t * k, *kb = topk_b + t * k;
        for (int64_t q = 0; q < k; q++) {
            double ga = 0.0, gb = 0.0; /* sum_v p^b_v chat_{ka[q] v}, sum_e p^a_e chat_{e kb[q]} */
            for (int64_t r = 0; r < k; r++) {
                ga += (double)pb[kb[r]] * chat[ka[q] * E + kb[r]];
                gb += (double)pa[ka[r]] * chat[ka[r] * E + kb[q]];
            }
            if (dprobs_a) dprobs_a[t * E + ka[q]] += (float)(s * ga);
            if (dprobs_b) dprobs_b[t * E + kb[q]] += (float)(s * gb);
        }
    }
}

void tess_nn_moe_cooc_counts(int64_t *counts, const int32_t *topk_a, const int32_t *topk_b,
                             int64_t N, int64_t E, int64_t k) {
    for (int64_t t = 0; t < N; t++)
        for (int64_t s = 0; s < k; s++)
            for (int64_t r = 0; r < k; r++) counts[topk_a[t * k + s] * E + topk_b[t * k + r]]++;
}

void tess_nn_moe_cooc_update(float *chat, const int64_t *counts, int64_t E, float decay) {
    double total = 0.0;
    for (int64_t i = 0; i < E * E; i++) total += (double)counts[i];
    if (total <= 0.0) return;
    const double scale = (double)(E * E) / total;
    for (int64_t i = 0; i < E * E; i++)
        chat[i] = (float)((double)decay * chat[i] + (1.0 - decay) * scale * (double)counts[i]);
}

/* ---------- R_sp ---------- */

static float phi_value(tess_nn_moe_phi phi, float c) {
    return phi == TESS_NN_MOE_PHI_SQ ? c * c : (phi == TESS_NN_MOE_PHI_ABS ? fabsf(c) : c);
}
static float phi_slope(tess_nn_moe_phi phi, float c) {
    return phi == TESS_NN_MOE_PHI_SQ ? 2.0f * c
                                     : (phi == TESS_NN_MOE_PHI_ABS ? (c > 0 ? 1.0f : (c < 0 ? -1.0f : 0.0f))
                                                                   : 1.0f);
}

/* Whether slots s, r of a token (rows (k), grp (k) or NULL) form a pair of R_sp: both kept and,
 * with grp, in different groups. */
static inline bool pair_on(const int32_t *rows, const int32_t *grp, int64_t s, int64_t r) {
    return rows[s] >= 0 && rows[r] >= 0 && (!grp || grp[s] != grp[r]);
}

/* <u, v> over n floats in 16 single-precision lanes (blocks of a known trip count, vectorised
 * at -O2 like tess_tensor_axpy), the lanes added in double: each lane sums n/16 products, so for
 * R_sp's rows (n = F in the hundreds) the relative error stays near 1e-7, far inside the 1e-5 of
 * the _ref comparisons, at half the work of double lanes. */
#define MOE_DOT_LANES 16
/* Slots per token handled by the fast R_sp without allocation. */
#define MOE_KMAX 16
static inline void dot_block(float *restrict acc, const float *restrict u,
                             const float *restrict v) {
    for (int i = 0; i < MOE_DOT_LANES; i++) acc[i] += u[i] * v[i];
}
static float dot_f32(const float *u, const float *v, int64_t n) {
    float acc[MOE_DOT_LANES] = {0};
    int64_t i = 0;
    for (; i + MOE_DOT_LANES <= n; i += MOE_DOT_LANES) dot_block(acc, u + i, v + i);
    double t = 0.0;
    for (; i < n; i++) t += (double)u[i] * v[i];
    for (int j = 0; j < MOE_DOT_LANES; j++) t += acc[j];
    return (float)t;
}

/* out = {<u,u>, <v,v>, <u,v>} in one pass over u and v, each as dot_f32 computes it (same lanes,
 * same order: a norm does not depend on the row it was paired with). */
static inline void dot3_block(float *restrict uu, float *restrict vv, float *restrict uv,
                              const float *restrict u, const float *restrict v) {
    for (int i = 0; i < MOE_DOT_LANES; i++) {
        uu[i] += u[i] * u[i];
        vv[i] += v[i] * v[i];
        uv[i] += u[i] * v[i];
    }
}
static void dot3_f32(float out[3], const float *u, const float *v, int64_t n) {
    float uu[MOE_DOT_LANES] = {0}, vv[MOE_DOT_LANES] = {0}, uv[MOE_DOT_LANES] = {0};
    int64_t i = 0;
    for (; i + MOE_DOT_LANES <= n; i += MOE_DOT_LANES) dot3_block(uu, vv, uv, u + i, v + i);
    double t[3] = {0.0, 0.0, 0.0};
    for (; i < n; i++) {
        t[0] += (double)u[i] * u[i];
        t[1] += (double)v[i] * v[i];
        t[2] += (double)u[i] * v[i];
    }
    for (int j = 0; j < MOE_DOT_LANES; j++) t[0] += uu[j], t[1] += vv[j], t[2] += uv[j];
    for (int j = 0; j < 3; j++) out[j] = (float)t[j];
}

void tess_nn_moe_router_logits(float *h, const float *x, const float *w, int64_t N, int64_t C,
                               int64_t E) {
    /* h (N,E); x (N,C); w (E,C) */
    for (int64_t t = 0; t < N; t++)
        for (int64_t e = 0; e < E; e++) h[t * E + e] = dot_f32(x + t * C, w + e * C, C);
}

void tess_nn_moe_router_input_grad(float *dx, const float *dlogits, const float *w, int64_t N,
                                   int64_t C, int64_t E, float beta) {
    /* dx (N,C); dlogits (N,E); w (E,C) */
    TESS_ASSERT(beta == 0.0f || beta == 1.0f);
    for (int64_t t = 0; t < N; t++) {
        float *restrict d = dx + t * C;
        const float *dl = dlogits + t * E;
        if (beta == 0.0f) memset(d, 0, (size_t)C * sizeof(float));
        for (int64_t e = 0; e < E; e++) {
            const float g = dl[e], *restrict we = w + e * C;
            for (int64_t c = 0; c < C; c++) d[c] += g * we[c];
        }
    }
}

/* One token's slots: norms nrm (k) and the cosine matrix cs (k,k) of its z rows, for the pairs
 * pair_on (others: c = 0). With a cache row (tess_nn_moe_rsp_cache_floats(k): the k norms, then
 * the cosines of the pairs s < r in row-major order) read it (from), or also write it (keep). */
static void token_cos(float *nrm, float *cs, const float *z, const int32_t *rows,
                      const int32_t *grp, int64_t k, int64_t F, const float *from, float *keep) {
    if (from) {
        for (int64_t s = 0, p = k; s < k; s++) {
            nrm[s] = from[s];
            cs[s * k + s] = 0.0f;
            for (int64_t r = s + 1; r < k; r++, p++) cs[s * k + r] = cs[r * k + s] = from[p];
        }
        return;
    }
    /* a slot's norm is computed with its first pair (one pass for both rows and their dot
     * product when neither norm is known: k = 2); slots in no pair (dropped, or with grp in no
     * split pair, whose z may not be there) keep 0 */
    bool known[MOE_KMAX];
    for (int64_t s = 0; s < k; s++) nrm[s] = 0.0f, cs[s * k + s] = 0.0f, known[s] = false;
    for (int64_t s = 0; s < k; s++)
        for (int64_t r = s + 1; r < k; r++) {
            cs[s * k + r] = cs[r * k + s] = 0.0f;
            if (!pair_on(rows, grp, s, r)) continue;
            const float *u = z + (int64_t)rows[s] * F, *v = z + (int64_t)rows[r] * F;
            float d;
            if (!known[s] && !known[r]) {
                float g[3];
                dot3_f32(g, u, v, F);
                nrm[s] = sqrtf(g[0]), nrm[r] = sqrtf(g[1]), d = g[2];
            } else {
                if (!known[s]) nrm[s] = sqrtf(dot_f32(u, u, F));
                if (!known[r]) nrm[r] = sqrtf(dot_f32(v, v, F));
                d = dot_f32(u, v, F);
            }
            known[s] = known[r] = true;
            cs[s * k + r] = cs[r * k + s] = d / fmaxf(nrm[s] * nrm[r], TESS_NN_MOE_COS_EPS);
        }
    if (keep)
        for (int64_t s = 0, p = k; s < k; s++) {
            keep[s] = nrm[s];
            for (int64_t r = s + 1; r < k; r++, p++) keep[p] = cs[s * k + r];
        }
}

/* A pair's gradient in one pass over its rows: du (n) += a v - bu u, dv (n) += a u - bv v, in
 * blocks of a known trip count (vectorised at -O2, as tess_tensor_axpy); du, dv, u, v four
 * distinct rows. set_u, set_v: that row is written (=) instead, not read (constants where
 * inlined). */
static inline __attribute__((always_inline)) void pair_grad_block(
    float *restrict du, float *restrict dv, float a, float bu, float bv, const float *restrict u,
    const float *restrict v, int64_t m, const bool set_u, const bool set_v) {
    for (int64_t i = 0; i < m; i++) {
        const float gu = a * v[i] - bu * u[i], gv = a * u[i] - bv * v[i];
        du[i] = set_u ? gu : du[i] + gu;
        dv[i] = set_v ? gv : dv[i] + gv;
    }
}
static inline __attribute__((always_inline)) void pair_grad_sets(
    float *du, float *dv, float a, float bu, float bv, const float *u, const float *v, int64_t n,
    const bool set_u, const bool set_v) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        pair_grad_block(du + i, dv + i, a, bu, bv, u + i, v + i, 16, set_u, set_v);
    pair_grad_block(du + i, dv + i, a, bu, bv, u + i, v + i, n - i, set_u, set_v);
}
static void pair_grad(float *du, float *dv, float a, float bu, float bv, const float *u,
                      const float *v, int64_t n, bool set_u, bool set_v) {
    if (set_u && set_v) pair_grad_sets(du, dv, a, bu, bv, u, v, n, true, true);
    else if (set_u) pair_grad_sets(du, dv, a, bu, bv, u, v, n, true, false);
    else if (set_v) pair_grad_sets(du, dv, a, bu, bv, u, v, n, false, true);
    else pair_grad_sets(du, dv, a, bu, bv, u, v, n, false, false);
}

float tess_nn_moe_rsp_forward(const float *z, const int32_t *row_of, int64_t N, int64_t k,
                              int64_t F, tess_nn_moe_phi phi) {
    TESS_ASSERT(k >= 2 && k <= MOE_KMAX);
    float nrm[MOE_KMAX], cs[MOE_KMAX * MOE_KMAX];
    double acc = 0.0;
    for (int64_t t = 0; t < N; t++) {
        const int32_t *rows = row_of + t * k;
        token_cos(nrm, cs, z, rows, NULL, k, F, NULL, NULL);
        for (int64_t s = 0; s < k; s++)
            for (int64_t r = s + 1; r < k; r++)
                if (rows[s] >= 0 && rows[r] >= 0) acc += 2.0 * phi_value(phi, cs[s * k + r]);
    }
    return (float)(acc / ((double)N * (double)(k * (k - 1))));
}

void tess_nn_moe_rsp_sums(double sums[TESS_NN_MOE_PHI_COUNT], float *cache, const float *z,
                          const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k,
                          int64_t F) {
    TESS_ASSERT(k >= 2 && k <= MOE_KMAX);
    if (cache) { /* the cosines first, then their sums: the same values as in one pass */
        tess_nn_moe_rsp_cache(cache, z, row_of, grp, 0, N, k, F);
        tess_nn_moe_rsp_sums_cached(sums, cache, row_of, grp, N, k);
        return;
    }
    float nrm[MOE_KMAX], cs[MOE_KMAX * MOE_KMAX];
    double acc[TESS_NN_MOE_PHI_COUNT] = {0};
    for (int64_t t = 0; t < N; t++) {
        const int32_t *rows = row_of + t * k, *g = grp ? grp + t * k : NULL;
        token_cos(nrm, cs, z, rows, g, k, F, NULL, NULL);
        for (int64_t s = 0; s < k; s++)
            for (int64_t r = s + 1; r < k; r++)
                if (pair_on(rows, g, s, r))
                    for (int p = 0; p < TESS_NN_MOE_PHI_COUNT; p++)
                        acc[p] += 2.0 * phi_value((tess_nn_moe_phi)p, cs[s * k + r]);
    }
    for (int p = 0; p < TESS_NN_MOE_PHI_COUNT; p++) sums[p] = acc[p] / (double)(k * (k - 1));
}

void tess_nn_moe_rsp_cache(float *cache, const float *z, const int32_t *row_of,
                           const int32_t *grp, int64_t t0, int64_t t1, int64_t k, int64_t F) {
    TESS_ASSERT(k >= 2 && k <= MOE_KMAX);
    const int64_t cw = tess_nn_moe_rsp_cache_floats(k);
    float nrm[MOE_KMAX], cs[MOE_KMAX * MOE_KMAX];
    for (int64_t t = t0; t < t1; t++)
        token_cos(nrm, cs, z, row_of + t * k, grp ? grp + t * k : NULL, k, F, NULL,
                  cache + t * cw);
}

void tess_nn_moe_rsp_sums_cached(double sums[TESS_NN_MOE_PHI_COUNT], const float *cache,
                                 const int32_t *row_of, const int32_t *grp, int64_t N,
                                 int64_t k) {
    TESS_ASSERT(k >= 2 && k <= MOE_KMAX);
    const int64_t cw = tess_nn_moe_rsp_cache_floats(k);
    double acc[TESS_NN_MOE_PHI_COUNT] = {0};
    for (int64_t t = 0; t < N; t++) {
        const int32_t *rows = row_of + t * k, *g = grp ? grp + t * k : NULL;
        for (int64_t s = 0, q = k; s < k; s++)
            for (int64_t r = s + 1; r < k; r++, q++)
                if (pair_on(rows, g, s, r))
                    for (int p = 0; p < TESS_NN_MOE_PHI_COUNT; p++)
                        acc[p] += 2.0 * phi_value((tess_nn_moe_phi)p, cache[t * cw + q]);
    }
    for (int p = 0; p < TESS_NN_MOE_PHI_COUNT; p++) sums[p] = acc[p] / (double)(k * (k - 1));
}

void tess_nn_moe_rsp_sums_ref(double sums[TESS_NN_MOE_PHI_COUNT], const float *z,
                              const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k,
                              int64_t F) {
    /* Every ordered pair, in double. */
    for (int p = 0; p < TESS_NN_MOE_PHI_COUNT; p++) sums[p] = 0.0;
    for (int64_t t = 0; t < N; t++)
        for (int64_t s = 0; s < k; s++)
            for (int64_t r = 0; r < k; r++) {
                const int64_t ru = row_of[t * k + s], rv = row_of[t * k + r];
                if (r == s || ru < 0 || rv < 0 || (grp && grp[t * k + s] == grp[t * k + r]))
                    continue;
                double uv = 0, uu = 0, vv = 0;
                for (int64_t f = 0; f < F; f++) {
                    uv += (double)z[ru * F + f] * z[rv * F + f];
                    uu += (double)z[ru * F + f] * z[ru * F + f];
                    vv += (double)z[rv * F + f] * z[rv * F + f];
                }
                const double c = uv / fmax(sqrt(uu) * sqrt(vv), TESS_NN_MOE_COS_EPS);
                sums[TESS_NN_MOE_PHI_SQ] += c * c / (double)(k * (k - 1));
                sums[TESS_NN_MOE_PHI_ABS] += fabs(c) / (double)(k * (k - 1));
                sums[TESS_NN_MOE_PHI_SIGNED] += c / (double)(k * (k - 1));
            }
}

void tess_nn_moe_rsp_backward(float *dz, float dloss, const float *z, const int32_t *row_of,
                              int64_t N, int64_t k, int64_t F, tess_nn_moe_phi phi) {
    tess_nn_moe_rsp_backward_grp(dz, dloss, NULL, z, row_of, NULL, N, k, F, phi);
}

void tess_nn_moe_rsp_backward_grp(float *dz, float dloss, const float *cache, const float *z,
                                  const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k,
                                  int64_t F, tess_nn_moe_phi phi) {
    tess_nn_moe_rsp_backward_rows(dz, dloss, cache, z, row_of, grp, 0, N, N, k, F, phi);
}

/* rsp_backward_rows (set false: += into dz) or written (set: the first pair of a row writes it,
 * later pairs add); zero_unpaired: a kept slot in no pair gets zeros, else it is not touched. */
static void rsp_backward_tokens(float *dz, float dloss, const float *cache, const float *z,
                                const int32_t *row_of, const int32_t *grp, int64_t t0, int64_t t1,
                                int64_t N, int64_t k, int64_t F, tess_nn_moe_phi phi, bool set,
                                bool zero_unpaired) {
    /* Unordered pair {s,r} counted twice: dR/du = 2 phi'(c) dc/du / (N k (k-1)), with
     * dc/du = v/den - c u/|u|^2 when the denominator is |u||v| (unclamped), v/den otherwise;
     * dR/dv likewise, both in one pass (pair_grad). */
    TESS_ASSERT(k >= 2 && k <= MOE_KMAX);
    const int64_t cw = tess_nn_moe_rsp_cache_floats(k);
    float nrm[MOE_KMAX], cs[MOE_KMAX * MOE_KMAX];
    bool added[MOE_KMAX]; /* set: the slot's row holds a gradient already */
    const double w = 2.0 * (double)dloss / ((double)N * (double)(k * (k - 1)));
    for (int64_t t = t0; t < t1; t++) {
        const int32_t *rows = row_of + t * k, *g = grp ? grp + t * k : NULL;
        token_cos(nrm, cs, z, rows, g, k, F, cache ? cache + t * cw : NULL, NULL);
        for (int64_t s = 0; s < k; s++) added[s] = !set;
        for (int64_t s = 0; s < k; s++)
            for (int64_t r = s + 1; r < k; r++) {
                if (!pair_on(rows, g, s, r)) continue;
                const float *u = z + (int64_t)rows[s] * F, *v = z + (int64_t)rows[r] * F;
                const float c = cs[s * k + r], prod = nrm[s] * nrm[r];
                const float a = (float)(w * phi_slope(phi, c));
                const bool clamped = prod < TESS_NN_MOE_COS_EPS;
                const float bu = clamped ? 0.0f : a * c / (nrm[s] * nrm[s]);
                const float bv = clamped ? 0.0f : a * c / (nrm[r] * nrm[r]);
                pair_grad(dz + (int64_t)rows[s] * F, dz + (int64_t)rows[r] * F,
                          a / (clamped ? TESS_NN_MOE_COS_EPS : prod), bu, bv, u, v, F, !added[s],
                          !added[r]);
                added[s] = added[r] = true;
            }
        for (int64_t s = 0; s < k && zero_unpaired; s++)
            if (!added[s] && rows[s] >= 0)
                memset(dz + (int64_t)rows[s] * F, 0, (size_t)F * sizeof(float));
    }
}

void tess_nn_moe_rsp_backward_rows(float *dz, float dloss, const float *cache, const float *z,
                                   const int32_t *row_of, const int32_t *grp, int64_t t0,
                                   int64_t t1, int64_t N, int64_t k, int64_t F,
                                   tess_nn_moe_phi phi) {
    rsp_backward_tokens(dz, dloss, cache, z, row_of, grp, t0, t1, N, k, F, phi, false, false);
}

void tess_nn_moe_rsp_backward_rows_set(float *dz, float dloss, const float *cache,
                                       const float *z, const int32_t *row_of, const int32_t *grp,
                                       int64_t t0, int64_t t1, int64_t N, int64_t k, int64_t F,
                                       tess_nn_moe_phi phi) {
    rsp_backward_tokens(dz, dloss, cache, z, row_of, grp, t0, t1, N, k, F, phi, true, true);
}

void tess_nn_moe_rsp_backward_set(float *dz, float dloss, const float *cache, const float *z,
                                  const int32_t *row_of, const int32_t *grp, int64_t N, int64_t k,
                                  int64_t F, tess_nn_moe_phi phi) {
    rsp_backward_tokens(dz, dloss, cache, z, row_of, grp, 0, N, N, k, F, phi, true, false);
}

float tess_nn_moe_rsp_forward_ref(const float *z, const int32_t *row_of, int64_t N, int64_t k,
                                  int64_t F, tess_nn_moe_phi phi) {
    /* Every ordered pair, in double. */
    double acc = 0.0;
    for (int64_t t = 0; t < N; t++)
        for (int64_t s = 0; s < k; s++)
            for (int64_t r = 0; r < k; r++) {
                if (r == s || row_of[t * k + s] < 0 || row_of[t * k + r] < 0) continue;
                const float *u = z + (int64_t)row_of[t * k + s] * F;
                const float *v = z + (int64_t)row_of[t * k + r] * F;
                double uv = 0, uu = 0, vv = 0;
                for (int64_t f = 0; f < F; f++) {
                    uv += (double)u[f] * v[f];
                    uu += (double)u[f] * u[f];
                    vv += (double)v[f] * v[f];
                }
                double c = uv / fmax(sqrt(uu) * sqrt(vv), TESS_NN_MOE_COS_EPS);
                acc += phi == TESS_NN_MOE_PHI_SQ ? c * c : (phi == TESS_NN_MOE_PHI_ABS ? fabs(c) : c);
            }
    return (float)(acc / ((double)N * (double)(k * (k - 1))));
}

void tess_nn_moe_rsp_backward_ref(float *dz, float dloss, const float *z, const int32_t *row_of,
                                  int64_t N, int64_t k, int64_t F, tess_nn_moe_phi phi) {
    tess_nn_moe_rsp_backward_grp_ref(dz, dloss, z, row_of, NULL, N, k, F, phi);
}

void tess_nn_moe_rsp_backward_grp_ref(float *dz, float dloss, const float *z,
                                      const int32_t *row_of, const int32_t *grp, int64_t N,
                                      int64_t k, int64_t F, tess_nn_moe_phi phi) {
    /* Every ordered pair (s, r) contributes phi'(c) dc/du to u and phi'(c) dc/dv to v, in double. */
    const double w = (double)dloss / ((double)N * (double)(k * (k - 1)));
    for (int64_t t = 0; t < N; t++)
        for (int64_t s = 0; s < k; s++)
            for (int64_t r = 0; r < k; r++) {
                const int64_t ru = row_of[t * k + s], rv = row_of[t * k + r];
                if (r == s || ru < 0 || rv < 0 || (grp && grp[t * k + s] == grp[t * k + r]))
                    continue;
                const float *u = z + ru * F, *v = z + rv * F;
                double uv = 0, uu = 0, vv = 0;
                for (int64_t f = 0; f < F; f++) {
                    uv += (double)u[f] * v[f];
                    uu += (double)u[f] * u[f];
                    vv += (double)v[f] * v[f];
                }
                const double prod = sqrt(uu) * sqrt(vv);
                const bool clamped = prod < TESS_NN_MOE_COS_EPS;
                const double dn = clamped ? TESS_NN_MOE_COS_EPS : prod, c = uv / dn;
                const double sl = phi == TESS_NN_MOE_PHI_SQ ? 2 * c
                                  : phi == TESS_NN_MOE_PHI_ABS ? (c > 0 ? 1 : (c < 0 ? -1 : 0))
                                                               : 1;
                for (int64_t f = 0; f < F; f++) {
                    double gu = v[f] / dn - (clamped ? 0 : c * u[f] / uu);
                    double gv = u[f] / dn - (clamped ? 0 : c * v[f] / vv);
                    dz[ru * F + f] += (float)(w * sl * gu);
                    dz[rv * F + f] += (float)(w * sl * gv);
                }
            }
}

/* ---------- the baselines of Guo et al. ---------- */

/* Solve (G + eps I) w = b for the m x m Gram block G (row stride ld), by Cholesky in double;
 * L (m,m) scratch. G + eps I is positive definite for eps > 0. */
static void ridge_solve(double *w, double *L, const double *G, int64_t ld, const double *b,
                        int64_t m) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j <= i; j++) {
            double v = G[i * ld + j] + (i == j ? TESS_NN_MOE_ORTHO_EPS : 0.0);
            for (int64_t q = 0; q < j; q++) v -= L[i * m + q] * L[j * m + q];
            L[i * m + j] = i == j ? sqrt(v) : v / L[j * m + j];
        }
    for (int64_t i = 0; i < m; i++) { /* L u = b */
        double v = b[i];
        for (int64_t q = 0; q < i; q++) v -= L[i * m + q] * w[q];
        w[i] = v / L[i * m + i];
    }
    for (int64_t i = m - 1; i >= 0; i--) { /* L^T w = u */
        double v = w[i];
        for (int64_t q = i + 1; q < m; q++) v -= L[q * m + i] * w[q];
        w[i] = v / L[i * m + i];
    }
}

/* One token's kept rows (up to k) into kr, their Gram matrix (n,n) into G; returns n. */
static int64_t token_gram(int32_t *kr, double *G, const float *y, const int32_t *rows, int64_t k,
                          int64_t C) {
    int64_t n = 0;
    for (int64_t s = 0; s < k; s++)
        if (rows[s] >= 0) kr[n++] = rows[s];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++) {
            const float *u = y + (int64_t)kr[i] * C, *v = y + (int64_t)kr[j] * C;
            double d = 0.0;
            for (int64_t c = 0; c < C; c++) d += (double)u[c] * v[c];
            G[i * MOE_KMAX + j] = G[j * MOE_KMAX + i] = d;
        }
    return n;
}

/* For kept slot s of n: the Gram block of the others (n-1, n-1) into Go, b into bo, and w. */
static void others_solve(double *w, double *Go, double *bo, double *L, const double *G, int64_t n,
                         int64_t s) {
    for (int64_t i = 0, ii = 0; i < n; i++) {
        if (i == s) continue;
        bo[ii] = G[i * MOE_KMAX + s];
        for (int64_t j = 0, jj = 0; j < n; j++) {
            if (j == s) continue;
            Go[ii * (n - 1) + jj++] = G[i * MOE_KMAX + j];
        }
        ii++;
    }
    ridge_solve(w, L, Go, n - 1, bo, n - 1);
}

float tess_nn_moe_ortho_forward(const float *y, const int32_t *row_of, int64_t N, int64_t k,
                                int64_t C) {
    TESS_ASSERT(k >= 2 && k <= MOE_KMAX);
    double G[MOE_KMAX * MOE_KMAX], Go[MOE_KMAX * MOE_KMAX], L[MOE_KMAX * MOE_KMAX];
    double bo[MOE_KMAX], w[MOE_KMAX], acc = 0.0;
    int32_t kr[MOE_KMAX];
    for (int64_t t = 0; t < N; t++) {
        const int64_t n = token_gram(kr, G, y, row_of + t * k, k, C);
        for (int64_t s = 0; n >= 2 && s < n; s++) {
            others_solve(w, Go, bo, L, G, n, s);
            for (int64_t j = 0; j < n - 1; j++) acc += w[j] * bo[j];
        }
    }
    return (float)(acc / ((double)N * (double)k));
}

void tess_nn_moe_ortho_backward(float *dy, float dloss, const float *y, const int32_t *row_of,
                                int64_t N, int64_t k, int64_t C) {
    TESS_ASSERT(k >= 2 && k <= MOE_KMAX);
    double G[MOE_KMAX * MOE_KMAX], Go[MOE_KMAX * MOE_KMAX], L[MOE_KMAX * MOE_KMAX];
    double bo[MOE_KMAX], w[MOE_KMAX];
    int32_t kr[MOE_KMAX];
    const double sc = 2.0 * (double)dloss / ((double)N * (double)k);
    for (int64_t t = 0; t < N; t++) {
        const int64_t n = token_gram(kr, G, y, row_of + t * k, k, C);
        for (int64_t s = 0; n >= 2 && s < n; s++) {
            others_solve(w, Go, bo, L, G, n, s);
            const float *ys = y + (int64_t)kr[s] * C;
            float *dys = dy + (int64_t)kr[s] * C;
            for (int64_t c = 0; c < C; c++) {
                /* p = A w (the projection); dy_s += sc p; dy_j += sc w_j (y_s - p) */
                double p = 0.0;
                for (int64_t i = 0, j = 0; i < n; i++)
                    if (i != s) p += w[j++] * y[(int64_t)kr[i] * C + c];
                dys[c] += (float)(sc * p);
                const double r = (double)ys[c] - p;
                for (int64_t i = 0, j = 0; i < n; i++)
                    if (i != s) dy[(int64_t)kr[i] * C + c] += (float)(sc * w[j++] * r);
            }
        }
    }
}

float tess_nn_moe_ortho_forward_ref(const float *y, const int32_t *row_of, int64_t N, int64_t k,
                                    int64_t C) {
    double acc = 0.0;
    double *basis = malloc((size_t)(k * C) * sizeof *basis);
    TESS_ASSERT(basis);
    for (int64_t t = 0; t < N; t++)
        for (int64_t s = 0; s < k; s++) {
            if (row_of[t * k + s] < 0) continue;
            int64_t nb = 0;
            for (int64_t r = 0; r < k; r++) {
                if (r == s || row_of[t * k + r] < 0) continue;
                double *u = basis + nb * C, len = 0.0, res = 0.0;
                for (int64_t c = 0; c < C; c++) {
                    u[c] = y[(int64_t)row_of[t * k + r] * C + c];
                    len += u[c] * u[c];
                }
                for (int64_t q = 0; q < nb; q++) {
                    double d = 0.0;
                    for (int64_t c = 0; c < C; c++) d += basis[q * C + c] * u[c];
                    for (int64_t c = 0; c < C; c++) u[c] -= d * basis[q * C + c];
                }
                for (int64_t c = 0; c < C; c++) res += u[c] * u[c];
                if (res <= 1e-24 * len || res == 0.0) continue;
                for (int64_t c = 0; c < C; c++) u[c] /= sqrt(res);
                nb++;
            }
            const float *ys = y + (int64_t)row_of[t * k + s] * C;
            for (int64_t q = 0; q < nb; q++) {
                double d = 0.0;
                for (int64_t c = 0; c < C; c++) d += basis[q * C + c] * ys[c];
                acc += d * d;
            }
        }
    free(basis);
    return (float)(acc / ((double)N * (double)k));
}

float tess_nn_moe_variance_forward(const float *probs, int64_t N, int64_t E) {
    TESS_ASSERT(E >= 2);
    double acc = 0.0;
    for (int64_t t = 0; t < N; t++) {
        const float *p = probs + t * E;
        double mean = 0.0, v = 0.0;
        for (int64_t e = 0; e < E; e++) mean += p[e];
        mean /= (double)E;
        for (int64_t e = 0; e < E; e++) v += ((double)p[e] - mean) * ((double)p[e] - mean);
        acc += v / (double)(E - 1);
    }
    return (float)(acc / (double)N);
}

void tess_nn_moe_variance_backward(float *dprobs, float dloss, const float *probs, int64_t N,
                                   int64_t E) {
    tess_nn_moe_variance_backward_rows(dprobs, dloss, probs, 0, N, N, E);
}

void tess_nn_moe_variance_backward_rows(float *dprobs, float dloss, const float *probs,
                                        int64_t t0, int64_t t1, int64_t N, int64_t E) {
    TESS_ASSERT(E >= 2);
    const double sc = 2.0 * (double)dloss / ((double)(E - 1) * (double)N);
    for (int64_t t = t0; t < t1; t++) {
        const float *p = probs + t * E;
        double mean = 0.0;
        for (int64_t e = 0; e < E; e++) mean += p[e];
        mean /= (double)E;
        for (int64_t e = 0; e < E; e++) dprobs[t * E + e] += (float)(sc * ((double)p[e] - mean));
    }
}

/* ---------- one expert ---------- */

void tess_nn_moe_expert_forward(float *y, float *a, float *b, float *z, const float *x,
                                const float *w_gate, const float *w_up, const float *w_down,
                                int64_t n, int64_t C, int64_t F) {
    if (n == 0) return;
    tess_nn_linear_tiles_forward(a, x, w_gate, NULL, n, C, F);
    tess_nn_linear_tiles_forward(b, x, w_up, NULL, n, C, F);
    tess_nn_swiglu_gate_forward(z, a, b, n * F);
    tess_nn_linear_tiles_forward(y, z, w_down, NULL, n, F, C);
}

void tess_nn_moe_expert_backward(float *dx, float *dw_gate, float *dw_up, float *dw_down,
                                 float *dz, float *db, const float *dy, const float *x,
                                 const float *w_gate, const float *w_up, const float *w_down,
                                 const float *a, const float *b, const float *z, int64_t n,
                                 int64_t C, int64_t F, float beta_dx, float beta_dz,
                                 float beta_dw) {
    TESS_ASSERT((beta_dx == 0.0f || beta_dx == 1.0f) && (beta_dz == 0.0f || beta_dz == 1.0f) &&
                (beta_dw == 0.0f || beta_dw == 1.0f));
    if (n == 0) {
        if (beta_dw == 0.0f) {
            memset(dw_gate, 0, (size_t)(F * C) * sizeof(float));
            memset(dw_up, 0, (size_t)(F * C) * sizeof(float));
            memset(dw_down, 0, (size_t)(C * F) * sizeof(float));
        }
        return;
    }
    /* dz = beta_dz dz + dy @ w_down; dw_down = beta_dw dw_down + dy^T z */
    tess_matmul_tiles(dz, F, dy, C, w_down, F, n, F, C, false, false, 1.0f, beta_dz, NULL);
    tess_matmul_tiles(dw_down, F, dy, C, z, F, C, F, n, true, false, 1.0f, beta_dw, NULL);
    /* da (into dz) = dz * b * s (1 + a (1 - s)); db = dz * silu(a) */
    tess_nn_swiglu_gate_backward_overwrite(dz, db, a, b, n * F);
    /* dx = beta_dx dx + da @ w_gate + db @ w_up; dw_gate = beta_dw dw_gate + da^T x, dw_up
     * likewise with db */
    if (dx) {
        tess_matmul_tiles(dx, C, dz, F, w_gate, C, n, C, F, false, false, 1.0f, beta_dx, NULL);
        tess_matmul_tiles(dx, C, db, F, w_up, C, n, C, F, false, false, 1.0f, 1.0f, NULL);
    }
    tess_matmul_tiles(dw_gate, C, dz, F, x, C, F, C, n, true, false, 1.0f, beta_dw, NULL);
    tess_matmul_tiles(dw_up, C, db, F, x, C, F, C, n, true, false, 1.0f, beta_dw, NULL);
}

void tess_nn_moe_expert_forward_ref(float *y, float *a, float *b, float *z, const float *x,
                                    const float *w_gate, const float *w_up, const float *w_down,
                                    int64_t n, int64_t C, int64_t F) {
    for (int64_t i = 0; i < n; i++) {
        for (int64_t f = 0; f < F; f++) {
            double ga = 0, gb = 0;
            for (int64_t c = 0; c < C; c++) {
                ga += (double)x[i * C + c] * w_gate[f * C + c];
                gb += (double)x[i * C + c] * w_up[f * C + c];
            }
            a[i * F + f] = (float)ga;
            b[i * F + f] = (float)gb;
            z[i * F + f] = (float)(ga / (1.0 + exp(-ga)) * gb);
        }
        for (int64_t c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t f = 0; f < F; f++) acc += (double)z[i * F + f] * w_down[c * F + f];
            y[i * C + c] = (float)acc;
        }
    }
}

void tess_nn_moe_expert_backward_ref(float *dx, float *dw_gate, float *dw_up, float *dw_down,
                                     float *dz, float *db, const float *dy, const float *x,
                                     const float *w_gate, const float *w_up, const float *w_down,
                                     const float *a, const float *b, const float *z, int64_t n,
                                     int64_t C, int64_t F, float beta_dx, float beta_dz,
                                     float beta_dw) {
    for (int64_t c = 0; c < C; c++)
        for (int64_t f = 0; f < F; f++) {
            double acc = 0;
            for (int64_t i = 0; i < n; i++) acc += (double)dy[i * C + c] * z[i * F + f];
            dw_down[c * F + f] = (beta_dw != 0.0f ? dw_down[c * F + f] : 0.0f) + (float)acc;
        }
    for (int64_t i = 0; i < n; i++)
        for (int64_t f = 0; f < F; f++) {
            double d = beta_dz != 0.0f ? dz[i * F + f] : 0.0;
            for (int64_t c = 0; c < C; c++) d += (double)dy[i * C + c] * w_down[c * F + f];
            double g = a[i * F + f], s = 1.0 / (1.0 + exp(-g));
            db[i * F + f] = (float)(d * g * s);
            dz[i * F + f] = (float)(d * b[i * F + f] * s * (1.0 + g * (1.0 - s)));
        }
    for (int64_t f = 0; f < F; f++)
        for (int64_t c = 0; c < C; c++) {
            double gg = 0, gu = 0;
            for (int64_t i = 0; i < n; i++) {
                gg += (double)dz[i * F + f] * x[i * C + c];
                gu += (double)db[i * F + f] * x[i * C + c];
            }
            dw_gate[f * C + c] = (beta_dw != 0.0f ? dw_gate[f * C + c] : 0.0f) + (float)gg;
            dw_up[f * C + c] = (beta_dw != 0.0f ? dw_up[f * C + c] : 0.0f) + (float)gu;
        }
    if (dx)
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < C; c++) {
                double acc = 0;
                for (int64_t f = 0; f < F; f++)
                    acc += (double)dz[i * F + f] * w_gate[f * C + c] +
                           (double)db[i * F + f] * w_up[f * C + c];
                dx[i * C + c] = (beta_dx != 0.0f ? dx[i * C + c] : 0.0f) + (float)acc;
            }
}
