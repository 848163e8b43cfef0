/* bench_calm - one training step of the calm app's models (apps/calm, docs/calm.md), Tessera's
 * side; bench_calm_torch.py is PyTorch's with the same architecture, shapes and initial scales.
 *
 *   bench_calm [--tok 0] [--base 0] [--batch 4] [--threads 1] [--reps 3] [--warmup 1]
 *   mpiexec -n 2 bench_calm ...        (data parallel: each rank runs --batch windows / traces)
 *
 * --tok 0: the dual-axis transformer (dat.h) with both heads, the patch input, A = 4, skip 4;
 *          --batch windows of N_max neurons x M patches, all neurons real, tokens
 *          (7 i + 3) mod K, frames sin(0.1 t + n), unit n, session 0.
 * --tok 1: the tokenizer (tok.h), Gumbel soft mode at tau_g 0.5 with Philox noise; --batch
 *          traces of M P frames, sin(0.1 t + trace).
 * --base 0|1: the spec's tiny or base sizes (model.preset; P = 4).
 * A timed step is the app's: zero the gradients, forward, backward, gradient sync over the ranks
 * (par/gradsync.h), AdamW. Prints "key value" lines: per timed step "step_s" (wall),
 * "step_cpu_s" (process CPU) and "sync_s" (wall time of tess_gradsync_finish, rank 0); the model
 * FLOPs of a step ("flops_per_step": 3 x the forward's multiply-adds x 2, attention scores
 * counted in full T x T, as for a dense model) and the sgemm peak measured in the same process.
 * Collective over MPI_COMM_WORLD; rank 0 prints. */
#include <cblas.h> /* openblas_set_num_threads */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"  /* tess_bench_* */
#include "core/timer.h"    /* tess_timer_now */
#include "dat.h"           /* calm_dat_* */
#include "optim/adamw.h"   /* tess_adamw_* */
#include "par/gradsync.h"  /* tess_gradsync_* */
#include "tok.h"           /* calm_tok_* */

typedef struct {
    tess_group *g;
    tess_registry *reg;
    calm_dat *dat;
    calm_tok *tok;
    tess_adamw *opt;
    tess_gradsync *sync;
    int32_t *tokens, *unit, *sid, *count, *ids;
    float *frames;
} bench;

static void bench_free(bench *b) {
    tess_gradsync_destroy(&b->sync);
    tess_adamw_destroy(&b->opt);
    calm_dat_destroy(&b->dat);
    calm_tok_destroy(&b->tok);
    tess_registry_destroy(&b->reg);
    tess_group_destroy(&b->g);
    free(b->tokens), free(b->unit), free(b->sid), free(b->count), free(b->ids), free(b->frames);
}

/* The presets of apps/calm/pretrain.c (tiny, base). */
static calm_tok_config tok_preset(bool base) {
    return (calm_tok_config){.P = 4, .M = base ? 32 : 16, .c = 64, .dt = 128, .nt = 2, .heads = 4,
                             .Dc = 32, .K = base ? 512 : 256, .tau_cos = 0.1f, .lambda_d = 0.5f,
                             .lambda_orth = 0.1f, .lambda_h = 0.01f, .quant = CALM_QUANT_GUMBEL,
                             .beta = 0.25f, .ema_decay = 0.99f};
}

static calm_dat_config dat_preset(bool base) {
    return (calm_dat_config){.K = base ? 512 : 256, .d = base ? 256 : 64, .layers = base ? 6 : 2,
                             .heads = base ? 8 : 4, .ffn = base ? 1024 : 256,
                             .units = base ? 256 : 64, .sessions = 1, .max_N = base ? 256 : 64,
                             .M = base ? 32 : 16, .P = 4, .ahead = 4, .skip = 4,
                             .patch_input = true, .head = CALM_HEAD_BOTH};
}

/* Multiply-adds of one window's forward (DAT): per layer the two attention projections
 * (4 d^2 each per token), the FFN (2 d F), the scores and weighted sums over M (temporal) and N
 * (neural) in full; the patch input and both heads. */
static double dat_macs(const calm_dat_config *c) {
    const double N = (double)c->max_N, M = (double)c->M, d = (double)c->d, F = (double)c->ffn;
    const double tok = N * M;
    const double layer = tok * (8.0 * d * d + 2.0 * d * F) + N * 2.0 * M * M * d + M * 2.0 * N * N * d;
    const double heads = tok * d * ((double)c->K + (double)(c->ahead * c->P)) +
                         tok * (double)(c->ahead * c->P) * (double)(c->skip * c->P);
    return (double)c->layers * layer + heads + tok * (double)c->P * d;
}

/* Multiply-adds of one trace's forward (tokenizer): the convolutions, the encoder and decoder
 * blocks (projections 4 dt^2 + FFN 8 dt^2 per patch, scores in full), the linear maps, the
 * codebook (logits and q) and the orthogonality Gram matrix (per batch, divided by it). */
static double tok_macs(const calm_tok_config *c, int64_t Bn) {
    const double L = (double)(c->M * c->P), M = (double)c->M, C = (double)c->c,
                 dt = (double)c->dt, K = (double)c->K, Dc = (double)c->Dc, P = (double)c->P;
    const double block = M * 12.0 * dt * dt + 2.0 * M * M * dt;
    const double enc = L * C * 5.0 + M * C * C * P + M * C * dt + (double)c->nt * block + M * dt * Dc;
    const double dec = M * Dc * dt + (double)c->nt * block + M * dt * C + M * C * C * P + L * C * 5.0;
    return enc + dec + 2.0 * M * K * Dc + K * K * Dc / (double)Bn;
}

