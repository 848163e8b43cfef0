/* bench_moe_ep - a training step of L MoE layers (nn/moe.h; L = 1 or 2, the second fed by the
 * first) under MPI: two configurations A and B built side by side and stepped alternately, so
 * that load from other processes hits both alike and their ratio is what counts (in the order
 * A B, B A, A B, ...: the order within a pair of steps alternates).
 *
 *   mpiexec -n P bench_moe_ep [--compare 1] [--tokens 2048] [--dim 256] [--hidden 512]
 *       [--experts 8] [--topk 2] [--layers 1] [--reps 5] [--warmup 2] [--threads 1]
 *       [--ep 1] [--sp 0] [--cp 0] [--capacity 0]
 *
 * --compare 1 (EP): A = expert parallelism 1 (every rank holds every expert: data parallelism,
 *             expert gradients averaged over the P ranks), B = EP P (rank r holds E/P experts,
 *             token rows exchanged by all-to-all-v, expert gradients not reduced);
 * --compare 2 (losses): A = L_lb only, B = L_lb + R_sp (lambda 2e-3) + R_cp (lambda 1e-3, needs
 *             --layers 2), both at --ep;
 * --compare 0: A alone (--ep, --sp, --cp), for memory.
 * --capacity c > 0: every expert capped at ceil(N k (c/100) / E) of a rank's pairs (capacity
 *             factor c percent, drop by score, no padding), in A and B; with expert parallelism
 *             the expert side is then carved for E times that (the most the ranks can send),
 *             not grown from the exchanged counts. 0: dropless.
 * Every rank runs --tokens tokens of width --dim (the same global batch in A and B). A step:
 * zero the gradients, forward with the aux terms, backward, the gradient sync (par/gradsync.h:
 * dense entries averaged over all ranks, expert entries over their expert-data-parallel group).
 * Prints "key value" lines per timed step and configuration X = a, b: X_step_s (wall, the slowest
 * rank, between barriers), X_layer_s (forward + backward, the mean over ranks), X_a2a_s (the
 * time in the expert exchanges, tess_nn_moe_stack_exchange_seconds, mean over ranks), X_sync_s
 * (the gradient sync, mean over ranks), and X_step_cpu_s, X_layer_cpu_s, X_a2a_cpu_s,
 * X_sync_cpu_s: the same in CPU seconds, means over the ranks. On a machine loaded by other
 * processes a rank's wall time counts the time it was descheduled, and waiting in MPI for a
 * descheduled peer; CPU time counts neither (MPI's polling while the peer computes counts, at the
 * rank's share of the CPU, so the imbalance between the ranks still shows). Then vmhwm_kib (the largest peak resident set over the
 * ranks), base_kib (the resident set after MPI and BLAS start, before anything of the bench),
 * and per rank of A: params (floats held), floor_bytes = parameters + gradients + the step's
 * inputs and outputs (x, y, dy, dx: 4 N C) + what backward must keep: router scores (N E), and
 * per routed row (R = N k, received rows as many on average) the expert input (C), the SwiGLU
 * pre-activations a and b (2 F), the expert output (C); act_bytes = the layers' arena, scratch
 * bytes = the backward scratch, grown_bytes = the expert side grown from the exchanged counts
 * (dropless with ep: tess_nn_moe_stack_grown_bytes), each the larger rank's. Collective on
 * MPI_COMM_WORLD.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h" /* tess_bench_* */
#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "core/rng.h"     /* tess_rng_fill_uniform */
#include "core/timer.h"   /* tess_timer_now */
#include "nn/moe.h"       /* tess_nn_moe_* */
#include "par/coll.h"     /* tess_par_allreduce_f64 */
#include "par/gradsync.h" /* tess_gradsync_* */
#include "par/mesh.h"     /* tess_group_* */

enum { MAXL = 2 };

typedef struct {
    tess_registry *reg;
    tess_nn_moe_stack *st;
    tess_nn_ffn *f[MAXL];
    int64_t L;
    tess_arena arena;
    float *h, *dh, *scratch; /* (N,C) between the layers, its gradient; backward scratch */
    int64_t scratch_floats;
    tess_gradsync *gs;
} model;

static void model_free(model *m) {
    tess_gradsync_destroy(&m->gs);
    for (int64_t l = 0; l < m->L; l++) tess_nn_ffn_destroy(&m->f[l]);
    tess_nn_moe_stack_destroy(&m->st);
    tess_registry_destroy(&m->reg);
    tess_arena_free(&m->arena);
    free(m->h), free(m->dh), free(m->scratch);
}

