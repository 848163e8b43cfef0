/* tensor.c - tess_tensor views and the elementwise, reduction and softmax kernels (see tensor.h). */
#include "tensor/tensor.h"

#include <math.h>
#include <string.h>

/* Partial sums kept apart so that the compiler may put them in vector lanes. */
#define TESS_TENSOR_LANES 8

static tess_status check_shape(int ndim, const int64_t *shape) {
    TESS_REQUIRE(ndim >= 1 && ndim <= TESS_TENSOR_MAX_DIMS, TESS_ERR_ARG,
                 "tensor ndim must be in 1..%d, got %d", TESS_TENSOR_MAX_DIMS, ndim);
    for (int d = 0; d < ndim; d++) {
        TESS_REQUIRE(shape[d] >= 0, TESS_ERR_ARG, "tensor extent %d is negative (%lld)", d,
                     (long long)shape[d]);
    }
    return TESS_OK;
}

tess_status tess_tensor_init(tess_tensor *t, float *data, int ndim, const int64_t *shape) {
    TESS_CHECK(check_shape(ndim, shape));
    t->data = data;
    t->ndim = ndim;
    for (int d = 0; d < TESS_TENSOR_MAX_DIMS; d++) t->shape[d] = d < ndim ? shape[d] : 1;
    return TESS_OK;
}

