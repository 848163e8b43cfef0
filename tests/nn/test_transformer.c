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

/* Records the gradient ranges the model reports. */
typedef struct {
    int n;
    int64_t lo[16], hi[16];
} hook_log;
static void record(void *ctx, int64_t lo, int64_t hi) {
    hook_log *h = ctx;
    if (h->n < 16) h->lo[h->n] = lo, h->hi[h->n] = hi;
    h->n++;
}

/* A pluggable feed-forward: GELU in odd layers, SwiGLU in even ones. */
static tess_status mixed_ffn(void *ctx, int64_t layer, const tess_tfm_config *cfg,
                             tess_nn_ffn **ffn) {
    const double *stds = ctx;
    TESS_CHECK(tess_nn_ffn_dense_create(ffn, layer % 2 ? TESS_NN_FFN_GELU : TESS_NN_FFN_SWIGLU,
                                        cfg->C, cfg->F, stds[0], stds[1]));
    return TESS_OK;
}

/* Sample standard deviation of entry i. */
static double entry_std(const tess_registry *reg, int64_t i) {
    const tess_registry_entry *e = tess_registry_get(reg, i);
    const float *p = tess_registry_param(reg, i);
    double s = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < e->local_count; j++) s += p[j], s2 += (double)p[j] * p[j];
    double m = s / (double)e->local_count;
    return sqrt(s2 / (double)e->local_count - m * m);
}

/* The model shares a registry with other modules: it registers without finalizing, its entries
 * are contiguous, the declared init gives the documented distributions (no name heuristics in
 * the library: this test reads the names only to know what to expect), the grad hook tiles
 * exactly the model's part of the buffer, and a custom feed-forward plugs in per layer. */
static void check_composition(void) {
    const int64_t L = 3;
    const double stds[2] = {0.02, 0.02 / sqrt(2.0 * (double)L)};
    tess_tfm_config cfg = {.V = 11, .T = 6, .C = 64, .NH = 4, .F = 96, .L = L,
                           .norm = TESS_NN_NORM_LAYER, .causal = true, .norm_eps = 1e-5f,
                           .rope_base = 10000.0f, .make_ffn = mixed_ffn, .ffn_ctx = (void *)stds};
    tess_registry *reg = NULL;
    tess_tfm *m = NULL;
    const int64_t shape[1] = {5};
    const tess_layout rep = tess_layout_replicated();
    int64_t before = -1, after = -1;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "other.before", 1, shape, &rep, &before) == TESS_OK &&
                        tess_tfm_create(&m, &cfg, 2, reg) == TESS_OK &&
                        tess_registry_add(reg, "other.after", 1, shape, &rep, &after) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK &&
                        tess_registry_init_params(reg, 42) == TESS_OK,
                    "composition setup: %s", tess_error_text());
    if (!m) return;
    TESS_TEST_CHECK(tess_registry_find(reg, "layers.0.mlp.w_gate") >= 0 &&
                        tess_registry_find(reg, "layers.1.mlp.w_fc") >= 0 &&
                        tess_registry_find(reg, "layers.1.mlp.b_proj") >= 0,
                    "make_ffn built each layer's feed-forward");
    for (int64_t i = before + 1; i < after; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        const float *p = tess_registry_param(reg, i);
        const size_t len = strlen(e->name);
        bool gain = strstr(e->name, "norm") && e->name[len - 1] == 'w';
        bool bias = e->ndim == 1 && !gain;
        bool out = strstr(e->name, "attn.w_o") || strstr(e->name, "mlp.w_down") ||
                   strstr(e->name, "mlp.w_proj");
        if (gain || bias) {
            int64_t wrong = 0;
            for (int64_t j = 0; j < e->local_count; j++) wrong += p[j] != (gain ? 1.0f : 0.0f);
            TESS_TEST_CHECK(wrong == 0, "%s: %lld elements not %g", e->name, (long long)wrong,
                            gain ? 1.0 : 0.0);
        } else {
            double want = out ? stds[1] : stds[0], got = entry_std(reg, i);
            TESS_TEST_CHECK(fabs(got - want) < 0.12 * want, "%s: std %.4g, want %.4g", e->name,
                            got, want);
        }
    }

    hook_log h = {0};
    tess_tfm_set_grad_hook(m, record, &h);
    int32_t ids[2 * 6], targets[2 * 6];
    for (int i = 0; i < 12; i++) ids[i] = i % 11, targets[i] = (i * 5) % 11;
    tess_registry_zero_grads(reg);
    (void)tess_tfm_forward(m, ids, targets, 2);
    tess_tfm_backward(m, 1.0f);
    const int64_t lo = tess_registry_get(reg, before + 1)->flat_offset;
    const int64_t hi = tess_registry_get(reg, after)->flat_offset;
    bool tiles = h.n == (int)L + 2 && h.hi[0] == hi && h.lo[h.n - 1] == lo;
    for (int k = 1; tiles && k < h.n; k++) tiles = h.hi[k] == h.lo[k - 1] && h.lo[k] < h.hi[k];
    TESS_TEST_CHECK(tiles, "hook ranges tile the model's [%lld, %lld) from the end: %d ranges",
                    (long long)lo, (long long)hi, h.n);
    tess_tfm_destroy(&m);
    tess_registry_destroy(&reg);

    /* a feed-forward's activation bytes: SwiGLU caches 3 (N,F) arrays, GELU 2 (arena-aligned) */
    for (int k = 0; k < 2; k++) {
        tess_nn_ffn *f = NULL;
        TESS_TEST_CHECK(tess_nn_ffn_dense_create(&f, k ? TESS_NN_FFN_GELU : TESS_NN_FFN_SWIGLU, 8,
                                                 12, 0.02, 0.01) == TESS_OK, "dense ffn");
        if (!f) continue;
        const int64_t want = (k ? 2 : 3) * 5 * 12 * (int64_t)sizeof(float);
        const int64_t got = tess_nn_ffn_activation_bytes(f, 5);
        TESS_TEST_CHECK(got >= want && got < want + 3 * 64, "ffn %d: %lld activation bytes, want %lld",
                        k, (long long)got, (long long)want);
        tess_nn_ffn_destroy(&f);
        TESS_TEST_CHECK(f == NULL, "ffn destroy clears the handle");
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    check_variant(TESS_NN_NORM_RMS, TESS_NN_FFN_SWIGLU, true);
    check_variant(TESS_NN_NORM_LAYER, TESS_NN_FFN_GELU, true);
    check_variant(TESS_NN_NORM_RMS, TESS_NN_FFN_GELU, false);
    check_variant(TESS_NN_NORM_LAYER, TESS_NN_FFN_SWIGLU, false);
    check_composition();

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
