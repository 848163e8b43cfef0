/* test_tok - the single-neuron tokenizer (apps/calm/tok.h, docs/calm.md): causality (frames
 * after patch m perturbed: token ids <= m unchanged, logits-level via the ids of every patch),
 * the backward against central differences of the loss (soft Gumbel mode, fixed noise), and
 * the round trip: trained a few hundred AdamW steps on synthetic sines and steps with the
 * spec's temperature schedule, the reconstruction of held-out traces has Pearson r > 0.9 and
 * the code perplexity of their token ids is > K / 8. The codebook's upkeep
 * (calm_tok_codes_update): with window 1 every unassigned code is restarted at an encoder output
 * of the batch and is then assigned, deterministically; the VQ quantiser's EMA (decay 0) puts
 * each assigned code at the mean of its encoder outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"     /* tess_rng_* */
#include "nn/registry.h"  /* tess_registry_* */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "par/mesh.h"     /* tess_group_create */
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

/* Distinct codes among n ids. */
static int distinct(const int32_t *ids, int64_t n) {
    int seen[256] = {0}, u = 0;
    for (int64_t i = 0; i < n; i++) u += !seen[ids[i]]++;
    return u;
}

static void fresh(calm_tok **t, tess_registry **reg, const calm_tok_config *c) {
    TESS_TEST_CHECK(tess_registry_create(reg) == TESS_OK, "registry");
    TESS_TEST_CHECK(calm_tok_create(t, c, BN, *reg) == TESS_OK, "create: %s", tess_error_text());
    TESS_TEST_CHECK(tess_registry_finalize(*reg) == TESS_OK, "finalize");
    TESS_TEST_CHECK(tess_registry_init_params(*reg, 6) == TESS_OK, "init");
}

/* Dead-code restart with window 1 on a fresh tokenizer: the codes no trace was assigned to are
 * restarted at encoder outputs of the batch, which then pick them; twice the same: bitwise. */
static void test_restart(const tess_group *g) {
    static float x[BN * L];
    int32_t ids[BN * 8];
    synth(x, 100, BN, 4);
    float *code[2] = {NULL, NULL};
    int64_t K = CFG.K, Dc = CFG.Dc;
    for (int rep = 0; rep < 2; rep++) {
        tess_registry *reg = NULL;
        calm_tok *t = NULL;
        fresh(&t, &reg, &CFG);
        calm_tok_forward(t, x, BN, ids, (tess_rng_key){1, 0}, 0, 0, 0.0f, TESS_NN_CODEBOOK_HARD_ST);
        const int u0 = distinct(ids, BN * CFG.M);
        int64_t n = -1;
        TESS_TEST_CHECK(calm_tok_codes_update(t, g, (tess_rng_key){3, 0}, 0, 0, BN, 1, &n) == TESS_OK,
                        "codes update");
        double total = 0.0;
        for (int64_t k = 0; k < K; k++) total += calm_tok_code_counts(t)[k];
        TESS_TEST_CHECK(total == (double)(BN * CFG.M), "the counts sum to the %d ids: %g",
                        BN * (int)CFG.M, total);
        TESS_TEST_CHECK(n == K - u0 && calm_tok_restarts(t) == n,
                        "%lld of the %lld unassigned codes restarted", (long long)n,
                        (long long)(K - u0));
        int was[256] = {0}, revived = 0;
        for (int i = 0; i < BN * CFG.M; i++) was[ids[i]] = 1;
        calm_tok_forward(t, x, BN, ids, (tess_rng_key){1, 0}, 0, 0, 0.0f, TESS_NN_CODEBOOK_HARD_ST);
        int now[256] = {0};
        for (int i = 0; i < BN * CFG.M; i++) now[ids[i]] = 1;
        for (int64_t k = 0; k < K; k++) revived += !was[k] && now[k];
        printf("restart: %d of %lld codes assigned, %lld restarted, %d of them assigned now\n", u0,
               (long long)K, (long long)n, revived);
        TESS_TEST_CHECK(n > 0 && revived == n, "every restarted code is assigned: %d of %lld",
                        revived, (long long)n);
        int64_t e = 0;
        for (; e < tess_registry_count(reg); e++)
            if (strcmp(tess_registry_get(reg, e)->name, "tok.codebook") == 0) break;
        const float *E = tess_registry_params(reg) + tess_registry_get(reg, e)->flat_offset;
        code[rep] = malloc((size_t)(K * Dc) * sizeof(float));
        memcpy(code[rep], E, (size_t)(K * Dc) * sizeof(float));
        calm_tok_destroy(&t);
        tess_registry_destroy(&reg);
    }
    TESS_TEST_CHECK(memcmp(code[0], code[1], (size_t)(K * Dc) * sizeof(float)) == 0,
                    "the restart is deterministic (codebooks bitwise equal)");
    free(code[0]), free(code[1]);
}

