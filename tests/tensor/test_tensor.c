/* test_tensor.c - tess_tensor views and the elementwise, reduction and softmax kernels, against
 * hand-computed values, against their _ref oracles, and the softmax kernels against PyTorch
 * (tests/data/nn_refs/crossentropy.txt; the directory is argv[1]). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/status.h"   /* tess_error_clear, TESS_ERR_ARG */
#include "tensor/tensor.h" /* tess_tensor_* */
#include "tess_ref.h"      /* tess_ref_* */
#include "tess_test.h"

/* Deterministic values in [-1, 1) (xorshift32); only for filling test arrays. */
static float next_val(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (float)((double)(*s >> 8) / 8388608.0 - 1.0);
}

static void test_views(void) {
    float data[24];
    for (int i = 0; i < 24; i++) data[i] = (float)i;
    tess_tensor t, r;
    TESS_TEST_CHECK(tess_tensor_init(&t, data, 3, (int64_t[]){2, 3, 4}) == TESS_OK, "init 3-D");
    TESS_TEST_CHECK(tess_tensor_numel(&t) == 24, "numel %lld", (long long)tess_tensor_numel(&t));
    TESS_TEST_CHECK(t.shape[3] == 1, "unused extents read as 1");
    TESS_TEST_CHECK(tess_tensor_row(&t, 1) == data + 12, "row 1 starts at element 12");
    TESS_TEST_CHECK(tess_tensor_reshape(&r, &t, 2, (int64_t[]){6, 4}) == TESS_OK, "reshape");
    TESS_TEST_CHECK(r.data == data && r.ndim == 2 && r.shape[0] == 6 && r.shape[1] == 4,
                    "reshape is a view with the new shape");
    TESS_TEST_CHECK(*tess_tensor_row(&r, 5) == 20.0f, "row 5 of (6,4) starts at 20");
    TESS_TEST_CHECK(tess_tensor_reshape(&r, &t, 2, (int64_t[]){5, 5}) == TESS_ERR_ARG,
                    "reshape to a different element count is refused");
    TESS_TEST_CHECK(tess_tensor_init(&r, data, 5, (int64_t[]){1, 1, 1, 1, 1}) == TESS_ERR_ARG,
                    "5 dimensions are refused");
    TESS_TEST_CHECK(tess_tensor_init(&r, data, 1, (int64_t[]){-1}) == TESS_ERR_ARG,
                    "negative extent is refused");
    tess_error_clear();
    tess_tensor e;
    TESS_TEST_CHECK(tess_tensor_init(&e, NULL, 2, (int64_t[]){0, 7}) == TESS_OK &&
                        tess_tensor_numel(&e) == 0, "empty view");
}

static void test_elementwise(void) {
    float a[5] = {1, -2, 3, 0.5f, 10}, b[5] = {4, 5, -6, 2, -10}, out[5];
    tess_tensor_add(out, a, b, 5);
    TESS_TEST_CHECK(out[0] == 5 && out[1] == 3 && out[2] == -3 && out[3] == 2.5f && out[4] == 0,
                    "add");
    tess_tensor_mul(out, a, b, 5);
    TESS_TEST_CHECK(out[0] == 4 && out[1] == -10 && out[2] == -18 && out[3] == 1 && out[4] == -100,
                    "mul");
    tess_tensor_add(out, out, a, 5); /* aliasing out = a */
    TESS_TEST_CHECK(out[0] == 5 && out[4] == -90, "add in place");
    float y[3] = {1, 2, 3};
    tess_tensor_axpy(y, 0.5f, (float[]){2, 4, -6}, 3);
    TESS_TEST_CHECK(y[0] == 2 && y[1] == 4 && y[2] == 0, "axpy: y += 0.5 x");
    tess_tensor_scale(y, -2.0f, 3);
    TESS_TEST_CHECK(y[0] == -4 && y[1] == -8 && y[2] == 0, "scale");
    float res[3] = {1, 2, 3}, f[3] = {0.25f, -2, 7}, o[3];
    tess_tensor_residual_add(o, res, f, 3);
    TESS_TEST_CHECK(o[0] == 1.25f && o[1] == 0 && o[2] == 10, "residual add");
    float dres[3] = {1, 1, 1}, df[3] = {0, 0, 0};
    tess_tensor_residual_add_backward(dres, df, (float[]){2, -3, 0.5f}, 3);
    TESS_TEST_CHECK(dres[0] == 3 && dres[1] == -2 && dres[2] == 1.5f, "residual backward adds to dres");
    TESS_TEST_CHECK(df[0] == 2 && df[1] == -3 && df[2] == 0.5f, "residual backward adds to df");
}

