/* test_attention.c - multi-head self-attention: the fast kernels against the reference on small
 * odd shapes (causal and not, RoPE and not, one and several heads, T across the causal row-block
 * size; the key-padding mask too), backward accumulation, causality, the mask's invariances and
 * argument checks. The PyTorch values are checked by the gradcheck table (tests/gradcheck). */
#include <stdlib.h>
#include <string.h>

#include "nn/attention.h" /* tess_nn_attention_* */
#include "tess_ref.h"       /* tess_ref_fill_uniform, tess_ref_rel_err */
#include "tess_test.h"

typedef struct {
    int64_t B, T, C, NH;
    bool causal, rope;
    bool masked; /* key-padding mask: keys with (b*T + s) % 3 == 0 masked (causal query 0 of
                  * sequence 0 then has no key) */
} shape;

/* Fast forward and backward against the reference on one shape, qkv uniform in (-amp, amp),
 * within relative error tol; backward must accumulate. */
static void check_against_ref(shape s, uint32_t seed, float amp, double tol) {
    tess_nn_attention_dims d;
    TESS_TEST_CHECK(tess_nn_attention_dims_init(&d, s.B, s.T, s.C, s.NH, s.causal, s.rope) ==
                        TESS_OK,
                    "dims B=%lld T=%lld C=%lld NH=%lld", (long long)s.B, (long long)s.T,
                    (long long)s.C, (long long)s.NH);
    int64_t nqkv = s.B * s.T * 3 * s.C, nout = s.B * s.T * s.C, natt = s.B * s.NH * s.T * s.T;
    float *qkv = malloc((size_t)nqkv * sizeof(float));
    float *dout = malloc((size_t)nout * sizeof(float));
    float *out = malloc((size_t)nout * sizeof(float));
    float *out_ref = malloc((size_t)nout * sizeof(float));
    float *dqkv = malloc((size_t)nqkv * sizeof(float));
    float *dqkv_ref = malloc((size_t)nqkv * sizeof(float));
    float *dqkv_twice = malloc((size_t)nqkv * sizeof(float));
    float *att = malloc((size_t)natt * sizeof(float)), *datt = malloc((size_t)natt * sizeof(float));
    float *cache = malloc((size_t)tess_nn_attention_cache_size(&d) * sizeof(float));
    float *scratch = malloc((size_t)tess_nn_attention_scratch_size(&d) * sizeof(float));
    tess_ref_fill_uniform(qkv, nqkv, seed, 1.0f);
    for (int64_t i = 0; i < nqkv; i++) qkv[i] *= amp;
    tess_ref_fill_uniform(dout, nout, seed + 1, 1.0f);
    tess_ref_fill_uniform(dqkv, nqkv, seed + 2, 1.0f); /* nonzero start: backward must add */
    memcpy(dqkv_ref, dqkv, (size_t)nqkv * sizeof(float));

    uint8_t *km = NULL;
    if (s.masked) {
        km = malloc((size_t)(s.B * s.T));
        for (int64_t i = 0; i < s.B * s.T; i++) km[i] = i % 3 != 0;
    }

    tess_nn_attention_forward(out, cache, scratch, qkv, km, &d);
    tess_nn_attention_forward_ref(out_ref, att, qkv, km, &d);
    tess_nn_attention_backward(dqkv, scratch, dout, qkv, cache, &d);
    tess_nn_attention_backward_ref(dqkv_ref, datt, dout, qkv, att, &d);
    char what[160];
    snprintf(what, sizeof what, "B=%lld T=%lld C=%lld NH=%lld causal=%d rope=%d masked=%d",
             (long long)s.B, (long long)s.T, (long long)s.C, (long long)s.NH, s.causal, s.rope,
             s.masked);
    double ef = tess_ref_rel_err(out, out_ref, nout), eb = tess_ref_rel_err(dqkv, dqkv_ref, nqkv);
    TESS_TEST_CHECK(ef < tol, "forward vs ref, %s: rel err %.3g", what, ef);
    TESS_TEST_CHECK(eb < tol, "backward vs ref, %s: rel err %.3g", what, eb);

    /* From zero, twice: twice the gradient of once. */
    memset(dqkv, 0, (size_t)nqkv * sizeof(float));
    tess_nn_attention_backward(dqkv, scratch, dout, qkv, cache, &d);
    memset(dqkv_twice, 0, (size_t)nqkv * sizeof(float));
    tess_nn_attention_backward(dqkv_twice, scratch, dout, qkv, cache, &d);
    tess_nn_attention_backward(dqkv_twice, scratch, dout, qkv, cache, &d);
    for (int64_t i = 0; i < nqkv; i++) dqkv[i] *= 2.0f;
    double ea = tess_ref_rel_err(dqkv_twice, dqkv, nqkv);
    TESS_TEST_CHECK(ea < 1e-6, "backward accumulates, %s: rel err %.3g", what, ea);

    free(qkv), free(dout), free(out), free(out_ref), free(dqkv), free(dqkv_ref), free(dqkv_twice);
    free(att), free(datt), free(cache), free(scratch), free(km);
}

