/* test_decode - behaviour decoding (apps/calm/decode.h):
 *   metrics against hand values: AUROC 0.75 (the textbook 4-sample case), 0.75 with tied scores
 *   (ties count half), 1 / 0 for perfect / reversed scores, NaN with one class; accuracy; R^2
 *   0.8 and Pearson r 0.99339 on hand-computed vectors;
 *   the head, for each readout (attn, mean, unit): backward against central differences of the
 *   loss (every parameter entry of the vectors - query, LayerNorm, biases - the largest-gradient
 *   entries of the matrices (with the unit biases) and of the hidden state; 5 %), padded
 *   neurons leave the outputs bit-identical, their hidden gradient is 0; a behaviour that is
 *   +s on some neurons and -s on others (signed tuning) is fitted by the unit readout and not
 *   by the mean one;
 *   the baselines on a session whose behaviour is a linear map of the lagged population vector
 *   (a regression target and its sign as a binary target): ridge test R^2 > 0.99 with the
 *   smallest penalty chosen, AUROC > 0.95; the MLP test R^2 > 0.8, AUROC > 0.9; behaviour of test frames
 *   set to NaN changes neither prediction (never read); a training part too short for the
 *   validation slice is refused naming the session;
 *   leave-one-animal-out decoding (the pooled fits): the population summaries against hand
 *   values (mean, sd, 10/50/90 % quantiles); three sessions of 12, 20 and 16 neurons whose
 *   behaviour follows a population-wide signal - ridge and MLP on the summaries, fitted on the
 *   first two, decode the third (R^2 > 0.9 / 0.8, AUROC > 0.9); the third's behaviour set to NaN
 *   (all frames) gives bit-identical predictions and standardisation (never read); sessions of
 *   different feature counts are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "decode.h"
#include "optim/adamw.h"
#include "tess_test.h"

static void metrics(void) {
    const double s1[] = {0.1, 0.4, 0.35, 0.8}, l1[] = {0, 0, 1, 1};
    TESS_TEST_CLOSE(calm_dec_auroc(s1, l1, 4), 0.75, 1e-12, 0.0, "AUROC textbook case");
    const double s2[] = {0.5, 0.5, 0.5, 0.9}, l2[] = {0, 1, 0, 1};
    TESS_TEST_CLOSE(calm_dec_auroc(s2, l2, 4), 0.75, 1e-12, 0.0, "AUROC with ties");
    const double s3[] = {1, 2, 3, 4}, l3[] = {0, 0, 1, 1}, l4[] = {1, 1, 0, 0}, l5[] = {1, 1, 1, 1};
    TESS_TEST_CLOSE(calm_dec_auroc(s3, l3, 4), 1.0, 0.0, 0.0, "AUROC perfect");
    TESS_TEST_CLOSE(calm_dec_auroc(s3, l4, 4), 0.0, 0.0, 0.0, "AUROC reversed");
    TESS_TEST_CHECK(isnan(calm_dec_auroc(s3, l5, 4)), "AUROC of one class is NaN");
    const double p6[] = {0.2, 0.7, 0.5, 0.4}, l6[] = {0, 1, 0, 1};
    TESS_TEST_CLOSE(calm_dec_accuracy(p6, l6, 4, 0.5), 0.5, 0.0, 0.0, "accuracy at 0.5");
    const double t7[] = {1, 2, 3, 4}, p7[] = {1, 2, 3, 5};
    TESS_TEST_CLOSE(calm_dec_r2(p7, t7, 4), 0.8, 1e-12, 0.0, "R^2 = 1 - 1/5");
    const double m7[] = {2.5, 2.5, 2.5, 2.5};
    TESS_TEST_CLOSE(calm_dec_r2(m7, t7, 4), 0.0, 1e-12, 0.0, "R^2 of the mean");
    const double x8[] = {1, 2, 3}, y8[] = {2, 4, 7};
    TESS_TEST_CLOSE(calm_dec_pearson(x8, y8, 3), 5.0 / sqrt(2.0 * 114.0 / 9.0), 1e-12, 0.0,
                    "Pearson r");
}

enum { B = 2, N = 5, M = 3, DM = 8, HID = 6, D = 2, U = 9 };

/* Unit ids of the two windows: 0-4, then 5-7 (padding repeats 5). */
static const int32_t units[B * N] = {0, 1, 2, 3, 4, 5, 6, 7, 5, 5};