static void test_reductions(void) {
    float x[11], y[11];
    for (int i = 0; i < 11; i++) {
        x[i] = (float)(i + 1); /* 1..11: covers one full 8-lane block and a tail of 3 */
        y[i] = (float)(i % 2 ? -1 : 1);
    }
    TESS_TEST_CHECK(tess_tensor_sum(x, 11) == 66.0, "sum 1..11 = 66, got %g", tess_tensor_sum(x, 11));
    TESS_TEST_CHECK(tess_tensor_sum_ref(x, 11) == 66.0, "ref sum");
    TESS_TEST_CHECK(tess_tensor_sum(x, 0) == 0.0, "empty sum");
    /* 1 - 2 + 3 - ... + 11 = 6 */
    TESS_TEST_CHECK(tess_tensor_dot(x, y, 11) == 6.0, "dot, got %g", tess_tensor_dot(x, y, 11));
    TESS_TEST_CHECK(tess_tensor_dot_ref(x, y, 11) == 6.0, "ref dot");
    /* sum of squares 1..11 = 11*12*23/6 = 506 */
    TESS_TEST_CHECK(tess_tensor_sqnorm(x, 11) == 506.0, "sqnorm 506, got %g", tess_tensor_sqnorm(x, 11));
    TESS_TEST_CHECK(tess_tensor_sqnorm_ref(x, 11) == 506.0, "ref sqnorm");
    TESS_TEST_CHECK(tess_tensor_max((float[]){-3, 7.5f, 2, 7.25f}, 4) == 7.5f, "max");
    TESS_TEST_CHECK(tess_tensor_max((float[]){-3}, 1) == -3.0f, "max of one");
    /* double accumulation: 1e8 + 1 + ... stays exact where a float sum would lose the ones */
    float big[9] = {1e8f, 1, 1, 1, 1, 1, 1, 1, 1};
    TESS_TEST_CHECK(tess_tensor_sum(big, 9) == 100000008.0, "sum in double keeps small terms");

    float u[1003], v[1003];
    uint32_t s = 12345;
    for (int i = 0; i < 1003; i++) {
        u[i] = next_val(&s);
        v[i] = next_val(&s);
    }
    TESS_TEST_CLOSE(tess_tensor_sum(u, 1003), tess_tensor_sum_ref(u, 1003), 1e-12, 1e-12, "sum vs ref");
    TESS_TEST_CLOSE(tess_tensor_dot(u, v, 1003), tess_tensor_dot_ref(u, v, 1003), 1e-12, 1e-12,
                    "dot vs ref");
    TESS_TEST_CLOSE(tess_tensor_sqnorm(u, 1003), tess_tensor_sqnorm_ref(u, 1003), 1e-12, 1e-12,
                    "sqnorm vs ref");
}

static void test_exp(void) {
    /* relative error over the whole unclamped range, on a grid finer than 1e-4 */
    double worst = 0, at = 0;
    for (double x = -87.0; x <= 88.0; x += 1.3e-4) {
        float xf = (float)x;
        double e = fabs(tess_tensor_expf(xf) / exp((double)xf) - 1.0);
        if (e > worst) {
            worst = e;
            at = xf;
        }
    }
    TESS_TEST_CHECK(worst <= 1.5e-7, "expf: relative error %g at x = %g", worst, at);
    TESS_TEST_CHECK(tess_tensor_expf(0.0f) == 1.0f, "e^0 = 1 exactly");
    float lo = tess_tensor_expf(-INFINITY), hi = tess_tensor_expf(INFINITY);
    TESS_TEST_CHECK(lo > 0 && lo < 1.3e-38f, "e^-inf clamps to ~1.2e-38, got %g", lo);
    TESS_TEST_CHECK(isfinite(hi) && hi > 2e38f, "e^+inf saturates at ~2.2e38, got %g", hi);
    TESS_TEST_CHECK(isnan(tess_tensor_expf(NAN)), "NaN propagates");
    float in[5] = {-1, 0, 0.5f, 2, -100}, out[5];
    tess_tensor_exp(out, in, 5);
    for (int i = 0; i < 4; i++) TESS_TEST_CLOSE(out[i], exp((double)in[i]), 0, 1.5e-7, "exp kernel");
    TESS_TEST_CHECK(out[4] < 1.3e-38f, "exp kernel clamps -100");
}

