/* test_nn_refs.c - linear, embedding, rmsnorm, layernorm, cross-entropy, MSE, GELU (tanh), SiLU
 * and the softmax kernels against PyTorch values stored in tests/data/nn_refs/<layer>.txt
 * (written by gen_refs.py there; the directory is argv[1]). Fast and _ref versions are both
 * checked, so the oracle itself is tested against an independent implementation.
 *
 * Tolerance: the stored answers are float64 results on the stored float32 inputs, so the only
 * error is the C code's fp32 arithmetic over rows of at most 16 terms: a few ulp (1e-7) of the
 * largest term. We accept |got - want| <= REF_ATOL + REF_RTOL |want| with REF_RTOL = 1e-5 and
 * REF_ATOL = 1e-6 (for entries near zero that come from cancelling O(1) terms); the worst
 * observed error is printed per array (at most 0.05 of the tolerance when this was written). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/activation.h" /* tess_nn_gelu_*, tess_nn_silu_* */
#include "nn/embedding.h"  /* tess_nn_embedding_* */
#include "nn/linear.h"     /* tess_nn_linear_* */
#include "nn/loss.h"       /* tess_nn_crossentropy_*, tess_nn_mse_* */
#include "nn/norm.h"       /* tess_nn_rmsnorm_*, tess_nn_layernorm_* */
#include "tensor/tensor.h" /* tess_tensor_softmax_rows*, tess_tensor_logsoftmax_rows* */
#include "tess_test.h"

#define REF_RTOL 1e-5
#define REF_ATOL 1e-6
#define REF_MAX_SECTIONS 32

/* One reference file: sections "<name> <count>" followed by count values. */
typedef struct {
    char name[32];
    int64_t n;
    float *f;   /* (n) values as float */
    int32_t *i; /* (n) values as int32 (for ids, targets, dims) */
} ref_section;

typedef struct {
    char layer[32];
    int nsec;
    ref_section sec[REF_MAX_SECTIONS];
} ref_file;

static void ref_free(ref_file *r) {
    for (int s = 0; s < r->nsec; s++) {
        free(r->sec[s].f);
        free(r->sec[s].i);
    }
    r->nsec = 0;
}

/* Load dir/<layer>.txt. Returns 0, or -1 after recording a test failure. */
static int ref_load(ref_file *r, const char *dir, const char *layer) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.txt", dir, layer);
    snprintf(r->layer, sizeof r->layer, "%s", layer);
    r->nsec = 0;
    FILE *fp = fopen(path, "r");
    TESS_TEST_CHECK(fp != NULL, "cannot open %s", path);
    if (!fp) return -1;
    char name[32];
    long long count;
    int ok = 1;
    while (ok && fscanf(fp, "%31s %lld", name, &count) == 2) {
        ok = r->nsec < REF_MAX_SECTIONS && count >= 0;
        if (!ok) break;
        ref_section *s = &r->sec[r->nsec++];
        snprintf(s->name, sizeof s->name, "%s", name);
        s->n = count;
        s->f = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
        s->i = malloc((size_t)(count > 0 ? count : 1) * sizeof(int32_t));
        ok = s->f && s->i;
        for (long long k = 0; ok && k < count; k++) {
            double v;
            ok = fscanf(fp, "%lf", &v) == 1;
            s->f[k] = (float)v;
            s->i[k] = (int32_t)lrint(v);
        }
    }
    ok = ok && feof(fp);
    fclose(fp);
    TESS_TEST_CHECK(ok, "%s: malformed reference file", path);
    if (!ok) ref_free(r);
    return ok ? 0 : -1;
}

/* Section `name`, which must hold exactly n values; NULL (and a failure) otherwise. */
static ref_section *ref_get(ref_file *r, const char *name, int64_t n) {
    for (int s = 0; s < r->nsec; s++) {
        if (strcmp(r->sec[s].name, name) != 0) continue;
        TESS_TEST_CHECK(r->sec[s].n == n, "%s: section %s has %lld values, expected %lld",
                        r->layer, name, (long long)r->sec[s].n, (long long)n);
        return r->sec[s].n == n ? &r->sec[s] : NULL;
    }
    TESS_TEST_CHECK(0, "%s: no section %s", r->layer, name);
    return NULL;
}