/* The head's summed loss at the registry's current parameters. */
static double head_loss(calm_dec *h, const float *hid, const int32_t *count, const float *tgt,
                        const bool *binary) {
    int64_t terms;
    calm_dec_forward(h, hid, count, units, B);
    return calm_dec_loss(h, tgt, binary, &terms);
}

/* Central difference of the loss in *v against the analytic gradient g (5 %, or 1e-3 absolute
 * for small gradients). */
static int check_entry(calm_dec *h, float *hid, const int32_t *count, const float *tgt,
                       const bool *binary, float *v, double g, const char *what, int64_t i) {
    const float keep = *v, eps = 1e-2f;
    *v = keep + eps;
    const double lp = head_loss(h, hid, count, tgt, binary);
    *v = keep - eps;
    const double lm = head_loss(h, hid, count, tgt, binary);
    *v = keep;
    const double fd = (lp - lm) / (2.0 * eps);
    const bool ok = fabs(fd - g) <= 0.05 * fabs(fd) + 1e-3;
    TESS_TEST_CHECK(ok, "%s[%lld]: analytic %.6g, central difference %.6g", what, (long long)i, g, fd);
    return ok;
}

static void head(calm_dec_readout readout) {
    tess_registry *reg = NULL;
    calm_dec *h = NULL;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK, "registry");
    TESS_TEST_CHECK(calm_dec_create(&h, readout, DM, HID, D, U, B, N, M, reg) == TESS_OK,
                    "create: %s", tess_error_text());
    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK && tess_registry_init_params(reg, 7) == TESS_OK,
                    "init");
    const char *rname = calm_dec_readout_names[readout].name;
    for (int64_t e = 0; e < tess_registry_count(reg); e++) {
        const tess_registry_entry *en = tess_registry_get(reg, e);
        float *v = tess_registry_param(reg, e);
        if (strcmp(en->name, "dec.query") == 0) /* a peaked pooling */
            for (int j = 0; j < DM; j++) v[j] = (float)(0.5 * sin(j + 1.0));
        if (strcmp(en->name, "dec.unit_gain") == 0) /* unit gains away from their zero init */
            for (int64_t j = 0; j < en->local_count; j++) v[j] = (float)(0.7 * cos(j + 0.5));
    }
    static float hid[B * N * M * DM], hid2[B * N * M * DM], dh[B * N * M * DM], tgt[B * M * D];
    const tess_rng_key key = {11, 1};
    tess_rng_fill_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1), 0, B * N * M * DM, hid, 0.0f, 1.0f);
    for (int i = 0; i < B * M; i++) {
        tgt[i * D] = (float)tess_rng_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 3), (uint64_t)i, 0.0, 1.0);
        tgt[i * D + 1] = (float)(i % 3) / 2.0f; /* a fraction of positive frames */
    }
    const int32_t count[B] = {N, 3};
    const bool binary[D] = {false, true};
    /* padded neurons (n >= count) change nothing */
    float y0[B * M * D];
    memcpy(y0, calm_dec_forward(h, hid, count, units, B), sizeof y0);
    memcpy(hid2, hid, sizeof hid);
    for (int n = 3; n < N; n++)
        for (int m = 0; m < M * DM; m++) hid2[((1 * N + n) * M) * DM + m] = 1e3f;
    TESS_TEST_CHECK(memcmp(y0, calm_dec_forward(h, hid2, count, units, B), sizeof y0) == 0,
                    "%s: padded neurons leave the outputs bit-identical", rname);
    /* analytic gradients */
    tess_registry_zero_grads(reg);
    head_loss(h, hid, count, tgt, binary);
    calm_dec_backward(h, 1.0f, dh);
    for (int n = 3; n < N; n++)
        for (int m = 0; m < M * DM; m++)
            TESS_TEST_CHECK(dh[((1 * N + n) * M) * DM + m] == 0.0f, "%s: padded neuron's gradient is 0",
                            rname);
    const int64_t nent = tess_registry_count(reg);
    int checked = 0;
    for (int64_t e = 0; e < nent; e++) {
        const tess_registry_entry *en = tess_registry_get(reg, e);
        float *p = tess_registry_param(reg, e);
        static float g[4096];
        TESS_TEST_CHECK(en->local_count <= 4096, "%s: %s fits the test's buffer", rname, en->name);
        memcpy(g, tess_registry_grad(reg, e), (size_t)en->local_count * sizeof(float));
        if (en->ndim == 1) { /* every entry */
            for (int64_t i = 0; i < en->local_count; i++)
                checked += check_entry(h, hid, count, tgt, binary, p + i, g[i], en->name, i);
            continue;
        }
        for (int r = 0; r < 6; r++) { /* the 6 largest gradients of a matrix */
            int64_t best = 0;
            for (int64_t i = 1; i < en->local_count; i++)
                best = fabsf(g[i]) > fabsf(g[best]) ? i : best;
            checked += check_entry(h, hid, count, tgt, binary, p + best, g[best], en->name, best);
            g[best] = 0.0f;
        }
    }
    for (int r = 0; r < 12; r++) { /* the 12 largest gradients of the hidden state */
        int64_t best = 0;
        for (int64_t i = 1; i < B * N * M * DM; i++) best = fabsf(dh[i]) > fabsf(dh[best]) ? i : best;
        checked += check_entry(h, hid, count, tgt, binary, hid + best, dh[best], "hidden", best);
        dh[best] = 0.0f;
    }
    printf("head (%s readout) backward: %d entries within 5 %% of central differences\n", rname,
           checked);
    calm_dec_destroy(&h);
    tess_registry_destroy(&reg);
}

