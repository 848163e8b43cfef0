/* norm.c - RMSNorm and LayerNorm forward/backward and their references (see norm.h).
 * The fast row statistics keep 8 double partial sums (tensor.h explains why). */
#include "nn/norm.h"

#include <math.h>

#include "tensor/tensor.h" /* tess_tensor_sum, tess_tensor_sqnorm, tess_tensor_dot */

#define LANES 8

/* sum_c (x[c] - m)^2, in double with LANES partial sums. x (C). */
static double sq_dev(const float *x, float m, int64_t C) {
    double acc[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= C; c += LANES) {
        for (int k = 0; k < LANES; k++) {
            double d = (double)x[c + k] - m;
            acc[k] += d * d;
        }
    }
    for (int k = 0; c < C; c++, k++) {
        double d = (double)x[c] - m;
        acc[k] += d * d;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* sum_c a[c] * b[c] * (x[c] - m), in double with LANES partial sums. a, b, x (C). */
static double dot3_dev(const float *a, const float *b, const float *x, float m, int64_t C) {
    double acc[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= C; c += LANES) {
        for (int k = 0; k < LANES; k++) {
            acc[k] += (double)a[c + k] * (double)b[c + k] * ((double)x[c + k] - m);
        }
    }
    for (int k = 0; c < C; c++, k++) acc[k] += (double)a[c] * (double)b[c] * ((double)x[c] - m);
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void tess_nn_rmsnorm_forward(float *out, float *rstd, const float *in, const float *w, int64_t N,
                             int64_t C, float eps) {
    /* out (N,C), rstd (N), in (N,C), w (C) */
    for (int64_t n = 0; n < N; n++) {
        const float *restrict x = in + n * C;
        float *restrict y = out + n * C;
        float r = (float)(1.0 / sqrt(tess_tensor_sqnorm(x, C) / (double)C + eps));
        rstd[n] = r;
        for (int64_t c = 0; c < C; c++) y[c] = x[c] * r * w[c];
    }
}

void tess_nn_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                              const float *w, const float *rstd, int64_t N, int64_t C) {
    /* din (N,C), dw (C), dout (N,C), in (N,C), w (C), rstd (N) */
    for (int64_t n = 0; n < N; n++) {
        const float *restrict x = in + n * C;
        const float *restrict g = dout + n * C;
        float *restrict dx = din + n * C;
        float r = rstd[n];
        /* d/dx_j of x r w: r (g w)_j - x_j r^3 <g w, x> / C */
        float k = (float)(dot3_dev(g, w, x, 0.0f, C) * (double)r * r * r / (double)C);
        for (int64_t c = 0; c < C; c++) {
            dx[c] += r * g[c] * w[c] - k * x[c];
            dw[c] += g[c] * x[c] * r;
        }
    }
}

void tess_nn_layernorm_forward(float *out, float *mean, float *rstd, const float *in,
                               const float *w, const float *b, int64_t N, int64_t C, float eps) {
    /* out (N,C), mean (N), rstd (N), in (N,C), w (C), b (C) or NULL */
    for (int64_t n = 0; n < N; n++) {
        const float *restrict x = in + n * C;
        float *restrict y = out + n * C;
        float m = (float)(tess_tensor_sum(x, C) / (double)C);
        float r = (float)(1.0 / sqrt(sq_dev(x, m, C) / (double)C + eps));
        mean[n] = m;
        rstd[n] = r;
        if (b) {
            for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m) * r * w[c] + b[c];
        } else {
            for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m) * r * w[c];
        }
    }
}

void tess_nn_layernorm_backward(float *din, float *dw, float *db, const float *dout,
                                const float *in, const float *w, const float *mean,
                                const float *rstd, int64_t N, int64_t C) {
    /* din (N,C), dw (C), db (C) or NULL, dout (N,C), in (N,C), w (C), mean (N), rstd (N) */
    for (int64_t n = 0; n < N; n++) {
        const float *restrict x = in + n * C;
        const float *restrict g = dout + n * C;
        float *restrict dx = din + n * C;
        float m = mean[n], r = rstd[n];
        /* with gw = g w and xhat = (x - m) r: dx = r (gw - mean(gw) - xhat mean(gw xhat)) */
        float mg = (float)(tess_tensor_dot(g, w, C) / (double)C);
        float mgx = (float)(dot3_dev(g, w, x, m, C) * r / (double)C);
        for (int64_t c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            dx[c] += r * (g[c] * w[c] - mg - xhat * mgx);
            dw[c] += g[c] * xhat;
        }
        if (db) {
            for (int64_t c = 0; c < C; c++) db[c] += g[c];
        }
    }
}

void tess_nn_rmsnorm_forward_ref(float *out, float *rstd, const float *in, const float *w,
                                 int64_t N, int64_t C, float eps) {
    for (int64_t n = 0; n < N; n++) {
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) ss += (double)in[n * C + c] * in[n * C + c];
        double r = 1.0 / sqrt(ss / (double)C + eps);
        rstd[n] = (float)r;
        for (int64_t c = 0; c < C; c++) out[n * C + c] = (float)(in[n * C + c] * r * w[c]);
    }
}

void tess_nn_rmsnorm_backward_ref(float *din, float *dw, const float *dout, const float *in,
                                  const float *w, const float *rstd, int64_t N, int64_t C) {
    for (int64_t n = 0; n < N; n++) {
        double r = rstd[n], gx = 0.0;
        for (int64_t c = 0; c < C; c++) gx += (double)dout[n * C + c] * w[c] * in[n * C + c];
        for (int64_t c = 0; c < C; c++) {
            double x = in[n * C + c], g = dout[n * C + c];
            din[n * C + c] += (float)(r * g * w[c] - x * r * r * r * gx / (double)C);
            dw[c] += (float)(g * x * r);
        }
    }
}

void tess_nn_layernorm_forward_ref(float *out, float *mean, float *rstd, const float *in,
                                   const float *w, const float *b, int64_t N, int64_t C,
                                   float eps) {
    for (int64_t n = 0; n < N; n++) {
        double m = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++) m += in[n * C + c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) v += (in[n * C + c] - m) * (in[n * C + c] - m);
        double r = 1.0 / sqrt(v / (double)C + eps);
        mean[n] = (float)m;
        rstd[n] = (float)r;
        for (int64_t c = 0; c < C; c++) {
            out[n * C + c] = (float)((in[n * C + c] - m) * r * w[c] + (b ? b[c] : 0.0));
        }
    }
}

void tess_nn_layernorm_backward_ref(float *din, float *dw, float *db, const float *dout,
                                    const float *in, const float *w, const float *mean,
                                    const float *rstd, int64_t N, int64_t C) {
    for (int64_t n = 0; n < N; n++) {
        double m = mean[n], r = rstd[n], mg = 0.0, mgx = 0.0;
        for (int64_t c = 0; c < C; c++) {
            double gw = (double)dout[n * C + c] * w[c];
            mg += gw;
            mgx += gw * (in[n * C + c] - m) * r;
        }
        mg /= (double)C;
        mgx /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            double g = dout[n * C + c], xhat = (in[n * C + c] - m) * r;
            din[n * C + c] += (float)(r * (g * w[c] - mg - xhat * mgx));
            dw[c] += (float)(g * xhat);
            if (db) db[c] += (float)g;
        }
    }
}
