/* test_zo_xstar - the exact minimisers of the zo app's problems (apps/zo/problem.h), computed
 * through the ScaLAPACK bridge on all ranks (run at 1, 2 and 4 ranks: 1x1, 1x2, 2x2 grids),
 * against serial references built here:
 *   - ridge (d = 45, n = 70, ragged 32-blocks): x* equals LAPACK dposv on the same normal
 *     equations to 1e-10 relative, and its reported residual is below 1e-12;
 *   - logistic (d = 30, n = 200): ||grad f(x*)|| <= 1e-10 recomputed here in a different order,
 *     in at most 15 Newton steps; x* agrees with the 1-rank problem's to 1e-10 (every rank
 *     builds the same problem on MPI_COMM_SELF as a reference);
 *   - l1 (d = 24, n = 31): U orthogonal (||U^T U - I||_max <= 1e-12) and 0 in the subdifferential
 *     of every coordinate of y* = U^T x* (one-sided slopes at y* -+ 1e-9: h- <= 1e-9 <= ...,
 *     h+ >= -1e-9);
 *   - quadratic: x* = bbar / lambda exactly; sharded slices match the replicated problem.
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "problem.h"   /* zoapp_problem_* */
#include "tess_test.h" /* TESS_TEST_* */

void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, int *info, size_t uplo_len);

static tess_group *world, *self; /* every rank; this rank alone */

static zoapp_problem_config cfg(zoapp_problem_kind k, int64_t d, int64_t n) {
    return (zoapp_problem_config){.kind = k, .d = d, .nstates = n, .mu = 0.5, .L = 8.0,
                                  .sigma = 0.7, .lambda = 0.05,
                                  .key = {.seed = 99, .stream = 3}};
}

static void test_ridge(void) {
    const zoapp_problem_config c = cfg(ZOAPP_PROB_RIDGE, 45, 70);
    zoapp_problem p;
    TESS_TEST_CHECK(zoapp_problem_create(&p, &c, 0, c.d, world) == TESS_OK, "ridge");
    if (!p.xstar) return;
    const int d = (int)c.d, n = (int)c.nstates, one = 1;
    double *H = calloc((size_t)(d * d), sizeof *H), *r = calloc((size_t)d, sizeof *r);
    for (int z = 0; z < n; z++)
        for (int i = 0; i < d; i++) {
            r[i] += p.A[z * d + i] * p.y[z] / n;
            for (int j = 0; j < d; j++) H[i * d + j] += p.A[z * d + i] * p.A[z * d + j] / n;
        }
    for (int i = 0; i < d; i++) H[i * d + i] += c.lambda;
    int info = 0;
    dposv_("L", &d, &one, H, &d, r, &d, &info, 1);
    TESS_TEST_CHECK(info == 0, "dposv info %d", info);
    double num = 0.0, den = 0.0;
    for (int i = 0; i < d; i++) {
        num += (p.xstar[i] - r[i]) * (p.xstar[i] - r[i]);
        den += r[i] * r[i];
    }
    TESS_TEST_CHECK(sqrt(num / den) <= 1e-10, "ridge x*: relative difference to LAPACK %.3g",
                    sqrt(num / den));
    TESS_TEST_CHECK(p.check <= 1e-12, "ridge residual %.3g", p.check);
    free(H);
    free(r);
    zoapp_problem_free(&p);
}

static void test_logistic(void) {
    const zoapp_problem_config c = cfg(ZOAPP_PROB_LOGISTIC, 30, 200);
    zoapp_problem p, q;
    TESS_TEST_CHECK(zoapp_problem_create(&p, &c, 0, c.d, world) == TESS_OK, "logistic");
    TESS_TEST_CHECK(zoapp_problem_create(&q, &c, 0, c.d, self) == TESS_OK, "logistic 1");
    if (!p.xstar || !q.xstar) return;
    const int64_t d = c.d, n = c.nstates;
    double g2 = 0.0;
    for (int64_t j = 0; j < d; j++) { /* gradient coordinate by coordinate */
        double g = c.lambda * p.xstar[j];
        for (int64_t z = 0; z < n; z++) {
            double m = 0.0;
            for (int64_t i = 0; i < d; i++) m += p.A[z * d + i] * p.xstar[i];
            g += -p.y[z] * p.A[z * d + j] / (1.0 + exp(p.y[z] * m)) / (double)n;
        }
        g2 += g * g;
    }
    TESS_TEST_CHECK(sqrt(g2) <= 1e-10, "logistic ||grad f(x*)|| = %.3g", sqrt(g2));
    TESS_TEST_CHECK(p.newton_steps >= 1 && p.newton_steps <= 15, "%d Newton steps", p.newton_steps);
    double worst = 0.0;
    for (int64_t j = 0; j < d; j++) worst = fmax(worst, fabs(p.xstar[j] - q.xstar[j]));
    TESS_TEST_CHECK(worst <= 1e-10, "logistic x* on the grid vs one rank: %.3g", worst);
    zoapp_problem_free(&p);
    zoapp_problem_free(&q);
}

