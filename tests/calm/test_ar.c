/* test_ar - the NLinear ridge AR baselines (apps/calm/ar.h): on noise-free sums of two sines
 * (amplitude 1.5; an exact linear recursion of order 4) both baselines forecast the test frames
 * to 5e-2 and
 * the validation slice picks the smallest penalty of the grid; test frames set to NaN change
 * nothing (the fit never reads them); white noise makes the validation pick a larger penalty
 * than the sines; a training part too short for the validation slice is refused naming the
 * session. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ar.h"
#include "core/rng.h"
#include "tess_test.h"

enum { T = 600, N = 3, LAGS = 16, H = 8 };

static void sines(calm_session *s, float *x) {
    *s = (calm_session){.T = T, .N = N, .unit0 = 0, .x = x};
    strcpy(s->name, "sines");
    calm_split_session(s, CALM_SPLIT_TAIL, 0.7, 0, 0); /* training frames [0, 420) */
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++)
            x[t * N + n] = (float)(sin(0.3 * t + n) + 0.5 * sin(0.11 * t + 1.0 + 2.0 * n));
}

/* Largest forecast error over the test frames of every neuron, with weights of `pooled`. */
static double test_error(const calm_ar *ar, const calm_session *s, bool pooled) {
    double worst = 0.0, pred[H];
    for (int n = 0; n < N; n++)
        for (int64_t t = s->train_T + LAGS; t + H < T; t += 5) {
            calm_ar_predict(ar, pooled ? ar->w_pooled : ar->w_neuron + n * H * LAGS, s, n, t, pred);
            for (int h = 0; h < H; h++) worst = fmax(worst, fabs(pred[h] - s->x[(t + 1 + h) * N + n]));
        }
    return worst;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    static float x[T * N], y[T * N];
    calm_session s;
    sines(&s, x);
    calm_ar ar;
    TESS_TEST_CHECK(calm_ar_fit(&ar, &s, 1, N, LAGS, H, 0.2) == TESS_OK, "fit: %s", tess_error_text());
    const double en = test_error(&ar, &s, false), ep = test_error(&ar, &s, true);
    TESS_TEST_CHECK(en < 5e-2 && ep < 5e-2, "sines forecast: per-neuron %.2g, pooled %.2g", en, ep);
    TESS_TEST_CHECK(ar.lambda_neuron == 1e-2 && ar.lambda_pooled == 1e-2,
                    "noise-free: the smallest penalty chosen (%g, %g)", ar.lambda_neuron,
                    ar.lambda_pooled);
    const double sines_lambda = ar.lambda_pooled;
    /* the fit on the same data with NaN test frames: bit-identical weights */
    memcpy(y, x, sizeof x);
    for (int t = 420; t < T; t++)
        for (int n = 0; n < N; n++) y[t * N + n] = NAN;
    calm_session sn = s;
    sn.x = y;
    calm_ar arn;
    TESS_TEST_CHECK(calm_ar_fit(&arn, &sn, 1, N, LAGS, H, 0.2) == TESS_OK, "fit with NaN test frames");
    TESS_TEST_CHECK(memcmp(ar.w_neuron, arn.w_neuron, sizeof(double) * N * H * LAGS) == 0 &&
                        memcmp(ar.w_pooled, arn.w_pooled, sizeof(double) * H * LAGS) == 0,
                    "test frames are never read");
    calm_ar_free(&arn);
    calm_ar_free(&ar);
    /* white noise: the validation slice wants more shrinkage than for the sines */
    for (int i = 0; i < T * N; i++)
        y[i] = (float)tess_rng_normal((tess_rng_key){5, 0}, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1),
                                      (uint64_t)i, 0.0, 1.0);
    TESS_TEST_CHECK(calm_ar_fit(&arn, &sn, 1, N, LAGS, H, 0.2) == TESS_OK, "fit on noise");
    TESS_TEST_CHECK(arn.lambda_pooled > sines_lambda && arn.lambda_neuron > sines_lambda,
                    "noise: larger penalties chosen (%g, %g)", arn.lambda_neuron, arn.lambda_pooled);
    calm_ar_free(&arn);
    /* block split (blocks of 200, 140 training frames each): NaN in every test span, the same
     * weights as with the true test frames */
    calm_split_session(&s, CALM_SPLIT_BLOCK, 0.7, 200, 0);
    TESS_TEST_CHECK(calm_ar_fit(&ar, &s, 1, N, LAGS, H, 0.2) == TESS_OK, "block fit: %s", tess_error_text());
    memcpy(y, x, sizeof x);
    for (int64_t i = 0; i < s.nspans; i++)
        for (int64_t t = s.spans[i].t0; !s.spans[i].train && t < s.spans[i].t1; t++)
            for (int n = 0; n < N; n++) y[t * N + n] = NAN;
    sn = s, sn.x = y;
    TESS_TEST_CHECK(calm_ar_fit(&arn, &sn, 1, N, LAGS, H, 0.2) == TESS_OK, "block fit, NaN test spans");
    TESS_TEST_CHECK(memcmp(ar.w_neuron, arn.w_neuron, sizeof(double) * N * H * LAGS) == 0 &&
                        memcmp(ar.w_pooled, arn.w_pooled, sizeof(double) * H * LAGS) == 0,
                    "block split: test spans are never read");
    calm_ar_free(&arn);
    calm_ar_free(&ar);
    /* leave-one-animal-out: two sessions, animal 1 held out; whatever the held-out session's
     * frames, the pooled map and the other animal's per-neuron maps are bit-identical */
    static float z[T * N];
    calm_session two[2] = {s, s};
    two[1].x = z, two[1].unit0 = N, two[1].animal = 1, two[1].spans = NULL;
    calm_split_session(&two[0], CALM_SPLIT_ANIMAL, 0.7, 0, 1);
    calm_split_session(&two[1], CALM_SPLIT_ANIMAL, 0.7, 0, 1);
    TESS_TEST_CHECK(!two[0].held_out && two[1].held_out && two[0].nspans == 1 &&
                        two[1].nspans == 2 && two[1].spans[0].t1 == 420,
                    "animal split: animal 1 held out, its first 70 %% its own training part");
    for (int i = 0; i < T * N; i++) z[i] = x[i];
    TESS_TEST_CHECK(calm_ar_fit(&ar, two, 2, 2 * N, LAGS, H, 0.2) == TESS_OK, "animal fit: %s", tess_error_text());
    for (int i = 0; i < T * N; i++) z[i] = (float)sin(0.05 * i);
    TESS_TEST_CHECK(calm_ar_fit(&arn, two, 2, 2 * N, LAGS, H, 0.2) == TESS_OK, "animal fit 2");
    TESS_TEST_CHECK(memcmp(ar.w_neuron, arn.w_neuron, sizeof(double) * N * H * LAGS) == 0 &&
                        memcmp(ar.w_pooled, arn.w_pooled, sizeof(double) * H * LAGS) == 0 &&
                        memcmp(ar.w_neuron + N * H * LAGS, arn.w_neuron + N * H * LAGS,
                               sizeof(double) * N * H * LAGS) != 0,
                    "the pooled map never reads the held-out animal (its per-neuron maps do)");
    calm_ar_free(&arn);
    calm_ar_free(&ar);
    free(two[0].spans), free(two[1].spans);
    s.spans = NULL;
    calm_split_session(&s, CALM_SPLIT_TAIL, 0.1, 0, 0);
    TESS_TEST_CHECK(calm_ar_check(&s, 1, LAGS, H, 0.2) == TESS_ERR_DATA &&
                        strstr(tess_error_text(), "'sines': 60 training frames (0-60) are too few"),
                    "short training part refused: %s", tess_error_text());
    free(s.spans);
    int rc = tess_test_finish("test_ar");
    MPI_Finalize();
    return rc;
}