/* Signed tuning: every group (window b, patch m) has a speed s ~ N(0, 1) (the target); neuron n
 * (unit n) carries h[n] = c + g_n s v with gain g_n = +1 for the even units and -1 for the odd
 * ones (c, v fixed, c orthogonal to v; nothing else tells the neurons apart). The set of the
 * h[n] is the same for s and -s, so no readout that treats the neurons alike (mean, attn) can
 * decode s; the unit readout's per-unit gains can (they weight each unit's features by its
 * gain's sign). 300 AdamW steps (lr 1e-2) on fresh draws, then the loss per output on a new batch:
 * unit < 0.15, mean > 0.8 (the variance of s is 1). */
enum { SB = 4, SN = 8, SM = 8, SD = 4, SH = 8 };

static double signed_fit(calm_dec_readout readout) {
    tess_registry *reg = NULL;
    calm_dec *h = NULL;
    tess_adamw *opt = NULL;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        calm_dec_create(&h, readout, SD, SH, 1, SN, SB, SN, SM, reg) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK &&
                        tess_registry_init_params(reg, 5) == TESS_OK,
                    "signed tuning: head: %s", tess_error_text());
    const tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f};
    TESS_TEST_CHECK(tess_adamw_create(&opt, reg, &ac) == TESS_OK, "adamw");
    static float hid[SB * SN * SM * SD], tgt[SB * SM];
    const float c[SD] = {2.0f, 2.0f, -2.0f, -2.0f}, v[SD] = {0.0f, 0.0f, 1.0f, -1.0f};
    int32_t count[SB], unit[SB * SN];
    for (int b = 0; b < SB; b++) {
        count[b] = SN;
        for (int n = 0; n < SN; n++) unit[b * SN + n] = n;
    }
    const bool binary[1] = {false};
    double loss = 0.0;
    for (int step = 0; step <= 300; step++) {
        for (int i = 0; i < SB * SM; i++)
            tgt[i] = (float)tess_rng_normal((tess_rng_key){13, (uint32_t)readout},
                                            tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 5), (uint64_t)(step * SB * SM + i),
                                            0.0, 1.0);
        for (int b = 0; b < SB; b++)
            for (int n = 0; n < SN; n++)
                for (int m = 0; m < SM; m++)
                    for (int j = 0; j < SD; j++)
                        hid[((b * SN + n) * SM + m) * SD + j] =
                            c[j] + (n % 2 ? -1.0f : 1.0f) * tgt[b * SM + m] * v[j];
        int64_t terms = 0;
        calm_dec_forward(h, hid, count, unit, SB);
        loss = calm_dec_loss(h, tgt, binary, &terms) / (double)terms;
        if (step == 300) break; /* the last draw is the held-out batch */
        tess_registry_zero_grads(reg);
        calm_dec_backward(h, 1.0f / (float)terms, NULL);
        tess_adamw_step(opt, 1e-2f);
    }
    tess_adamw_destroy(&opt);
    calm_dec_destroy(&h);
    tess_registry_destroy(&reg);
    return loss;
}