/* Causal: changing tokens after t leaves outputs at <= t bitwise unchanged (the masked weights
 * are exact zeros), and does change the output after t. Bidirectional: it changes token 0.
 * T = 75, hs = 4: two causal row blocks of the BLAS path; T = 32, hs = 8: the short path. */
static void check_causality(bool causal, bool rope, int64_t T, int64_t C) {
    const int64_t B = 1, NH = 2, t = T / 2 + 2;
    tess_nn_attention_dims d;
    TESS_TEST_CHECK(tess_nn_attention_dims_init(&d, B, T, C, NH, causal, rope) == TESS_OK,
                    "dims");
    float *qkv = malloc((size_t)(B * T * 3 * C) * sizeof(float));
    float *out0 = malloc((size_t)(B * T * C) * sizeof(float));
    float *out1 = malloc((size_t)(B * T * C) * sizeof(float));
    float *cache = malloc((size_t)tess_nn_attention_cache_size(&d) * sizeof(float));
    float *scratch = malloc((size_t)tess_nn_attention_scratch_size(&d) * sizeof(float));
    tess_ref_fill_uniform(qkv, B * T * 3 * C, 77, 1.0f);
    tess_nn_attention_forward(out0, cache, scratch, qkv, NULL, &d);
    for (int64_t i = (t + 1) * 3 * C; i < T * 3 * C; i++) qkv[i] = -3.0f * qkv[i] + 0.5f;
    tess_nn_attention_forward(out1, cache, scratch, qkv, NULL, &d);
    int same_before = memcmp(out0, out1, (size_t)((t + 1) * C) * sizeof(float)) == 0;
    int same_after = memcmp(out0 + (t + 1) * C, out1 + (t + 1) * C, (size_t)C * sizeof(float)) == 0;
    if (causal) {
        TESS_TEST_CHECK(same_before, "causal (rope=%d): outputs at <= %lld unchanged", rope,
                        (long long)t);
        TESS_TEST_CHECK(!same_after, "causal (rope=%d): output at %lld changed", rope,
                        (long long)(t + 1));
    } else {
        TESS_TEST_CHECK(!same_before, "bidirectional: early outputs see later tokens");
    }
    free(qkv), free(out0), free(out1), free(cache), free(scratch);
}

/* A NaN in one query reaches that token's output (it is not clamped away in the softmax).
 * Causal T = 12, hs = 4: the BLAS path; T = 16, hs = 8: the short path; bidirectional T = 72,
 * hs = 8: the wide path (where present) with its softmax of unmasked rows. */
static void check_nan(int64_t T, int64_t C, bool causal) {
    const int64_t B = 1, NH = 2, t = 5;
    tess_nn_attention_dims d;
    TESS_TEST_CHECK(tess_nn_attention_dims_init(&d, B, T, C, NH, causal, false) == TESS_OK,
                    "dims");
    float *qkv = malloc((size_t)(B * T * 3 * C) * sizeof(float));
    float *out = malloc((size_t)(B * T * C) * sizeof(float));
    float *cache = malloc((size_t)tess_nn_attention_cache_size(&d) * sizeof(float));
    float *scratch = malloc((size_t)tess_nn_attention_scratch_size(&d) * sizeof(float));
    tess_ref_fill_uniform(qkv, B * T * 3 * C, 55, 1.0f);
    qkv[t * 3 * C] = -NAN; /* q of token t, head 0; x86 makes negative NaNs */
    tess_nn_attention_forward(out, cache, scratch, qkv, NULL, &d);
    TESS_TEST_CHECK(isnan(out[t * C]) && !isnan(out[(t - 1) * C]) && !isnan(out[t * C + C / NH]),
                    "NaN in q reaches its own head and token only: %g %g %g", out[t * C],
                    out[(t - 1) * C], out[t * C + C / NH]);
    qkv[t * 3 * C] = NAN;
    tess_nn_attention_forward(out, cache, scratch, qkv, NULL, &d);
    TESS_TEST_CHECK(isnan(out[t * C]), "positive NaN too: %g", out[t * C]);
    free(qkv), free(out), free(cache), free(scratch);
}