/* Compare got (n) with section `name`: every element within REF_ATOL + REF_RTOL |want|. */
static void ref_compare(ref_file *r, const char *name, const float *got, int64_t n,
                        const char *variant) {
    ref_section *s = ref_get(r, name, n);
    if (!s) return;
    double worst = 0; /* largest |got - want| / (REF_ATOL + REF_RTOL |want|) */
    int64_t at = 0;
    for (int64_t k = 0; k < n; k++) {
        double want = s->f[k], err = fabs((double)got[k] - want);
        double q = err / (REF_ATOL + REF_RTOL * fabs(want));
        if (q > worst) {
            worst = q;
            at = k;
        }
    }
    printf("  %-12s %-5s %-6s worst error %.2f of tolerance\n", r->layer, variant, name, worst);
    TESS_TEST_CHECK(worst <= 1.0, "%s (%s): %s[%lld] = %.9g, torch says %.9g", r->layer, variant,
                    name, (long long)at, got[at], s->f[at]);
}

/* A zeroed float buffer of n values (gradients start at zero: backward accumulates). */
static float *zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

static const char *variant_name(int ref) { return ref ? "_ref" : "fast"; }

static void test_linear(const char *dir) {
    ref_file r;
    if (ref_load(&r, dir, "linear")) return;
    ref_section *dims = ref_get(&r, "dims", 3);
    if (!dims) goto out;
    int64_t N = dims->i[0], C = dims->i[1], OC = dims->i[2];
    ref_section *in = ref_get(&r, "in", N * C), *w = ref_get(&r, "w", OC * C),
                *b = ref_get(&r, "b", OC), *dout = ref_get(&r, "dout", N * OC);
    if (!in || !w || !b || !dout) goto out;
    for (int ref = 0; ref < 2; ref++) {
        float *out = zeros(N * OC), *din = zeros(N * C), *dw = zeros(OC * C), *db = zeros(OC);
        if (ref) {
            tess_nn_linear_forward_ref(out, in->f, w->f, b->f, N, C, OC);
            tess_nn_linear_backward_ref(din, dw, db, dout->f, in->f, w->f, N, C, OC);
        } else {
            tess_nn_linear_forward(out, in->f, w->f, b->f, N, C, OC);
            tess_nn_linear_backward(din, dw, db, dout->f, in->f, w->f, N, C, OC);
        }
        ref_compare(&r, "out", out, N * OC, variant_name(ref));
        ref_compare(&r, "din", din, N * C, variant_name(ref));
        ref_compare(&r, "dw", dw, OC * C, variant_name(ref));
        ref_compare(&r, "db", db, OC, variant_name(ref));
        free(out);
        free(din);
        free(dw);
        free(db);
    }
out:
    ref_free(&r);
}

static void test_embedding(const char *dir) {
    ref_file r;
    if (ref_load(&r, dir, "embedding")) return;
    ref_section *dims = ref_get(&r, "dims", 3);
    if (!dims) goto out;
    int64_t N = dims->i[0], V = dims->i[1], C = dims->i[2];
    ref_section *ids = ref_get(&r, "ids", N), *table = ref_get(&r, "table", V * C),
                *dout = ref_get(&r, "dout", N * C);
    if (!ids || !table || !dout) goto out;
    float *out = zeros(N * C), *dtable = zeros(V * C);
    tess_nn_embedding_forward(out, ids->i, table->f, N, V, C);
    tess_nn_embedding_backward(dtable, dout->f, ids->i, N, V, C);
    ref_compare(&r, "out", out, N * C, "fast");
    ref_compare(&r, "dtable", dtable, V * C, "fast");
    free(out);
    free(dtable);
out:
    ref_free(&r);
}

