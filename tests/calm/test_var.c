/* test_var - the population ridge VAR baseline (apps/calm/var.h), on the ranks it is run with:
 * on a generated VAR(1) x[t+1] = A x[t] + e (6 neurons, A a damped rotation mixing all of them,
 * e ~ N(0, 0.3^2)) the forecasts of the test frames match the true conditional means A^h x[t]
 * to a small fraction of the innovation variance at every step ahead, far better than
 * copy-last, and the validation picks a small penalty; the dual form gives the primal's
 * forecasts; with the test frames set to NaN the
 * forecasts at training frames are bit-identical (the fit never reads test frames); on white
 * noise a larger penalty is picked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "par/mesh.h"
#include "split.h"
#include "tess_test.h"
#include "var.h"

enum { T = 1500, N = 6, LAGS = 3, H = 3 };
static const double SIGMA = 0.3;

/* A: three 2-d rotations (0.1, 0.25, 0.4 rad) damped by 0.9, conjugated by a fixed mixing of
 * the 6 coordinates (a Householder reflection, orthogonal). */
static void make_a(double A[N][N]) {
    double R[N][N] = {{0}}, Q[N][N], v[N] = {1, -2, 0.5, 1.5, -1, 2}, vv = 0;
    const double ang[3] = {0.1, 0.25, 0.4};
    for (int b = 0; b < 3; b++) {
        R[2 * b][2 * b] = R[2 * b + 1][2 * b + 1] = 0.9 * cos(ang[b]);
        R[2 * b][2 * b + 1] = -0.9 * sin(ang[b]);
        R[2 * b + 1][2 * b] = 0.9 * sin(ang[b]);
    }
    for (int i = 0; i < N; i++) vv += v[i] * v[i];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) Q[i][j] = (i == j) - 2.0 * v[i] * v[j] / vv;
    for (int i = 0; i < N; i++) /* A = Q R Q (Q symmetric, Q Q = I) */
        for (int j = 0; j < N; j++) {
            double a = 0.0;
            for (int k = 0; k < N; k++)
                for (int l = 0; l < N; l++) a += Q[i][k] * R[k][l] * Q[l][j];
            A[i][j] = a;
        }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tess_group *world = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "world", &world) == TESS_OK, "group");
    static float x[T * N], y[T * N];
    double A[N][N];
    make_a(A);
    for (int n = 0; n < N; n++) x[n] = 0.0f;
    for (int t = 1; t < T; t++)
        for (int i = 0; i < N; i++) {
            double a = SIGMA * tess_rng_normal((tess_rng_key){3, 0},
                                               tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 2),
                                               (uint64_t)(t * N + i), 0.0, 1.0);
            for (int j = 0; j < N; j++) a += A[i][j] * x[(t - 1) * N + j];
            x[t * N + i] = (float)a;
        }
    calm_session s = {.T = T, .N = N, .x = x};
    strcpy(s.name, "var1");
    TESS_TEST_CHECK(calm_split_session(&s, CALM_SPLIT_TAIL, 0.7, 0, 0) == TESS_OK, "split");
    calm_var v;
    TESS_TEST_CHECK(calm_var_fit(&v, &s, LAGS, H, 0.2, CALM_VAR_AUTO, world) == TESS_OK, "fit: %s", tess_error_text());
    /* forecasts after every test frame against A^h x[t] and against copy-last */
    enum { Q = T - 1050 - H - LAGS };
    static int64_t tl[Q];
    static double pred[Q * H * N];
    for (int r = 0; r < Q; r++) tl[r] = 1050 + LAGS + r;
    TESS_TEST_CHECK(calm_var_predict(&v, &s, tl, Q, pred) == TESS_OK, "predict: %s", tess_error_text());
    double dev[H] = {0}, copy[H] = {0};
    for (int r = 0; rank == 0 && r < Q; r++) {
        double m[N], m2[N];
        for (int i = 0; i < N; i++) m[i] = x[tl[r] * N + i];
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < N; i++) {
                m2[i] = 0.0;
                for (int j = 0; j < N; j++) m2[i] += A[i][j] * m[j];
            }
            for (int i = 0; i < N; i++) {
                m[i] = m2[i];
                dev[h] += pow(pred[(r * H + h) * N + i] - m[i], 2) / (Q * N);
                copy[h] += pow(x[tl[r] * N + i] - m[i], 2) / (Q * N);
            }
        }
    }
    for (int h = 0; rank == 0 && h < H; h++)
        TESS_TEST_CHECK(dev[h] < 0.1 * SIGMA * SIGMA && dev[h] < 0.05 * copy[h],
                        "step %d: squared deviation from A^h x %.3g (innovation variance %.3g, "
                        "copy-last %.3g)", h + 1, dev[h], SIGMA * SIGMA, copy[h]);
    TESS_TEST_CHECK(v.lambda <= 1.0 && !v.dual, "a small penalty chosen (%g), the primal form",
                    v.lambda);
    const double known_lambda = v.lambda;
    /* the dual form: the same chosen penalty and forecasts to round-off */
    calm_var vd;
    static double pd[Q * H * N];
    TESS_TEST_CHECK(calm_var_fit(&vd, &s, LAGS, H, 0.2, CALM_VAR_DUAL, world) == TESS_OK &&
                        calm_var_predict(&vd, &s, tl, Q, pd) == TESS_OK && vd.dual,
                    "dual fit: %s", tess_error_text());
    double diff = 0.0;
    for (int i = 0; rank == 0 && i < Q * H * N; i++) diff = fmax(diff, fabs(pd[i] - pred[i]));
    TESS_TEST_CHECK(vd.lambda == v.lambda && diff < 1e-8, "dual vs primal: lambda %g vs %g, max "
                    "forecast difference %.3g", vd.lambda, v.lambda, diff);
    calm_var_free(&vd);
    /* NaN test frames: bit-identical forecasts at training frames */
    static int64_t tt[200];
    static double p1[200 * H * N], p2[200 * H * N];
    for (int r = 0; r < 200; r++) tt[r] = 100 + 3 * r;
    TESS_TEST_CHECK(calm_var_predict(&v, &s, tt, 200, p1) == TESS_OK, "predict at training frames");
    calm_var_free(&v);
    memcpy(y, x, sizeof x);
    for (int i = 1050 * N; i < T * N; i++) y[i] = NAN;
    calm_session sn = s;
    sn.x = y;
    TESS_TEST_CHECK(calm_var_fit(&v, &sn, LAGS, H, 0.2, CALM_VAR_AUTO, world) == TESS_OK, "fit with NaN test frames");
    TESS_TEST_CHECK(calm_var_predict(&v, &sn, tt, 200, p2) == TESS_OK, "predict (NaN test frames)");
    TESS_TEST_CHECK(rank != 0 || memcmp(p1, p2, sizeof p1) == 0, "test frames are never read");
    calm_var_free(&v);
    /* white noise: more shrinkage */
    for (int i = 0; i < T * N; i++)
        y[i] = (float)tess_rng_normal((tess_rng_key){5, 0}, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1),
                                      (uint64_t)i, 0.0, 1.0);
    TESS_TEST_CHECK(calm_var_fit(&v, &sn, LAGS, H, 0.2, CALM_VAR_AUTO, world) == TESS_OK, "fit on noise");
    TESS_TEST_CHECK(v.lambda > known_lambda, "noise: a larger penalty chosen (%g)", v.lambda);
    calm_var_free(&v);
    free(s.spans);
    tess_group_destroy(&world);
    int rc = tess_test_finish_mpi("test_var", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
