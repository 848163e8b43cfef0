/* bench_memory - peak resident memory of one tinylm-like training step against what the step
 * must hold, Tessera's side (bench_block_torch.py --mode memory is PyTorch's).
 *
 *   bench_memory [--layers 2] [--batch 8]
 *
 * Model: tess_bench_tfm_config with --layers blocks, AdamW, one step (zero grads, forward,
 * backward, update), as apps/tinylm runs it. Baseline: VmRSS after MPI_Init and one warm-up
 * cblas_sgemm (so MPI's and OpenBLAS's own buffers are in it), then VmHWM is reset to VmRSS.
 * After the step, growth = VmHWM - baseline. What the step must hold ("floor"): params, grads,
 * AdamW m and v (4 x 4 bytes per parameter), the activation arena (tess_tfm_activation_bytes)
 * and the token batch. Prints "key value" lines (KiB and bytes) for the driver.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"   /* tess_bench_* */
#include "nn/registry.h"    /* tess_registry_* */
#include "nn/transformer.h" /* tess_tfm_* */
#include "optim/adamw.h"    /* tess_adamw_* */

typedef struct {
    tess_registry *reg;
    tess_tfm *model;
    tess_adamw *opt;
    int32_t *ids, *targets;
} bench;

static void bench_free(bench *b) {
    free(b->ids);
    free(b->targets);
    tess_adamw_destroy(&b->opt);
    tess_tfm_destroy(&b->model);
    tess_registry_destroy(&b->reg);
}

static tess_status run(bench *b, int argc, char **argv) {
    static const char *const keys[] = {"--layers", "--batch"};
    int64_t opt[] = {2, 8};
    TESS_CHECK(tess_bench_parse_ints(argc, argv, keys, opt, 2, 1, 4096));
    const int64_t B = opt[1];
    tess_bench_blas_setup(1);
    double warm_wall, warm_cpu;
    TESS_CHECK(tess_bench_sgemm_peak(512, 1, &warm_wall, &warm_cpu));

    const int64_t rss0 = tess_bench_proc_kib("VmRSS");
    const bool reset = tess_bench_reset_hwm();
    printf("baseline_rss_kib %lld\n", (long long)rss0);
    printf("hwm_reset %d\n", reset ? 1 : 0);

    const tess_tfm_config cfg = tess_bench_tfm_config(opt[0]);
    const int64_t n = B * cfg.T;
    TESS_CHECK(tess_registry_create(&b->reg));
    TESS_CHECK(tess_tfm_create(&b->model, &cfg, B, b->reg));
    TESS_CHECK(tess_registry_finalize(b->reg));
    TESS_CHECK(tess_registry_init_params(b->reg, 1234));
    TESS_CHECK(tess_adamw_create(&b->opt, b->reg, &(tess_adamw_config){
        .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f}));
    b->ids = malloc((size_t)n * sizeof *b->ids);
    b->targets = malloc((size_t)n * sizeof *b->targets);
    TESS_REQUIRE(b->ids && b->targets, TESS_ERR_MEM, "cannot allocate %lld tokens", (long long)n);
    tess_bench_tokens(b->ids, b->targets, n, cfg.V);

    tess_registry_zero_grads(b->reg);
    float loss = tess_tfm_forward(b->model, b->ids, b->targets, B);
    tess_tfm_backward(b->model, 1.0f);
    tess_adamw_step(b->opt, 1e-3f);

    const int64_t hwm = tess_bench_proc_kib("VmHWM"), params = tess_registry_global_total(b->reg);
    const int64_t act = tess_tfm_activation_bytes(b->model);
    printf("loss %.6f\n", (double)loss);
    printf("hwm_kib %lld\n", (long long)hwm);
    printf("params %lld\n", (long long)params);
    printf("state_bytes %lld\n", (long long)(16 * params));
    printf("activation_bytes %lld\n", (long long)act);
    printf("floor_bytes %lld\n", (long long)(16 * params + act + 2 * n * (int64_t)sizeof(int32_t)));
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    bench b = {0};
    tess_status s = run(&b, argc, argv);
    bench_free(&b);
    if (s != TESS_OK) tess_error_write();
    MPI_Finalize();
    return tess_status_exit_code(s);
}