static tess_status model_build(model *m, const tess_nn_moe_config *mc, int64_t L, int64_t N,
                               int64_t C, const tess_group *world) {
    *m = (model){.L = L};
    const tess_tfm_config tc = {.V = 2, .T = N, .C = C, .NH = 1, .F = 1, .L = L};
    TESS_CHECK(tess_registry_create(&m->reg));
    TESS_CHECK(tess_nn_moe_stack_create(&m->st, mc));
    for (int64_t l = 0; l < L; l++) {
        TESS_CHECK(tess_nn_moe_stack_make_ffn(m->st, l, &tc, &m->f[l]));
        TESS_CHECK(tess_nn_ffn_add_params(m->f[l], m->reg, l ? "moe1" : "moe0"));
    }
    TESS_CHECK(tess_registry_finalize(m->reg));
    TESS_CHECK(tess_registry_init_params(m->reg, 1234));
    tess_arena meas;
    tess_arena_init_measure(&meas);
    for (int64_t l = 0; l < L; l++) TESS_CHECK(tess_nn_ffn_carve(m->f[l], &meas, N));
    TESS_CHECK(tess_arena_init(&m->arena, tess_arena_high_water(&meas)));
    for (int64_t l = 0; l < L; l++) TESS_CHECK(tess_nn_ffn_carve(m->f[l], &m->arena, N));
    for (int64_t l = 0; l < L; l++) {
        const int64_t s = tess_nn_ffn_scratch_floats(m->f[l], N);
        m->scratch_floats = s > m->scratch_floats ? s : m->scratch_floats;
    }
    m->h = malloc((size_t)(N * C) * sizeof(float));
    m->dh = malloc((size_t)(N * C) * sizeof(float));
    m->scratch = malloc((size_t)m->scratch_floats * sizeof(float));
    TESS_REQUIRE(m->h && m->dh && m->scratch, TESS_ERR_MEM, "bench buffers");
    TESS_CHECK(tess_gradsync_create(&m->gs, m->reg, world, 1 << 18));
    return TESS_OK;
}

/* One step; t[0..3] = step, layer (forward + backward), exchange, sync wall seconds on this rank,
 * t[4..7] the same in this rank's CPU seconds (the process's; one thread per rank). */
static tess_status model_step(model *m, const float *x, float *y, const float *dy, float *dx,
                              int64_t N, int64_t C, const tess_group *world, double t[8]) {
    TESS_MPI_CHECK(MPI_Barrier(world->comm));
    const double t0 = tess_timer_now(), c0 = tess_bench_cpu_now();
    tess_registry_zero_grads(m->reg);
    tess_nn_ffn_forward(m->f[0], m->L > 1 ? m->h : y, x, N);
    if (m->L > 1) tess_nn_ffn_forward(m->f[1], y, m->h, N);
    tess_nn_moe_aux aux;
    tess_nn_moe_stack_aux(m->st, &aux);
    memset(dx, 0, (size_t)(N * C) * sizeof(float));
    if (m->L > 1) {
        memset(m->dh, 0, (size_t)(N * C) * sizeof(float));
        tess_nn_ffn_backward(m->f[1], m->dh, m->scratch, dy, N);
        tess_nn_ffn_backward(m->f[0], dx, m->scratch, m->dh, N);
    } else {
        tess_nn_ffn_backward(m->f[0], dx, m->scratch, dy, N);
    }
    TESS_CHECK(tess_nn_moe_stack_status(m->st));
    const double t1 = tess_timer_now(), c1 = tess_bench_cpu_now();
    TESS_CHECK(tess_gradsync_finish(m->gs, NULL));
    const double t2 = tess_timer_now(), c2 = tess_bench_cpu_now();
    t[0] = t2 - t0, t[1] = t1 - t0, t[2] = tess_nn_moe_stack_exchange_seconds(m->st, true, &t[6]);
    t[3] = t2 - t1;
    t[4] = c2 - c0, t[5] = c1 - c0, t[7] = c2 - c1;
    return TESS_OK;
}

