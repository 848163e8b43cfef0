/* bench_block - training throughput of one transformer block, Tessera's side (bench_block_torch.py
 * is PyTorch's): tess_tfm with L = 1 and a 64-token vocabulary, so a step is embedding + one
 * block (RMSNorm, fused qkv, RoPE, causal attention, output projection, RMSNorm, SwiGLU MLP,
 * residuals) + final RMSNorm + head + cross-entropy, forward and backward. Shapes are
 * tess_bench_tfm_config (B = 8, T = 256, C = 256, NH = 4, F = 704 by default).
 *
 *   bench_block [--threads 1] [--reps 5] [--warmup 2] [--batch 8] [--layers 1]
 *
 * A timed step is: zero the gradients, forward, backward (no optimizer update). Prints "key
 * value" lines: the loss of the first step (a check that both sides compute the same model), a
 * "step_s" (wall) and a "step_cpu_s" (process CPU time) line per timed step, the model FLOPs of
 * a step (tess_tfm_train_flops) and the sgemm peak measured in the same process, for the
 * driver's medians and MFU.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"    /* tess_bench_* */
#include "core/timer.h"      /* tess_timer_now */
#include "nn/registry.h"     /* tess_registry_* */
#include "nn/transformer.h"  /* tess_tfm_* */

typedef struct {
    tess_registry *reg;
    tess_tfm *model;
    int32_t *ids, *targets;
} bench;

static void bench_free(bench *b) {
    free(b->ids);
    free(b->targets);
    tess_tfm_destroy(&b->model);
    tess_registry_destroy(&b->reg);
}

static tess_status run(bench *b, int argc, char **argv) {
    static const char *const keys[] = {"--threads", "--reps", "--warmup", "--batch", "--layers"};
    int64_t opt[] = {1, 5, 2, 8, 1};
    TESS_CHECK(tess_bench_parse_ints(argc, argv, keys, opt, 5, 0, 4096));
    const int64_t reps = opt[1], warmup = opt[2], B = opt[3];
    TESS_REQUIRE(opt[0] >= 1 && reps >= 1 && B >= 1 && opt[4] >= 1, TESS_ERR_ARG,
                 "--threads, --reps, --batch and --layers must be >= 1");
    tess_bench_blas_setup((int)opt[0]);
    const tess_tfm_config cfg = tess_bench_tfm_config(opt[4]);
    const int64_t n = B * cfg.T;

    TESS_CHECK(tess_registry_create(&b->reg));
    TESS_CHECK(tess_tfm_create(&b->model, &cfg, B, b->reg));
    TESS_CHECK(tess_registry_finalize(b->reg));
    TESS_CHECK(tess_registry_init_params(b->reg, 1234));
    b->ids = malloc((size_t)n * sizeof *b->ids);
    b->targets = malloc((size_t)n * sizeof *b->targets);
    TESS_REQUIRE(b->ids && b->targets, TESS_ERR_MEM, "cannot allocate %lld tokens", (long long)n);
    tess_bench_tokens(b->ids, b->targets, n, cfg.V);

    double peak, peak_cpu;
    TESS_CHECK(tess_bench_sgemm_peak(1024, 3, &peak, &peak_cpu));
    printf("peak_gflops %.2f\npeak_cpu_gflops %.2f\n", peak, peak_cpu);
    printf("tokens_per_step %lld\n", (long long)n);
    printf("flops_per_step %.6e\n", tess_tfm_train_flops(b->model, B));
    printf("params %lld\n", (long long)tess_registry_global_total(b->reg));
    for (int64_t s = -warmup; s < reps; s++) {
        double w0 = tess_timer_now(), c0 = tess_bench_cpu_now();
        tess_registry_zero_grads(b->reg);
        float loss = tess_tfm_forward(b->model, b->ids, b->targets, B);
        tess_tfm_backward(b->model, 1.0f);
        double w = tess_timer_now() - w0, c = tess_bench_cpu_now() - c0;
        if (s == -warmup) printf("loss %.6f\n", (double)loss);
        if (s >= 0) printf("step_s %.6f\nstep_cpu_s %.6f\n", w, c);
    }
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