static void test_softmax(void) {
    /* row 0: softmax(1,2,3) = e^i / (e + e^2 + e^3); row 1: huge equal logits must not overflow */
    float in[6] = {1, 2, 3, 1000, 1000, 1000}, out[6], ref[6];
    const double p0[3] = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
    const double lp0[3] = {-2.4076059644443806, -1.4076059644443806, -0.4076059644443806};
    tess_tensor_softmax_rows(out, in, 2, 3);
    for (int v = 0; v < 3; v++) {
        TESS_TEST_CLOSE(out[v], p0[v], 0, 2e-7, "softmax(1,2,3)");
        TESS_TEST_CLOSE(out[3 + v], 1.0 / 3.0, 0, 2e-7, "softmax of equal huge logits");
    }
    tess_tensor_softmax_rows_ref(ref, in, 2, 3);
    for (int v = 0; v < 6; v++) TESS_TEST_CLOSE(ref[v], v < 3 ? p0[v] : 1.0 / 3.0, 0, 1e-7, "softmax ref");
    tess_tensor_logsoftmax_rows(out, in, 2, 3);
    for (int v = 0; v < 3; v++) {
        TESS_TEST_CLOSE(out[v], lp0[v], 0, 2e-7, "logsoftmax(1,2,3)");
        TESS_TEST_CLOSE(out[3 + v], -log(3.0), 0, 2e-7, "logsoftmax of equal huge logits");
    }
    tess_tensor_logsoftmax_rows_ref(ref, in, 2, 3);
    for (int v = 0; v < 3; v++) TESS_TEST_CLOSE(ref[v], lp0[v], 0, 1e-7, "logsoftmax ref");

    /* random rows, fast vs ref, and in place */
    enum { N = 4, V = 37 };
    float x[N * V], a[N * V], b[N * V];
    uint32_t s = 777;
    for (int i = 0; i < N * V; i++) x[i] = 8.0f * next_val(&s);
    tess_tensor_softmax_rows(a, x, N, V);
    tess_tensor_softmax_rows_ref(b, x, N, V);
    double maxerr = 0, rowsum = 0;
    for (int i = 0; i < N * V; i++) maxerr = fmax(maxerr, fabs(a[i] - b[i]) / b[i]);
    for (int v = 0; v < V; v++) rowsum += a[2 * V + v];
    TESS_TEST_CHECK(maxerr < 1e-6, "softmax vs ref: max relative error %g", maxerr);
    TESS_TEST_CLOSE(rowsum, 1.0, 1e-6, 0, "softmax row sums to 1");
    tess_tensor_logsoftmax_rows(a, x, N, V);
    tess_tensor_logsoftmax_rows_ref(b, x, N, V);
    maxerr = 0;
    for (int i = 0; i < N * V; i++) maxerr = fmax(maxerr, fabs(a[i] - b[i]) / (1.0 + fabs(b[i])));
    TESS_TEST_CHECK(maxerr < 1e-6, "logsoftmax vs ref: max error %g", maxerr);
    for (int i = 0; i < N * V; i++) a[i] = x[i];
    tess_tensor_softmax_rows(a, a, N, V);
    tess_tensor_softmax_rows(b, x, N, V);
    int same = 1;
    for (int i = 0; i < N * V; i++) same &= a[i] == b[i];
    TESS_TEST_CHECK(same, "softmax in place equals out of place");
}

/* The softmax kernels on the logits of tests/data/nn_refs/crossentropy.txt (dir) against
 * PyTorch's probabilities; log-softmax against their logarithm. */
static void test_softmax_torch(const char *dir) {
    tess_ref_file r;
    if (tess_ref_load(&r, dir, "crossentropy")) return;
    tess_ref_section *dims = tess_ref_find(&r, "dims", 2);
    const int64_t N = dims ? dims->i[0] : 0, V = dims ? dims->i[1] : 0;
    tess_ref_section *logits = tess_ref_find(&r, "logits", N * V),
                     *probs = tess_ref_find(&r, "probs", N * V);
    TESS_TEST_CHECK(dims && logits && probs, "crossentropy.txt: dims, logits and probs");
    if (!dims || !logits || !probs) {
        tess_ref_free(&r);
        return;
    }
    float *out = malloc((size_t)(N * V) * sizeof(float));
    tess_ref_section logp = *probs; /* log(torch's probabilities), same tolerance on O(1..10) */
    logp.f = malloc((size_t)(N * V) * sizeof(float));
    snprintf(logp.name, sizeof logp.name, "log(probs)");
    for (int64_t k = 0; k < N * V; k++) logp.f[k] = (float)log((double)probs->f[k]);
    for (int ref = 0; ref < 2; ref++) {
        (ref ? tess_tensor_softmax_rows_ref : tess_tensor_softmax_rows)(out, logits->f, N, V);
        tess_ref_compare(&r, probs, out, ref ? "sm_ref" : "sm");
        (ref ? tess_tensor_logsoftmax_rows_ref : tess_tensor_logsoftmax_rows)(out, logits->f, N, V);
        tess_ref_compare(&r, &logp, out, ref ? "lsm_ref" : "lsm");
    }
    free(logp.f);
    free(out);
    tess_ref_free(&r);
}

