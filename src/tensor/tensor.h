/* tensor.h - local dense fp32 tensors: a non-owning view struct (tess_tensor) and the free
 * kernels over raw float buffers that layers are built from: elementwise add/scale/axpy/mul, the
 * fused residual add, reductions accumulated in double (sum, max, dot, squared norm) and row-wise
 * (log-)softmax. Matrix products live in tensor/matmul.h.
 *
 * Contracts shared by every kernel here:
 *   - buffers are contiguous, row-major; counts are int64_t; n = 0 is allowed (no-op / empty sum);
 *   - "out may alias" is stated per function; otherwise buffers must not overlap;
 *   - kernels never allocate and cannot fail: misuse is caught by TESS_ASSERT (TESS_ASSERTS builds);
 *   - where the fast kernel differs from the obvious loop (reductions, softmax) a naive _ref with
 *     sequential double accumulation stays beside it as the test oracle.
 * Nothing here is collective; everything is local to the calling rank and thread-safe. */
#ifndef TESS_TENSOR_TENSOR_H
#define TESS_TENSOR_TENSOR_H

#include <math.h> /* fmaf */
#include <stdint.h>
#include <string.h>

#include "core/status.h" /* tess_status */

#define TESS_TENSOR_MAX_DIMS 4

/* A view of ndim (1..4) dimensions over contiguous row-major floats it does not own.
 * shape[d] for d >= ndim is 1, so a view can always be read as 4-D. */
typedef struct {
    float *data;                           /* (shape[0], ..., shape[ndim-1]), not owned */
    int ndim;                              /* 1..TESS_TENSOR_MAX_DIMS */
    int64_t shape[TESS_TENSOR_MAX_DIMS];   /* each >= 0 */
} tess_tensor;

/* Make *t a view of data with the given shape (ndim values). TESS_ERR_ARG on ndim outside 1..4
 * or a negative extent; *t is left untouched then. */
tess_status tess_tensor_init(tess_tensor *t, float *data, int ndim, const int64_t *shape);

/* Number of elements: the product of the extents (1-D empty view: 0). */
int64_t tess_tensor_numel(const tess_tensor *t);

/* *out = the same data seen with a new shape. TESS_ERR_ARG if the element counts differ or the
 * shape is invalid (as for tess_tensor_init). out may be t. */
tess_status tess_tensor_reshape(tess_tensor *out, const tess_tensor *t, int ndim,
                                const int64_t *shape);

/* Pointer to row i of t seen as (shape[0], rest): data + i * numel / shape[0]. Asserts i in range. */
float *tess_tensor_row(const tess_tensor *t, int64_t i);

/* ---- elementwise, all (n); vectorisable loops ---- */

/* out = a + b. out may alias a or b. */
void tess_tensor_add(float *out, const float *a, const float *b, int64_t n);
/* x *= alpha, in place. */
void tess_tensor_scale(float *x, float alpha, int64_t n);
/* y += alpha * x. */
void tess_tensor_axpy(float *y, float alpha, const float *x, int64_t n);
/* out = a * b (Hadamard). out may alias a or b. */
void tess_tensor_mul(float *out, const float *a, const float *b, int64_t n);

/* Residual connection, fused: out = res + f; backward: dres += dout and df += dout in one pass.
 * out may alias res or f. dres and df must not alias each other or dout. */
void tess_tensor_residual_add(float *out, const float *res, const float *f, int64_t n);
void tess_tensor_residual_add_backward(float *dres, float *df, const float *dout, int64_t n);

/* ---- permutation of the middle axes ----
 * out (d0,d2,d1,d3) = in (d0,d1,d2,d3) with axes 1 and 2 swapped: out[a][j][i][:] = in[a][i][j][:].
 * With (d0,d1,d2,d3) = (B,N,T,C) this turns [B][N][T][C] into [B][T][N][C], so a block can attend
 * along N as B*T sequences of length N; the same call with (B,T,N,C) turns it back. The backward
 * is the inverse permutation and ADDS: din (d0,d1,d2,d3) += dout (d0,d2,d1,d3) swapped back.
 * out must not alias in. Rows of d3 floats are copied whole; the loops are tiled so that the
 * strided side stays in cache. */
