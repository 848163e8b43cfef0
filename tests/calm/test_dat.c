/* test_dat - the dual-axis transformer's structural guarantees (apps/calm/dat.h, docs/calm.md),
 * for the token head alone and for both heads with the patch input:
 * causality (tokens and frames perturbed at patch m0 leave every logit and patch prediction at
 * m < m0 bit-identical, and do change later ones and other neurons at m0), padding invariance
 * (padded neurons' tokens, frames and units leave the real outputs and the loss bit-identical),
 * neuron-permutation equivariance (permuting the neurons with their unit ids permutes the
 * outputs, 1e-5), the backward against central differences of the mean loss on the parameters
 * with the largest gradients; and the patch head's NLinear start: with its projection zeroed it
 * predicts copy-last exactly, and its loss is the mean squared change of the next patch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"    /* tess_rng_* */
#include "dat.h"
#include "nn/registry.h" /* tess_registry_* */
#include "tess_test.h"

enum { B = 2, N = 5, M = 6, K = 16, U = 20, S = 3, P = 3, A = 2 };
static calm_dat_config CFG = {.K = K, .d = 16, .layers = 2, .heads = 2, .ffn = 32, .units = U,
                              .sessions = S, .max_N = N, .M = M, .P = P, .ahead = A};

static int32_t draw(uint64_t what, uint64_t i, int32_t n) {
    return (int32_t)(tess_rng_u64((tess_rng_key){3, 0}, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, what), i) %
                     (uint64_t)n);
}

typedef struct {
    int32_t tok[B * N * M], unit[B * N], sess[B], count[B];
    float fr[B * N * M * P];
} batch;

static void make_batch(batch *x) {
    for (int i = 0; i < B * N * M; i++) x->tok[i] = draw(1, (uint64_t)i, K);
    for (int i = 0; i < B * N * M * P; i++)
        x->fr[i] = (float)(draw(4, (uint64_t)i, 2001) - 1000) / 500.0f;
    for (int i = 0; i < B * N; i++) x->unit[i] = draw(2, (uint64_t)i, U);
    x->sess[0] = 1, x->sess[1] = 2;
    x->count[0] = N, x->count[1] = 3;
}

/* Outputs per row (b, n, m): the K logits, then (with the patch head) the A P predicted frames. */
enum { O = K + A * P };

static double run(calm_dat *m, const batch *x, float *out) {
    int64_t pairs;
    double loss = calm_dat_forward(m, x->tok, x->fr, x->unit, x->sess, x->count, B, &pairs);
    for (int r = 0; out && r < B * N * M; r++) {
        memcpy(out + r * O, calm_dat_logits(m) + r * K, sizeof(float) * K);
        if (CFG.head == CALM_HEAD_BOTH)
            memcpy(out + r * O + K, calm_dat_patch_pred(m) + r * A * P, sizeof(float) * A * P);
        else memset(out + r * O + K, 0, sizeof(float) * A * P);
    }
    return loss / (double)pairs;
}

static size_t at(int b, int n, int t) { return ((size_t)((b * N + n) * M + t)) * O; }

static void test_causal(calm_dat *m) {
    batch x, y;
    make_batch(&x);
    static float l0[B * N * M * O], l1[B * N * M * O];
    run(m, &x, l0);
    const int m0 = 3;
    y = x;
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            y.tok[(b * N + n) * M + m0] = (x.tok[(b * N + n) * M + m0] + 5) % K;
            for (int i = 0; i < P; i++) y.fr[((b * N + n) * M + m0) * P + i] += 0.5f;
        }
    run(m, &y, l1);
    int before = 1, after = 0;
    for (int b = 0; b < B; b++)
        for (int n = 0; n < x.count[b]; n++)
            for (int t = 0; t < M; t++) {
                int same = memcmp(l0 + at(b, n, t), l1 + at(b, n, t), O * sizeof(float)) == 0;
                if (t < m0) before &= same;
                else after |= !same;
            }
    TESS_TEST_CHECK(before, "logits before the perturbed patch are bit-identical");
    TESS_TEST_CHECK(after, "logits from the perturbed patch on change");
    /* one neuron perturbed: another neuron's logits at the same patch change (neural axis) */
    y = x;
    y.tok[(0 * N + 0) * M + 2] = (x.tok[2] + 7) % K;
    y.fr[2 * P] += 0.5f;
    run(m, &y, l1);
    TESS_TEST_CHECK(memcmp(l0 + at(0, 1, 2), l1 + at(0, 1, 2), O * sizeof(float)) != 0,
                    "neuron 1 sees neuron 0 at the same patch");
    TESS_TEST_CHECK(memcmp(l0 + at(0, 1, 1), l1 + at(0, 1, 1), O * sizeof(float)) == 0,
                    "... but not at an earlier patch");
}

