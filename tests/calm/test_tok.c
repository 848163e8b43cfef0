/* test_tok - the single-neuron tokenizer (apps/calm/tok.h, docs/calm.md): causality (frames
 * after patch m perturbed: token ids <= m unchanged, logits-level via the ids of every patch),
 * the backward against central differences of the loss (soft Gumbel mode, fixed noise), and
 * the round trip: trained a few hundred AdamW steps on synthetic sines and steps with the
 * spec's temperature schedule, the reconstruction of held-out traces has Pearson r > 0.9 and
 * the code perplexity of their token ids is > K / 8. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"     /* tess_rng_* */
#include "nn/registry.h"  /* tess_registry_* */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "tess_test.h"
#include "tok.h"

static const calm_tok_config CFG = {.P = 4, .M = 8, .c = 16, .dt = 32, .nt = 1, .heads = 2,
                                    .Dc = 8, .K = 32, .tau_cos = 0.1f, .lambda_d = 0.5f,
                                    .lambda_orth = 0.1f, .lambda_h = 0.01f};
enum { L = 32, BN = 32 };

/* Trace j of a family: a sine of random frequency, phase and amplitude plus a random step. */
static void synth(float *x, int64_t first, int64_t n, uint64_t purpose_n) {
    tess_rng_key key = {9, 1};
    uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_TEST, purpose_n);
    for (int64_t j = 0; j < n; j++) {
        uint64_t s = (uint64_t)(first + j) * 8;
        double f = tess_rng_uniform(key, ctr, s, 0.02, 0.2), ph = tess_rng_uniform(key, ctr, s + 2, 0, 6.283);
        double a = tess_rng_uniform(key, ctr, s + 4, 0.5, 1.5), at = tess_rng_uniform(key, ctr, s + 6, 0, L);
        double h = tess_rng_uniform(key, ctr, s + 7, -1, 1);
        for (int t = 0; t < L; t++)
            x[j * L + t] = (float)(a * sin(6.283 * f * t + ph) + (t >= at ? h : 0.0));
    }
}

static void test_causal(calm_tok *t) {
    float x[2 * L], y[2 * L];
    int32_t a[2 * 8], b[2 * 8];
    synth(x, 0, 2, 1);
    calm_tok_forward(t, x, 2, a, (tess_rng_key){1, 0}, 0, 0, 0.0f, TESS_NN_CODEBOOK_HARD_ST);
    for (int m = 0; m < CFG.M - 1; m++) {
        memcpy(y, x, sizeof x);
        for (int j = 0; j < 2; j++)
            for (int f = (m + 1) * (int)CFG.P; f < L; f++) y[j * L + f] += 3.0f;
        calm_tok_forward(t, y, 2, b, (tess_rng_key){1, 0}, 0, 0, 0.0f, TESS_NN_CODEBOOK_HARD_ST);
        int same = 1;
        for (int j = 0; j < 2; j++)
            for (int k = 0; k <= m; k++) same &= a[j * CFG.M + k] == b[j * CFG.M + k];
        TESS_TEST_CHECK(same, "frames after patch %d perturbed: ids 0..%d unchanged", m, m);
    }
}

static void test_gradient(calm_tok *t, tess_registry *reg) {
    float x[4 * L];
    int32_t ids[4 * 8];
    synth(x, 10, 4, 1);
    const tess_rng_key key = {2, 0};
    tess_registry_zero_grads(reg);
    calm_tok_forward(t, x, 4, ids, key, 3, 0, 0.7f, TESS_NN_CODEBOOK_SOFT);
    calm_tok_backward(t, 1.0f);
    const float *g = tess_registry_grads(reg);
    float *p = tess_registry_params(reg);
    int checked = 0, bad = 0;
    double worst = 0.0;
    for (int64_t e = 0; e < tess_registry_count(reg); e++) {
        /* the largest gradient of each entry */
        const tess_registry_entry *en = tess_registry_get(reg, e);
        int64_t best = -1;
        for (int64_t i = 0; i < en->local_count; i++)
            if (best < 0 || fabsf(g[en->flat_offset + i]) > fabsf(g[en->flat_offset + best])) best = i;
        int64_t i = en->flat_offset + best;
        if (fabsf(g[i]) < 1e-4f) continue;
        const float keep = p[i], h = 1e-2f * fmaxf(1.0f, fabsf(keep));
        p[i] = keep + h;
        double up = calm_tok_forward(t, x, 4, ids, key, 3, 0, 0.7f, TESS_NN_CODEBOOK_SOFT).total;
        p[i] = keep - h;
        double dn = calm_tok_forward(t, x, 4, ids, key, 3, 0, 0.7f, TESS_NN_CODEBOOK_SOFT).total;
        p[i] = keep;
        double fd = (up - dn) / (2.0 * h), err = fabs(fd - g[i]) / fmax(fabs(fd), fabs(g[i]));
        if (err > 0.05) fprintf(stderr, "  %s: grad %.5g, fd %.5g\n", en->name, g[i], fd);
        worst = fmax(worst, err);
        bad += err > 0.05;
        checked++;
    }
    TESS_TEST_CHECK(checked >= 15 && bad == 0,
                    "%d of %d entries' largest gradients off the central difference by > 5 %% "
                    "(worst %.3g)",
                    bad, checked, worst);
}

