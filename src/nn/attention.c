/* attention.c - multi-head self-attention forward/backward, fast (tess_matmul per head and row
 * block; tess_matmul_small in the forward of short sequences) and reference (plain loops). See
 * attention.h for layouts and the RoPE convention. */
#include "nn/attention.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/status.h"   /* TESS_REQUIRE, TESS_ASSERT */
#include "tensor/matmul.h" /* tess_matmul_ld, tess_matmul_small */
#include "tensor/tensor.h" /* tess_tensor_expf */

/* Rows per block of causal attention. Smaller blocks skip more of the masked triangle but make
 * smaller GEMMs; 64 was the fastest of 32..256 for T = 256..1024, hs = 64 (single thread). */
enum { ATT_ROW_BLOCK = 64 };

/* Short sequences (T <= ATT_SMALL_T, T and hs multiples of TESS_MATMUL_SMALL_NB) run the
 * forward's two products through tess_matmul_small (a head's q, k, v (T,hs) and weights (T,T)
 * sit in L1), with k transposed into scratch once per head, in row blocks of ATT_SMALL_ROWS:
 * causal blocks stop at their last row's keys, so the scores of the masked triangle are not
 * computed (BLAS's one (T,T) product computes all of them). With the per-sequence copy of the
 * forward (below; then of the whole qkv, now of the rotated q and k), the temporal attention of
 * the calm DAT (T = 32, hs = 32, causal, 256 sequences x 8 heads, 1 thread) ran its forward in
 * 0.012 s instead of 0.018 s (0.014 s with the copy alone). The backward stays on BLAS:
 * OpenBLAS's small-matrix kernels (no packing at these sizes) were no slower than
 * tess_matmul_small on its four products. */
enum { ATT_SMALL_T = 64, ATT_SMALL_ROWS = 8 };

/* Longer sequences in one row block (bidirectional, ATT_SMALL_T < T <= ATT_WIDE_T, T and hs
 * multiples of TESS_MATMUL_SMALL_NB) run forward and backward through tess_matmul_small /
 * tess_matmul_small_tn when they have their wide tiles (TESS_MATMUL_SMALL_WIDE), on per-head
 * copies in the scratch (WIDE_BLOCKS (T,hs) blocks): the backward's v transposed and k, q, dout
 * contiguous, the forward's k transposed and v contiguous; the (T,T) weights and their gradient
 * are read where they lie (transposed ones through the broadcasts) instead of being packed by
 * BLAS for each product. The forward runs a head's query rows in blocks of WIDE_ROWS: scores,
 * softmax and the product with v of one block while its (WIDE_ROWS,T) weights are in L2 (BLAS
 * wrote the whole (T,T) scores, then the softmax read them back and the AV product packed them).
 * Written for the calm DAT's neural attention (T = 256, hs = 32, 8 heads, 32 sequences: per layer
 * its backward 0.0714 s against 0.0750 s on BLAS, medians of 10 alternating repetitions in one
 * process, load ~15; its forward 0.032 s against 0.047 s, minima of 7 repetitions, two
 * alternating processes a side, load ~4; 64, 128 and 256 rows per block were within the noise).
 * ATT_WIDE_T bounds a head's weights (T,T) to 1 MiB. */
enum { ATT_WIDE_T = 512, WIDE_BLOCKS = 4, WIDE_ROWS = 64 };

tess_status tess_nn_attention_dims_check(const tess_nn_attention_dims *d) {
    TESS_REQUIRE(d != NULL, TESS_ERR_ARG, "attention dims are NULL");
    TESS_REQUIRE(d->B >= 1 && d->T >= 1 && d->C >= 1 && d->NH >= 1, TESS_ERR_ARG,
                 "attention sizes must be >= 1: B=%lld T=%lld C=%lld NH=%lld", (long long)d->B,
                 (long long)d->T, (long long)d->C, (long long)d->NH);
    TESS_REQUIRE(d->C % d->NH == 0, TESS_ERR_ARG, "C=%lld is not divisible by NH=%lld",
                 (long long)d->C, (long long)d->NH);
    TESS_REQUIRE(d->T <= INT_MAX && d->C <= INT_MAX, TESS_ERR_ARG,
                 "T=%lld or C=%lld exceeds the BLAS int range", (long long)d->T, (long long)d->C);
    if (d->rope) {
        TESS_REQUIRE((d->C / d->NH) % 2 == 0, TESS_ERR_ARG,
                     "RoPE needs an even head size, got hs=%lld (C=%lld, NH=%lld)",
                     (long long)(d->C / d->NH), (long long)d->C, (long long)d->NH);
        TESS_REQUIRE(d->rope_base > 0.0f, TESS_ERR_ARG, "rope_base must be > 0, got %g",
                     (double)d->rope_base);
    }
    return TESS_OK;
}

