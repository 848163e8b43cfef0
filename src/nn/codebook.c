/* codebook.c - L2 normalisation, the cosine Gumbel-softmax quantiser, its regularisers and the
 * VQ-EMA alternative (see codebook.h). */
#include "nn/codebook.h"

#include <math.h>
#include <string.h>

#include "core/status.h"   /* TESS_ASSERT */
#include "tensor/matmul.h" /* tess_matmul */
#include "tensor/tensor.h" /* tess_tensor_softmax_rows, tess_tensor_dot */

/* ---- l2norm -------------------------------------------------------------------------------- */

void tess_nn_l2norm_forward(float *out, float *rnorm, const float *in, int64_t N, int64_t D,
                            float eps) {
    for (int64_t n = 0; n < N; n++) {
        double ss = 0.0;
        for (int64_t j = 0; j < D; j++) ss += (double)in[n * D + j] * in[n * D + j];
        double norm = sqrt(ss), r = 1.0 / (norm > eps ? norm : eps);
        rnorm[n] = (float)r;
        for (int64_t j = 0; j < D; j++) out[n * D + j] = (float)(in[n * D + j] * r);
    }
}

void tess_nn_l2norm_backward(float *din, const float *dout, const float *out, const float *rnorm,
                             const float *in, int64_t N, int64_t D, float eps) {
    for (int64_t n = 0; n < N; n++) {
        double ss = 0.0, dot = 0.0;
        for (int64_t j = 0; j < D; j++) {
            ss += (double)in[n * D + j] * in[n * D + j];
            dot += (double)out[n * D + j] * dout[n * D + j];
        }
        if (sqrt(ss) <= eps) dot = 0.0; /* clamped norm: out = in / eps is linear */
        for (int64_t j = 0; j < D; j++)
            din[n * D + j] += (float)((dout[n * D + j] - out[n * D + j] * dot) * rnorm[n]);
    }
}

/* ---- quantiser ----------------------------------------------------------------------------- */

/* y (N, K) = softmax((logits + G) / tau_g); ids = argmax(logits + G); q from y or ids. Each
 * row's softmax runs right after its scores are written, while the row is in L1 (one pass over
 * y instead of two; bitwise the same as softmax over all rows afterwards). */
static void quantise(float *q, const float *logits, float *y, int32_t *ids, const float *E,
                     const float *G, const tess_nn_codebook_dims *d) {
    const int64_t N = d->N, K = d->K, D = d->D;
    for (int64_t n = 0; n < N; n++) {
        float *row = y + n * K;
        int32_t best = 0;
        float bv = -INFINITY;
        for (int64_t k = 0; k < K; k++) {
            float s = logits[n * K + k] + (G ? G[n * K + k] : 0.0f);
            if (s > bv) bv = s, best = (int32_t)k;
            row[k] = s / d->tau_g;
        }
        ids[n] = best;
        tess_tensor_softmax_rows(row, row, 1, K);
    }
    if (d->mode == TESS_NN_CODEBOOK_HARD_ST) {
        for (int64_t n = 0; n < N; n++) memcpy(q + n * D, E + ids[n] * D, (size_t)D * sizeof(float));
    }
}

void tess_nn_codebook_forward(float *q, float *logits, float *y, int32_t *ids, const float *z,
                              const float *E, const float *G, const tess_nn_codebook_dims *d) {
    /* q (N, D), logits (N, K), y (N, K), ids (N), z (N, D), E (K, D), G (N, K) or NULL */
    TESS_ASSERT(d->N >= 0 && d->K > 0 && d->D > 0 && d->tau_cos > 0 && d->tau_g > 0);
    tess_matmul(logits, z, E, d->N, d->K, d->D, false, true, 1.0f / d->tau_cos, 0.0f);
    quantise(q, logits, y, ids, E, G, d);
    if (d->mode == TESS_NN_CODEBOOK_SOFT)
        tess_matmul(q, y, E, d->N, d->D, d->K, false, false, 1.0f, 0.0f);
}

void tess_nn_codebook_backward(float *dz, float *dE, float *work, const float *dq,
                               const float *dlogits, const float *z, const float *E,
                               const float *y, const tess_nn_codebook_dims *d) {
    /* dz (N, D) or NULL, dE (K, D) or NULL, work (N, K), dq (N, D), dlogits (N, K) or NULL,
     * z (N, D), E (K, D), y (N, K) */
    const int64_t N = d->N, K = d->K, D = d->D;
    if (dE) tess_matmul(dE, y, dq, K, D, N, true, false, 1.0f, 1.0f); /* dE += y^T dq */
    tess_matmul(work, dq, E, N, K, D, false, true, 1.0f, 0.0f);      /* dy = dq E^T */
    for (int64_t n = 0; n < N; n++) {
        float *g = work + n * K;
        const float *p = y + n * K;
        const double dot = tess_tensor_dot(p, g, K); /* double lanes: vectorised */
        for (int64_t k = 0; k < K; k++) {
            g[k] = (float)(p[k] * (g[k] - dot) / d->tau_g); /* dlogits from the softmax */
            if (dlogits) g[k] += dlogits[n * K + k];
        }
    }
    /* logits = z E^T / tau_cos */
    if (dz) tess_matmul(dz, work, E, N, D, K, false, false, 1.0f / d->tau_cos, 1.0f);
    if (dE) tess_matmul(dE, work, z, K, D, N, true, false, 1.0f / d->tau_cos, 1.0f);
}

