/* test_scalapack_example.c - the example of docs/scalapack.md, compiled and run: rank 0 holds an
 * SPD system A x = b (row-major), the grid solves it, rank 0 gets x back and checks A x = b. */
#include <stdlib.h>

#include "par/mesh.h"      /* tess_group_* */
#include "par/scalapack.h" /* tess_scal_* */
#include "tess_test.h"

/* Solve A x = b for SPD A (n, n) and b (n), both row-major on rank 0 of `on`; x (n) on rank 0. */
static tess_status solve_spd(const tess_group *on, const double *A, const double *b, double *x,
                             int64_t n) {
    tess_scal_grid *g = NULL;
    tess_scal_matrix *dA = NULL, *dB = NULL;
    TESS_CHECK(tess_scal_grid_create(on, 0, 0, &g)); /* most square grid on all of `on` */
    tess_status st = tess_scal_matrix_create(g, TESS_SCAL_F64, n, n, 32, 32, &dA);
    if (st == TESS_OK) st = tess_scal_matrix_create(g, TESS_SCAL_F64, n, 1, 32, 32, &dB);
    if (st == TESS_OK) st = tess_scal_matrix_distribute(dA, A, TESS_SCAL_ROW_MAJOR);
    if (st == TESS_OK) st = tess_scal_matrix_distribute(dB, b, TESS_SCAL_ROW_MAJOR);
    if (st == TESS_OK) st = tess_scal_posv(dB, dA); /* dB <- x, dA <- Cholesky factor */
    if (st == TESS_OK) st = tess_scal_matrix_collect(dB, x, TESS_SCAL_ROW_MAJOR);
    tess_scal_matrix_destroy(&dA);
    tess_scal_matrix_destroy(&dB);
    tess_scal_grid_destroy(&g);
    TESS_REQUIRE(st == TESS_OK, st, "SPD solve of order %lld failed", (long long)n);
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int64_t n = 70;
    double *A = malloc(n * n * sizeof *A), *b = malloc(n * sizeof *b), *x = calloc(n, sizeof *x);
    TESS_TEST_CHECK(A && b && x, "allocation");
    for (int64_t i = 0; A && b && i < n; i++) { /* tridiagonal, diagonally dominant: SPD */
        for (int64_t j = 0; j < n; j++) A[i * n + j] = i == j ? 4.0 : llabs(i - j) == 1 ? 1.0 : 0.0;
        b[i] = (double)(i % 7) - 3.0;
    }
    tess_group *world = NULL;
    tess_status st = tess_group_create(MPI_COMM_WORLD, "world", &world);
    if (st == TESS_OK) st = solve_spd(world, A, b, x, n);
    TESS_TEST_CHECK(st == TESS_OK, "solve: %s", tess_error_text());
    double res = 0.0;
    for (int64_t i = 0; rank == 0 && st == TESS_OK && i < n; i++) {
        double r = -b[i];
        for (int64_t j = 0; j < n; j++) r += A[i * n + j] * x[j];
        res = fmax(res, fabs(r));
    }
    TESS_TEST_CHECK(res < 1e-12, "max |A x - b| = %.3g", res);
    free(A);
    free(b);
    free(x);
    tess_group_destroy(&world);
    int rc = tess_test_finish_mpi("scalapack_example", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