tess_status tess_nn_attention_dims_init(tess_nn_attention_dims *d, int64_t B, int64_t T,
                                        int64_t C, int64_t NH, bool causal, bool rope) {
    TESS_REQUIRE(d != NULL, TESS_ERR_ARG, "attention dims are NULL");
    *d = (tess_nn_attention_dims){
        .B = B, .T = T, .C = C, .NH = NH, .causal = causal, .rope = rope, .rope_base = 10000.0f};
    TESS_CHECK(tess_nn_attention_dims_check(d));
    return TESS_OK;
}

/* Row block r covers rows [r*rb, min(T, (r+1)*rb)) and keys [0, kv); its weights are stored as a
 * contiguous (rows, kv) matrix. Bidirectional attention is one block of (T,T). */
static int64_t row_block(const tess_nn_attention_dims *d) {
    return d->causal && d->T > ATT_ROW_BLOCK ? ATT_ROW_BLOCK : d->T;
}

static int64_t block_kv(const tess_nn_attention_dims *d, int64_t i1) {
    return d->causal ? i1 : d->T;
}

/* The short path: T and hs multiples of TESS_MATMUL_SMALL_NB, T <= ATT_SMALL_T, and one row
 * block (rb = T: bidirectional, or causal with T <= ATT_ROW_BLOCK). */
static bool small_path(const tess_nn_attention_dims *d) {
    return d->T <= ATT_SMALL_T && (!d->causal || d->T <= ATT_ROW_BLOCK) &&
           d->T % TESS_MATMUL_SMALL_NB == 0 && (d->C / d->NH) % TESS_MATMUL_SMALL_NB == 0;
}

/* The wide path of the backward (see ATT_WIDE_T). */
static bool wide_path(const tess_nn_attention_dims *d) {
    return TESS_MATMUL_SMALL_WIDE && !small_path(d) && d->T <= ATT_WIDE_T &&
           row_block(d) == d->T && d->T % TESS_MATMUL_SMALL_NB == 0 &&
           (d->C / d->NH) % TESS_MATMUL_SMALL_NB == 0;
}

/* Floats of one head's block-packed weights. */
static int64_t head_att_size(const tess_nn_attention_dims *d) {
    int64_t rb = row_block(d), n = 0;
    for (int64_t i0 = 0; i0 < d->T; i0 += rb) {
        int64_t i1 = i0 + rb < d->T ? i0 + rb : d->T;
        n += (i1 - i0) * block_kv(d, i1);
    }
    return n;
}

int64_t tess_nn_attention_cache_size(const tess_nn_attention_dims *d) {
    int64_t hs = d->C / d->NH;
    return d->B * d->NH * head_att_size(d) + (d->rope ? 2 * d->B * d->T * d->C + d->T * hs : 0) +
           (wide_path(d) ? d->B * d->NH * d->T : 0);
}

int64_t tess_nn_attention_scratch_size(const tess_nn_attention_dims *d) {
    /* the largest row block is (rb, T): the last one when causal, the only one otherwise; then
     * the short path's transposed k (hs,T), sized for min(T, ATT_SMALL_T), or with the wide tiles
     * the wide backward's WIDE_BLOCKS (T,hs) blocks, sized for min(T, ATT_WIDE_T) (more than the
     * former), so that the scratch fits any smaller T as well */
    const int64_t ts = d->T < ATT_SMALL_T ? d->T : ATT_SMALL_T,
                  tw = d->T < ATT_WIDE_T ? d->T : ATT_WIDE_T;
    const int64_t ext = TESS_MATMUL_SMALL_WIDE ? WIDE_BLOCKS * tw : ts;
    return 2 * d->T * d->C + 2 * d->T + row_block(d) * d->T + ext * (d->C / d->NH);
}

/* The short and wide paths' part of the scratch: after g (2TC), the key rows (2T) and a row
 * block. */
static float *small_scratch(float *scratch, const tess_nn_attention_dims *d) {
    return scratch + 2 * d->T * d->C + 2 * d->T + row_block(d) * d->T;
}

/* dst (cols, rows) contiguous = src^T, src (rows, cols) with leading dimension lds. */
static void transpose(float *restrict dst, const float *restrict src, int64_t lds, int64_t rows,
                      int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) dst[j * rows + r] = src[r * lds + j];
}

/* dst (rows, cols) contiguous = src (rows, cols) with leading dimension lds. */
static void copy_rows(float *restrict dst, const float *restrict src, int64_t lds, int64_t rows,
                      int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        memcpy(dst + r * cols, src + r * lds, (size_t)cols * sizeof(float));
}

/* Views into the cache of tess_nn_attention_forward. The wide path stores each row's weights
 * unnormalised, e^(score - max) (softmax_exp_row), and the factor 1/sum that normalises them in
 * inv: its forward scales the row's output (hs) instead of the row (T), its backward the row of
 * dout it reads. */