static tess_status run(int argc, char **argv, const tess_group *world, tess_group *self) {
    static const char *const keys[] = {"--compare", "--tokens", "--dim",  "--hidden",
                                       "--experts", "--topk",   "--layers", "--reps",
                                       "--warmup",  "--threads", "--ep",  "--sp", "--cp",
                                       "--capacity"};
    int64_t o[] = {1, 2048, 256, 512, 8, 2, 1, 5, 2, 1, 1, 0, 0, 0};
    TESS_CHECK(tess_bench_parse_ints(argc, argv, keys, o, 14, 0, 1 << 24));
    const int64_t cmp = o[0], N = o[1], C = o[2], L = o[6], reps = o[7], warmup = o[8];
    const int P = world->size;
    TESS_REQUIRE(cmp <= 2 && N >= 1 && C >= 1 && L >= 1 && L <= MAXL && reps >= 1 && o[9] >= 1,
                 TESS_ERR_ARG, "--compare 0..2, --tokens, --dim, --reps, --threads >= 1, "
                 "--layers 1 or 2");
    TESS_REQUIRE(cmp != 2 || L == 2 || o[12] == 0, TESS_ERR_ARG, "R_cp needs --layers 2");
    tess_bench_blas_setup((int)o[9]);
    const int64_t base_kib = tess_bench_proc_kib("VmRSS");
    const tess_nn_moe_config mc = {
        .E = o[4], .k = o[5], .F = o[3], .every = 1, .lambda_lb = 1e-2, .phi = TESS_NN_MOE_PHI_SQ,
        .std = 0.02, .drop = o[13] > 0 ? TESS_NN_MOE_DROP_PROBS : TESS_NN_MOE_DROP_NONE,
        .capacity_factor = (double)o[13] / 100.0};
    tess_nn_moe_config cfg[2] = {mc, mc};
    const int64_t ep[2] = {cmp == 1 ? 1 : o[10], cmp == 1 ? P : o[10]};
    for (int i = 0; i < 2; i++) {
        const bool sp = cmp == 2 ? i == 1 : o[11] != 0, cp = cmp == 2 ? i == 1 : o[12] != 0;
        cfg[i].lambda_sp = sp ? 2e-3 : 0.0;
        cfg[i].lambda_cp = cp ? 1e-3 : 0.0;
        TESS_REQUIRE(ep[i] == 1 || ep[i] == P, TESS_ERR_ARG, "--ep must be 1 or the ranks (%d)", P);
        if (ep[i] > 1) cfg[i].ep = world, cfg[i].edp = self;
    }
    const int nm = cmp == 0 ? 1 : 2;
    float *x = malloc((size_t)(N * C) * sizeof(float)), *y = malloc((size_t)(N * C) * sizeof(float));
    float *dy = malloc((size_t)(N * C) * sizeof(float)), *dx = malloc((size_t)(N * C) * sizeof(float));
    TESS_REQUIRE(x && y && dy && dx, TESS_ERR_MEM, "bench inputs");
    const tess_rng_key key = {.seed = 7, .stream = (uint32_t)world->rank};
    tess_rng_fill_uniform(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 0), 0, N * C, x, -1.0f, 1.0f);
    tess_rng_fill_uniform(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1), 0, N * C, dy, -1.0f, 1.0f);
    model m[2] = {{0}, {0}};
    tess_status s = TESS_OK;
    for (int i = 0; i < nm && s == TESS_OK; i++) s = model_build(&m[i], &cfg[i], L, N, C, world);
    /* A B, then B A, ...: neither configuration always runs first (after the output and the
     * reductions of the previous step) */
    for (int64_t r = -warmup; r < reps && s == TESS_OK; r++)
        for (int u = 0; u < nm && s == TESS_OK; u++) {
            const int i = (r + warmup) % 2 ? nm - 1 - u : u;
            double t[8], mx;
            s = model_step(&m[i], x, y, dy, dx, N, C, world, t);
            if (s != TESS_OK) break;
            mx = t[0];
            s = tess_par_allreduce_f64(world, &mx, 1, TESS_PAR_MAX);
            if (s == TESS_OK) s = tess_par_allreduce_f64(world, t + 1, 7, TESS_PAR_MEAN);
            static const char *const name[8] = {"step_s", "layer_s", "a2a_s", "sync_s",
                                               "step_cpu_s", "layer_cpu_s", "a2a_cpu_s",
                                               "sync_cpu_s"};
            for (int j = 0; j < 8 && s == TESS_OK && r >= 0 && world->rank == 0; j++)
                printf("%c_%s %.6f\n", 'a' + i, name[j], j ? t[j] : mx);
        }
    if (s == TESS_OK) {
        double hwm[4] = {(double)tess_bench_proc_kib("VmHWM"),
                         (double)tess_arena_high_water(&m[0].arena),
                         (double)(m[0].scratch_floats * (int64_t)sizeof(float)),
                         (double)tess_nn_moe_stack_grown_bytes(m[0].st)};
        s = tess_par_allreduce_f64(world, hwm, 4, TESS_PAR_MAX);
        /* the floor of A on one rank */
        const double E = (double)mc.E, k = (double)mc.k, F = (double)mc.F, n = (double)N;
        const double el = E / (double)ep[0];
        const double params = (double)L * (E * (double)C + 3.0 * el * F * (double)C);
        const double floor = 4.0 * (2.0 * params + 4.0 * n * (double)C +
                                    (double)L * (n * E + n * k * (2.0 * (double)C + 2.0 * F)));
        if (s == TESS_OK && world->rank == 0)
            printf("ranks %d\ncapacity_pct %lld\nep_a %lld\nep_b %lld\nvmhwm_kib %.0f\n"
                   "base_kib %lld\nparams %.0f\nfloor_bytes %.0f\nact_bytes %.0f\n"
                   "scratch_bytes %.0f\ngrown_bytes %.0f\n",
                   P, (long long)o[13], (long long)ep[0], (long long)ep[1], hwm[0],
                   (long long)base_kib, params, floor, hwm[1], hwm[2], hwm[3]);
    }
    for (int i = 0; i < 2; i++) model_free(&m[i]);
    free(x), free(y), free(dy), free(dx);
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_group *world = NULL, *self = NULL;
    tess_status s = tess_group_create(MPI_COMM_WORLD, "ep", &world);
    if (s == TESS_OK) s = tess_group_split(world, world->rank, 0, "edp", &self);
    if (s == TESS_OK) s = run(argc, argv, world, self);
    if (s != TESS_OK) tess_error_write();
    tess_group_destroy(&self);
    tess_group_destroy(&world);
    MPI_Finalize();
    return s == TESS_OK ? 0 : tess_status_exit_code(s);
}
