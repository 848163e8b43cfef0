/* bench_zo_mpi - communication and strong scaling of the zero-order optimizer (optim/zo.h).
 * Run on 2 ranks: mpiexec -n 2 bench_zo_mpi [--dim 2000000] [--steps 4] [--batch 4]
 *
 *   bytes    payload bytes each rank contributes to all-reduces per step, evaluation-parallel
 *            (ranks split the samples, exchange function values) and coordinate-sharded, for
 *            d = 10^3 and 10^5 and B = 1 and 16 (fixed batch): O(B), independent of d.
 *   scaling  seconds per step at d = --dim, B = --batch (fixed), two-point sphere, on the diagonal
 *            quadratic of bench_zo_rate: rank 0 alone (rank 1 waits in a barrier, so rank 0 has a
 *            core), then both ranks sharding x (design C), then both splitting the evaluations
 *            (design B: every rank still regenerates every direction, so with a cheap objective
 *            it cannot scale; it is shown for contrast). Median of 3 repetitions, wall time.
 * Prints "key value" lines on rank 0.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h" /* tess_bench_* */
#include "core/timer.h"   /* tess_timer_now */
#include "par/layout.h"  /* tess_par_block_range */
#include "par/mesh.h"    /* tess_group_* */
#include "optim/zo.h"     /* tess_zo_* */

typedef struct {
    int64_t first, n;
    double *lam, *b, *r; /* local coordinates */
} objective;

static tess_status objective_init(objective *o, int64_t d, int64_t first, int64_t n) {
    o->first = first;
    o->n = n;
    o->lam = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    o->b = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    o->r = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    TESS_REQUIRE(o->lam && o->b && o->r, TESS_ERR_MEM, "objective of %lld", (long long)n);
    for (int64_t j = 0; j < n; j++) {
        int64_t g = first + j;
        o->lam[j] = 1.0 + 9.0 * (double)g / (double)d;
        o->b[j] = sin(0.1 * (double)g);
        o->r[j] = (g % 2 ? 1.0 : -1.0) / sqrt((double)d);
    }
    return TESS_OK;
}

static void objective_free(objective *o) {
    free(o->lam);
    free(o->b);
    free(o->r);
}

static void partial(void *ctx, const double *x, int64_t first, int64_t n, int64_t t, double *out) {
    const objective *o = ctx;
    const double s = sin((double)t);
    double f = 0.0;
    for (int64_t j = 0; j < n; j++) f += x[j] * (0.5 * o->lam[j] * x[j] - o->b[j] - s * o->r[j]);
    out[0] = f;
}

/* Mean seconds and payload bytes per step of `steps` steps (median of reps). Collective on the
 * groups; eval and shard may be NULL. */
static tess_status measure(int64_t d, int64_t batch, int64_t steps, int reps, const tess_group *eval,
                           const tess_group *shard, double *sec, double *bytes) {
    int64_t lo = 0, hi = d;
    if (shard) tess_par_block_range(d, shard->size, shard->rank, &lo, &hi);
    objective o;
    TESS_CHECK(objective_init(&o, d, lo, hi - lo));
    const tess_zo_config cfg = {.estimator = TESS_ZO_EST_TWO_POINT, .dir = TESS_ZO_DIR_SPHERE,
                                .batching = TESS_ZO_BATCH_FIXED, .gamma = 1e-3, .batch = batch,
                                .cap = 1, .rule = TESS_ZO_RULE_CONSTANT, .eta = 1e-3 / (double)d,
                                .mu = 1.0, .key = {.seed = 7, .stream = 1}};
    const tess_zo_objective obj = {.ctx = &o, .npartials = 1, .partial = partial};
    double t[5];
    *bytes = 0.0;
    for (int rep = 0; rep < reps; rep++) {
        tess_zo *zo = NULL;
        TESS_CHECK(tess_zo_create(&zo, &cfg, d, eval, shard));
        if (eval) MPI_Barrier(eval->comm);
        if (shard) MPI_Barrier(shard->comm);
        double t0 = tess_timer_now();
        for (int64_t k = 0; k < steps; k++) {
            tess_zo_step_info info;
            TESS_CHECK(tess_zo_step(zo, &obj, &info));
            *bytes += info.comm_bytes / (double)(steps * reps);
        }
        t[rep] = (tess_timer_now() - t0) / (double)steps;
        tess_zo_destroy(&zo);
    }
    *sec = tess_bench_median(t, reps);
    objective_free(&o);
    return TESS_OK;
}

static tess_status run(int argc, char **argv, MPI_Comm comm) {
    static const char *const keys[] = {"--dim", "--steps", "--batch"};
    int64_t v[] = {2000000, 4, 4};
    TESS_CHECK(tess_bench_parse_ints(argc, argv, keys, v, 3, 1, (int64_t)1 << 34));
    tess_group *world = NULL, *self = NULL;
    TESS_CHECK(tess_group_create(comm, "world", &world));
    TESS_REQUIRE(world->size == 2, TESS_ERR_ARG, "run on 2 ranks (got %d)", world->size);
    TESS_CHECK(tess_group_split(world, world->rank, 0, "self", &self));
    const int me = world->rank;
    const int64_t dims[2] = {1000, 100000}, batches[2] = {1, 16};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double sec, be, bs;
            TESS_CHECK(measure(dims[i], batches[j], 3, 1, world, NULL, &sec, &be));
            TESS_CHECK(measure(dims[i], batches[j], 3, 1, NULL, world, &sec, &bs));
            if (me == 0)
                printf("bytes_per_step d %lld B %lld: eval_split %.0f sharded %.0f\n",
                       (long long)dims[i], (long long)batches[j], be, bs);
        }
    double t1 = 0.0, ts, te, b;
    if (me == 0) TESS_CHECK(measure(v[0], v[2], v[1], 3, self, NULL, &t1, &b));
    MPI_Barrier(world->comm);
    TESS_CHECK(measure(v[0], v[2], v[1], 3, NULL, world, &ts, &b));
    TESS_CHECK(measure(v[0], v[2], v[1], 3, world, NULL, &te, &b));
    if (me == 0) {
        printf("scaling_dim %lld\nscaling_batch %lld\n", (long long)v[0], (long long)v[2]);
        printf("sec_per_step_1rank %.4f\nsec_per_step_2ranks_sharded %.4f\n"
               "sec_per_step_2ranks_eval_split %.4f\n", t1, ts, te);
        printf("speedup_sharded %.2f\nspeedup_eval_split %.2f\n", t1 / ts, t1 / te);
    }
    tess_group_destroy(&self);
    tess_group_destroy(&world);
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_status s = run(argc, argv, MPI_COMM_WORLD);
    if (s != TESS_OK) tess_error_write();
    MPI_Finalize();
    return s == TESS_OK ? 0 : 1;
}