typedef struct {
    float *att;           /* (B,NH, head_att_size) block-packed softmax weights */
    float *xr;            /* (B,T,2C): q and k rotated, with rope; else NULL (read from qkv) */
    float *cos_t, *sin_t; /* (T,hs/2) each, or NULL without rope */
    float *inv;           /* (B,NH,T): wide path, 1/sum of each row of att; else NULL */
} att_cache;

static att_cache cache_views(float *cache, const tess_nn_attention_dims *d) {
    att_cache c;
    c.att = cache;
    float *end = c.att + d->B * d->NH * head_att_size(d);
    c.xr = d->rope ? end : NULL;
    c.cos_t = d->rope ? c.xr + 2 * d->B * d->T * d->C : NULL;
    c.sin_t = d->rope ? c.cos_t + d->T * (d->C / d->NH / 2) : NULL;
    if (d->rope) end = c.sin_t + d->T * (d->C / d->NH / 2);
    c.inv = wide_path(d) ? end : NULL;
    return c;
}

/* cos_t, sin_t (T, half): angle t * base^(-2i/hs), computed in double. */
static void rope_tables(float *cos_t, float *sin_t, int64_t T, int64_t hs, double base) {
    int64_t half = hs / 2;
    for (int64_t i = 0; i < half; i++) {
        double theta = pow(base, -2.0 * (double)i / (double)hs);
        for (int64_t t = 0; t < T; t++) {
            cos_t[t * half + i] = (float)cos((double)t * theta);
            sin_t[t * half + i] = (float)sin((double)t * theta);
        }
    }
}

/* y (hs) = x (hs) rotated by the angles c, s (hs/2). */
static void rope_rotate(float *y, const float *x, const float *c, const float *s, int64_t hs) {
    int64_t half = hs / 2;
    for (int64_t i = 0; i < half; i++) {
        float x1 = x[i], x2 = x[i + half];
        y[i] = x1 * c[i] - x2 * s[i];
        y[i + half] = x2 * c[i] + x1 * s[i];
    }
}

/* dx (hs) += R^T dy (hs): the backward of rope_rotate. */
static void rope_rotate_backward(float *dx, const float *dy, const float *c, const float *s,
                                 int64_t hs) {
    int64_t half = hs / 2;
    for (int64_t i = 0; i < half; i++) {
        float d1 = dy[i], d2 = dy[i + half];
        dx[i] += d1 * c[i] + d2 * s[i];
        dx[i + half] += d2 * c[i] - d1 * s[i];
    }
}

/* The softmax loops are written for GCC's auto-vectoriser, at -O2 as well as -O3: the main loops
 * walk LANES elements at a time with LANES independent partial results (one float accumulator
 * would be a serial chain, as without -ffast-math the compiler may not reorder the sum), a
 * scalar loop takes the n % LANES tail, and the exponential is tess_tensor_expf (inline). */
enum { LANES = 8 };

/* An int32 that orders as the float x for every non-NaN x (the sign-magnitude bits turned into
 * two's complement), and back: the row maximum runs as an integer maximum, which GCC vectorises
 * (a float compare-select it left scalar). A NaN maps above +inf or below -inf by its sign. */