static tess_status run(bench *b, int argc, char **argv) {
    static const char *const keys[] = {"--tok", "--base", "--batch", "--threads", "--reps",
                                       "--warmup"};
    int64_t o[] = {0, 0, 4, 1, 3, 1};
    TESS_CHECK(tess_bench_parse_ints(argc, argv, keys, o, 6, 0, 1 << 20));
    const bool tok = o[0] != 0, base = o[1] != 0;
    const int64_t B = o[2], reps = o[4], warmup = o[5];
    TESS_REQUIRE(B >= 1 && o[3] >= 1 && reps >= 1, TESS_ERR_ARG,
                 "--batch, --threads and --reps must be >= 1");
    TESS_CHECK(tess_group_create(MPI_COMM_WORLD, "bench", &b->g));
    const bool root = b->g->rank == 0;
    if (root) tess_bench_blas_setup((int)o[3]);
    else openblas_set_num_threads((int)o[3]);
    TESS_CHECK(tess_registry_create(&b->reg));
    const calm_tok_config tc = tok_preset(base);
    const calm_dat_config dc = dat_preset(base);
    const int64_t N = dc.max_N, M = dc.M, L = tc.M * tc.P;
    if (tok) TESS_CHECK(calm_tok_create(&b->tok, &tc, B, b->reg));
    else TESS_CHECK(calm_dat_create(&b->dat, &dc, B, b->reg));
    TESS_CHECK(tess_registry_finalize(b->reg));
    TESS_CHECK(tess_registry_init_params(b->reg, 1234));
    const tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f};
    TESS_CHECK(tess_adamw_create(&b->opt, b->reg, &ac));
    TESS_CHECK(tess_gradsync_create(&b->sync, b->reg, b->g, 1 << 16));
    const int64_t rows = tok ? B : B * N, cols = tok ? L : M * dc.P;
    b->frames = malloc((size_t)(rows * cols) * sizeof(float));
    b->tokens = malloc((size_t)(B * N * M) * sizeof(int32_t));
    b->ids = malloc((size_t)(B * tc.M) * sizeof(int32_t));
    b->unit = malloc((size_t)(B * N) * sizeof(int32_t));
    b->sid = calloc((size_t)B, sizeof(int32_t));
    b->count = malloc((size_t)B * sizeof(int32_t));
    TESS_REQUIRE(b->frames && b->tokens && b->ids && b->unit && b->sid && b->count, TESS_ERR_MEM,
                 "buffers");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = 0; t < cols; t++) b->frames[r * cols + t] = (float)sin(0.1 * t + (double)r);
    for (int64_t i = 0; i < B * N * M; i++) b->tokens[i] = (int32_t)((7 * i + 3) % dc.K);
    for (int64_t i = 0; i < B * N; i++) b->unit[i] = (int32_t)(i % N);
    for (int64_t i = 0; i < B; i++) b->count[i] = (int32_t)N;

    double peak = 0.0, peak_cpu = 0.0;
    TESS_CHECK(tess_bench_sgemm_peak(1024, 3, &peak, &peak_cpu));
    const double flops = 6.0 * (double)B * (tok ? tok_macs(&tc, B) : dat_macs(&dc));
    if (root) {
        printf("ranks %d\nparams %lld\n", b->g->size, (long long)tess_registry_global_total(b->reg));
        printf("peak_gflops %.2f\npeak_cpu_gflops %.2f\nflops_per_step %.6e\n", peak, peak_cpu, flops);
    }
    for (int64_t s = -warmup; s < reps; s++) {
        MPI_Barrier(b->g->comm);
        double w0 = tess_timer_now(), c0 = tess_bench_cpu_now();
        tess_registry_zero_grads(b->reg);
        if (tok) {
            calm_tok_loss l = calm_tok_forward(b->tok, b->frames, B, b->ids,
                                               (tess_rng_key){1, 8}, s + warmup, b->g->rank * B,
                                               0.5f, TESS_NN_CODEBOOK_SOFT);
            if (s == -warmup && root) printf("loss %.6f\n", l.total);
            calm_tok_backward(b->tok, 1.0f);
        } else {
            int64_t pairs = 0;
            double loss = calm_dat_forward(b->dat, b->tokens, b->frames, b->unit, b->sid,
                                           b->count, B, &pairs);
            if (s == -warmup && root) printf("loss %.6f\n", loss / (double)pairs);
            calm_dat_backward(b->dat, 1.0f / (float)pairs);
        }
        double w1 = tess_timer_now();
        TESS_CHECK(tess_gradsync_finish(b->sync, NULL));
        double sync = tess_timer_now() - w1;
        tess_adamw_step(b->opt, 1e-4f);
        double w = tess_timer_now() - w0, c = tess_bench_cpu_now() - c0;
        if (s >= 0 && root) printf("step_s %.6f\nstep_cpu_s %.6f\nsync_s %.6f\n", w, c, sync);
    }
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    bench b = {0};
    tess_status s = run(&b, argc, argv);
    bench_free(&b);
    if (s != TESS_OK) tess_error_write();
    MPI_Finalize();
    return s == TESS_OK ? 0 : tess_status_exit_code(s);
}