static void signed_tuning(void) {
    const double lu = signed_fit(CALM_DEC_UNIT), lm = signed_fit(CALM_DEC_MEAN);
    printf("signed tuning: held-out loss per output, unit readout %.4f, mean readout %.4f\n", lu, lm);
    TESS_TEST_CHECK(lu < 0.15, "the unit readout decodes signed tuning (loss %.4f)", lu);
    TESS_TEST_CHECK(lm > 0.8, "the mean readout cannot (loss %.4f)", lm);
}

enum { T = 900, NN = 12, TRAIN = 630, P = 4, L = 2, DB = 2 };

/* A session whose behaviour is a fixed linear map of the lagged vector ending at e(t). */
static void linear_session(float *x, float *beh) {
    const tess_rng_key key = {5, 2};
    tess_rng_fill_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 2), 0, T * NN, x, 0.0f, 1.0f);
    for (int t = 0; t < T; t++) {
        const int e = t / P * P + P - 1;
        double v = 0.0;
        for (int n = 0; n < NN && e < T; n++)
            v += sin(n + 1.0) * x[e * NN + n] + 0.5 * cos(n + 2.0) * (e >= 1 ? x[(e - 1) * NN + n] : 0.0);
        beh[t * DB] = (float)(10.0 + 3.0 * v);
        beh[t * DB + 1] = v > 0.0;
    }
}

/* Test-frame metrics of pred against beh. */
static void test_metrics(const float *pred, const float *beh, double *r2, double *auroc) {
    static double a[T], b[T], c[T], dd[T];
    int n = 0;
    for (int t = TRAIN + P; t < T - P; t++, n++) {
        a[n] = pred[t * DB], b[n] = beh[t * DB];
        c[n] = pred[t * DB + 1], dd[n] = beh[t * DB + 1];
    }
    *r2 = calm_dec_r2(a, b, n);
    *auroc = calm_dec_auroc(c, dd, n);
}