static inline int32_t order_key(float x) {
    int32_t b;
    memcpy(&b, &x, sizeof b);
    return b ^ ((b >> 31) & 0x7FFFFFFF);
}
static inline float order_key_float(int32_t k) {
    const int32_t b = k ^ ((k >> 31) & 0x7FFFFFFF);
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* softmax_exp_row for a row whose kv keys all take part (no causal limit, no masked key): the
 * same result without the limit's selects and the mask's adds and products. */
static float exp_row_full(float *restrict row, int64_t kv) {
    const int64_t nv = kv - kv % LANES;
    const int32_t ninf = order_key(-INFINITY);
    int32_t mx[LANES], mk = ninf;
    for (int l = 0; l < LANES; l++) mx[l] = ninf;
    for (int64_t s = 0; s < nv; s += LANES) {
        for (int l = 0; l < LANES; l++) {
            const int32_t k = order_key(row[s + l]);
            mx[l] = k > mx[l] ? k : mx[l];
        }
    }
    for (int l = 0; l < LANES; l++) mk = mx[l] > mk ? mx[l] : mk;
    for (int64_t s = nv; s < kv; s++) {
        const int32_t k = order_key(row[s]);
        mk = k > mk ? k : mk;
    }
    float m = order_key_float(mk);
    if (m == -INFINITY) m = NAN; /* every score -inf or NaN: the row is NaN (softmax_exp_row) */
    float acc[LANES] = {0}, sum = 0.0f;
    for (int64_t s = 0; s < nv; s += LANES) {
        for (int l = 0; l < LANES; l++) {
            row[s + l] = tess_tensor_expf(row[s + l] - m);
            acc[l] += row[s + l];
        }
    }
    for (int64_t s = nv; s < kv; s++) {
        row[s] = tess_tensor_expf(row[s] - m);
        sum += row[s];
    }
    for (int l = 0; l < LANES; l++) sum += acc[l];
    return 1.0f / sum;
}

/* row (kv) = e^(score - max) over the keys that take part: s < n (the causal limit; n = kv when
 * bidirectional) with keep[s] = 1, neg[s] = 0 (a key of the key-padding mask; a masked key has
 * keep 0, neg -inf); every other entry becomes exactly 0. Returns 1 / (the row's sum), the factor
 * that turns the row into its softmax, or 0 for a row without any key (then all 0: attention.h).
 * The whole row goes through the LANES loops, so a short causal row (n < LANES) costs no scalar
 * tail when kv is a multiple of LANES; the limit and the mask are selects and products, not
 * branches; the limit compares int32 indices (T <= INT_MAX: dims_check; GCC builds its masks
 * from int64 ones in two halves, though neither was measurably faster). keep = neg = NULL: every
 * key s < kv takes part (n = kv), exp_row_full. kv >= 1. */
static float softmax_exp_row(float *restrict row, int64_t kv, int64_t n,
                             const float *restrict keep, const float *restrict neg) {
    if (!keep) return exp_row_full(row, kv);
    const int32_t nv = (int32_t)(kv - kv % LANES), n32 = (int32_t)n;
    const int32_t ninf = order_key(-INFINITY);
    int32_t mx[LANES], mk = ninf;
    for (int l = 0; l < LANES; l++) mx[l] = ninf;
    for (int32_t s = 0; s < nv; s += LANES) {
        for (int32_t l = 0; l < LANES; l++) {
            const float lim = s + l < n32 ? 0.0f : -INFINITY;
            const int32_t k = order_key(row[s + l] + neg[s + l] + lim);
            mx[l] = k > mx[l] ? k : mx[l];
        }
    }
    for (int l = 0; l < LANES; l++) mk = mx[l] > mk ? mx[l] : mk;
    for (int32_t s = nv; s < kv; s++) {
        const float lim = s < n32 ? 0.0f : -INFINITY;
        const int32_t k = order_key(row[s] + neg[s] + lim);
        mk = k > mk ? k : mk;
    }
    /* a NaN score, if its sign bit is clear, is the maximum: m NaN, and so is the row */
    float m = order_key_float(mk);
    if (m == -INFINITY) { /* no key left, or every key's score is NaN (or -inf) */
        bool any = false;
        for (int64_t s = 0; s < n; s++) any |= keep[s] != 0.0f;
        if (!any) {
            memset(row, 0, (size_t)kv * sizeof(float));
            return 0.0f;
        }
        m = NAN; /* a NaN score is not dropped (nor one with its sign bit set): the row is NaN */
    }
    /* a masked key's exp may saturate (its score can exceed m) but stays finite: keep 0 zeroes it */
    float acc[LANES] = {0}, sum = 0.0f;
    for (int32_t s = 0; s < nv; s += LANES) {
        for (int32_t l = 0; l < LANES; l++) {
            const float e = tess_tensor_expf(row[s + l] - m) * keep[s + l];
            row[s + l] = s + l < n32 ? e : 0.0f;
            acc[l] += row[s + l];
        }
    }
    for (int32_t s = nv; s < kv; s++) {
        row[s] = s < n32 ? tess_tensor_expf(row[s] - m) * keep[s] : 0.0f;
        sum += row[s];
    }
    for (int l = 0; l < LANES; l++) sum += acc[l];
    return 1.0f / sum; /* sum >= 1: the maximum contributes exp(0) */
}

/* row (kv) = softmax over the keys that take part (softmax_exp_row's contract, normalised). */
static void softmax_row(float *restrict row, int64_t kv, int64_t n, const float *restrict keep,
                        const float *restrict neg) {
    const float inv = softmax_exp_row(row, kv, n, keep, neg);
    const int64_t nv = kv - kv % LANES;
    for (int64_t s = 0; s < nv; s += LANES) {
        for (int l = 0; l < LANES; l++) row[s + l] *= inv;
    }
    for (int64_t s = nv; s < kv; s++) row[s] *= inv;
}

/* g (n) = e * (g - inv <e, g>): softmax backward in place for weights a = inv e, e (n) their
 * unnormalised exponentials (softmax_exp_row), inv their 1/sum, and g (n) d/d weights divided by
 * inv. With inv = 1, e the weights: a * (g - <a, g>). */
static void softmax_backward_scaled(float *restrict g, const float *restrict e, float inv,
                                    int64_t n) {
    const int64_t nv = n - n % LANES;
    float acc[LANES] = {0}, dot = 0.0f;
    for (int64_t s = 0; s < nv; s += LANES) {
        for (int l = 0; l < LANES; l++) acc[l] += e[s + l] * g[s + l];
    }
    for (int64_t s = nv; s < n; s++) dot += e[s] * g[s];
    for (int l = 0; l < LANES; l++) dot += acc[l];
    dot *= inv;
    for (int64_t s = 0; s < nv; s += LANES) {
        for (int l = 0; l < LANES; l++) g[s + l] = e[s + l] * (g[s + l] - dot);
    }
    for (int64_t s = nv; s < n; s++) g[s] = e[s] * (g[s] - dot);
}

/* keep, neg (T) = 1, 0 where key s of the sequence takes part (kmask row km, or NULL for all),
 * else 0, -inf: the form softmax_row takes. Returns whether every key takes part. */
static bool key_rows(float *keep, float *neg, const uint8_t *km, int64_t T) {
    bool all = true;
    for (int64_t s = 0; s < T; s++) keep[s] = !km || km[s] ? 1.0f : 0.0f;
    for (int64_t s = 0; s < T; s++) neg[s] = !km || km[s] ? 0.0f : -INFINITY;
    for (int64_t s = 0; s < T; s++) all &= keep[s] != 0.0f;
    return all;
}

/* The products run on each head's rows where they lie in the (T,3C) qkv layout (leading dimension
 * 3C; out and dout C), so no head is gathered into contiguous blocks or scattered back: with rope
 * the forward rotates q and k into the cache one sequence at a time just before its heads (so
 * that they find them in L2), and the backward accumulates dv (and dq, dk without rope) straight
 * into dqkv. Without rope the cache holds no copy of qkv: a copy (24 MB per layer of the calm
 * DAT's neural attention) was no faster to read than qkv itself. */
void tess_nn_attention_forward(float *out, float *cache, float *scratch, const float *qkv,
                               const uint8_t *kmask, const tess_nn_attention_dims *d) {
    /* out (B,T,C); cache (cache_size); scratch (scratch_size); qkv (B,T,3C); kmask (B,T) or NULL */
    TESS_ASSERT(tess_nn_attention_dims_check(d) == TESS_OK);
    const int64_t B = d->B, T = d->T, C = d->C, NH = d->NH, hs = C / NH, half = hs / 2;
    const int64_t rb = row_block(d), hatt = head_att_size(d), C3 = 3 * C;
    const int64_t lqk = d->rope ? 2 * C : C3; /* rows of q, k: the rotated copy's or qkv's */
    const float scale = 1.0f / sqrtf((float)hs);
    att_cache c = cache_views(cache, d);
    float *keep = scratch;  /* (T): 1 where key s of the current sequence takes part, else 0 */
    float *neg = keep + T;  /* (T): 0 where it takes part, else -inf */

    if (d->rope) rope_tables(c.cos_t, c.sin_t, T, hs, (double)d->rope_base);
    const bool small = small_path(d);
    const bool wide = wide_path(d);
    /* small and wide: (hs,T) k of the current head, transposed; wide: its v (T,hs) contiguous */
    float *kt = small_scratch(scratch, d), *vc = kt + T * hs;
    for (int64_t b = 0; b < B; b++) {
        if (d->rope) {
            for (int64_t t = 0; t < T; t++) {
                const float *src = qkv + (b * T + t) * C3, *ct = c.cos_t + t * half,
                            *st = c.sin_t + t * half;
                float *dst = c.xr + (b * T + t) * 2 * C;
                for (int64_t h = 0; h < 2 * NH; h++) /* the q heads, then the k heads */
                    rope_rotate(dst + h * hs, src + h * hs, ct, st, hs);
            }
        }
        /* bidirectional rows of a sequence without masked keys take exp_row_full */
        const bool full = key_rows(keep, neg, kmask ? kmask + b * T : NULL, T) && !d->causal;
        const float *kp = full ? NULL : keep, *np = full ? NULL : neg;
        for (int64_t h = 0; h < NH; h++) {
            /* (T,hs) each with leading dimension 3C */
            /* (T,hs) each, q and k with leading dimension lqk, v 3C */
            const float *q = (d->rope ? c.xr + b * T * lqk : qkv + b * T * C3) + h * hs,
                        *k = q + C, *v = qkv + b * T * C3 + 2 * C + h * hs;
            float *att = c.att + (b * NH + h) * hatt, *y = out + b * T * C + h * hs;
            if (small) { /* one (T,T) block of weights (rb = T), rows in blocks of 8 */
                transpose(kt, k, lqk, T, hs);
                for (int64_t i0 = 0; i0 < T; i0 += ATT_SMALL_ROWS) {
                    const int64_t i1 = i0 + ATT_SMALL_ROWS, kv = block_kv(d, i1);
                    float *a = att + i0 * T;
                    /* a (8,kv) = scale * q[i0:i1] (8,hs) @ kt[:, 0:kv] (hs,kv) */
                    tess_matmul_small(a, T, q + i0 * lqk, lqk, kt, T, ATT_SMALL_ROWS, kv, hs,
                                      scale, 0.0f);
                    for (int64_t t = i0; t < i1; t++) {
                        float *row = att + t * T;
                        softmax_row(row, kv, d->causal ? t + 1 : T, kp, np);
                        if (kv < T) memset(row + kv, 0, (size_t)(T - kv) * sizeof(float));
                    }
                    /* y[i0:i1] (8,hs) = a (8,kv) @ v[0:kv] (kv,hs), into out (ld C) */
                    tess_matmul_small(y + i0 * C, C, a, T, v, C3, ATT_SMALL_ROWS, hs, kv, 1.0f,
                                      0.0f);
                }
                continue;
            }
            if (wide) { /* one (T,T) block, rows in blocks of WIDE_ROWS */
                transpose(kt, k, lqk, T, hs);
                copy_rows(vc, v, C3, T, hs);
                float *inv = c.inv + (b * NH + h) * T; /* (T) */
                for (int64_t i0 = 0; i0 < T; i0 += WIDE_ROWS) {
                    const int64_t rows = i0 + WIDE_ROWS < T ? WIDE_ROWS : T - i0;
                    float *a = att + i0 * T, *yb = y + i0 * C;
                    /* a (rows,T) = scale * q[i0:i0+rows] (rows,hs) @ kt (hs,T) */
                    tess_matmul_small(a, T, q + i0 * lqk, lqk, kt, T, rows, T, hs, scale, 0.0f);
                    for (int64_t t = 0; t < rows; t++)
                        inv[i0 + t] = softmax_exp_row(a + t * T, T, T, kp, np);
                    /* y[i0:i0+rows] (rows,hs) = a (rows,T) @ vc (T,hs), into out (ld C), then
                     * each row times its 1/sum */
                    tess_matmul_small(yb, C, a, T, vc, hs, rows, hs, T, 1.0f, 0.0f);
                    for (int64_t t = 0; t < rows; t++)
                        for (int64_t j = 0; j < hs; j++) yb[t * C + j] *= inv[i0 + t];
                }
                continue;
            }
            for (int64_t i0 = 0; i0 < T; i0 += rb) {
                int64_t i1 = i0 + rb < T ? i0 + rb : T, rows = i1 - i0, kv = block_kv(d, i1);
                /* att (rows,kv) = scale * q[i0:i1] (rows,hs) @ k[0:kv]^T */
                tess_matmul_ld(att, kv, q + i0 * lqk, lqk, k, lqk, rows, kv, hs, false, true,
                               scale, 0.0f);
                for (int64_t t = i0; t < i1; t++)
                    softmax_row(att + (t - i0) * kv, kv, d->causal ? t + 1 : T, kp, np);
                /* y[i0:i1] (rows,hs) = att (rows,kv) @ v[0:kv] (kv,hs), into out (ld C) */
                tess_matmul_ld(y + i0 * C, C, att, kv, v, C3, rows, hs, kv, false, false, 1.0f,
                               0.0f);
                att += rows * kv;
            }
        }
    }
}

void tess_nn_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                                const float *cache, const tess_nn_attention_dims *d) {
    /* dqkv (B,T,3C); scratch (scratch_size); dout (B,T,C); qkv (B,T,3C) and cache as in
     * forward */
    TESS_ASSERT(tess_nn_attention_dims_check(d) == TESS_OK);
    const int64_t B = d->B, T = d->T, C = d->C, NH = d->NH, hs = C / NH, half = hs / 2;
    const int64_t rb = row_block(d), hatt = head_att_size(d), C3 = 3 * C;
    const int64_t lqk = d->rope ? 2 * C : C3; /* rows of q, k: the rotated copy's or qkv's */
    const float scale = 1.0f / sqrtf((float)hs);
    /* The views are read-only here; cache_views only computes offsets. */
    att_cache c = cache_views((float *)cache, d);
    float *g = scratch;          /* (T,2C): d/d rotated q | k of one sequence (rope only) */
    float *datt = g + 2 * T * C; /* (rows,kv) of the current row block */
    const bool wide = wide_path(d);
    /* wide: the current head's v transposed (hs,T), and k, q, dy contiguous (T,hs) */
    float *vt = small_scratch(scratch, d), *kc = vt + T * hs, *qc = kc + T * hs,
          *dyc = qc + T * hs;

    for (int64_t b = 0; b < B; b++) {
        /* dq, dk go to g (rotated frame, ld 2C) with rope, else straight into dqkv (ld 3C) */
        float *dqk = d->rope ? g : dqkv + b * T * C3;
        const int64_t ldg = d->rope ? 2 * C : C3;
        if (d->rope) memset(g, 0, (size_t)(2 * T * C) * sizeof(float));
        for (int64_t h = 0; h < NH; h++) {
            const float *q = (d->rope ? c.xr + b * T * lqk : qkv + b * T * C3) + h * hs,
                        *k = q + C, *v = qkv + b * T * C3 + 2 * C + h * hs;
            const float *att = c.att + (b * NH + h) * hatt, *dy = dout + b * T * C + h * hs;
            float *dq = dqk + h * hs, *dk = dq + C, *dv = dqkv + b * T * C3 + 2 * C + h * hs;
            if (wide) { /* one (T,T) block (rb = T, kv = T) */
                /* att holds e = sum * weights; dyc = dy row t times inv[t] makes dv and datt
                 * those of the weights, datt's row t divided by inv[t] */
                const float *inv = c.inv + (b * NH + h) * T;
                transpose(vt, v, C3, T, hs);
                copy_rows(kc, k, lqk, T, hs);
                copy_rows(qc, q, lqk, T, hs);
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = 0; j < hs; j++) dyc[t * hs + j] = dy[t * C + j] * inv[t];
                /* datt (T,T) = dyc (T,hs) @ vt (hs,T) */
                tess_matmul_small(datt, T, dyc, hs, vt, T, T, T, hs, 1.0f, 0.0f);
                /* dv (T,hs) += e^T (T,T) @ dyc (T,hs) */
                tess_matmul_small_tn(dv, C3, att, T, dyc, hs, T, hs, T, 1.0f, 1.0f);
                for (int64_t t = 0; t < T; t++)
                    softmax_backward_scaled(datt + t * T, att + t * T, inv[t], T);
                /* dq (T,hs) += scale * dpre (T,T) @ k (T,hs) */
                tess_matmul_small(dq, ldg, datt, T, kc, hs, T, hs, T, scale, 1.0f);
                /* dk (T,hs) += scale * dpre^T (T,T) @ q (T,hs) */
                tess_matmul_small_tn(dk, ldg, datt, T, qc, hs, T, hs, T, scale, 1.0f);
                continue;
            }
            for (int64_t i0 = 0; i0 < T; i0 += rb) {
                int64_t i1 = i0 + rb < T ? i0 + rb : T, rows = i1 - i0, kv = block_kv(d, i1);
                /* datt (rows,kv) = dy[i0:i1] (rows,hs) @ v[0:kv]^T */
                tess_matmul_ld(datt, kv, dy + i0 * C, C, v, C3, rows, kv, hs, false, true, 1.0f,
                               0.0f);
                /* dv[0:kv] (kv,hs) += att^T (kv,rows) @ dy[i0:i1] (rows,hs) */
                tess_matmul_ld(dv, C3, att, kv, dy + i0 * C, C, kv, hs, rows, true, false, 1.0f,
                               1.0f);
                /* softmax backward in place: dpre = att * (datt - <att, datt>), masked entries 0 */
                for (int64_t t = i0; t < i1; t++) /* over the whole row: att is 0 past the limit */
                    softmax_backward_scaled(datt + (t - i0) * kv, att + (t - i0) * kv, 1.0f, kv);
                /* dq[i0:i1] (rows,hs) += scale * dpre (rows,kv) @ k[0:kv] (kv,hs) */
                tess_matmul_ld(dq + i0 * ldg, ldg, datt, kv, k, lqk, rows, hs, kv, false, false,
                               scale, 1.0f);
                /* dk[0:kv] (kv,hs) += scale * dpre^T (kv,rows) @ q[i0:i1] (rows,hs) */
                tess_matmul_ld(dk, ldg, datt, kv, q + i0 * lqk, lqk, kv, hs, rows, true, false,
                               scale, 1.0f);
                att += rows * kv;
            }
        }
        if (d->rope) { /* undo the rotation: dqkv's q | k += R^T g */
            for (int64_t t = 0; t < T; t++) {
                const float *ct = c.cos_t + t * half, *st = c.sin_t + t * half;
                float *dst = dqkv + (b * T + t) * C3;
                for (int64_t h = 0; h < 2 * NH; h++)
                    rope_rotate_backward(dst + h * hs, g + t * 2 * C + h * hs, ct, st, hs);
            }
        }
    }
}