static void test_rmsnorm(const char *dir) {
    ref_file r;
    if (ref_load(&r, dir, "rmsnorm")) return;
    ref_section *dims = ref_get(&r, "dims", 2), *eps = ref_get(&r, "eps", 1);
    if (!dims || !eps) goto out;
    int64_t N = dims->i[0], C = dims->i[1];
    ref_section *in = ref_get(&r, "in", N * C), *w = ref_get(&r, "w", C),
                *dout = ref_get(&r, "dout", N * C);
    if (!in || !w || !dout) goto out;
    for (int ref = 0; ref < 2; ref++) {
        float *out = zeros(N * C), *rstd = zeros(N), *din = zeros(N * C), *dw = zeros(C);
        if (ref) {
            tess_nn_rmsnorm_forward_ref(out, rstd, in->f, w->f, N, C, eps->f[0]);
            tess_nn_rmsnorm_backward_ref(din, dw, dout->f, in->f, w->f, rstd, N, C);
        } else {
            tess_nn_rmsnorm_forward(out, rstd, in->f, w->f, N, C, eps->f[0]);
            tess_nn_rmsnorm_backward(din, dw, dout->f, in->f, w->f, rstd, N, C);
        }
        ref_compare(&r, "out", out, N * C, variant_name(ref));
        ref_compare(&r, "rstd", rstd, N, variant_name(ref));
        ref_compare(&r, "din", din, N * C, variant_name(ref));
        ref_compare(&r, "dw", dw, C, variant_name(ref));
        free(out);
        free(rstd);
        free(din);
        free(dw);
    }
out:
    ref_free(&r);
}

static void test_layernorm(const char *dir) {
    ref_file r;
    if (ref_load(&r, dir, "layernorm")) return;
    ref_section *dims = ref_get(&r, "dims", 2), *eps = ref_get(&r, "eps", 1);
    if (!dims || !eps) goto out;
    int64_t N = dims->i[0], C = dims->i[1];
    ref_section *in = ref_get(&r, "in", N * C), *w = ref_get(&r, "w", C), *b = ref_get(&r, "b", C),
                *dout = ref_get(&r, "dout", N * C);
    if (!in || !w || !b || !dout) goto out;
    for (int ref = 0; ref < 2; ref++) {
        float *out = zeros(N * C), *mean = zeros(N), *rstd = zeros(N), *din = zeros(N * C),
              *dw = zeros(C), *db = zeros(C);
        if (ref) {
            tess_nn_layernorm_forward_ref(out, mean, rstd, in->f, w->f, b->f, N, C, eps->f[0]);
            tess_nn_layernorm_backward_ref(din, dw, db, dout->f, in->f, w->f, mean, rstd, N, C);
        } else {
            tess_nn_layernorm_forward(out, mean, rstd, in->f, w->f, b->f, N, C, eps->f[0]);
            tess_nn_layernorm_backward(din, dw, db, dout->f, in->f, w->f, mean, rstd, N, C);
        }
        ref_compare(&r, "out", out, N * C, variant_name(ref));
        ref_compare(&r, "mean", mean, N, variant_name(ref));
        ref_compare(&r, "rstd", rstd, N, variant_name(ref));
        ref_compare(&r, "din", din, N * C, variant_name(ref));
        ref_compare(&r, "dw", dw, C, variant_name(ref));
        ref_compare(&r, "db", db, C, variant_name(ref));
        free(out);
        free(mean);
        free(rstd);
        free(din);
        free(dw);
        free(db);
    }
out:
    ref_free(&r);
}