int64_t tess_tensor_numel(const tess_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

tess_status tess_tensor_reshape(tess_tensor *out, const tess_tensor *t, int ndim,
                                const int64_t *shape) {
    TESS_CHECK(check_shape(ndim, shape));
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    int64_t have = tess_tensor_numel(t);
    TESS_REQUIRE(n == have, TESS_ERR_ARG, "reshape of %lld elements into a shape of %lld",
                 (long long)have, (long long)n);
    return tess_tensor_init(out, t->data, ndim, shape);
}

float *tess_tensor_row(const tess_tensor *t, int64_t i) {
    TESS_ASSERT(i >= 0 && i < t->shape[0]);
    return t->data + i * (tess_tensor_numel(t) / t->shape[0]);
}

void tess_tensor_add(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void tess_tensor_scale(float *x, float alpha, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= alpha;
}

/* In blocks of a known trip count: -O2's very-cheap cost model vectorises only loops that need
 * no scalar epilogue. Elementwise, so the result is the plain loop's bit for bit. */
static inline void axpy_block(float *restrict y, float alpha, const float *restrict x, int64_t m) {
    for (int64_t i = 0; i < m; i++) y[i] += alpha * x[i];
}

void tess_tensor_axpy(float *restrict y, float alpha, const float *restrict x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) axpy_block(y + i, alpha, x + i, 16);
    axpy_block(y + i, alpha, x + i, n - i);
}

void tess_tensor_mul(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

void tess_tensor_residual_add(float *out, const float *res, const float *f, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = res[i] + f[i];
}

void tess_tensor_residual_add_backward(float *restrict dres, float *restrict df,
                                       const float *restrict dout, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        dres[i] += dout[i];
        df[i] += dout[i];
    }
}

/* Combine the lane partials in a fixed order (pairwise), so results are reproducible. */
static double lanes_total(const double *acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double tess_tensor_sum(const float *x, int64_t n) {
    double acc[TESS_TENSOR_LANES] = {0};
    int64_t i = 0;
    for (; i + TESS_TENSOR_LANES <= n; i += TESS_TENSOR_LANES) {
        for (int k = 0; k < TESS_TENSOR_LANES; k++) acc[k] += (double)x[i + k];
    }
    for (int k = 0; i < n; i++, k++) acc[k] += (double)x[i];
    return lanes_total(acc);
}

double tess_tensor_sum_ref(const float *x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

double tess_tensor_dot(const float *x, const float *y, int64_t n) {
    double acc[TESS_TENSOR_LANES] = {0};
    int64_t i = 0;
    for (; i + TESS_TENSOR_LANES <= n; i += TESS_TENSOR_LANES) {
        for (int k = 0; k < TESS_TENSOR_LANES; k++) acc[k] += (double)x[i + k] * (double)y[i + k];
    }
    for (int k = 0; i < n; i++, k++) acc[k] += (double)x[i] * (double)y[i];
    return lanes_total(acc);
}

double tess_tensor_dot_ref(const float *x, const float *y, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)y[i];
    return s;
}

double tess_tensor_sqnorm(const float *x, int64_t n) { return tess_tensor_dot(x, x, n); }

double tess_tensor_sqnorm_ref(const float *x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

float tess_tensor_max(const float *x, int64_t n) {
    TESS_ASSERT(n >= 1);
    float m = x[0];
    for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

void tess_tensor_exp(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = tess_tensor_expf(in[i]);
}

void tess_tensor_softmax_rows(float *out, const float *in, int64_t N, int64_t V) {
    TESS_ASSERT(V >= 1);
    for (int64_t r = 0; r < N; r++) {
        const float *x = in + r * V;
        float *y = out + r * V;
        float m = tess_tensor_max(x, V);
        for (int64_t v = 0; v < V; v++) y[v] = tess_tensor_expf(x[v] - m);
        /* the sum is >= 1 (the max contributes exp(0)), so the division is safe */
        float inv = (float)(1.0 / tess_tensor_sum(y, V));
        tess_tensor_scale(y, inv, V);
    }
}

void tess_tensor_softmax_rows_ref(float *out, const float *in, int64_t N, int64_t V) {
    for (int64_t r = 0; r < N; r++) {
        const float *x = in + r * V;
        float *y = out + r * V;
        double m = x[0], s = 0.0;
        for (int64_t v = 1; v < V; v++) m = x[v] > m ? x[v] : m;
        for (int64_t v = 0; v < V; v++) s += exp((double)x[v] - m);
        for (int64_t v = 0; v < V; v++) y[v] = (float)(exp((double)x[v] - m) / s);
    }
}

void tess_tensor_logsoftmax_rows(float *out, const float *in, int64_t N, int64_t V) {
    TESS_ASSERT(V >= 1);
    for (int64_t r = 0; r < N; r++) {
        const float *x = in + r * V;
        float *y = out + r * V;
        float m = tess_tensor_max(x, V);
        double acc[TESS_TENSOR_LANES] = {0};
        int64_t v = 0;
        for (; v + TESS_TENSOR_LANES <= V; v += TESS_TENSOR_LANES) {
            for (int k = 0; k < TESS_TENSOR_LANES; k++) {
                acc[k] += (double)tess_tensor_expf(x[v + k] - m);
            }
        }
        for (int k = 0; v < V; v++, k++) acc[k] += (double)tess_tensor_expf(x[v] - m);
        double s = lanes_total(acc);
        /* (x - m) first: exact near the max, where x - lse would cancel */
        float logs = (float)log(s);
        for (v = 0; v < V; v++) y[v] = (x[v] - m) - logs;
    }
}

void tess_tensor_logsoftmax_rows_ref(float *out, const float *in, int64_t N, int64_t V) {
    for (int64_t r = 0; r < N; r++) {
        const float *x = in + r * V;
        float *y = out + r * V;
        double m = x[0], s = 0.0;
        for (int64_t v = 1; v < V; v++) m = x[v] > m ? x[v] : m;
        for (int64_t v = 0; v < V; v++) s += exp((double)x[v] - m);
        double lse = m + log(s);
        for (int64_t v = 0; v < V; v++) y[v] = (float)((double)x[v] - lse);
    }
}

/* Tile edge of the (d1,d2) loop nest: 16 x 16 rows of d3 floats. */
enum { PERMUTE_TILE = 16 };

void tess_tensor_permute_0213(float *restrict out, const float *restrict in, int64_t d0,
                              int64_t d1, int64_t d2, int64_t d3) {
    /* out (d0,d2,d1,d3); in (d0,d1,d2,d3) */
    const size_t row = (size_t)d3 * sizeof(float);
    for (int64_t a = 0; a < d0; a++) {
        const float *src = in + a * d1 * d2 * d3;
        float *dst = out + a * d1 * d2 * d3;
        for (int64_t i0 = 0; i0 < d1; i0 += PERMUTE_TILE) {
            int64_t i1 = i0 + PERMUTE_TILE < d1 ? i0 + PERMUTE_TILE : d1;
            for (int64_t j0 = 0; j0 < d2; j0 += PERMUTE_TILE) {
                int64_t j1 = j0 + PERMUTE_TILE < d2 ? j0 + PERMUTE_TILE : d2;
                for (int64_t i = i0; i < i1; i++)
                    for (int64_t j = j0; j < j1; j++)
                        memcpy(dst + (j * d1 + i) * d3, src + (i * d2 + j) * d3, row);
            }
        }
    }
}

void tess_tensor_permute_0213_backward(float *restrict din, const float *restrict dout,
                                       int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    /* din (d0,d1,d2,d3) +=; dout (d0,d2,d1,d3) */
    for (int64_t a = 0; a < d0; a++) {
        float *dst = din + a * d1 * d2 * d3;
        const float *src = dout + a * d1 * d2 * d3;
        for (int64_t i0 = 0; i0 < d1; i0 += PERMUTE_TILE) {
            int64_t i1 = i0 + PERMUTE_TILE < d1 ? i0 + PERMUTE_TILE : d1;
            for (int64_t j0 = 0; j0 < d2; j0 += PERMUTE_TILE) {
                int64_t j1 = j0 + PERMUTE_TILE < d2 ? j0 + PERMUTE_TILE : d2;
                for (int64_t i = i0; i < i1; i++) {
                    for (int64_t j = j0; j < j1; j++) {
                        float *d = dst + (i * d2 + j) * d3;
                        const float *g = src + (j * d1 + i) * d3;
                        for (int64_t k = 0; k < d3; k++) d[k] += g[k];
                    }
                }
            }
        }
    }
}

void tess_tensor_permute_0213_ref(float *out, const float *in, int64_t d0, int64_t d1, int64_t d2,
                                  int64_t d3) {
    for (int64_t a = 0; a < d0; a++)
        for (int64_t i = 0; i < d1; i++)
            for (int64_t j = 0; j < d2; j++)
                for (int64_t k = 0; k < d3; k++)
                    out[((a * d2 + j) * d1 + i) * d3 + k] = in[((a * d1 + i) * d2 + j) * d3 + k];
}

void tess_tensor_permute_0213_backward_ref(float *din, const float *dout, int64_t d0, int64_t d1,
                                           int64_t d2, int64_t d3) {
    for (int64_t a = 0; a < d0; a++)
        for (int64_t i = 0; i < d1; i++)
            for (int64_t j = 0; j < d2; j++)
                for (int64_t k = 0; k < d3; k++)
                    din[((a * d1 + i) * d2 + j) * d3 + k] += dout[((a * d2 + j) * d1 + i) * d3 + k];
}
