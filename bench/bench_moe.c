/* bench_moe - one MoE layer forward + backward (nn/moe.h), Tessera's side (bench_moe_torch.py is
 * PyTorch's): T tokens of width d through a top-k router and E SwiGLU experts of width d_ff,
 * with L_lb on and, with --sp 1, R_sp (lambda 2e-3; R_cp needs a second layer and costs O(T k)).
 *
 *   bench_moe [--threads 1] [--reps 5] [--warmup 2] [--tokens 2048] [--dim 256] [--hidden 512]
 *             [--experts 8] [--topk 2] [--sp 0]
 *
 * A timed step is: zero the parameter gradients, forward, backward (dx, which backward adds into,
 * is zeroed before the timer starts). Prints "key value" lines: a "step_s" (wall) and "step_cpu_s"
 * (process CPU) line per timed step, the expert-GEMM FLOPs of a step (18 T k d d_ff: three products
 * forward, six backward) and the 1024^3 peaks measured in the same process at --threads threads,
 * OpenBLAS's sgemm and the AVX-512 tiles the experts run on (tess_matmul_tiles, rows split over a
 * team), each the better of a measurement before and one after the steps (all four printed);
 * peak_gflops is the better path's (peak_kind), so the driver reports the GEMM share of the step
 * against the faster of the two; "moe_threads": the threads the layer runs its experts on
 * (--threads > 1: a team, nn/moe.h). After each timed step two calls of each path are timed too,
 * "step_peak_gflops" and "step_peak_cpu_gflops" (the fastest of the four, wall and CPU), so that
 * each step can be set against the peak of the same minute (the driver's paired share).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h" /* tess_bench_* */
#include "core/timer.h"   /* tess_timer_now */
#include "nn/moe.h"       /* tess_nn_moe_* */
#include "core/rng.h"     /* tess_rng_fill_uniform */

typedef struct {
    tess_bench_peak *peak;
    tess_registry *reg;
    tess_nn_moe_stack *st;
    tess_nn_ffn *f;
    tess_arena arena;
    float *x, *y, *dx, *dy, *scratch;
} bench;

static void bench_free(bench *b) {
    tess_bench_peak_destroy(&b->peak);
    tess_nn_ffn_destroy(&b->f);
    tess_nn_moe_stack_destroy(&b->st);
    tess_registry_destroy(&b->reg);
    tess_arena_free(&b->arena);
    free(b->x), free(b->y), free(b->dx), free(b->dy), free(b->scratch);
}

/* The 1024^3 peaks at the bench's thread count: OpenBLAS's sgemm and the AVX-512 tiles that
 * the experts' products run on (bench_common.h), in wall and CPU GFLOP/s. */
typedef struct {
    double sgemm, sgemm_cpu, tiles, tiles_cpu;
} peak_pair;

static double better(double a, double b) { return a > b ? a : b; }

/* The fastest of `calls` calls of each path. */
static peak_pair measure_peaks(tess_bench_peak *peak, int calls) {
    peak_pair p;
    tess_bench_peak_time(peak, false, calls, &p.sgemm, &p.sgemm_cpu);
    tess_bench_peak_time(peak, true, calls, &p.tiles, &p.tiles_cpu);
    return p;
}

/* Each path's peak is the better of a measurement before and one after the steps: one can fall
 * into a pause of the process (a 1024^3 product takes about 10 ms at two threads) and give a
 * figure below the machine's, then the GEMM share above 100%. The share is taken against the
 * better path (peak_kind), so a faster path for the experts cannot flatter it. */
static void print_peak(const peak_pair *b, const peak_pair *a) {
    const double sg = better(b->sgemm, a->sgemm), ti = better(b->tiles, a->tiles);
    const double sg_cpu = better(b->sgemm_cpu, a->sgemm_cpu);
    const double ti_cpu = better(b->tiles_cpu, a->tiles_cpu);
    printf("peak_sgemm_before_gflops %.2f\npeak_sgemm_after_gflops %.2f\n", b->sgemm, a->sgemm);
    printf("peak_tiles_before_gflops %.2f\npeak_tiles_after_gflops %.2f\n", b->tiles, a->tiles);
    printf("peak_kind %s\n", ti > sg ? "tiles" : "sgemm");
    printf("peak_gflops %.2f\npeak_cpu_gflops %.2f\n", better(sg, ti), better(sg_cpu, ti_cpu));
}