void tess_tensor_permute_0213(float *out, const float *in, int64_t d0, int64_t d1, int64_t d2,
                              int64_t d3);
void tess_tensor_permute_0213_backward(float *din, const float *dout, int64_t d0, int64_t d1,
                                       int64_t d2, int64_t d3);
/* The same by plain index arithmetic, element by element: the oracle for tests. */
void tess_tensor_permute_0213_ref(float *out, const float *in, int64_t d0, int64_t d1, int64_t d2,
                                  int64_t d3);
void tess_tensor_permute_0213_backward_ref(float *din, const float *dout, int64_t d0, int64_t d1,
                                           int64_t d2, int64_t d3);

/* ---- reductions, all (n), accumulated in double ----
 * The fast versions keep 8 independent partial sums (so the loop vectorises without
 * -ffast-math) combined in a fixed order: bitwise reproducible, but not bitwise equal to the
 * _ref's sequential order. */
double tess_tensor_sum(const float *x, int64_t n);
double tess_tensor_sum_ref(const float *x, int64_t n);
double tess_tensor_dot(const float *x, const float *y, int64_t n);
double tess_tensor_dot_ref(const float *x, const float *y, int64_t n);
/* Squared Euclidean norm sum x_i^2. */
double tess_tensor_sqnorm(const float *x, int64_t n);
double tess_tensor_sqnorm_ref(const float *x, int64_t n);
/* Largest element; n >= 1 (asserted). NaNs are not ordered: do not pass them. Exact, so no _ref. */
float tess_tensor_max(const float *x, int64_t n);

/* ---- exponential ----
 * tess_fmaf: a * b + c in one rounding where the target has FMA (-march=native on x86-64: GCC
 * expands fmaf inline and vectorises it), else in two. The project compiles as ISO C11, whose
 * default -ffp-contract=off keeps GCC from fusing on its own, so the polynomials here fuse
 * explicitly: their last bits differ between FMA and non-FMA builds (each build is reproducible).
 *
 * tess_tensor_expf: e^x in fp32 without libm, written so that loops calling it vectorise (libm's
 * expf does not without -ffast-math): Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, Cephes'
 * degree-6 polynomial for e^r (Horner in tess_fmaf), 2^k assembled in the exponent bits. Relative
 * error <= 1.5e-7 (tested over [-87, 88]). Arguments are clamped to [-87.3, 88.3]: below (and
 * -inf), the result is ~1.2e-38 instead of a denormal or 0; above (and +inf), it saturates at
 * ~2.2e38. NaN propagates. The clamp works on the bits with integer compares: a float compare in
 * a conditional stops GCC's if-conversion (and so vectorisation) under the default
 * -ftrapping-math. */
static inline float tess_fmaf(float a, float b, float c) {
#ifdef __FMA__
    return fmaf(a, b, c);
#else
    return a * b + c;
#endif
}