/* worst relative error of f against the double function g on [lo, hi] stepping by step */
static double worst_rel(float (*f)(float), double (*g)(double), double lo, double hi,
                        double step, double *at) {
    double worst = 0;
    for (double x = lo; x <= hi; x += step) {
        const float xf = (float)x;
        const double want = g((double)xf), e = fabs(f(xf) - want) / fabs(want);
        if (e > worst) {
            worst = e;
            *at = xf;
        }
    }
    return worst;
}

static float tanh_f(float x) { return tess_tensor_tanhf(x); }
static float log1p_f(float x) { return tess_tensor_log1pf(x); }
static float log_f(float x) { return tess_tensor_logf(x); }
static float softplus_f(float x) { return tess_tensor_softplusf(x); }
static float sigmoid_f(float x) { return tess_tensor_sigmoidf(x); }
static double softplus_d(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

static void test_tanh_log1p(void) {
    double at = 0, w;
    /* tanh: fine steps across the polynomial / exponential switch at 0.625, coarse beyond */
    w = worst_rel(tanh_f, tanh, 1e-6, 2.0, 1.1e-6, &at);
    TESS_TEST_CHECK(w <= 3e-7, "tanhf: relative error %g at x = %g", w, at);
    w = worst_rel(tanh_f, tanh, -20.0, -1e-6, 3.7e-5, &at);
    TESS_TEST_CHECK(w <= 3e-7, "tanhf (negative): relative error %g at x = %g", w, at);
    TESS_TEST_CHECK(tess_tensor_tanhf(0.0f) == 0.0f && tess_tensor_tanhf(INFINITY) == 1.0f &&
                        tess_tensor_tanhf(-INFINITY) == -1.0f && isnan(tess_tensor_tanhf(NAN)),
                    "tanhf: 0, +-inf, NaN");
    TESS_TEST_CHECK(tess_tensor_tanhf(1e-30f) == 1e-30f, "tanhf: tiny x is x");
    w = worst_rel(log1p_f, log1p, -0.99, 1.0, 1.3e-6, &at);
    TESS_TEST_CHECK(w <= 3e-7, "log1pf: relative error %g at t = %g", w, at);
    w = worst_rel(log1p_f, log1p, 1.0, 1e6, 0.77, &at);
    TESS_TEST_CHECK(w <= 3e-7, "log1pf (large t): relative error %g at t = %g", w, at);
    w = worst_rel(log1p_f, log1p, 1e-12, 1e-6, 1.3e-10, &at);
    TESS_TEST_CHECK(w <= 3e-7, "log1pf (tiny t): relative error %g at t = %g", w, at);
    TESS_TEST_CHECK(tess_tensor_log1pf(0.0f) == 0.0f, "log1pf(0) = 0");
    /* logf: around 1 (where ln x -> 0), then across many binades up and down */
    w = worst_rel(log_f, log, 0.5, 2.0, 1.1e-6, &at);
    TESS_TEST_CHECK(w <= 3e-7, "logf: relative error %g at x = %g", w, at);
    w = worst_rel(log_f, log, 0.9999, 1.0001, 1.3e-10, &at);
    TESS_TEST_CHECK(w <= 3e-7, "logf (near 1): relative error %g at x = %g", w, at);
    for (double lo = 1e-30; lo < 1e30; lo *= 1e3) {
        w = worst_rel(log_f, log, lo, lo * 1e3, lo * 1.7e-2, &at);
        TESS_TEST_CHECK(w <= 3e-7, "logf: relative error %g at x = %g", w, at);
    }
    TESS_TEST_CHECK(tess_tensor_logf(1.0f) == 0.0f && tess_tensor_logf(0x1.fffffep-1f) < 0.0f,
                    "logf(1) = 0, logf(1 - ulp) < 0");
    w = worst_rel(softplus_f, softplus_d, -87.0, 60.0, 7.3e-5, &at);
    TESS_TEST_CHECK(w <= 4e-7, "softplusf: relative error %g at x = %g", w, at);
    TESS_TEST_CHECK(tess_tensor_softplusf(-200.0f) >= 0.0f && tess_tensor_softplusf(-200.0f) < 1.3e-38f,
                    "softplusf clamps far below");
    TESS_TEST_CHECK(tess_tensor_softplusf(1e30f) == 1e30f, "softplusf(large) = x");
    w = worst_rel(sigmoid_f, sigmoid_d, -87.0, 60.0, 7.3e-5, &at);
    TESS_TEST_CHECK(w <= 3e-7, "sigmoidf: relative error %g at x = %g", w, at);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    TESS_TEST_CHECK(argc == 2, "usage: test_tensor <tests/data/nn_refs dir>");
    if (argc == 2) test_softmax_torch(argv[1]);
    test_views();
    test_elementwise();
    test_reductions();
    test_exp();
    test_tanh_log1p();
    test_softmax();
    int rc = tess_test_finish("tensor");
    MPI_Finalize();
    return rc;
}