static void baselines(void) {
    static float x[T * NN], beh[T * DB], behn[T * DB], p1[T * DB], p2[T * DB];
    linear_session(x, beh);
    const bool binary[DB] = {false, true};
    calm_dec_session s = {.x = x, .beh = beh, .T = T, .N = NN, .D = DB, .train_T = TRAIN};
    const calm_dec_base_config c = {.P = P, .L = L, .val_fraction = 0.2, .binary = binary,
                                    .hidden = 32, .max_steps = 300, .lr = 3e-3, .seed = 3};
    TESS_TEST_CHECK(calm_dec_base_check(&s, &c, "lin") == TESS_OK, "check");
    double lambda[DB], r2, auroc;
    TESS_TEST_CHECK(calm_dec_ridge(&s, &c, p1, lambda) == TESS_OK, "ridge: %s", tess_error_text());
    test_metrics(p1, beh, &r2, &auroc);
    printf("ridge: test R^2 %.4f, AUROC %.4f, lambda %g / %g\n", r2, auroc, lambda[0], lambda[1]);
    TESS_TEST_CHECK(r2 > 0.99 && auroc > 0.95, "ridge decodes a linear behaviour (R^2 %.4f, AUROC %.4f)",
                    r2, auroc);
    TESS_TEST_CHECK(lambda[0] == 1.0, "noise-free: the smallest penalty (%g)", lambda[0]);
    int64_t steps = 0;
    TESS_TEST_CHECK(calm_dec_mlp(&s, &c, p2, &steps) == TESS_OK, "mlp: %s", tess_error_text());
    test_metrics(p2, beh, &r2, &auroc);
    printf("MLP: test R^2 %.4f, AUROC %.4f, %lld steps\n", r2, auroc, (long long)steps);
    TESS_TEST_CHECK(r2 > 0.8 && auroc > 0.9, "MLP decodes a linear behaviour (R^2 %.4f, AUROC %.4f)",
                    r2, auroc);
    /* the behaviour of test frames is never read */
    memcpy(behn, beh, sizeof beh);
    for (int i = TRAIN * DB; i < T * DB; i++) behn[i] = NAN;
    s.beh = behn;
    static float q1[T * DB], q2[T * DB];
    double lambda2[DB];
    TESS_TEST_CHECK(calm_dec_ridge(&s, &c, q1, lambda2) == TESS_OK &&
                        calm_dec_mlp(&s, &c, q2, &steps) == TESS_OK,
                    "fits with NaN test behaviour");
    TESS_TEST_CHECK(memcmp(p1, q1, sizeof p1) == 0 && memcmp(p2, q2, sizeof p2) == 0,
                    "NaN test behaviour: bit-identical predictions");
    s.train_T = 8;
    TESS_TEST_CHECK(calm_dec_base_check(&s, &c, "short-session") == TESS_ERR_DATA &&
                        strstr(tess_error_text(), "'short-session': 8 training frames"),
                    "a short training part is refused naming the session: %s", tess_error_text());
}

enum { NS = 3 };

/* Session i: x (T, N) = g(t) + 0.5 noise, g one population-wide N(0, 1) signal per frame; the
 * behaviour 10 + 3 g(e(t)) and its sign. */
static void shared_session(int i, int64_t nn, float *x, float *beh) {
    static float g[T];
    tess_rng_fill_normal((tess_rng_key){7, (uint32_t)i}, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 3), 0,
                         T, g, 0.0f, 1.0f);
    tess_rng_fill_normal((tess_rng_key){8, (uint32_t)i}, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 4), 0,
                         T * nn, x, 0.0f, 0.5f);
    for (int t = 0; t < T; t++) {
        for (int64_t n = 0; n < nn; n++) x[t * nn + n] += g[t];
        const int e = t / P * P + P - 1 < T ? t / P * P + P - 1 : T - 1;
        beh[t * DB] = 10.0f + 3.0f * g[e];
        beh[t * DB + 1] = g[e] > 0.0f;
    }
}

