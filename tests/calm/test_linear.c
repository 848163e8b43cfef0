/* test_linear - the linear analyses of the embeddings (apps/calm/linear.h), on 2 ranks:
 *   - identity decoding of embeddings constructed to be separable (4 animals, each a distinct
 *     mean plus noise of sd 0.3) is exact, under 5 folds and under leave-one-row-out folds
 *     (8 animals x 2 "sessions", the session analysis's layout);
 *   - on random embeddings with random labels it is at chance (|accuracy - chance| < 0.1 over
 *     400 rows; chance = sum_c p_c^2);
 *   - PCA through the ScaLAPACK bridge (1 x 2 grid) of a 64 x 6 matrix with orthogonal columns
 *     of known norms (cosines of distinct frequencies scaled by 5, 4, 3, 2, 1, 0.5, plus a column
 *     offset that the centring removes): the explained-variance ratios s_j^2 / sum s^2 to 1e-6
 *     on every rank (the matrix is float: measured 6e-9);
 *   - bad arguments (one class, two folds) refused. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/rng.h"
#include "linear.h"
#include "par/mesh.h"
#include "tess_test.h"

enum { D = 8 };

/* n rows of D features: row i of class label[i] at 3 e_label + N(0, sd^2) (sd 0, pure noise
 * N(0, 1) when separable is false). */
static void rows(float *X, const int64_t *label, int64_t n, bool separable, uint32_t seed) {
    const tess_rng_key key = {seed, 1};
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < D; j++)
            X[i * D + j] = (float)((separable && label[i] == j ? 3.0 : 0.0) +
                                   tess_rng_normal(key, 0, (uint64_t)(i * D + j), 0.0,
                                                   separable ? 0.3 : 1.0));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_group *world = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "world", &world) == TESS_OK, "group");
    enum { N = 400 };
    static float X[N * D];
    static int64_t label[N], fold[N];
    calm_lin_result r;
    /* separable, 4 classes x 40 rows, 5 folds */
    for (int64_t i = 0; i < 160; i++) label[i] = i % 4, fold[i] = (i / 4) % 5;
    rows(X, label, 160, true, 1);
    TESS_TEST_CHECK(calm_lin_identity(X, 160, D, label, 4, fold, 5, &r) == TESS_OK, "identity: %s",
                    tess_error_text());
    TESS_TEST_CHECK(r.accuracy == 1.0 && fabs(r.chance - 0.25) < 1e-12,
                    "separable, 5 folds: accuracy %.4f (expected 1), chance %.4f (0.25)", r.accuracy,
                    r.chance);
    /* separable, 8 classes x 2 rows, leave one row out (the session analysis) */
    for (int64_t i = 0; i < 16; i++) label[i] = i / 2, fold[i] = i;
    rows(X, label, 16, true, 2);
    TESS_TEST_CHECK(calm_lin_identity(X, 16, D, label, 8, fold, 16, &r) == TESS_OK, "identity: %s",
                    tess_error_text());
    TESS_TEST_CHECK(r.accuracy == 1.0 && fabs(r.chance - 0.125) < 1e-12,
                    "separable, leave one out: accuracy %.4f (expected 1), chance %.4f (0.125)",
                    r.accuracy, r.chance);
    /* random rows, random labels: chance */
    const tess_rng_key key = {3, 2};
    for (int64_t i = 0; i < N; i++)
        label[i] = (int64_t)(tess_rng_u64(key, 0, (uint64_t)i) % 4), fold[i] = i % 5;
    rows(X, label, N, false, 4);
    TESS_TEST_CHECK(calm_lin_identity(X, N, D, label, 4, fold, 5, &r) == TESS_OK, "identity: %s",
                    tess_error_text());
    TESS_TEST_CHECK(fabs(r.accuracy - r.chance) < 0.1,
                    "random labels: accuracy %.4f, chance %.4f", r.accuracy, r.chance);
    if (world->rank == 0)
        printf("random labels: accuracy %.4f, chance %.4f, penalties %g-%g\n", r.accuracy,
               r.chance, r.lambda_min, r.lambda_max);
    TESS_TEST_CHECK(calm_lin_identity(X, N, D, label, 1, fold, 5, &r) == TESS_ERR_ARG &&
                        calm_lin_identity(X, N, D, label, 4, fold, 2, &r) == TESS_ERR_ARG,
                    "one class or two folds refused");
    /* PCA of a known spectrum */
    enum { R = 64, C = 6 };
    static float Y[R * C];
    const double s[C] = {5, 4, 3, 2, 1, 0.5};
    double total = 0.0, ratio[C];
    for (int64_t j = 0; j < C; j++) total += s[j] * s[j];
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
            Y[i * C + j] = (float)(s[j] * cos(2.0 * acos(-1.0) * (double)((j + 1) * i) / R) + (j == 0 ? 7.0 : 0.0));
    TESS_TEST_CHECK(calm_lin_pca(world, Y, R, C, ratio) == TESS_OK, "pca: %s", tess_error_text());
    double err = 0.0;
    for (int64_t j = 0; j < C; j++) err = fmax(err, fabs(ratio[j] - s[j] * s[j] / total));
    TESS_TEST_CHECK(err < 1e-6, "PCA explained-variance ratios off by %.3g on rank %d", err, world->rank);
    if (world->rank == 0)
        printf("PCA of a known spectrum on %d ranks: ratios %.4f %.4f %.4f ... (max error %.2g)\n",
               world->size, ratio[0], ratio[1], ratio[2], err);
    tess_group_destroy(&world);
    int rc = tess_test_finish("test_linear");
    MPI_Finalize();
    return rc;
}