/* The VQ quantiser: the commitment term is part of the loss; the backward leaves the codebook's
 * gradient at zero (the EMA trains it); the EMA with decay 0 puts every assigned code at the
 * mean of the encoder outputs assigned to it. */
static void test_vq(const tess_group *g) {
    calm_tok_config c = CFG;
    c.quant = CALM_QUANT_VQ, c.beta = 0.25f, c.ema_decay = 0.0f;
    tess_registry *reg = NULL;
    calm_tok *t = NULL;
    fresh(&t, &reg, &c);
    static float x[BN * L];
    int32_t ids[BN * 8];
    synth(x, 200, BN, 4);
    calm_tok_loss l = calm_tok_forward(t, x, BN, ids, (tess_rng_key){1, 0}, 0, 0, 1.0f,
                                       TESS_NN_CODEBOOK_SOFT);
    TESS_TEST_CHECK(l.commit > 0.0 && fabs(l.total - (l.mse + 0.5 * l.dmse + 0.1 * l.orth +
                                                      0.01 * l.entropy + 0.25 * l.commit)) < 1e-9,
                    "VQ loss = terms + 0.25 commitment (%.4f)", l.commit);
    tess_registry_zero_grads(reg);
    calm_tok_backward(t, 1.0f);
    int64_t e = 0;
    for (; e < tess_registry_count(reg); e++)
        if (strcmp(tess_registry_get(reg, e)->name, "tok.codebook") == 0) break;
    const tess_registry_entry *en = tess_registry_get(reg, e);
    double gsum = 0.0, zsum = 0.0;
    for (int64_t i = 0; i < en->local_count; i++) gsum += fabsf(tess_registry_grads(reg)[en->flat_offset + i]);
    for (int64_t i = 0; i < tess_registry_local_total(reg); i++) zsum += fabsf(tess_registry_grads(reg)[i]);
    TESS_TEST_CHECK(gsum == 0.0 && zsum > 0.0, "VQ: no gradient on the codebook (%g), some elsewhere",
                    gsum);
    int64_t n = 0;
    TESS_TEST_CHECK(calm_tok_codes_update(t, g, (tess_rng_key){3, 0}, 0, 0, BN, 0, &n) == TESS_OK &&
                        n == 0,
                    "EMA update, no restart with window 0");
    /* the initial rows are N(0, 1) (norm about sqrt(Dc)); a mean of unit encoder outputs has
     * norm <= 1, so every assigned code's row was replaced */
    const float *E = tess_registry_params(reg) + en->flat_offset;
    int ok = 1, used = 0;
    for (int64_t k = 0; k < c.K; k++) {
        const float cnt = calm_tok_code_counts(t)[k];
        if (cnt == 0.0f) continue;
        used++;
        double norm = 0.0;
        for (int64_t j = 0; j < c.Dc; j++) norm += (double)E[k * c.Dc + j] * E[k * c.Dc + j];
        ok &= norm <= 1.0 + 1e-5; /* a mean of unit vectors */
    }
    TESS_TEST_CHECK(ok && used >= 2, "EMA rows of the %d assigned codes are means of unit vectors",
                    used);
    calm_tok_destroy(&t);
    tess_registry_destroy(&reg);
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
    tess_group *g = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "tok", &g) == TESS_OK, "group");
    test_restart(g);
    test_vq(g);
    tess_group_destroy(&g);
    int rc = tess_test_finish("test_tok");
    MPI_Finalize();
    return rc;
}
