/* bench_coll.c - our collectives (par/coll.h) against the raw MPI calls on the same buffers:
 * all-reduce, all-gather and all-to-all-v (with its counts exchange), 1 KiB .. 64 MiB per rank.
 * Each size alternates ours and raw for `reps` rounds (after a warm-up) and reports the median
 * time of each and the overhead ours/raw - 1. Collective on MPI_COMM_WORLD.
 * Output (rank 0): one line per (op, bytes): "coll <op> <bytes> <raw_us> <ours_us> <overhead_%>".
 * usage: mpiexec -n P bench_coll [reps=20] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h" /* tess_bench_median */
#include "par/coll.h"    /* tess_par_* */

enum { MAX_REPS = 64 };

typedef enum { OP_ALLREDUCE, OP_ALLGATHER, OP_ALLTOALLV } bench_op;
static const char *const op_names[] = {"allreduce", "allgather", "alltoallv"};

/* One timed call of op, ours or raw, on n floats per rank. */
static double run_once(bench_op op, bool ours, const tess_group *g, float *a, float *b, int64_t n,
                       int *icounts, int *idispls, int64_t *rows) {
    MPI_Barrier(g->comm);
    double t0 = MPI_Wtime();
    tess_status s = TESS_OK;
    const int64_t per = n / g->size; /* all-to-all-v: per-destination rows of 1 float */
    switch (op) {
    case OP_ALLREDUCE:
        if (ours) s = tess_par_allreduce(g, a, n, TESS_PAR_SUM);
        else MPI_Allreduce(MPI_IN_PLACE, a, (int)n, MPI_FLOAT, MPI_SUM, g->comm);
        break;
    case OP_ALLGATHER:
        if (ours) s = tess_par_allgather(g, a, n / g->size, b);
        else MPI_Allgather(a, (int)(n / g->size), MPI_FLOAT, b, (int)(n / g->size), MPI_FLOAT, g->comm);
        break;
    case OP_ALLTOALLV:
        for (int r = 0; r < g->size; r++) rows[r] = per;
        if (ours) {
            int64_t recv_rows[64];
            s = tess_par_alltoallv(g, a, rows, 1, b, n, recv_rows);
        } else { /* the raw peer also exchanges counts first, as a real dispatch must */
            int scounts[64], rcounts[64];
            for (int r = 0; r < g->size; r++) scounts[r] = (int)per;
            MPI_Alltoall(scounts, 1, MPI_INT, rcounts, 1, MPI_INT, g->comm);
            for (int r = 0; r < g->size; r++) {
                icounts[r] = rcounts[r];
                idispls[r] = r * (int)per;
            }
            MPI_Alltoallv(a, scounts, idispls, MPI_FLOAT, b, icounts, idispls, MPI_FLOAT, g->comm);
        }
        break;
    }
    double t = MPI_Wtime() - t0;
    if (s != TESS_OK) {
        tess_error_write();
        MPI_Abort(g->comm, 1);
    }
    return t;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 1 || reps > MAX_REPS) reps = 20;
    tess_group *g = NULL;
    if (tess_group_create(MPI_COMM_WORLD, "bench", &g) != TESS_OK || g->size > 64) {
        tess_error_write();
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const int64_t max_n = (64 << 20) / 4;
    float *a = malloc((size_t)max_n * 4), *b = malloc((size_t)max_n * 4);
    int icounts[64], idispls[64];
    int64_t rows[64];
    for (int64_t i = 0; i < max_n; i++) a[i] = b[i] = 1.0f;
    if (g->rank == 0) printf("# ranks %d, reps %d\n", g->size, reps);
    for (int op = 0; op < 3; op++) {
        for (int64_t bytes = 1024; bytes <= (64 << 20); bytes *= 4) {
            int64_t n = bytes / 4 / g->size * g->size;
            double raw[MAX_REPS], ours[MAX_REPS];
            run_once((bench_op)op, false, g, a, b, n, icounts, idispls, rows);
            run_once((bench_op)op, true, g, a, b, n, icounts, idispls, rows);
            for (int r = 0; r < reps; r++) {
                raw[r] = run_once((bench_op)op, false, g, a, b, n, icounts, idispls, rows);
                ours[r] = run_once((bench_op)op, true, g, a, b, n, icounts, idispls, rows);
                for (int64_t i = 0; i < n; i++) a[i] = 1.0f; /* keep all-reduce values finite */
            }
            double mr = tess_bench_median(raw, reps), mo = tess_bench_median(ours, reps);
            if (g->rank == 0)
                printf("coll %s %lld %.1f %.1f %.1f\n", op_names[op], (long long)bytes, mr * 1e6,
                       mo * 1e6, 100.0 * (mo / mr - 1.0));
        }
    }
    free(a);
    free(b);
    tess_group_destroy(&g);
    MPI_Finalize();
    return 0;
}
