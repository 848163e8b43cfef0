/* test_armlp - the MLP forecasting baseline (apps/calm/armlp.h), on 2 ranks: on sums of two
 * sines its test forecasts beat copy-last by far and the kept parameters are the best validated
 * ones; the fit on 2 ranks matches a fit on rank 0 alone (the batch is drawn by global index;
 * parameters within 1e-5); test frames set to NaN and a held-out animal's frames replaced by
 * others give bit-identical parameters (never read); on white noise early stopping keeps
 * parameters whose validation MSE is no worse than copy-last's at the start. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "armlp.h"
#include "core/rng.h"
#include "par/mesh.h"
#include "tess_test.h"

enum { T = 600, N = 3, LAGS = 16, H = 8 };

static const calm_armlp_config CFG = {.lags = LAGS, .H = H, .hidden = 32, .steps = 400,
                                      .batch = 64, .eval_every = 50, .lr = 3e-3, .seed = 7};

static bool same_params(const calm_armlp *a, const calm_armlp *b, double tol) {
    const int64_t n = tess_registry_local_total(a->reg);
    const float *x = tess_registry_params(a->reg), *y = tess_registry_params(b->reg);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)x[i] - (double)y[i]) <= tol)) return false;
    return true;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tess_group *world = NULL, *self = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "world", &world) == TESS_OK &&
                        tess_group_create(MPI_COMM_SELF, "self", &self) == TESS_OK,
                    "groups");
    static float x[T * N], y[T * N], z[T * N];
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++)
            x[t * N + n] = (float)(sin(0.3 * t + n) + 0.5 * sin(0.11 * t + 1.0 + 2.0 * n));
    calm_session s = {.T = T, .N = N, .x = x};
    strcpy(s.name, "sines");
    calm_split_session(&s, CALM_SPLIT_TAIL, 0.7, 0, 0); /* training frames [0, 420) */
    calm_armlp m, m1;
    TESS_TEST_CHECK(calm_armlp_fit(&m, &s, 1, &CFG, 0.2, world) == TESS_OK, "fit: %s", tess_error_text());
    double e = 0.0, c = 0.0, pred[H];
    for (int n = 0; n < N; n++)
        for (int64_t t = 420 + LAGS; t + H < T; t++) {
            calm_armlp_predict(&m, &s, n, t, pred);
            for (int h = 0; h < H; h++) {
                e += pow(pred[h] - x[(t + 1 + h) * N + n], 2);
                c += pow(x[t * N + n] - x[(t + 1 + h) * N + n], 2);
            }
        }
    TESS_TEST_CHECK(e < 0.1 * c && m.best_step > 0, "sines: test SSE %.3g vs copy-last %.3g, best "
                    "validation at step %lld (val MSE %.3g)", e, c, (long long)m.best_step, m.val_mse);
    /* rank-count independence: the same fit on rank 0 alone */
    if (rank == 0) {
        TESS_TEST_CHECK(calm_armlp_fit(&m1, &s, 1, &CFG, 0.2, self) == TESS_OK, "fit on 1 rank");
        TESS_TEST_CHECK(same_params(&m, &m1, 1e-5) && m1.best_step == m.best_step,
                        "1 rank vs 2 ranks: parameters within 1e-5, the same best step");
        calm_armlp_free(&m1);
    }
    /* NaN test frames: bit-identical */
    memcpy(y, x, sizeof x);
    for (int i = 420 * N; i < T * N; i++) y[i] = NAN;
    calm_session sn = s;
    sn.x = y;
    TESS_TEST_CHECK(calm_armlp_fit(&m1, &sn, 1, &CFG, 0.2, world) == TESS_OK &&
                        same_params(&m, &m1, 0.0),
                    "test frames are never read");
    calm_armlp_free(&m1);
    /* a held-out animal (session 1) with other frames: bit-identical */
    calm_session two[2] = {s, s};
    two[0].spans = two[1].spans = NULL;
    two[1].x = z, two[1].animal = 1, two[1].unit0 = N;
    for (int k = 0; k < 2; k++) calm_split_session(&two[k], CALM_SPLIT_ANIMAL, 0.7, 0, 1);
    for (int i = 0; i < T * N; i++) z[i] = (float)cos(0.05 * i);
    calm_armlp ma, mb;
    TESS_TEST_CHECK(calm_armlp_fit(&ma, two, 2, &CFG, 0.2, world) == TESS_OK, "animal fit");
    for (int i = 0; i < T * N; i++) z[i] = NAN;
    TESS_TEST_CHECK(calm_armlp_fit(&mb, two, 2, &CFG, 0.2, world) == TESS_OK &&
                        same_params(&ma, &mb, 0.0),
                    "a held-out animal is never read");
    calm_armlp_free(&ma), calm_armlp_free(&mb);
    for (int k = 0; k < 2; k++) free(two[k].spans);
    /* white noise: the kept parameters validate no worse than the initial copy-last ones */
    for (int i = 0; i < T * N; i++)
        y[i] = (float)tess_rng_normal((tess_rng_key){5, 0}, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1),
                                      (uint64_t)i, 0.0, 1.0);
    calm_armlp_config c0 = CFG;
    c0.steps = 1, c0.eval_every = 1, c0.lr = 1e-12; /* the initial parameters' validation MSE */
    TESS_TEST_CHECK(calm_armlp_fit(&m1, &sn, 1, &c0, 0.2, world) == TESS_OK, "noise, no training");
    calm_armlp mn;
    TESS_TEST_CHECK(calm_armlp_fit(&mn, &sn, 1, &CFG, 0.2, world) == TESS_OK &&
                        mn.val_mse <= m1.val_mse,
                    "noise: kept validation MSE %.4f <= copy-last's %.4f (best step %lld)",
                    mn.val_mse, m1.val_mse, (long long)mn.best_step);
    calm_armlp_free(&m1), calm_armlp_free(&mn), calm_armlp_free(&m);
    free(s.spans);
    tess_group_destroy(&self);
    tess_group_destroy(&world);
    int rc = tess_test_finish_mpi("test_armlp", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