/* Cross-entropy, plus the softmax kernels on the same logits against torch's probabilities. */
static void test_crossentropy(const char *dir) {
    ref_file r;
    if (ref_load(&r, dir, "crossentropy")) return;
    ref_section *dims = ref_get(&r, "dims", 2);
    if (!dims) goto out;
    int64_t N = dims->i[0], V = dims->i[1];
    ref_section *logits = ref_get(&r, "logits", N * V), *targets = ref_get(&r, "targets", N),
                *dloss = ref_get(&r, "dloss", 1), *probs_ref = ref_get(&r, "probs", N * V);
    if (!logits || !targets || !dloss || !probs_ref) goto out;
    float *probs = zeros(N * V), *dlogits = zeros(N * V), loss;
    loss = tess_nn_crossentropy_forward(probs, logits->f, targets->i, N, V);
    tess_nn_crossentropy_backward(dlogits, probs, targets->i, N, V, dloss->f[0]);
    ref_compare(&r, "loss", &loss, 1, "fast");
    ref_compare(&r, "probs", probs, N * V, "fast");
    ref_compare(&r, "dlogits", dlogits, N * V, "fast");

    for (int ref = 0; ref < 2; ref++) {
        (ref ? tess_tensor_softmax_rows_ref : tess_tensor_softmax_rows)(probs, logits->f, N, V);
        ref_compare(&r, "probs", probs, N * V, ref ? "sm_ref" : "sm");
        /* log-softmax against log(torch's probabilities): same tolerance on O(1..10) values */
        (ref ? tess_tensor_logsoftmax_rows_ref : tess_tensor_logsoftmax_rows)(probs, logits->f, N,
                                                                             V);
        double worst = 0;
        for (int64_t k = 0; k < N * V; k++) {
            double want = log((double)probs_ref->f[k]);
            worst = fmax(worst, fabs(probs[k] - want) / (REF_ATOL + REF_RTOL * fabs(want)));
        }
        printf("  %-12s %-5s %-6s worst error %.2f of tolerance\n", "crossentropy",
               ref ? "lsm_ref" : "lsm", "log(probs)", worst);
        TESS_TEST_CHECK(worst <= 1.0, "logsoftmax%s vs log(torch probs): %.2f of tolerance",
                        ref ? "_ref" : "", worst);
    }
    free(probs);
    free(dlogits);
out:
    ref_free(&r);
}

static void test_mse(const char *dir) {
    ref_file r;
    if (ref_load(&r, dir, "mse")) return;
    ref_section *dims = ref_get(&r, "dims", 1);
    if (!dims) goto out;
    int64_t n = dims->i[0];
    ref_section *pred = ref_get(&r, "pred", n), *target = ref_get(&r, "target", n),
                *dloss = ref_get(&r, "dloss", 1);
    if (!pred || !target || !dloss) goto out;
    float *dpred = zeros(n);
    float loss = tess_nn_mse_forward(pred->f, target->f, n);
    tess_nn_mse_backward(dpred, pred->f, target->f, n, dloss->f[0]);
    ref_compare(&r, "loss", &loss, 1, "fast");
    ref_compare(&r, "dpred", dpred, n, "fast");
    free(dpred);
out:
    ref_free(&r);
}

typedef void (*act_fwd)(float *out, const float *in, int64_t n);
typedef void (*act_bwd)(float *din, const float *dout, const float *in, int64_t n);

static void test_activation(const char *dir, const char *layer, act_fwd fwd, act_bwd bwd) {
    ref_file r;
    if (ref_load(&r, dir, layer)) return;
    ref_section *dims = ref_get(&r, "dims", 1);
    if (!dims) goto out;
    int64_t n = dims->i[0];
    ref_section *in = ref_get(&r, "in", n), *dout = ref_get(&r, "dout", n);
    if (!in || !dout) goto out;
    float *out = zeros(n), *din = zeros(n);
    fwd(out, in->f, n);
    bwd(din, dout->f, in->f, n);
    ref_compare(&r, "out", out, n, "fast");
    ref_compare(&r, "din", din, n, "fast");
    free(out);
    free(din);
out:
    ref_free(&r);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    TESS_TEST_CHECK(argc == 2, "usage: test_nn_refs <dir of the reference files>");
    if (argc == 2) {
        const char *dir = argv[1];
        test_linear(dir);
        test_embedding(dir);
        test_rmsnorm(dir);
        test_layernorm(dir);
        test_crossentropy(dir);
        test_mse(dir);
        test_activation(dir, "gelu", tess_nn_gelu_forward, tess_nn_gelu_backward);
        test_activation(dir, "silu", tess_nn_silu_forward, tess_nn_silu_backward);
    }
    int rc = tess_test_finish("nn_refs");
    MPI_Finalize();
    return rc;
}