static void pooled(void) {
    /* the summaries against hand values */
    const float xs[4] = {3, 1, 2, 4};
    float out[CALM_DEC_SUMMARY], work[4];
    calm_dec_summarize(xs, 1, 4, out, work);
    const double want[CALM_DEC_SUMMARY] = {2.5, sqrt(1.25), 1.3, 2.5, 3.7};
    for (int j = 0; j < CALM_DEC_SUMMARY; j++)
        TESS_TEST_CHECK(fabs(out[j] - want[j]) < 1e-6, "summary %d: %g, expected %g", j, out[j],
                        want[j]);
    static const int64_t Ns[NS] = {12, 20, 16};
    static float x[NS][T * 20], beh[NS][T * DB], sum[NS][T * CALM_DEC_SUMMARY], behn[T * DB];
    static float pr[2][T * DB], qr[2][T * DB];
    calm_dec_session s[NS];
    float wk[20];
    for (int i = 0; i < NS; i++) {
        shared_session(i, Ns[i], x[i], beh[i]);
        calm_dec_summarize(x[i], T, Ns[i], sum[i], wk);
        s[i] = (calm_dec_session){.x = sum[i], .beh = beh[i], .T = T, .N = CALM_DEC_SUMMARY,
                                  .D = DB, .train_T = i < 2 ? T : TRAIN};
    }
    const bool train[NS] = {true, true, false}, binary[DB] = {false, true};
    const calm_dec_base_config c = {.P = P, .L = L, .val_fraction = 0.2, .binary = binary,
                                    .hidden = 32, .max_steps = 300, .lr = 3e-3, .seed = 3};
    double lambda[DB], r2, auroc, mu[NS * DB], sd[NS * DB], mu2[NS * DB], sd2[NS * DB];
    int64_t steps = 0, steps2 = 0;
    float *pred[NS] = {NULL, NULL, pr[0]};
    TESS_TEST_CHECK(calm_dec_ridge_pooled(s, NS, train, &c, pred, lambda) == TESS_OK, "pooled ridge: %s",
                    tess_error_text());
    pred[2] = pr[1];
    TESS_TEST_CHECK(calm_dec_mlp_pooled(s, NS, train, &c, pred, &steps) == TESS_OK, "pooled MLP: %s",
                    tess_error_text());
    calm_dec_target_stats(s, NS, train, binary, mu, sd);
    for (int j = 0; j < 2; j++) {
        test_metrics(pr[j], beh[2], &r2, &auroc);
        printf("pooled %s on the summaries, held-out session: R^2 %.4f, AUROC %.4f\n",
               j ? "MLP" : "ridge", r2, auroc);
        TESS_TEST_CHECK(r2 > (j ? 0.8 : 0.9) && auroc > 0.9,
                        "pooled %s decodes the held-out session (R^2 %.4f, AUROC %.4f)",
                        j ? "MLP" : "ridge", r2, auroc);
    }
    TESS_TEST_CHECK(mu[0] == mu[2 * DB] && sd[0] == sd[2 * DB] && fabs(mu[0] - 10.0) < 0.5 &&
                        fabs(sd[0] - 3.0) < 0.3 && mu[1] == 0.0 && sd[1] == 1.0,
                    "pooled standardisation: the same for every session (mu %g, sd %g)", mu[0], sd[0]);
    /* the held-out session's behaviour is never read */
    for (int i = 0; i < T * DB; i++) behn[i] = NAN;
    s[2].beh = behn;
    pred[2] = qr[0];
    TESS_TEST_CHECK(calm_dec_ridge_pooled(s, NS, train, &c, pred, lambda) == TESS_OK, "ridge, NaN");
    pred[2] = qr[1];
    TESS_TEST_CHECK(calm_dec_mlp_pooled(s, NS, train, &c, pred, &steps2) == TESS_OK, "MLP, NaN");
    calm_dec_target_stats(s, NS, train, binary, mu2, sd2);
    TESS_TEST_CHECK(memcmp(pr, qr, sizeof pr) == 0 && steps == steps2,
                    "NaN behaviour of the held-out session: bit-identical predictions");
    TESS_TEST_CHECK(memcmp(mu, mu2, sizeof mu) == 0 && memcmp(sd, sd2, sizeof sd) == 0,
                    "NaN behaviour of the held-out session: the same standardisation");
    /* per-session standardisation reads each session's own training frames */
    s[2].beh = beh[2];
    calm_dec_target_stats(s, NS, NULL, binary, mu2, sd2);
    TESS_TEST_CHECK(mu2[0] != mu2[2 * DB] && fabs(mu2[2 * DB] - 10.0) < 0.5,
                    "per-session standardisation (%g, %g)", mu2[0], mu2[2 * DB]);
    /* raw population vectors of different sizes cannot be pooled */
    for (int i = 0; i < NS; i++) s[i].x = x[i], s[i].N = Ns[i];
    TESS_TEST_CHECK(calm_dec_ridge_pooled(s, NS, train, &c, pred, lambda) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "session 1 has 20 features"),
                    "sessions of different feature counts are refused: %s", tess_error_text());
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    metrics();
    head(CALM_DEC_ATTN);
    head(CALM_DEC_MEAN);
    head(CALM_DEC_UNIT);
    signed_tuning();
    baselines();
    pooled();
    int rc = tess_test_finish("test_decode");
    MPI_Finalize();
    return rc;
}