static tess_status run(bench *b, int argc, char **argv) {
    static const char *const keys[] = {"--threads", "--reps",    "--warmup", "--tokens",
                                       "--dim",     "--hidden",  "--experts", "--topk", "--sp"};
    int64_t o[] = {1, 5, 2, 2048, 256, 512, 8, 2, 0};
    TESS_CHECK(tess_bench_parse_ints(argc, argv, keys, o, 9, 0, 1 << 24));
    const int64_t reps = o[1], warmup = o[2], N = o[3], C = o[4];
    TESS_REQUIRE(o[0] >= 1 && reps >= 1 && N >= 1 && C >= 1, TESS_ERR_ARG,
                 "--threads, --reps, --tokens and --dim must be >= 1");
    tess_bench_blas_setup((int)o[0]);
    const tess_nn_moe_config mc = {.E = o[6], .k = o[7], .F = o[5], .every = 1, .lambda_lb = 1e-2,
                                   .lambda_sp = o[8] ? 2e-3 : 0.0, .phi = TESS_NN_MOE_PHI_SQ,
                                   .std = 0.02};
    const tess_tfm_config tc = {.V = 2, .T = N, .C = C, .NH = 1, .F = 1, .L = 1};
    TESS_CHECK(tess_registry_create(&b->reg));
    TESS_CHECK(tess_nn_moe_stack_create(&b->st, &mc));
    TESS_CHECK(tess_nn_moe_stack_make_ffn(b->st, 0, &tc, &b->f));
    printf("moe_threads %d\n", tess_nn_moe_stack_threads(b->st));
    TESS_CHECK(tess_nn_ffn_add_params(b->f, b->reg, "moe"));
    TESS_CHECK(tess_registry_finalize(b->reg));
    TESS_CHECK(tess_registry_init_params(b->reg, 1234));
    TESS_CHECK(tess_arena_init(&b->arena, (size_t)tess_nn_ffn_activation_bytes(b->f, N)));
    TESS_CHECK(tess_nn_ffn_carve(b->f, &b->arena, N));
    b->x = malloc((size_t)(N * C) * sizeof(float));
    b->y = malloc((size_t)(N * C) * sizeof(float));
    b->dx = malloc((size_t)(N * C) * sizeof(float));
    b->dy = malloc((size_t)(N * C) * sizeof(float));
    b->scratch = malloc((size_t)tess_nn_ffn_scratch_floats(b->f, N) * sizeof(float));
    TESS_REQUIRE(b->x && b->y && b->dx && b->dy && b->scratch, TESS_ERR_MEM, "buffers");
    const tess_rng_key key = {.seed = 7, .stream = 0};
    tess_rng_fill_uniform(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 0), 0, N * C, b->x, -1.0f, 1.0f);
    tess_rng_fill_uniform(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1), 0, N * C, b->dy, -1.0f, 1.0f);

    TESS_CHECK(tess_bench_peak_create(&b->peak, 1024, (int)o[0]));
    const peak_pair before = measure_peaks(b->peak, 3);
    printf("gemm_flops_per_step %.6e\n", 18.0 * (double)(N * mc.k * C * mc.F));
    for (int64_t s = -warmup; s < reps; s++) {
        /* backward adds into dx (in a model: the residual stream's gradient, never zeroed), so
         * the bench zeroes it outside the timed step */
        memset(b->dx, 0, (size_t)(N * C) * sizeof(float));
        double w0 = tess_timer_now(), c0 = tess_bench_cpu_now();
        tess_registry_zero_grads(b->reg);
        tess_nn_ffn_forward(b->f, b->y, b->x, N);
        tess_nn_ffn_backward(b->f, b->dx, b->scratch, b->dy, N);
        double w = tess_timer_now() - w0, c = tess_bench_cpu_now() - c0;
        if (s < 0) continue;
        printf("step_s %.6f\nstep_cpu_s %.6f\n", w, c);
        /* two calls per path: one can fall in a pause */
        const peak_pair q = measure_peaks(b->peak, 2);
        printf("step_peak_gflops %.2f\nstep_peak_cpu_gflops %.2f\n", better(q.sgemm, q.tiles),
               better(q.sgemm_cpu, q.tiles_cpu));
    }
    const peak_pair after = measure_peaks(b->peak, 3);
    print_peak(&before, &after);
    return TESS_OK;
}

int main(int argc, char **argv) {
    bench b = {0};
    tess_status s = run(&b, argc, argv);
    bench_free(&b);
    if (s != TESS_OK) {
        tess_error_write();
        return tess_status_exit_code(s);
    }
    return 0;
}