static void test_padding(calm_dat *m) {
    batch x, y;
    make_batch(&x);
    static float l0[B * N * M * O], l1[B * N * M * O];
    double a = run(m, &x, l0);
    y = x;
    for (int n = x.count[1]; n < N; n++) {
        y.unit[1 * N + n] = (x.unit[1 * N + n] + 3) % U;
        for (int t = 0; t < M; t++) y.tok[(1 * N + n) * M + t] = (x.tok[(1 * N + n) * M + t] + 1) % K;
        for (int i = 0; i < M * P; i++) y.fr[(1 * N + n) * M * P + i] -= 1.0f;
    }
    double b = run(m, &y, l1);
    int same = 1;
    for (int bb = 0; bb < B; bb++)
        for (int n = 0; n < x.count[bb]; n++)
            same &= memcmp(l0 + at(bb, n, 0), l1 + at(bb, n, 0), M * O * sizeof(float)) == 0;
    TESS_TEST_CHECK(same, "padded neurons leave the real logits bit-identical");
    TESS_TEST_CHECK(a == b, "and the loss (%.9g vs %.9g)", a, b);
}

static void test_permutation(calm_dat *m) {
    batch x, y;
    make_batch(&x);
    static float l0[B * N * M * O], l1[B * N * M * O];
    run(m, &x, l0);
    const int perm[N] = {3, 0, 4, 1, 2}; /* new neuron n is old neuron perm[n] (window 0) */
    y = x;
    for (int n = 0; n < N; n++) {
        y.unit[n] = x.unit[perm[n]];
        for (int t = 0; t < M; t++) y.tok[n * M + t] = x.tok[perm[n] * M + t];
        for (int i = 0; i < M * P; i++) y.fr[n * M * P + i] = x.fr[perm[n] * M * P + i];
    }
    run(m, &y, l1);
    double worst = 0.0;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < M * O; i++)
            worst = fmax(worst, fabs(l1[at(0, n, 0) + i] - l0[at(0, perm[n], 0) + i]));
    TESS_TEST_CHECK(worst < 1e-5, "permuting neurons permutes the logits (worst %.2g)", worst);
}

static int cmp_abs_desc(const void *a, const void *b) {
    float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
    return (x < y) - (x > y);
}

/* The `want` largest gradients among parameters [lo, hi) of the flat buffer against central
 * differences of the mean loss; returns how many are off by > 5 % (worst in *worst). */
static int fd_check(calm_dat *m, tess_registry *reg, const batch *x, int64_t lo, int64_t hi,
                    int want, int *checked, double *worst) {
    float *p = tess_registry_params(reg), *g = tess_registry_grads(reg);
    float *sorted = malloc((size_t)(hi - lo) * sizeof(float));
    memcpy(sorted, g + lo, (size_t)(hi - lo) * sizeof(float));
    qsort(sorted, (size_t)(hi - lo), sizeof(float), cmp_abs_desc);
    const float thresh = fabsf(sorted[want < hi - lo ? want - 1 : hi - lo - 1]);
    free(sorted);
    int bad = 0;
    *checked = 0;
    for (int64_t i = lo; i < hi && *checked < want; i++) {
        if (fabsf(g[i]) < thresh || fabsf(g[i]) == 0.0f) continue;
        const float keep = p[i], h = 1e-2f;
        p[i] = keep + h;
        double up = run(m, x, NULL);
        p[i] = keep - h;
        double dn = run(m, x, NULL);
        p[i] = keep;
        double fd = (up - dn) / (2.0 * h), err = fabs(fd - g[i]) / fmax(fabs(fd), fabs(g[i]));
        *worst = fmax(*worst, err);
        bad += err > 0.05;
        (*checked)++;
    }
    return bad;
}

/* The backward against central differences: the 40 largest gradients of the model, and the 6
 * largest of every entry (so the patch input and both heads are covered however small their
 * gradients are next to the rest). */
static void test_gradient(calm_dat *m, tess_registry *reg) {
    batch x;
    make_batch(&x);
    tess_registry_zero_grads(reg);
    int64_t pairs;
    calm_dat_forward(m, x.tok, x.fr, x.unit, x.sess, x.count, B, &pairs);
    calm_dat_backward(m, 1.0f / (float)pairs);
    int checked = 0, bad = 0;
    double worst = 0.0;
    bad = fd_check(m, reg, &x, 0, tess_registry_local_total(reg), 40, &checked, &worst);
    TESS_TEST_CHECK(checked >= 40 && bad == 0,
                    "%d of %d largest gradients off the central difference by > 5 %% (worst %.3g)",
                    bad, checked, worst);
    for (int64_t e = 0; e < tess_registry_count(reg); e++) {
        const tess_registry_entry *en = tess_registry_get(reg, e);
        worst = 0.0;
        bad = fd_check(m, reg, &x, en->flat_offset, en->flat_offset + en->local_count, 6, &checked,
                       &worst);
        TESS_TEST_CHECK(checked >= 1 && bad == 0, "%s: %d of %d gradients off by > 5 %% (worst %.3g)",
                        en->name, bad, checked, worst);
    }
}