static void test_l1(void) {
    zoapp_problem_config c = cfg(ZOAPP_PROB_L1, 24, 31);
    c.mu = 0.2;
    zoapp_problem p;
    TESS_TEST_CHECK(zoapp_problem_create(&p, &c, 0, c.d, world) == TESS_OK, "l1");
    if (!p.xstar) return;
    const int64_t d = c.d;
    double worst = 0.0;
    for (int64_t i = 0; i < d; i++)
        for (int64_t j = 0; j < d; j++) {
            double s = 0.0;
            for (int64_t r = 0; r < d; r++) s += p.U[r * d + i] * p.U[r * d + j];
            worst = fmax(worst, fabs(s - (i == j)));
        }
    TESS_TEST_CHECK(worst <= 1e-12, "U^T U - I: %.3g", worst);
    int ok = 1;
    for (int64_t i = 0; i < d; i++) {
        /* y* sits on a kink c_{z,i} or between kinks; U^T U y* returns it only up to rounding,
         * so the one-sided slopes are taken 1e-9 to either side */
        double y = 0.0, hm, hp, unused;
        for (int64_t r = 0; r < d; r++) y += p.U[r * d + i] * p.xstar[r];
        zoapp_problem_l1_slopes(&p, i, y - 1e-9, &hm, &unused);
        zoapp_problem_l1_slopes(&p, i, y + 1e-9, &unused, &hp);
        if (!(hm <= 1e-9 && hp >= -1e-9)) {
            ok = 0;
            fprintf(stderr, "coordinate %lld: y* = %.6g, slopes [%.3g, %.3g]\n", (long long)i, y,
                    hm, hp);
        }
    }
    TESS_TEST_CHECK(ok, "0 is not in the subdifferential of every coordinate at y*");
    zoapp_problem_free(&p);
}

static void test_quadratic(void) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const zoapp_problem_config c = cfg(ZOAPP_PROB_QUADRATIC, 50, 8);
    zoapp_problem full, part;
    const int64_t lo = 50 * rank / size, hi = 50 * (rank + 1) / size;
    TESS_TEST_CHECK(zoapp_problem_create(&full, &c, 0, 50, world) == TESS_OK, "quad");
    TESS_TEST_CHECK(zoapp_problem_create(&part, &c, lo, hi - lo, world) == TESS_OK,
                    "quad slice");
    if (!full.xstar || !part.xstar) return;
    int ok = 1;
    for (int64_t j = 0; j < 50; j++) ok &= full.xstar[j] * full.lam[j] == full.bbar[j] ||
                                           fabs(full.xstar[j] - full.bbar[j] / full.lam[j]) <= 1e-15;
    TESS_TEST_CHECK(ok, "x* != bbar / lambda");
    double x[50], f = 0.0;
    for (int64_t j = 0; j < 50; j++) x[j] = 0.01 * (double)j;
    ok = 1;
    for (int64_t j = lo; j < hi; j++) ok &= part.xstar[j - lo] == full.xstar[j];
    TESS_TEST_CHECK(ok && part.fstar == full.fstar, "sharded slice of x* or f* differs");
    for (int64_t z = 0; z < 8; z++) {
        double v = zoapp_problem_value(&part, x + lo, z), tot;
        MPI_Allreduce(&v, &tot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double ref = zoapp_problem_value(&full, x, z);
        TESS_TEST_CLOSE(tot, ref, 1e-13, 1e-12, "sharded F(x, z)");
        f += ref / 8.0;
    }
    TESS_TEST_CLOSE(f, zoapp_problem_f(&full, x), 1e-13, 1e-12, "f = mean_z F (noise cancels)");
    zoapp_problem_free(&full);
    zoapp_problem_free(&part);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    TESS_TEST_CHECK(argc > 1 && atoi(argv[1]) == size, "world size %d", size);
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "world", &world) == TESS_OK &&
                        tess_group_create(MPI_COMM_SELF, "self", &self) == TESS_OK,
                    "groups");
    test_ridge();
    test_logistic();
    test_l1();
    test_quadratic();
    tess_group_destroy(&self);
    tess_group_destroy(&world);
    int rc = tess_test_finish_mpi("zo_xstar", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