static void test_round_trip(calm_tok *t, tess_registry *reg) {
    tess_adamw *opt = NULL;
    tess_adamw_config ac = tess_adamw_config_default();
    ac.beta2 = 0.95f, ac.weight_decay = 0.0f;
    TESS_TEST_CHECK(tess_adamw_create(&opt, reg, &ac) == TESS_OK, "adamw");
    static float x[BN * L];
    int32_t ids[BN * 8];
    const int steps = 400;
    for (int s = 0; s < steps; s++) {
        double frac = (double)s / steps;
        float tau = (float)(frac < 0.5 ? 1.0 * pow(0.1, frac / 0.5) : 0.1);
        tess_nn_codebook_mode mode = frac >= 0.9 ? TESS_NN_CODEBOOK_HARD_ST : TESS_NN_CODEBOOK_SOFT;
        synth(x, (int64_t)s * BN, BN, 2);
        tess_registry_zero_grads(reg);
        calm_tok_forward(t, x, BN, ids, (tess_rng_key){4, 0}, s, 0, tau, mode);
        calm_tok_backward(t, 1.0f);
        tess_adamw_step(opt, 3e-3f);
    }
    /* held-out traces, no noise, hard codes */
    synth(x, 0, BN, 3);
    calm_tok_forward(t, x, BN, ids, (tess_rng_key){4, 0}, 0, 0, 0.0f, TESS_NN_CODEBOOK_HARD_ST);
    const float *xh = calm_tok_recon(t);
    double r = 0.0;
    for (int j = 0; j < BN; j++) {
        double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
        for (int k = 0; k < L; k++) mx += x[j * L + k] / L, my += xh[j * L + k] / L;
        for (int k = 0; k < L; k++) {
            double a = x[j * L + k] - mx, b = xh[j * L + k] - my;
            sxy += a * b, sxx += a * a, syy += b * b;
        }
        r += sxy / sqrt(sxx * syy + 1e-30) / BN;
    }
    double hist[32] = {0}, H = 0.0;
    for (int i = 0; i < BN * CFG.M; i++) hist[ids[i]] += 1.0 / (BN * CFG.M);
    for (int k = 0; k < CFG.K; k++)
        if (hist[k] > 0) H -= hist[k] * log(hist[k]);
    printf("round trip: mean Pearson r %.3f, code perplexity %.1f of %lld codes\n", r, exp(H),
           (long long)CFG.K);
    TESS_TEST_CHECK(r > 0.9, "reconstruction r = %.3f (want > 0.9)", r);
    TESS_TEST_CHECK(exp(H) > CFG.K / 8.0, "perplexity %.2f (want > K/8 = %.1f)", exp(H), CFG.K / 8.0);
    tess_adamw_destroy(&opt);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_registry *reg = NULL;
    calm_tok *t = NULL;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK, "registry");
    TESS_TEST_CHECK(calm_tok_create(&t, &CFG, BN, reg) == TESS_OK, "create: %s", tess_error_text());
    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK, "finalize");
    TESS_TEST_CHECK(tess_registry_init_params(reg, 5) == TESS_OK, "init");
    test_causal(t);
    test_gradient(t, reg);
    test_round_trip(t, reg);
    calm_tok_destroy(&t);
    tess_registry_destroy(&reg);
    int rc = tess_test_finish("test_tok");
    MPI_Finalize();
    return rc;
}