void tess_nn_codebook_forward_ref(float *q, float *logits, float *y, int32_t *ids, const float *z,
                                  const float *E, const float *G, const tess_nn_codebook_dims *d) {
    const int64_t N = d->N, K = d->K, D = d->D;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            double acc = 0.0;
            for (int64_t j = 0; j < D; j++) acc += (double)z[n * D + j] * E[k * D + j];
            logits[n * K + k] = (float)(acc / d->tau_cos);
        }
    quantise(q, logits, y, ids, E, G, d);
    if (d->mode == TESS_NN_CODEBOOK_SOFT)
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < D; j++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++) acc += (double)y[n * K + k] * E[k * D + j];
                q[n * D + j] = (float)acc;
            }
}

void tess_nn_codebook_backward_ref(float *dz, float *dE, const float *dq, const float *dlogits,
                                   const float *z, const float *E, const float *y,
                                   const tess_nn_codebook_dims *d) {
    const int64_t N = d->N, K = d->K, D = d->D;
    for (int64_t n = 0; n < N; n++) {
        double dot = 0.0;
        for (int64_t k = 0; k < K; k++) {
            double dy = 0.0;
            for (int64_t j = 0; j < D; j++) dy += (double)dq[n * D + j] * E[k * D + j];
            dot += y[n * K + k] * dy;
        }
        for (int64_t k = 0; k < K; k++) {
            double dy = 0.0;
            for (int64_t j = 0; j < D; j++) dy += (double)dq[n * D + j] * E[k * D + j];
            double dl = y[n * K + k] * (dy - dot) / d->tau_g + (dlogits ? dlogits[n * K + k] : 0.0);
            for (int64_t j = 0; j < D; j++) {
                if (dz) dz[n * D + j] += (float)(dl * E[k * D + j] / d->tau_cos);
                if (dE)
                    dE[k * D + j] += (float)(dl * z[n * D + j] / d->tau_cos +
                                             (double)y[n * K + k] * dq[n * D + j]);
            }
        }
    }
}

/* ---- regularisers -------------------------------------------------------------------------- */

double tess_nn_codebook_entropy_forward(float *p, float *pbar, const float *logits, int64_t N,
                                        int64_t K) {
    tess_tensor_softmax_rows(p, logits, N, K);
    /* the column means in blocks of ENT_COLS codes, so each row contributes one contiguous run
     * (a cache line) per pass instead of one float per code; each code's sum still runs over n
     * in order, in double */
    enum { ENT_COLS = 16 };
    double h = 0.0;
    for (int64_t k0 = 0; k0 < K; k0 += ENT_COLS) {
        const int64_t nk = K - k0 < ENT_COLS ? K - k0 : ENT_COLS;
        double m[ENT_COLS] = {0};
        for (int64_t n = 0; n < N; n++) {
            const float *pr = p + n * K + k0;
            for (int64_t j = 0; j < nk; j++) m[j] += pr[j];
        }
        for (int64_t j = 0; j < nk; j++) {
            const double mj = m[j] / (double)N;
            pbar[k0 + j] = (float)mj;
            if (mj > 0.0) h -= mj * log(mj);
        }
    }
    return log((double)K) - h;
}

void tess_nn_codebook_entropy_backward(float *dlogits, float *work, float dloss, const float *p,
                                       const float *pbar, int64_t N, int64_t K) {
    /* dL/dpbar_k = g_k = log pbar_k + 1 (once per code, in work); dL/dp_nk = g_k / N; through
     * each row's softmax */
    for (int64_t k = 0; k < K; k++) work[k] = pbar[k] > 0.0f ? (float)(log((double)pbar[k]) + 1.0) : 0.0f;
    for (int64_t n = 0; n < N; n++) {
        const float *pr = p + n * K;
        const double dot = tess_tensor_dot(pr, work, K); /* double lanes: vectorised */
        const float c = (float)(dloss / (double)N), fdot = (float)dot;
        for (int64_t k = 0; k < K; k++) dlogits[n * K + k] += c * pr[k] * (work[k] - fdot);
    }
}