static inline float tess_tensor_expf(float x) {
    const uint32_t lo_bits = 0x42AE999Au, hi_bits = 0x42B0999Au; /* 87.3f, 88.3f */
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: t + magic keeps round(t) in low bits */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t mag = u & 0x7FFFFFFFu, lim = (u >> 31) ? lo_bits : hi_bits;
    u = (mag > lim && mag <= 0x7F800000u) ? ((u & 0x80000000u) | lim) : u; /* NaN untouched */
    memcpy(&x, &u, sizeof x);
    float t = tess_fmaf(x, 1.44269504f, round_magic);
    float k = t - round_magic;
    float r = tess_fmaf(k, -0.693359375f, x); /* ln2 split in two: this product is exact */
    r = tess_fmaf(k, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = tess_fmaf(p, r, 1.3981999507e-3f);
    p = tess_fmaf(p, r, 8.3334519073e-3f);
    p = tess_fmaf(p, r, 4.1665795894e-2f);
    p = tess_fmaf(p, r, 1.6666665459e-1f);
    p = tess_fmaf(p, r, 5.0000001201e-1f);
    p = tess_fmaf(p, r * r, r) + 1.0f;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits - 0x4B400000u + 127u) << 23; /* k + 127 in [1, 254]: a normal 2^k */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* ---- tanh, log1p, softplus, sigmoid: fp32, inline and vectorisable like tess_tensor_expf ----
 * tanh: Cephes' odd degree-11 polynomial for |x| < 0.625, else sign(x) (1 - 2 / (e^(2|x|) + 1));
 * relative error <= 3e-7 (tested), +-inf give +-1, NaN propagates. */
static inline float tess_tensor_tanhf(float x) {
    uint32_t u, ab;
    memcpy(&u, &x, sizeof u);
    const uint32_t sign = u & 0x80000000u, au = u & 0x7FFFFFFFu;
    float a;
    memcpy(&a, &au, sizeof a);
    const float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const float small = p * z * x + x;
    const float big = 1.0f - 2.0f / (tess_tensor_expf(2.0f * a) + 1.0f);
    memcpy(&ab, &big, sizeof ab);
    ab |= sign;
    float bigs;
    memcpy(&bigs, &ab, sizeof bigs);
    return au < 0x3F200000u /* 0.625f */ ? small : bigs;
}

/* ln x for a normal x > 0 (finite): x = 2^e m with m in [sqrt(1/2), sqrt(2)) from the bits,
 * Cephes' degree-9 polynomial for ln m. Relative error <= 3e-7 (tested on [1e-30, 1e30] and near
 * 1); 0, denormals, negatives, inf and NaN are outside the contract. */
static inline float tess_tensor_logf(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b += 0x3F800000u - 0x3F3504F3u; /* shift so that m lands in [sqrt(1/2), sqrt(2)) */
    const float e = (float)((int32_t)(b >> 23) - 127);
    b = (b & 0x007FFFFFu) + 0x3F3504F3u;
    float m;
    memcpy(&m, &b, sizeof m);
    const float f = m - 1.0f, z = f * f;
    float y = 7.0376836292e-2f;
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z;
    y += e * -2.12194440e-4f - 0.5f * z; /* ln 2 split in two, as in tess_tensor_expf */
    return f + y + e * 0.693359375f;
}

/* ln(1 + t) for t > -1 (finite): tess_tensor_logf(u) of u = 1 + t, with the rounding of 1 + t
 * corrected to first order by (t - (u - 1)) / u. Relative error <= 3e-7 (tested on [-0.99, 1e6]);
 * t <= -1, inf and NaN are outside the contract. */
static inline float tess_tensor_log1pf(float t) {
    const float u = 1.0f + t;
    return tess_tensor_logf(u) + (t - (u - 1.0f)) / u;
}

/* softplus(x) = ln(1 + e^x) as max(x, 0) + ln(1 + e^-|x|): no overflow, relative error <= 4e-7
 * for x >= -87 (tested); below, e^-|x| is clamped (tess_tensor_expf) and the result is ~1.2e-38
 * instead of e^x. */
static inline float tess_tensor_softplusf(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u &= 0x7FFFFFFFu;
    float a;
    memcpy(&a, &u, sizeof a);
    return (x > 0.0f ? x : 0.0f) + tess_tensor_log1pf(tess_tensor_expf(-a));
}

/* sigmoid(x) = 1 / (1 + e^-x); relative error <= 3e-7 for x >= -87 (tested). */
static inline float tess_tensor_sigmoidf(float x) { return 1.0f / (1.0f + tess_tensor_expf(-x)); }

/* out = e^in elementwise with tess_tensor_expf; out may alias in. (n) */
void tess_tensor_exp(float *out, const float *in, int64_t n);

/* ---- row-wise softmax over (N, V), numerically stable (the row max is subtracted) ----
 * out may alias in. Rows are independent; V >= 1. */
void tess_tensor_softmax_rows(float *out, const float *in, int64_t N, int64_t V);
void tess_tensor_softmax_rows_ref(float *out, const float *in, int64_t N, int64_t V);
/* out[n,v] = in[n,v] - max_n - log(sum_v exp(in[n,v] - max_n)). out may alias in. */
void tess_tensor_logsoftmax_rows(float *out, const float *in, int64_t N, int64_t V);
void tess_tensor_logsoftmax_rows_ref(float *out, const float *in, int64_t N, int64_t V);

#endif
