/* pool.c - attention and mean pooling over a set with a padding mask (see pool.h). */
#include "nn/pool.h"

#include <math.h>
#include <string.h>

#include "tensor/matmul.h" /* tess_matmul */

/* a[n] = masked softmax of s[n] over n in [0, N); all-masked: a = 0. */
static void masked_softmax(float *a, const uint8_t *mask, int64_t N) {
    float m = -INFINITY;
    for (int64_t n = 0; n < N; n++)
        if (!mask || mask[n]) m = a[n] > m ? a[n] : m;
    double z = 0.0;
    for (int64_t n = 0; n < N; n++) {
        double e = (!mask || mask[n]) && m > -INFINITY ? exp((double)a[n] - m) : 0.0;
        a[n] = (float)e;
        z += e;
    }
    for (int64_t n = 0; n < N; n++) a[n] = z > 0.0 ? (float)(a[n] / z) : 0.0f;
}

void tess_nn_attnpool_forward(float *out, float *a, const float *h, const float *q,
                              const uint8_t *mask, int64_t G, int64_t N, int64_t d) {
    /* per group: s (N) = h_g (N, d) q (d) / sqrt(d); out_g (d) = a_g^T h_g */
    const float scale = 1.0f / sqrtf((float)d);
    for (int64_t g = 0; g < G; g++) {
        tess_matmul(a + g * N, h + g * N * d, q, N, 1, d, false, false, scale, 0.0f);
        masked_softmax(a + g * N, mask ? mask + g * N : NULL, N);
        tess_matmul(out + g * d, a + g * N, h + g * N * d, 1, d, N, false, false, 1.0f, 0.0f);
    }
}

void tess_nn_attnpool_backward(float *dh, float *dq, const float *dout, const float *h,
                               const float *q, const float *a, int64_t G, int64_t N, int64_t d) {
    const float scale = 1.0f / sqrtf((float)d);
    for (int64_t g = 0; g < G; g++) {
        const float *hg = h + g * N * d, *ag = a + g * N, *dg = dout + g * d;
        double dot = 0.0;
        for (int64_t n = 0; n < N; n++) {
            double da = 0.0;
            for (int64_t j = 0; j < d; j++) da += (double)dg[j] * hg[n * d + j];
            dot += ag[n] * da;
        }
        for (int64_t n = 0; n < N; n++) {
            if (ag[n] == 0.0f) continue;
            double da = 0.0;
            for (int64_t j = 0; j < d; j++) da += (double)dg[j] * hg[n * d + j];
            float ds = (float)(ag[n] * (da - dot)) * scale;
            for (int64_t j = 0; j < d; j++) {
                if (dh) dh[(g * N + n) * d + j] += ag[n] * dg[j] + ds * q[j];
                if (dq) dq[j] += ds * hg[n * d + j];
            }
        }
    }
}

void tess_nn_attnpool_forward_ref(float *out, float *a, const float *h, const float *q,
                                  const uint8_t *mask, int64_t G, int64_t N, int64_t d) {
    const double scale = 1.0 / sqrt((double)d);
    for (int64_t g = 0; g < G; g++) {
        for (int64_t n = 0; n < N; n++) {
            double s = 0.0;
            for (int64_t j = 0; j < d; j++) s += (double)h[(g * N + n) * d + j] * q[j];
            a[g * N + n] = (float)(s * scale);
        }
        masked_softmax(a + g * N, mask ? mask + g * N : NULL, N);
        for (int64_t j = 0; j < d; j++) {
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) acc += (double)a[g * N + n] * h[(g * N + n) * d + j];
            out[g * d + j] = (float)acc;
        }
    }
}

void tess_nn_attnpool_backward_ref(float *dh, float *dq, const float *dout, const float *h,
                                   const float *q, const float *a, int64_t G, int64_t N,
                                   int64_t d) {
    const double scale = 1.0 / sqrt((double)d);
    for (int64_t g = 0; g < G; g++)
        for (int64_t n = 0; n < N; n++) {
            double ds = 0.0;
            for (int64_t m = 0; m < N; m++) {
                double da = 0.0;
                for (int64_t j = 0; j < d; j++) da += (double)dout[g * d + j] * h[(g * N + m) * d + j];
                double jac = (double)a[g * N + n] * ((n == m ? 1.0 : 0.0) - a[g * N + m]);
                ds += jac * da;
            }
            for (int64_t j = 0; j < d; j++) {
                if (dh)
                    dh[(g * N + n) * d + j] +=
                        (float)((double)a[g * N + n] * dout[g * d + j] + ds * scale * q[j]);
                if (dq) dq[j] += (float)(ds * scale * h[(g * N + n) * d + j]);
            }
        }
}

/* The number of real members of a group (mask row m of N, or NULL: all). */
static int64_t real_count(const uint8_t *m, int64_t N) {
    if (!m) return N;
    int64_t c = 0;
    for (int64_t n = 0; n < N; n++) c += m[n] != 0;
    return c;
}

void tess_nn_meanpool_forward(float *out, const float *x, const uint8_t *mask, int64_t G,
                              int64_t N, int64_t C) {
    for (int64_t g = 0; g < G; g++) {
        const uint8_t *mg = mask ? mask + g * N : NULL;
        const int64_t cnt = real_count(mg, N);
        float *o = out + g * C;
        memset(o, 0, (size_t)C * sizeof(float));
        for (int64_t n = 0; n < N; n++) {
            if (mg && !mg[n]) continue;
            const float *xn = x + (g * N + n) * C;
            for (int64_t j = 0; j < C; j++) o[j] += xn[j];
        }
        const float inv = cnt > 0 ? 1.0f / (float)cnt : 0.0f;
        for (int64_t j = 0; j < C; j++) o[j] *= inv;
    }
}

void tess_nn_meanpool_backward(float *dx, const float *dout, const uint8_t *mask, int64_t G,
                               int64_t N, int64_t C) {
    for (int64_t g = 0; g < G; g++) {
        const uint8_t *mg = mask ? mask + g * N : NULL;
        const int64_t cnt = real_count(mg, N);
        if (cnt == 0) continue;
        const float inv = 1.0f / (float)cnt, *dg = dout + g * C;
        for (int64_t n = 0; n < N; n++) {
            if (mg && !mg[n]) continue;
            float *dxn = dx + (g * N + n) * C;
            for (int64_t j = 0; j < C; j++) dxn[j] += dg[j] * inv;
        }
    }
}

void tess_nn_meanpool_forward_ref(float *out, const float *x, const uint8_t *mask, int64_t G,
                                  int64_t N, int64_t C) {
    for (int64_t g = 0; g < G; g++)
        for (int64_t j = 0; j < C; j++) {
            double acc = 0.0, cnt = 0.0;
            for (int64_t n = 0; n < N; n++)
                if (!mask || mask[g * N + n]) acc += x[(g * N + n) * C + j], cnt += 1.0;
            out[g * C + j] = cnt > 0.0 ? (float)(acc / cnt) : 0.0f;
        }
}

void tess_nn_meanpool_backward_ref(float *dx, const float *dout, const uint8_t *mask, int64_t G,
                                   int64_t N, int64_t C) {
    for (int64_t g = 0; g < G; g++) {
        double cnt = 0.0;
        for (int64_t n = 0; n < N; n++) cnt += !mask || mask[g * N + n];
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < C; j++)
                if (!mask || mask[g * N + n])
                    dx[(g * N + n) * C + j] += (float)((double)dout[g * C + j] / cnt);
    }
}
