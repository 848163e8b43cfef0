/* test_transformer.c - the whole transformer's hand-written backward against central
 * differences of its forward loss, for each norm x MLP variant, causal and bidirectional.
 *
 * Tolerance: the loss is an fp32 forward (about 1e-7 relative noise on a loss near ln V = 2);
 * with step h = 1e-2 on O(0.1..1) parameters the rounding error of a central difference is about
 * 2 * 1e-7 * 2 / (2h) = 2e-5 absolute, and the truncation error h^2 |L'''| / 6 is ~1e-5. Sampled
 * gradients are O(1e-3..1e-1), so per tensor the normalised error ||g - g_fd|| / max(||g||,
 * ||g_fd||) stays near 1e-3 when the backward is right; a wrong term gives O(1). We require
 * < 3e-2 per tensor. Parameters are drawn larger than the model's 0.02 init (std 0.3) so that
 * every path carries signal. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/rng.h"       /* tess_rng_* */
#include "nn/registry.h"    /* tess_registry_* */
#include "nn/transformer.h" /* tess_tfm_* */
#include "tess_test.h"

enum { B = 2, SAMPLES_PER_TENSOR = 6 };

static void check_variant(tess_nn_norm_kind norm, tess_nn_ffn_kind mlp, bool causal) {
    tess_tfm_config cfg = {.V = 7, .T = 5, .C = 8, .NH = 2, .F = 12, .L = 2, .norm = norm,
                           .mlp = mlp, .causal = causal, .norm_eps = 1e-5f, .rope_base = 10000.0f};
    char label[64];
    snprintf(label, sizeof label, "%s/%s/%s", norm == TESS_NN_NORM_RMS ? "rmsnorm" : "layernorm",
             mlp == TESS_NN_FFN_SWIGLU ? "swiglu" : "gelu", causal ? "causal" : "bidirectional");
    tess_registry *reg = NULL;
    tess_tfm *m = NULL;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK, "%s: registry", label);
    TESS_TEST_CHECK(tess_tfm_create(&m, &cfg, B, reg) == TESS_OK, "%s: create\n%s", label,
                    tess_error_text());
    if (!m) return;
    TESS_TEST_CHECK(!tess_registry_is_final(reg), "%s: create leaves the registry open", label);
    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK, "%s: finalize", label);
    const tess_rng_key key = {.seed = 7, .stream = 3};
    float *p = tess_registry_params(reg);
    const int64_t n = tess_registry_local_total(reg);
    tess_rng_fill_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 0), 0, n, p, 0.0f, 0.3f);
    for (int64_t i = 0; i < tess_registry_count(reg); i++) { /* gains near 1 keep norms sane */
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (strstr(e->name, "norm") && e->name[strlen(e->name) - 1] == 'w')
            for (int64_t j = 0; j < e->local_count; j++) tess_registry_param(reg, i)[j] += 1.0f;
    }
    int32_t ids[B * 5], targets[B * 5];
    for (int i = 0; i < B * 5; i++) {
        ids[i] = (int32_t)(tess_rng_u64(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1), (uint64_t)i) % 7);
        targets[i] = i % 4 == 1 ? -1 : (int32_t)((ids[i] * 3 + 1) % 7);
    }

    tess_registry_zero_grads(reg);
    (void)tess_tfm_forward(m, ids, targets, B);
    tess_tfm_backward(m, 1.0f);
    const float *g = tess_registry_grads(reg);
    const float h = 1e-2f;
    for (int64_t i = 0; i < tess_registry_count(reg); i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        double num = 0.0, den_a = 0.0, den_b = 0.0;
        for (int s = 0; s < SAMPLES_PER_TENSOR; s++) {
            int64_t j = e->flat_offset +
                        (int64_t)(tess_rng_u64(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 2),
                                               (uint64_t)(i * 64 + s)) % (uint64_t)e->local_count);
            float saved = p[j];
            p[j] = saved + h;
            double lp = tess_tfm_forward(m, ids, targets, B);
            p[j] = saved - h;
            double lm = tess_tfm_forward(m, ids, targets, B);
            p[j] = saved;
            double fd = (lp - lm) / (2.0 * h);
            num += (g[j] - fd) * (g[j] - fd);
            den_a += (double)g[j] * g[j];
            den_b += fd * fd;
        }
        double den = sqrt(fmax(fmax(den_a, den_b), 1e-20));
        double err = sqrt(num) / den;
        TESS_TEST_CHECK(err < 3e-2, "%s: %s normalised gradient error %.3g (|g| %.3g, |fd| %.3g)",
                        label, e->name, err, sqrt(den_a), sqrt(den_b));
    }

    /* a shorter batch gives the same loss for its sequences as inside the full batch:
     * rows are independent (no cross-sequence leakage) */
    float full = tess_tfm_forward(m, ids, targets, B);
    float first = tess_tfm_forward(m, ids, targets, 1);
    float second = tess_tfm_forward(m, ids + 5, targets + 5, 1);
    int n1 = 0, n2 = 0;
    for (int i = 0; i < 5; i++) n1 += targets[i] >= 0, n2 += targets[5 + i] >= 0;
    TESS_TEST_CLOSE(full, (first * n1 + second * n2) / (n1 + n2), 1e-6, 1e-5, label);
    tess_tfm_destroy(&m);
    tess_registry_destroy(&reg);
    TESS_TEST_CHECK(m == NULL && reg == NULL, "destroy clears the handles");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    check_variant(TESS_NN_NORM_RMS, TESS_NN_FFN_SWIGLU, true);
    check_variant(TESS_NN_NORM_LAYER, TESS_NN_FFN_GELU, true);
    check_variant(TESS_NN_NORM_RMS, TESS_NN_FFN_GELU, false);
    check_variant(TESS_NN_NORM_LAYER, TESS_NN_FFN_SWIGLU, false);

    /* bad dimensions are refused with the offending field */
    tess_tfm_config bad = {.V = 7, .T = 5, .C = 8, .NH = 3, .F = 12, .L = 2, .norm_eps = 1e-5f};
    TESS_TEST_CHECK(tess_tfm_check_config(&bad, 1) == TESS_ERR_CONFIG &&
                        strstr(tess_error_text(), "model.heads (3)"),
                    "channels not divisible by heads: %s", tess_error_text());
    tess_error_clear();
    int rc = tess_test_finish("transformer");
    MPI_Finalize();
    return rc;
}