double tess_nn_codebook_orth_forward(float *gram, const float *E, int64_t K, int64_t D) {
    tess_matmul(gram, E, E, K, K, D, false, true, 1.0f, 0.0f);
    double s = 0.0;
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = 0; j < K; j++) {
            double v = gram[i * K + j] - (i == j ? 1.0 : 0.0);
            s += v * v;
        }
    return s / ((double)K * (double)K);
}

void tess_nn_codebook_orth_backward(float *dE, float *work, float dloss, const float *gram,
                                    const float *E, int64_t K, int64_t D) {
    for (int64_t i = 0; i < K * K; i++) work[i] = gram[i];
    for (int64_t i = 0; i < K; i++) work[i * K + i] -= 1.0f;
    tess_matmul(dE, work, E, K, D, K, false, false, 4.0f * dloss / ((float)K * (float)K), 1.0f);
}

double tess_nn_codebook_orth_forward_ref(const float *E, int64_t K, int64_t D) {
    double s = 0.0;
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = 0; j < K; j++) {
            double g = 0.0;
            for (int64_t t = 0; t < D; t++) g += (double)E[i * D + t] * E[j * D + t];
            g -= i == j ? 1.0 : 0.0;
            s += g * g;
        }
    return s / ((double)K * (double)K);
}

void tess_nn_codebook_orth_backward_ref(float *dE, float dloss, const float *E, int64_t K,
                                        int64_t D) {
    for (int64_t i = 0; i < K; i++)
        for (int64_t t = 0; t < D; t++) {
            double acc = 0.0;
            for (int64_t j = 0; j < K; j++) {
                double g = 0.0;
                for (int64_t u = 0; u < D; u++) g += (double)E[i * D + u] * E[j * D + u];
                g -= i == j ? 1.0 : 0.0;
                acc += g * E[j * D + t];
            }
            dE[i * D + t] += (float)(4.0 * dloss * acc / ((double)K * (double)K));
        }
}

/* ---- VQ ------------------------------------------------------------------------------------ */

double tess_nn_codebook_vq_forward(float *q, int32_t *ids, const float *z, const float *E,
                                   int64_t N, int64_t K, int64_t D) {
    double commit = 0.0;
    for (int64_t n = 0; n < N; n++) {
        int32_t best = 0;
        double bv = -INFINITY;
        for (int64_t k = 0; k < K; k++) {
            double s = 0.0;
            for (int64_t j = 0; j < D; j++) s += (double)z[n * D + j] * E[k * D + j];
            if (s > bv) bv = s, best = (int32_t)k;
        }
        ids[n] = best;
        for (int64_t j = 0; j < D; j++) {
            q[n * D + j] = E[best * D + j];
            double e = (double)z[n * D + j] - E[best * D + j];
            commit += e * e;
        }
    }
    return N > 0 ? commit / (double)N : 0.0;
}

void tess_nn_codebook_vq_backward(float *dz, const float *dq, float dcommit, const float *z,
                                  const float *q, int64_t N, int64_t D) {
    for (int64_t i = 0; i < N * D; i++)
        dz[i] += dq[i] + dcommit * 2.0f * (z[i] - q[i]) / (float)N;
}

void tess_nn_codebook_ema_stats(float *nk, float *sk, const float *z, const int32_t *ids,
                                int64_t N, int64_t K, int64_t D) {
    memset(nk, 0, (size_t)K * sizeof(float));
    memset(sk, 0, (size_t)(K * D) * sizeof(float));
    for (int64_t n = 0; n < N; n++) {
        int32_t k = ids[n];
        TESS_ASSERT(k >= 0 && k < K);
        nk[k] += 1.0f;
        for (int64_t j = 0; j < D; j++) sk[k * D + j] += z[n * D + j];
    }
}

void tess_nn_codebook_ema_apply(float *E, float *count, float *sum, const float *nk,
                                const float *sk, int64_t K, int64_t D, float decay) {
    for (int64_t k = 0; k < K; k++) {
        count[k] = decay * count[k] + (1.0f - decay) * nk[k];
        for (int64_t j = 0; j < D; j++)
            sum[k * D + j] = decay * sum[k * D + j] + (1.0f - decay) * sk[k * D + j];
        if (count[k] > 1e-6f)
            for (int64_t j = 0; j < D; j++) E[k * D + j] = sum[k * D + j] / count[k];
    }
}

/* ---- dead codes ---------------------------------------------------------------------------- */

int64_t tess_nn_codebook_dead(int64_t *dead, int64_t *idle, const float *nk, int64_t K,
                              int64_t window) {
    TESS_ASSERT(window >= 1);
    int64_t n = 0;
    for (int64_t k = 0; k < K; k++) {
        idle[k] = nk[k] > 0.0f ? 0 : idle[k] + 1;
        if (idle[k] >= window) dead[n++] = k, idle[k] = 0;
    }
    return n;
}
