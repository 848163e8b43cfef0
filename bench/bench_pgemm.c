/* bench_pgemm.c - the ScaLAPACK bridge's p?gemm (tess_scal_gemm) on all ranks against a
 * single-process cblas_?gemm of the same size on rank 0, both double and single precision.
 * Reports GFLOP/s of each (median of reps after a warm-up) and pgemm / gemm: at 1 rank the
 * bridge's overhead, at P ranks the speed-up. Collective on MPI_COMM_WORLD.
 * usage: mpiexec -n P bench_pgemm [n=1536] [reps=5] [block=64] */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"   /* tess_bench_median, tess_bench_blas_setup */
#include "par/mesh.h"      /* tess_group_* */
#include "par/scalapack.h" /* tess_scal_* */

enum { MAX_REPS = 32 };

static void check(tess_status s) {
    if (s != TESS_OK) {
        tess_error_write();
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* One precision: fill A, B with a fixed pattern, time reps of p?gemm and of ?gemm. */
static void run(tess_scal_grid *grid, MPI_Comm comm, int rank, tess_scal_dtype t, int64_t n,
                int reps, int64_t nb) {
    tess_scal_matrix *A = NULL, *B = NULL, *C = NULL;
    check(tess_scal_matrix_create(grid, t, n, n, nb, nb, &A));
    check(tess_scal_matrix_create(grid, t, n, n, nb, nb, &B));
    check(tess_scal_matrix_create(grid, t, n, n, nb, nb, &C));
    const bool dbl = t == TESS_SCAL_F64;
    const size_t esz = dbl ? sizeof(double) : sizeof(float);
    for (int64_t i = 0; i < A->lld * A->nloc; i++) {
        if (dbl) ((double *)A->data)[i] = ((double *)B->data)[i] = (double)(i % 7) * 0.1;
        else ((float *)A->data)[i] = ((float *)B->data)[i] = (float)(i % 7) * 0.1f;
    }
    double tp[MAX_REPS], ts[MAX_REPS];
    void *a = NULL, *b = NULL, *c = NULL;
    if (rank == 0) {
        a = calloc((size_t)(n * n), esz);
        b = calloc((size_t)(n * n), esz);
        c = calloc((size_t)(n * n), esz);
    }
    for (int r = -1; r < reps; r++) {
        int k = r < 0 ? 0 : r;
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        check(tess_scal_gemm(C, A, B, false, false, 1.0, 0.0));
        MPI_Barrier(comm);
        tp[k] = MPI_Wtime() - t0;
        if (rank == 0) {
            t0 = MPI_Wtime();
            if (dbl)
                cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0,
                            a, (int)n, b, (int)n, 0.0, c, (int)n);
            else
                cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f,
                            a, (int)n, b, (int)n, 0.0f, c, (int)n);
            ts[k] = MPI_Wtime() - t0;
        }
        MPI_Barrier(comm);
    }
    if (rank == 0) {
        double flops = 2.0 * (double)n * (double)n * (double)n;
        double gp = flops / tess_bench_median(tp, reps) / 1e9, gs = flops / tess_bench_median(ts, reps) / 1e9;
        printf("pgemm %s n %lld block %lld: p?gemm %.2f GFLOP/s, ?gemm (1 process) %.2f GFLOP/s, ratio %.3f\n",
               dbl ? "double" : "single", (long long)n, (long long)nb, gp, gs, gp / gs);
    }
    free(a);
    free(b);
    free(c);
    tess_scal_matrix_destroy(&A);
    tess_scal_matrix_destroy(&B);
    tess_scal_matrix_destroy(&C);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tess_bench_blas_setup(1);
    int64_t n = argc > 1 ? atoll(argv[1]) : 1536;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    int64_t nb = argc > 3 ? atoll(argv[3]) : 64;
    if (reps < 1 || reps > MAX_REPS) reps = 5;
    tess_group *world = NULL;
    check(tess_group_create(MPI_COMM_WORLD, "world", &world));
    tess_scal_grid *grid = NULL;
    check(tess_scal_grid_create(world, 0, 0, &grid));
    run(grid, MPI_COMM_WORLD, rank, TESS_SCAL_F64, n, reps, nb);
    run(grid, MPI_COMM_WORLD, rank, TESS_SCAL_F32, n, reps, nb);
    tess_scal_grid_destroy(&grid);
    tess_group_destroy(&world);
    MPI_Finalize();
    return 0;
}
