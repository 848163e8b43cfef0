/* test_zo_mpi - rank-count invariance of the zero-order optimizer (optim/zo.h), run at 1, 2 and
 * 4 ranks (argv[1] = expected world size).
 *
 * On an objective whose noise depends on the chain time t, each configuration (two-point MLMC
 * sphere; one-point residual MLMC; one-point symmetric fixed B = 3 Gaussian; two-point Rademacher
 * with projection and averaging; first-order MLMC) runs 60 iterations
 *   - alone on every rank (the reference),
 *   - with the world as the eval group: x, x-bar and the counters must be BITWISE equal to the
 *     reference, and each rank must have sent O(K) bytes (8 per value), independent of d;
 *   - with the world as the shard group (zero-order only; an objective with two partial sums and
 *     a non-separable finish): equal to the reference slice to 1e-9 relative (sums over shards
 *     are reordered; MLMC's 2^J factors amplify the rounding: measured ~1e-11);
 *   - at 4 ranks also on a 2 eval x 2 shard mesh, to 1e-9.
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "par/layout.h" /* tess_par_block_range */
#include "par/mesh.h"   /* tess_group_*, tess_mesh_* */
#include "optim/zo.h"    /* tess_zo_* */
#include "tess_test.h"   /* TESS_TEST_* */

enum { D = 37, STEPS = 60 };

static double coef_a(int64_t j) { return 1.0 + 0.25 * (double)(j % 7); }
static double noise(int64_t t, int64_t j) { return 0.5 * sin(0.3 * (double)t + 0.7 * (double)j); }

/* partials: [sum a_j x_j^2/2 - (1 + noise) x_j, sum x_j]; F = p0 + 0.05 p1^2 */
static void obj_partial(void *ctx, const double *x, int64_t first, int64_t n, int64_t t,
                        double *out) {
    double q = 0.0, l = 0.0;
    for (int64_t j = 0; j < n; j++) {
        int64_t g = first + j;
        q += 0.5 * coef_a(g) * x[j] * x[j] - (1.0 + noise(t, g)) * x[j];
        l += x[j];
    }
    out[0] = q;
    out[1] = l;
}
static double obj_finish(void *ctx, const double *sum, int64_t t) {
    return sum[0] + 0.05 * sum[1] * sum[1];
}
static void obj_grad(void *ctx, const double *x, int64_t n, int64_t t, double *grad) {
    double l = 0.0;
    for (int64_t j = 0; j < n; j++) l += x[j];
    for (int64_t j = 0; j < n; j++) grad[j] = coef_a(j) * x[j] - (1.0 + noise(t, j)) + 0.1 * l;
}

static const tess_zo_objective objective = {.npartials = 2, .partial = obj_partial,
                                            .finish = obj_finish, .grad = obj_grad};

static tess_zo_config config(int which) {
    tess_zo_config c = {.estimator = TESS_ZO_EST_TWO_POINT, .dir = TESS_ZO_DIR_SPHERE,
                        .batching = TESS_ZO_BATCH_MLMC, .baseline = TESS_ZO_BASELINE_NONE,
                        .gamma = 1e-2, .batch = 1, .cap = 64, .rule = TESS_ZO_RULE_CONSTANT,
                        .eta = 2e-3, .mu = 1.0, .key = {.seed = 77, .stream = 1}};
    switch (which) {
    case 1: c.estimator = TESS_ZO_EST_ONE_POINT; c.baseline = TESS_ZO_BASELINE_RESIDUAL; break;
    case 2:
        c.estimator = TESS_ZO_EST_ONE_POINT_SYM;
        c.batching = TESS_ZO_BATCH_FIXED;
        c.batch = 3;
        c.dir = TESS_ZO_DIR_GAUSS;
        c.eta = 1e-3;
        break;
    case 3:
        c.dir = TESS_ZO_DIR_RADEMACHER;
        c.radius = 0.5;
        c.average = true;
        c.rule = TESS_ZO_RULE_DECAY;
        c.eta = 1e-3;
        break;
    case 4: c.estimator = TESS_ZO_EST_FIRST_ORDER; c.eta = 0.05; break;
    default: break;
    }
    return c;
}
static const char *const names[5] = {"two-point MLMC sphere", "one-point residual MLMC",
                                     "one-point symmetric fixed Gauss", "Rademacher proj+avg",
                                     "first-order MLMC"};