/* Key-padding mask: changing the k and v of masked keys changes no output; masked keys get no
 * gradient; a query whose keys are all masked outputs 0 and passes no gradient; and an unmasked
 * run differs (the mask is not ignored). T = 70, hs = 4: several causal row blocks of the BLAS
 * path; T = 32, hs = 8: the short path; T = 72, hs = 8, bidirectional: the wide path (with
 * TESS_MATMUL_SMALL_WIDE). T <= 80. */
static void check_key_mask(bool causal, bool rope, int64_t T, int64_t C) {
    const int64_t B = 2, NH = 2;
    tess_nn_attention_dims d;
    TESS_TEST_CHECK(tess_nn_attention_dims_init(&d, B, T, C, NH, causal, rope) == TESS_OK, "dims");
    const int64_t nqkv = B * T * 3 * C, nout = B * T * C;
    float *qkv = malloc((size_t)nqkv * sizeof(float)), *dqkv = calloc((size_t)nqkv, sizeof(float));
    float *out0 = malloc((size_t)nout * sizeof(float)), *out1 = malloc((size_t)nout * sizeof(float));
    float *dout = malloc((size_t)nout * sizeof(float));
    float *cache = malloc((size_t)tess_nn_attention_cache_size(&d) * sizeof(float));
    float *scratch = malloc((size_t)tess_nn_attention_scratch_size(&d) * sizeof(float));
    uint8_t km[2 * 80];
    /* sequence 0: keys 0..2 and every 5th masked (so causal query 0 has no key); sequence 1: all
     * masked when bidirectional (no query has a key), keys 10..19 masked when causal */
    for (int64_t t = 0; t < T; t++) {
        km[t] = !(t < 3 || t % 5 == 0);
        km[T + t] = causal ? !(t >= 10 && t < 20) : 0;
    }
    tess_ref_fill_uniform(qkv, nqkv, 71, 1.0f);
    tess_ref_fill_uniform(dout, nout, 72, 1.0f);
    tess_nn_attention_forward(out0, cache, scratch, qkv, km, &d);
    tess_nn_attention_backward(dqkv, scratch, dout, qkv, cache, &d);
    int64_t leaks = 0, nonzero_dead = 0;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < T; t++) {
            const float *g = dqkv + (b * T + t) * 3 * C;
            if (!km[b * T + t])
                for (int64_t i = C; i < 3 * C; i++) leaks += g[i] != 0.0f; /* dk, dv of a masked key */
        }
    }
    /* a query without keys: causal sequence 0 query 0..2; bidirectional sequence 1 all */
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < T; t++) {
            bool dead = causal ? (b == 0 && t < 3) : b == 1;
            if (!dead) continue;
            for (int64_t i = 0; i < C; i++) nonzero_dead += out0[(b * T + t) * C + i] != 0.0f;
            for (int64_t i = 0; i < C; i++) nonzero_dead += dqkv[(b * T + t) * 3 * C + i] != 0.0f;
        }
    }
    TESS_TEST_CHECK(leaks == 0, "masked keys got %lld nonzero k/v gradients", (long long)leaks);
    TESS_TEST_CHECK(nonzero_dead == 0, "fully masked queries: %lld nonzero outputs or dq",
                    (long long)nonzero_dead);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            if (!km[b * T + t])
                for (int64_t i = C; i < 3 * C; i++) qkv[(b * T + t) * 3 * C + i] += 5.0f;
    tess_nn_attention_forward(out1, cache, scratch, qkv, km, &d);
    TESS_TEST_CHECK(memcmp(out0, out1, (size_t)nout * sizeof(float)) == 0,
                    "masked keys' k and v changed an output");
    tess_nn_attention_forward(out1, cache, scratch, qkv, NULL, &d);
    TESS_TEST_CHECK(memcmp(out0, out1, (size_t)nout * sizeof(float)) != 0,
                    "the unmasked run must differ");
    free(qkv), free(dqkv), free(out0), free(out1), free(dout), free(cache), free(scratch);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const shape shapes[] = {
        {1, 1, 4, 1, false, false, false},   {2, 7, 8, 1, false, false, false},
        {2, 7, 12, 3, false, false, false},  {1, 13, 12, 2, false, false, false},
        {1, 70, 16, 2, false, false, false}, {2, 130, 8, 4, false, false, false},
        {1, 65, 6, 3, false, false, false},
    };
    uint32_t seed = 10;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        for (int causal = 0; causal < 2; causal++) {
            for (int rope = 0; rope < 2; rope++) {
                shape s = shapes[i];
                s.causal = causal, s.rope = rope;
                if (rope && (s.C / s.NH) % 2 != 0) continue;
                check_against_ref(s, seed, 2.0f, 2e-6); /* scores well beyond +-1 */
                seed += 3;
            }
        }
    }
    /* odd head size without RoPE (hs = 3, 5) */
    check_against_ref((shape){2, 9, 15, 5, true, false, false}, 99, 2.0f, 2e-6);
    check_against_ref((shape){1, 66, 5, 1, true, false, false}, 98, 2.0f, 2e-6);
    /* Score gaps of hundreds: exp underflows (the fast exp clamps below -87.3). Float rounding
     * of scores this large alone moves the weights by ~1e-5, hence the looser tolerance. */
    check_against_ref((shape){1, 20, 8, 2, true, true, false}, 97, 30.0f, 5e-5);
    check_against_ref((shape){2, 17, 8, 1, false, false, false}, 96, 30.0f, 5e-5);
    /* The dual-axis transformer's shapes (rows of 16, 32, 64 keys: whole LANES blocks, no
     * tail), with and without the key-padding mask, and masked rows with a tail */
    const shape dat[] = {
        {3, 16, 32, 2, true, true, false},  {3, 16, 32, 2, true, true, true},
        {2, 32, 64, 4, true, true, true},   {2, 64, 32, 2, false, false, false},
        {2, 64, 32, 2, false, false, true}, {2, 29, 16, 2, false, false, true},
        {2, 29, 16, 2, true, false, true},  {1, 70, 16, 2, true, true, true},
        /* bidirectional, T > 64, T and hs multiples of 8: the wide path (the neural axis, T = 256,
         * hs = 32; hs 8 and 16 with RoPE) */
        {2, 256, 64, 2, false, false, true}, {1, 72, 16, 2, false, true, false},
        {2, 136, 32, 2, false, true, true},
    };
    for (size_t i = 0; i < sizeof dat / sizeof dat[0]; i++)
        check_against_ref(dat[i], 200 + (uint32_t)i, 2.0f, 2e-6);

    check_nan(12, 8, true);
    check_nan(16, 16, true);
    check_nan(72, 16, false);
    for (int small = 0; small < 2; small++) {
        const int64_t T = small ? 32 : 70, C = small ? 16 : 8;
        check_key_mask(true, false, T, C);
        check_key_mask(true, true, T, C);
        check_key_mask(false, true, T, C);
        check_causality(true, false, small ? 32 : 75, C);
        check_causality(true, true, small ? 32 : 75, C);
        check_causality(false, true, small ? 32 : 75, C);
    }
    check_key_mask(false, false, 72, 16); /* the wide path */
    check_key_mask(false, true, 72, 16);
    check_causality(false, false, 72, 16);

    tess_nn_attention_dims d;
    TESS_TEST_CHECK(tess_nn_attention_dims_init(&d, 1, 4, 10, 3, true, false) == TESS_ERR_ARG,
                    "C not divisible by NH is rejected");
    TESS_TEST_CHECK(tess_nn_attention_dims_init(&d, 1, 4, 9, 3, true, true) == TESS_ERR_ARG,
                    "odd head size with RoPE is rejected");
    TESS_TEST_CHECK(tess_nn_attention_dims_init(&d, 0, 4, 8, 2, true, false) == TESS_ERR_ARG,
                    "B = 0 is rejected");
    tess_error_clear();
    TESS_TEST_CHECK(tess_nn_attention_dims_init(&d, 1, 4, 8, 2, true, true) == TESS_OK &&
                        d.rope_base == 10000.0f,
                    "default RoPE base");

    int rc = tess_test_finish("attention");
    MPI_Finalize();
    return rc;
}