/* Element i of the rotated head vector x (hs) at position t, in double. */
static double rope_ref(const float *x, int64_t t, int64_t i, int64_t hs,
                       const tess_nn_attention_dims *d) {
    if (!d->rope) return x[i];
    int64_t half = hs / 2, j = i < half ? i : i - half;
    double ang = (double)t * pow((double)d->rope_base, -2.0 * (double)j / (double)hs);
    return i < half ? x[i] * cos(ang) - x[i + half] * sin(ang)
                    : x[i] * cos(ang) + x[i - half] * sin(ang);
}

void tess_nn_attention_forward_ref(float *out, float *att, const float *qkv, const uint8_t *kmask,
                                   const tess_nn_attention_dims *d) {
    /* out (B,T,C); att (B,NH,T,T); qkv (B,T,3C); kmask (B,T) or NULL */
    const int64_t B = d->B, T = d->T, C = d->C, NH = d->NH, hs = C / NH;
    const double scale = 1.0 / sqrt((double)hs);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < NH; h++) {
            for (int64_t t = 0; t < T; t++) {
                const float *q = qkv + (b * T + t) * 3 * C + h * hs;
                float *a = att + ((b * NH + h) * T + t) * T;
                int64_t n = d->causal ? t + 1 : T;
                double mx = -INFINITY, sum = 0.0;
                for (int64_t s = 0; s < n; s++) {
                    if (kmask && !kmask[b * T + s]) continue;
                    const float *k = qkv + (b * T + s) * 3 * C + C + h * hs;
                    double dot = 0.0;
                    for (int64_t i = 0; i < hs; i++) {
                        dot += rope_ref(q, t, i, hs, d) * rope_ref(k, s, i, hs, d);
                    }
                    a[s] = (float)(dot * scale);
                    mx = a[s] > mx ? a[s] : mx;
                }
                /* masked keys weigh 0; a row with no key left is all 0 (mx stays -inf) */
                for (int64_t s = 0; s < n; s++) {
                    bool key = !kmask || kmask[b * T + s];
                    if (key) sum += exp(a[s] - mx);
                }
                for (int64_t s = 0; s < n; s++) {
                    bool key = (!kmask || kmask[b * T + s]) && sum > 0.0;
                    a[s] = key ? (float)(exp(a[s] - mx) / sum) : 0.0f;
                }
                for (int64_t s = n; s < T; s++) a[s] = 0.0f;
                for (int64_t i = 0; i < hs; i++) {
                    double acc = 0.0;
                    for (int64_t s = 0; s < n; s++) {
                        acc += (double)a[s] * qkv[(b * T + s) * 3 * C + 2 * C + h * hs + i];
                    }
                    out[(b * T + t) * C + h * hs + i] = (float)acc;
                }
            }
        }
    }
}

