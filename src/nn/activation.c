/* activation.c - GELU (tanh), SiLU and the SwiGLU gate, forward and backward (see
 * activation.h). All are written through sigmoid(z) = 1 / (1 + q), q = e^-z, with
 * 1 - sigmoid(z) = q sigmoid(z): no cancellation in either tail, and every loop vectorises
 * (tess_tensor_expf, no libm). GELU uses 0.5 (1 + tanh(u)) = sigmoid(2u). */
#include "nn/activation.h"

#if defined(__AVX512F__)
#include <immintrin.h> /* the SwiGLU gate's 16-lane loops */
#endif

#include "tensor/tensor.h" /* tess_tensor_expf, tess_fmaf */

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void tess_nn_gelu_forward(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        float u = GELU_K * (x + GELU_A * x * x * x);
        out[i] = x / (1.0f + tess_tensor_expf(-2.0f * u));
    }
}

/* gelu'(x): d/dx [x s] = s + x * 2 s (1 - s) * du/dx, s = sigmoid(2u), du/dx = K (1 + 3 A x^2) */
static inline float gelu_grad(float x) {
    float u = GELU_K * (x + GELU_A * x * x * x);
    float q = tess_tensor_expf(-2.0f * u);
    float s = 1.0f / (1.0f + q); /* sigmoid(2u) */
    float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);
    return s + 2.0f * x * du * s * (q * s);
}

void tess_nn_gelu_backward(float *restrict din, const float *restrict dout,
                           const float *restrict in, int64_t n) {
    for (int64_t i = 0; i < n; i++) din[i] += dout[i] * gelu_grad(in[i]);
}

void tess_nn_gelu_backward_inplace(float *restrict g, const float *restrict in, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] *= gelu_grad(in[i]);
}

void tess_nn_silu_forward(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        out[i] = x / (1.0f + tess_tensor_expf(-x));
    }
}

void tess_nn_silu_backward(float *restrict din, const float *restrict dout,
                           const float *restrict in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        float q = tess_tensor_expf(-x);
        float s = 1.0f / (1.0f + q);
        /* d/dx [x s] = s (1 + x (1 - s)) */
        din[i] += dout[i] * s * (1.0f + x * (q * s));
    }
}

/* ---------- the SwiGLU gate ----------
 * In cache compute-bound (about 0.4 ns per element forward on one Zen 4 core), so there the
 * instruction count is what matters; in the MoE layer, whose operands come from memory, they
 * run at the memory's speed (docs/benchmarks.md). The AVX-512 path evaluates tess_tensor_expf's
 * formula on 16 lanes with two shortcuts that give the same bits: the argument clamp as
 * vmaxps/vminps (tess_tensor_expf compares the bits as integers only so that GCC will
 * if-convert it), and 2^k applied by vscalefps instead of assembling its exponent bits (exact:
 * the clamp keeps 2^k and the result normal). 15 vector operations for e^x instead of 24: the
 * gate runs about 20% faster in cache. Without AVX-512 the same formula runs in blocks of
 * SWIGLU_VEC elements, which GCC vectorises at -O2 (its very-cheap cost model refuses a loop
 * that needs a scalar epilogue; a block's inner loop has a known trip count). The unit test
 * compares both against the scalar formula bit for bit. */
#define SWIGLU_VEC 16

#if defined(__AVX512F__)
static inline __m512 expf16(__m512 x) {
    /* max/min return their second operand when either is NaN: NaN propagates */
    x = _mm512_max_ps(_mm512_set1_ps(-87.3f), _mm512_min_ps(_mm512_set1_ps(88.3f), x));
    const __m512 round_magic = _mm512_set1_ps(12582912.0f);
    const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504f), round_magic);
    const __m512 k = _mm512_sub_ps(t, round_magic);
    __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-0.693359375f), x);
    r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

/* h = silu(gate) * up on the lanes of mask m */
static inline void swiglu_forward16(float *h, const float *gate, const float *up, __mmask16 m) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate);
    const __m512 q = expf16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, q));
    _mm512_mask_storeu_ps(h, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up)));
}

void tess_nn_swiglu_gate_forward(float *restrict h, const float *restrict gate,
                                 const float *restrict up, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) swiglu_forward16(h + i, gate + i, up + i, 0xFFFF);
    if (i < n) swiglu_forward16(h + i, gate + i, up + i, (__mmask16)((1u << (n - i)) - 1u));
}

/* dup = dh silu(gate); dh = dh up s (1 + gate (1 - s)) on the lanes of mask m */
static inline void swiglu_backward16(float *dh, float *dup, const float *gate, const float *up,
                                     __mmask16 m) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate), d = _mm512_maskz_loadu_ps(m, dh);
    const __m512 q = expf16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, q));
    _mm512_mask_storeu_ps(dup, m, _mm512_mul_ps(_mm512_mul_ps(d, g), s));
    const __m512 dus = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, up)), s);
    const __m512 bend = _mm512_fmadd_ps(g, _mm512_mul_ps(q, s), one);
    _mm512_mask_storeu_ps(dh, m, _mm512_mul_ps(dus, bend));
}

void tess_nn_swiglu_gate_backward_overwrite(float *restrict dh, float *restrict dup,
                                            const float *restrict gate,
                                            const float *restrict up, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) swiglu_backward16(dh + i, dup + i, gate + i, up + i, 0xFFFF);
    if (i < n)
        swiglu_backward16(dh + i, dup + i, gate + i, up + i, (__mmask16)((1u << (n - i)) - 1u));
}
#else
static inline void swiglu_forward_block(float *restrict h, const float *restrict gate,
                                        const float *restrict up, int64_t m) {
    for (int64_t j = 0; j < m; j++) h[j] = gate[j] / (1.0f + tess_tensor_expf(-gate[j])) * up[j];
}

void tess_nn_swiglu_gate_forward(float *h, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + SWIGLU_VEC <= n; i += SWIGLU_VEC)
        swiglu_forward_block(h + i, gate + i, up + i, SWIGLU_VEC);
    swiglu_forward_block(h + i, gate + i, up + i, n - i);
}

static inline void swiglu_backward_block(float *restrict dh, float *restrict dup,
                                         const float *restrict gate, const float *restrict up,
                                         int64_t m) {
    for (int64_t j = 0; j < m; j++) {
        const float g = gate[j], d = dh[j];
        const float q = tess_tensor_expf(-g);
        const float s = 1.0f / (1.0f + q);
        dup[j] = d * g * s;
        dh[j] = d * up[j] * s * tess_fmaf(g, q * s, 1.0f);
    }
}

void tess_nn_swiglu_gate_backward_overwrite(float *dh, float *dup, const float *gate,
                                            const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + SWIGLU_VEC <= n; i += SWIGLU_VEC)
        swiglu_backward_block(dh + i, dup + i, gate + i, up + i, SWIGLU_VEC);
    swiglu_backward_block(dh + i, dup + i, gate + i, up + i, n - i);
}
#endif
