/* bench_dp.c - how much of the data-parallel gradient sync the backward pass hides.
 * A transformer (bench_common's block-benchmark shapes, L layers) runs forward, then per step:
 *   t_sync     a blocking all-reduce of the whole gradient buffer alone, between barriers
 *              (what the sync costs when nothing hides it);
 *   t_serial   barrier, backward, then one blocking all-reduce of all gradients;
 *   t_overlap  barrier, backward with the hook feeding par/gradsync, tess_gradsync_finish.
 * hidden = (t_serial - t_overlap) / t_sync: the fraction of the sync time the overlap removed
 * from the step (both step timings include the same rank skew). Medians over `steps`.
 * Collective on MPI_COMM_WORLD.
 * usage: mpiexec -n P bench_dp [layers=4] [steps=10] [bucket_kib=1024] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"    /* tess_bench_* */
#include "core/timer.h"      /* tess_timer_now */
#include "par/gradsync.h"   /* tess_gradsync_* */
#include "nn/registry.h"     /* tess_registry_* */
#include "nn/transformer.h"  /* tess_tfm_* */

enum { MAX_STEPS = 64 };

static void check(tess_status s) {
    if (s != TESS_OK) {
        tess_error_write();
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_bench_blas_setup(1);
    int64_t L = argc > 1 ? atoll(argv[1]) : 4;
    int steps = argc > 2 ? atoi(argv[2]) : 10;
    int64_t bucket_kib = argc > 3 ? atoll(argv[3]) : 1024;
    if (steps < 1 || steps > MAX_STEPS) steps = 10;
    tess_group *g = NULL;
    check(tess_group_create(MPI_COMM_WORLD, "dp", &g));
    tess_tfm_config cfg = tess_bench_tfm_config(L);
    const int64_t B = 4;
    tess_registry *reg = NULL;
    tess_tfm *m = NULL;
    check(tess_registry_create(&reg));
    check(tess_tfm_create(&m, &cfg, B, reg));
    check(tess_registry_finalize(reg));
    check(tess_registry_init_params(reg, 1));
    int32_t *ids = malloc((size_t)(B * cfg.T) * sizeof *ids);
    int32_t *tg = malloc((size_t)(B * cfg.T) * sizeof *tg);
    tess_bench_tokens(ids, tg, B * cfg.T, cfg.V);
    float *grads = tess_registry_grads(reg);
    const int64_t n = tess_registry_local_total(reg);
    tess_gradsync *gs = NULL;
    check(tess_gradsync_create(&gs, reg, g, bucket_kib * 1024 / 4));

    double sync[MAX_STEPS], serial[MAX_STEPS], overlap[MAX_STEPS];
    for (int s = -1; s < steps; s++) { /* s = -1: warm-up */
        int k = s < 0 ? 0 : s;
        MPI_Barrier(g->comm);
        double t0 = tess_timer_now();
        check(tess_par_allreduce(g, grads, n, TESS_PAR_SUM));
        sync[k] = tess_timer_now() - t0;

        tess_registry_zero_grads(reg);
        tess_tfm_forward(m, ids, tg, B);
        tess_tfm_set_grad_hook(m, NULL, NULL);
        MPI_Barrier(g->comm);
        t0 = tess_timer_now();
        tess_tfm_backward(m, 1.0f);
        check(tess_par_allreduce(g, grads, n, TESS_PAR_SUM));
        serial[k] = tess_timer_now() - t0;

        tess_registry_zero_grads(reg);
        tess_tfm_forward(m, ids, tg, B);
        tess_tfm_set_grad_hook(m, tess_gradsync_hook, gs);
        MPI_Barrier(g->comm);
        t0 = tess_timer_now();
        tess_tfm_backward(m, 1.0f);
        check(tess_gradsync_finish(gs, NULL));
        overlap[k] = tess_timer_now() - t0;
    }
    double ms = tess_bench_median(sync, steps), mser = tess_bench_median(serial, steps);
    double mo = tess_bench_median(overlap, steps);
    if (g->rank == 0) {
        printf("dp ranks %d\ndp layers %lld\ndp grad_mib %.2f\ndp bucket_kib %lld\n", g->size,
               (long long)L, (double)n * 4.0 / 1048576.0, (long long)bucket_kib);
        printf("dp sync_alone_ms %.2f\ndp step_serial_ms %.2f\ndp step_overlap_ms %.2f\n"
               "dp hidden_fraction %.3f\n",
               ms * 1e3, mser * 1e3, mo * 1e3, ms > 0 ? (mser - mo) / ms : 0.0);
    }
    tess_gradsync_destroy(&gs);
    tess_tfm_destroy(&m);
    tess_registry_destroy(&reg);
    free(ids);
    free(tg);
    tess_group_destroy(&g);
    MPI_Finalize();
    return 0;
}