/* With dat.phead (and the skip) zeroed the patch head predicts the last observed frame (copy-last), and the
 * summed MSE part of the loss is the squared change of the (up to A) real next patches over
 * A P, the last rows having fewer. */
static void test_copy_last(calm_dat *m, tess_registry *reg) {
    batch x;
    make_batch(&x);
    const int64_t e = tess_registry_find(reg, "dat.phead");
    float *w = tess_registry_param(reg, e), keep[A * P * 16], keep_skip[A * P * M * P];
    const int64_t nw = tess_registry_get(reg, e)->local_count, sk = tess_registry_find(reg, "dat.patch_skip");
    float *ws = sk >= 0 ? tess_registry_param(reg, sk) : NULL;
    const int64_t ns = sk >= 0 ? tess_registry_get(reg, sk)->local_count : 0;
    memcpy(keep, w, sizeof(float) * (size_t)nw);
    memset(w, 0, sizeof(float) * (size_t)nw);
    if (ws) memcpy(keep_skip, ws, sizeof(float) * (size_t)ns), memset(ws, 0, sizeof(float) * (size_t)ns);
    int64_t pairs;
    calm_dat_forward(m, x.tok, x.fr, x.unit, x.sess, x.count, B, &pairs);
    double ce, mse, want = 0.0;
    calm_dat_loss_parts(m, &ce, &mse);
    int exact = 1;
    for (int b = 0; b < B; b++)
        for (int n = 0; n < x.count[b]; n++)
            for (int t = 0; t < M; t++) {
                const float *f = x.fr + ((b * N + n) * M + t) * P;
                const float *pr = calm_dat_patch_pred(m) + ((b * N + n) * M + t) * A * P;
                for (int i = 0; i < A * P; i++) {
                    exact &= pr[i] == f[P - 1];
                    if (t + 1 + i / P < M) want += pow(f[P + i] - f[P - 1], 2) / (A * P);
                }
            }
    memcpy(w, keep, sizeof(float) * (size_t)nw);
    if (ws) memcpy(ws, keep_skip, sizeof(float) * (size_t)ns);
    TESS_TEST_CHECK(exact, "zeroed patch head: every prediction is the last observed frame");
    TESS_TEST_CHECK(fabs(mse - want) < 1e-4 * want, "patch MSE %.6g is copy-last's %.6g", mse, want);
    TESS_TEST_CHECK(pairs == (N + 3) * (M - 1), "pairs %lld", (long long)pairs);
}

/* Every check on the model CFG describes. */
static void check_model(void) {
    tess_registry *reg = NULL;
    calm_dat *m = NULL;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK, "registry");
    TESS_TEST_CHECK(calm_dat_create(&m, &CFG, B, reg) == TESS_OK, "create: %s", tess_error_text());
    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK, "finalize");
    TESS_TEST_CHECK(tess_registry_init_params(reg, 11) == TESS_OK, "init");
    /* weights 10x their init (std 0.2, norms untouched) so that the checks see real mixing */
    for (int64_t e = 0; e < tess_registry_count(reg); e++) {
        if (tess_registry_get(reg, e)->init.kind != TESS_INIT_NORMAL) continue;
        float *w = tess_registry_param(reg, e);
        for (int64_t i = 0; i < tess_registry_get(reg, e)->local_count; i++) w[i] *= 10.0f;
    }
    const int64_t sk = tess_registry_find(reg, "dat.patch_skip"); /* zeros at init: fill it */
    for (int64_t i = 0; sk >= 0 && i < tess_registry_get(reg, sk)->local_count; i++)
        tess_registry_param(reg, sk)[i] = (float)(draw(5, (uint64_t)i, 201) - 100) / 500.0f;
    test_causal(m);
    test_padding(m);
    test_permutation(m);
    test_gradient(m, reg);
    if (CFG.head == CALM_HEAD_BOTH) test_copy_last(m, reg);
    calm_dat_destroy(&m);
    tess_registry_destroy(&reg);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    CFG.head = CALM_HEAD_TOKEN; /* the token head on token ids alone */
    check_model();
    CFG.head = CALM_HEAD_BOTH; /* both heads, the frames entering through the patch input */
    CFG.patch_input = true;
    check_model();
    CFG.skip = 3; /* and the head's linear skip over 3 patches */
    check_model();
    calm_dat_config bad = CFG;
    bad.heads = 3;
    TESS_TEST_CHECK(calm_dat_check(&bad, 1) == TESS_ERR_CONFIG, "heads not dividing channels refused");
    int rc = tess_test_finish("test_dat");
    MPI_Finalize();
    return rc;
}