/* Run STEPS iterations; copy x (and x-bar) slices and counters out. */
static int run(const tess_zo_config *c, const tess_group *eval, const tess_group *shard,
               double *x, double *xbar, int64_t *cnt, double *max_bytes, int64_t *max_k) {
    tess_zo *zo = NULL;
    if (tess_zo_create(&zo, c, D, eval, shard) != TESS_OK) return 0;
    int64_t first, n;
    tess_zo_local_range(zo, &first, &n);
    double *x0 = tess_zo_x(zo);
    for (int64_t j = 0; j < n; j++) x0[j] = 0.1 * (double)((first + j) % 5);
    *max_bytes = 0.0;
    *max_k = 0;
    for (int s = 0; s < STEPS; s++) {
        tess_zo_step_info info;
        if (tess_zo_step(zo, &objective, &info) != TESS_OK) {
            tess_zo_destroy(&zo);
            return 0;
        }
        *max_bytes = info.comm_bytes > *max_bytes ? info.comm_bytes : *max_bytes;
        *max_k = info.plan.K > *max_k ? info.plan.K : *max_k;
    }
    memcpy(x, tess_zo_x(zo), (size_t)n * sizeof *x);
    if (c->average) memcpy(xbar, tess_zo_xbar(zo), (size_t)n * sizeof *xbar);
    memcpy(cnt, tess_zo_counters(zo), TESS_ZO_NCNT * sizeof *cnt);
    tess_zo_destroy(&zo);
    return 1;
}

static void compare_slice(const double *got, const double *ref, const tess_group *shard,
                          const char *what, const char *name) {
    int64_t lo = 0, hi = D;
    if (shard) tess_par_block_range(D, shard->size, shard->rank, &lo, &hi);
    double worst = 0.0;
    for (int64_t j = lo; j < hi; j++) {
        double r = fabs(got[j - lo] - ref[j]) / fmax(fabs(ref[j]), 1e-3);
        worst = r > worst ? r : worst;
    }
    TESS_TEST_CHECK(worst <= 1e-9, "%s, %s: relative difference %.3g > 1e-9", name, what, worst);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    TESS_TEST_CHECK(argc > 1 && atoi(argv[1]) == size, "world size %d, expected %s", size,
                    argc > 1 ? argv[1] : "?");
    tess_group *world = NULL, *self = NULL;
    tess_mesh *mesh = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "world", &world) == TESS_OK, "world group");
    TESS_TEST_CHECK(tess_group_split(world, rank, 0, "self", &self) == TESS_OK, "self group");
    if (size == 4) {
        const tess_mesh_axis axes[2] = {{"eval", 2}, {"shard", 2}};
        TESS_TEST_CHECK(tess_mesh_create(world, 2, axes, &mesh) == TESS_OK, "mesh");
    }
    for (int w = 0; w < 5; w++) {
        const tess_zo_config c = config(w);
        double ref[D], refbar[D], x[D], xbar[D], bytes, rbytes;
        int64_t rcnt[TESS_ZO_NCNT], cnt[TESS_ZO_NCNT], k, rk;
        TESS_TEST_CHECK(run(&c, self, NULL, ref, refbar, rcnt, &rbytes, &rk), "%s: reference",
                        names[w]);
        TESS_TEST_CHECK(run(&c, world, NULL, x, xbar, cnt, &bytes, &k), "%s: eval split", names[w]);
        TESS_TEST_CHECK(memcmp(x, ref, sizeof x) == 0, "%s: x on %d eval ranks differs from 1 rank",
                        names[w], size);
        TESS_TEST_CHECK(!c.average || memcmp(xbar, refbar, sizeof xbar) == 0,
                        "%s: x-bar on %d eval ranks differs", names[w], size);
        TESS_TEST_CHECK(memcmp(cnt, rcnt, sizeof cnt) == 0, "%s: counters differ", names[w]);
        double per_value = c.estimator == TESS_ZO_EST_ONE_POINT ? 8.0 : 16.0;
        TESS_TEST_CHECK(c.estimator == TESS_ZO_EST_FIRST_ORDER ||
                            bytes <= (size > 1 ? per_value * (double)k : 0.0),
                        "%s: %g bytes sent in one iteration, expected <= %g (K = %lld)", names[w],
                        bytes, per_value * (double)k, (long long)k);
        if (c.estimator == TESS_ZO_EST_FIRST_ORDER) continue;
        TESS_TEST_CHECK(run(&c, NULL, world, x, xbar, cnt, &bytes, &k), "%s: sharded", names[w]);
        compare_slice(x, ref, world, "sharded x", names[w]);
        if (c.average) compare_slice(xbar, refbar, world, "sharded x-bar", names[w]);
        TESS_TEST_CHECK(cnt[TESS_ZO_CNT_T] == rcnt[TESS_ZO_CNT_T], "%s: sharded chain time",
                        names[w]);
        if (mesh) {
            const tess_group *ev = tess_mesh_axis_group(mesh, 0), *sh = tess_mesh_axis_group(mesh, 1);
            TESS_TEST_CHECK(run(&c, ev, sh, x, xbar, cnt, &bytes, &k), "%s: 2x2 mesh", names[w]);
            compare_slice(x, ref, sh, "2 eval x 2 shard x", names[w]);
        }
    }
    tess_mesh_destroy(&mesh);
    tess_group_destroy(&self);
    tess_group_destroy(&world);
    int rc = tess_test_finish_mpi("zo_mpi", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