void tess_nn_attention_backward_ref(float *dqkv, float *dpreatt, const float *dout,
                                    const float *qkv, const float *att,
                                    const tess_nn_attention_dims *d) {
    /* dqkv (B,T,3C); dpreatt (B,NH,T,T); dout (B,T,C); qkv (B,T,3C); att (B,NH,T,T) */
    const int64_t B = d->B, T = d->T, C = d->C, NH = d->NH, hs = C / NH, half = hs / 2;
    const double scale = 1.0 / sqrt((double)hs);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < NH; h++) {
            const float *A = att + (b * NH + h) * T * T;  /* (T,T) */
            float *P = dpreatt + (b * NH + h) * T * T;    /* (T,T) */
            /* dpre[t,s] = att[t,s] * (datt[t,s] - sum_s' att[t,s'] datt[t,s']),
             * datt[t,s] = <dout[t], v[s]>, recomputed rather than stored */
            for (int64_t t = 0; t < T; t++) {
                const float *go = dout + (b * T + t) * C + h * hs;
                double dot = 0.0;
                for (int64_t s = 0; s < T; s++) {
                    const float *v = qkv + (b * T + s) * 3 * C + 2 * C + h * hs;
                    double g = 0.0;
                    for (int64_t i = 0; i < hs; i++) g += (double)go[i] * v[i];
                    dot += (double)A[t * T + s] * g;
                }
                for (int64_t s = 0; s < T; s++) {
                    const float *v = qkv + (b * T + s) * 3 * C + 2 * C + h * hs;
                    double g = 0.0;
                    for (int64_t i = 0; i < hs; i++) g += (double)go[i] * v[i];
                    P[t * T + s] = (float)((double)A[t * T + s] * (g - dot));
                }
            }
            for (int64_t t = 0; t < T; t++) {
                float *dst = dqkv + (b * T + t) * 3 * C + h * hs;
                for (int64_t i = 0; i < hs; i++) {
                    /* d/dq_rot and d/dk_rot at channel i (and its RoPE partner), then R^T */
                    int64_t ip = !d->rope ? i : (i < half ? i + half : i - half);
                    double gq = 0.0, gqp = 0.0, gk = 0.0, gkp = 0.0, gv = 0.0;
                    for (int64_t s = 0; s < T; s++) {
                        const float *ks = qkv + (b * T + s) * 3 * C + C + h * hs;
                        const float *qs = qkv + (b * T + s) * 3 * C + h * hs;
                        gq += (double)P[t * T + s] * rope_ref(ks, s, i, hs, d);
                        gqp += (double)P[t * T + s] * rope_ref(ks, s, ip, hs, d);
                        gk += (double)P[s * T + t] * rope_ref(qs, s, i, hs, d);
                        gkp += (double)P[s * T + t] * rope_ref(qs, s, ip, hs, d);
                        gv += (double)A[s * T + t] * dout[(b * T + s) * C + h * hs + i];
                    }
                    double dq = gq, dk = gk;
                    if (d->rope) {
                        int64_t j = i < half ? i : i - half;
                        double ang = (double)t * pow((double)d->rope_base,
                                                     -2.0 * (double)j / (double)hs);
                        double sn = i < half ? sin(ang) : -sin(ang);
                        dq = gq * cos(ang) + gqp * sn;
                        dk = gk * cos(ang) + gkp * sn;
                    }
                    dst[i] += (float)(scale * dq);
                    dst[C + i] += (float)(scale * dk);
                    dst[2 * C + i] += (float)gv;
                }
            }
        }
    }
}
