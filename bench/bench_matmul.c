/* bench_matmul - Tessera's matmul path (tess_matmul with the transposes the transformer uses)
 * against cblas_sgemm called directly on the same buffers, on the GEMMs of one transformer
 * training step, plus the sgemm peak of a large square product.
 *
 *   bench_matmul [--threads 1] [--reps 7] [--sample-ms 20] [--tokens 2048]
 *
 * Shapes, for C = 256 and 512, N = --tokens rows (B*T, a multiple of 256), F = 8C/3 rounded up
 * to a multiple of 64 (SwiGLU), and per attention head T = 256, hs = 64 (N/256 sequences times
 * C/64 heads per step):
 *   linear layers (qkv C->3C, out C->C, gate/up C->F, down F->C), as nn/linear.c issues them:
 *     forward  out = in @ W^T          (N,OC,C)  trans_b
 *     backward din += dout @ W         (N,C,OC)
 *     backward dW += dout^T @ in       (OC,C,N)  trans_a
 *   attention, one head, as nn/attention.c issues it: causal row blocks of 64 rows, forward
 *   QK^T and AV, backward dY V^T, A^T dY, dP K, dP^T Q; and the unblocked QK^T (256,256,64).
 *
 * Protocol: one warm-up call per side, a sample of k calls lasting about --sample-ms, --reps
 * samples per side taken in alternation (ours, theirs, theirs, ours, ...) so that load from other
 * processes hits both alike. With one thread samples are timed in process CPU time (not inflated
 * while other processes hold the core), with more in wall time. GFLOP/s are from the median
 * sample; the ratio is the median of the per-pair ratios (cblas time / ours, > 1 when ours is
 * faster). "step total" weighs each row by how often one layer's training step runs it. The peak
 * is the fastest 1024^3 cblas_sgemm, measured before and after the rows. Prints facts as "key
 * value" lines and the table as markdown rows ("|...").
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"  /* tess_bench_* */
#include "core/rng.h"      /* tess_rng_fill_normal */
#include "core/timer.h"    /* tess_timer_now */
#include "tensor/matmul.h" /* tess_matmul */

enum { MAX_REPS = 63, MAX_CASES = 40, ATT_T = 256, ATT_HS = 64, ATT_RB = 64 };

typedef enum { GEMM_ONE, GEMM_ATT_FWD, GEMM_ATT_BWD } gemm_kind;

typedef struct {
    char name[48];
    gemm_kind kind;
    int64_t M, N, K; /* GEMM_ONE only */
    bool ta, tb;
    float beta;
    double count; /* runs per layer per training step; 0: shown, not in the step total */
} gemm_case;

/* The peer: cblas_sgemm on row-major operands, leading dimensions spelled out here. */
static void raw_sgemm(float *C, const float *A, const float *B, int M, int N, int K, bool ta,
                      bool tb, float alpha, float beta) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, ta ? M : K, B, tb ? K : N, beta, C, N);
}

static void gemm(bool raw, float *C, const float *A, const float *B, int64_t M, int64_t N,
                 int64_t K, bool ta, bool tb, float alpha, float beta) {
    if (raw)
        raw_sgemm(C, A, B, (int)M, (int)N, (int)K, ta, tb, alpha, beta);
    else
        tess_matmul(C, A, B, M, N, K, ta, tb, alpha, beta);
}

/* One head of causal attention in row blocks, the GEMMs of nn/attention.c only.
 * a: q, k, v, dy (T,hs) each; b: the block-packed weights; c: y, dq, dk, dv (T,hs) each, then
 * one (ATT_RB, T) block of d weights. */
static void attention_head(bool raw, bool backward, float *a, float *b, float *c) {
    const int64_t T = ATT_T, hs = ATT_HS;
    const float scale = 1.0f / sqrtf((float)hs);
    float *q = a, *k = a + T * hs, *v = a + 2 * T * hs, *dy = a + 3 * T * hs;
    float *y = c, *dq = c + T * hs, *dk = c + 2 * T * hs, *dv = c + 3 * T * hs;
    float *datt = c + 4 * T * hs, *att = b;
    for (int64_t i0 = 0; i0 < T; i0 += ATT_RB) {
        int64_t rows = ATT_RB, kv = i0 + ATT_RB;
        if (!backward) {
            gemm(raw, att, q + i0 * hs, k, rows, kv, hs, false, true, scale, 0.0f);
            gemm(raw, y + i0 * hs, att, v, rows, hs, kv, false, false, 1.0f, 0.0f);
        } else {
            gemm(raw, datt, dy + i0 * hs, v, rows, kv, hs, false, true, 1.0f, 0.0f);
            gemm(raw, dv, att, dy + i0 * hs, kv, hs, rows, true, false, 1.0f, 1.0f);
            gemm(raw, dq + i0 * hs, datt, k, rows, hs, kv, false, false, scale, 0.0f);
            gemm(raw, dk, datt, q + i0 * hs, kv, hs, rows, true, false, scale, 1.0f);
        }
        att += rows * kv;
    }
}

static double case_flops(const gemm_case *g) {
    if (g->kind == GEMM_ONE) return 2.0 * (double)g->M * (double)g->N * (double)g->K;
    double f = 0.0;
    for (int64_t i0 = 0; i0 < ATT_T; i0 += ATT_RB) f += 2.0 * ATT_RB * (double)(i0 + ATT_RB) * ATT_HS;
    return (g->kind == GEMM_ATT_FWD ? 2.0 : 4.0) * f;
}

static void run_case(const gemm_case *g, bool raw, float *a, float *b, float *c) {
    if (g->kind == GEMM_ONE)
        gemm(raw, c, a, b, g->M, g->N, g->K, g->ta, g->tb, 1.0f, g->beta);
    else
        attention_head(raw, g->kind == GEMM_ATT_BWD, a, b, c);
}

typedef double (*clock_fn)(void);

/* Seconds per call on clock now, averaged over iters calls. */
static double time_case(const gemm_case *g, bool raw, int64_t iters, clock_fn now, float *a,
                        float *b, float *c) {
    double t0 = now();
    for (int64_t i = 0; i < iters; i++) run_case(g, raw, a, b, c);
    return (now() - t0) / (double)iters;
}

/* Linear layer in -> out over n rows: forward, din, dW, each run `count` times per step. */
static int add_linear(gemm_case *cs, int n_cases, const char *layer, int64_t n, int64_t in,
                      int64_t out, double count) {
    gemm_case *g = cs + n_cases;
    g[0] = (gemm_case){.kind = GEMM_ONE, .M = n, .N = out, .K = in, .tb = true, .count = count};
    g[1] = (gemm_case){.kind = GEMM_ONE, .M = n, .N = in, .K = out, .beta = 1.0f, .count = count};
    g[2] = (gemm_case){.kind = GEMM_ONE, .M = out, .N = in, .K = n, .ta = true, .beta = 1.0f,
                       .count = count};
    snprintf(g[0].name, sizeof g[0].name, "%s fwd X@W^T", layer);
    snprintf(g[1].name, sizeof g[1].name, "%s bwd dY@W", layer);
    snprintf(g[2].name, sizeof g[2].name, "%s bwd dY^T@X", layer);
    return n_cases + 3;
}

static tess_status run(int argc, char **argv) {
    static const char *const keys[] = {"--threads", "--reps", "--sample-ms", "--tokens"};
    int64_t opt[] = {1, 7, 20, 2048};
    TESS_CHECK(tess_bench_parse_ints(argc, argv, keys, opt, 4, 1, 1 << 20));
    TESS_REQUIRE(opt[1] <= MAX_REPS, TESS_ERR_ARG, "--reps %lld exceeds %d", (long long)opt[1],
                 MAX_REPS);
    const int reps = (int)opt[1];
    const double sample_s = (double)opt[2] * 1e-3;
    const int64_t n = opt[3];
    TESS_REQUIRE(n % ATT_T == 0, TESS_ERR_ARG, "--tokens %lld must be a multiple of T = %d",
                 (long long)n, ATT_T);
    tess_bench_blas_setup((int)opt[0]);

    gemm_case cs[MAX_CASES];
    int nc = 0;
    int64_t max_floats = 5 * ATT_T * ATT_HS + ATT_RB * ATT_T;
    static const int64_t widths[] = {256, 512};
    for (int w = 0; w < 2; w++) {
        const int64_t C = widths[w], F = (8 * C / 3 + 63) / 64 * 64;
        char layer[32];
        snprintf(layer, sizeof layer, "C%lld qkv", (long long)C);
        nc = add_linear(cs, nc, layer, n, C, 3 * C, 1.0);
        snprintf(layer, sizeof layer, "C%lld out", (long long)C);
        nc = add_linear(cs, nc, layer, n, C, C, 1.0);
        snprintf(layer, sizeof layer, "C%lld gate,up", (long long)C);
        nc = add_linear(cs, nc, layer, n, C, F, 2.0);
        snprintf(layer, sizeof layer, "C%lld down", (long long)C);
        nc = add_linear(cs, nc, layer, n, F, C, 1.0);
        const double heads = (double)(n / ATT_T) * (double)(C / ATT_HS);
        cs[nc] = (gemm_case){.kind = GEMM_ATT_FWD, .count = heads};
        snprintf(cs[nc++].name, sizeof cs[0].name, "C%lld attn fwd, per head", (long long)C);
        cs[nc] = (gemm_case){.kind = GEMM_ATT_BWD, .count = heads};
        snprintf(cs[nc++].name, sizeof cs[0].name, "C%lld attn bwd, per head", (long long)C);
    }
    cs[nc] = (gemm_case){.kind = GEMM_ONE, .M = ATT_T, .N = ATT_T, .K = ATT_HS, .tb = true};
    snprintf(cs[nc++].name, sizeof cs[0].name, "QK^T unblocked, per head");
    for (int i = 0; i < nc; i++) { /* every operand fits in each buffer */
        const int64_t sizes[3] = {cs[i].M * cs[i].K, cs[i].K * cs[i].N, cs[i].M * cs[i].N};
        for (int j = 0; j < 3; j++)
            if (sizes[j] > max_floats) max_floats = sizes[j];
    }

    float *a = malloc((size_t)max_floats * sizeof *a), *b = malloc((size_t)max_floats * sizeof *b);
    float *c = calloc((size_t)max_floats, sizeof *c);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                               "cannot allocate 3 x %lld floats", (long long)max_floats);
    }
    const tess_rng_key key = {.seed = 7, .stream = 0};
    tess_rng_fill_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1), 0, max_floats, a, 0.0f, 0.1f);
    tess_rng_fill_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 2), 0, max_floats, b, 0.0f, 0.1f);

    /* One thread: process CPU time, which other processes' load does not inflate; more threads:
     * wall time (CPU time would add the threads up). */
    const clock_fn now = opt[0] == 1 ? tess_bench_cpu_now : tess_timer_now;
    printf("clock %s\n", opt[0] == 1 ? "cpu" : "wall");
    double peak_w[2], peak_c[2];
    TESS_CHECK(tess_bench_sgemm_peak(1024, 5, &peak_w[0], &peak_c[0]));
    double gf_ours[MAX_CASES], gf_raw[MAX_CASES], ratio[MAX_CASES];
    double flops_step = 0.0, t_ours_step = 0.0, t_raw_step = 0.0;
    for (int i = 0; i < nc; i++) {
        const gemm_case *g = &cs[i];
        run_case(g, false, a, b, c);
        run_case(g, true, a, b, c);
        double t1 = time_case(g, false, 1, tess_timer_now, a, b, c);
        int64_t iters = (int64_t)ceil(sample_s / (t1 > 1e-7 ? t1 : 1e-7));
        if (iters < 1) iters = 1;
        double t_ours[MAX_REPS], t_raw[MAX_REPS], pair[MAX_REPS];
        for (int r = 0; r < reps; r++) {
            bool ours_first = r % 2 == 0;
            if (ours_first) t_ours[r] = time_case(g, false, iters, now, a, b, c);
            t_raw[r] = time_case(g, true, iters, now, a, b, c);
            if (!ours_first) t_ours[r] = time_case(g, false, iters, now, a, b, c);
            pair[r] = t_raw[r] / t_ours[r];
        }
        const double flops = case_flops(g);
        const double to = tess_bench_median(t_ours, reps), tr = tess_bench_median(t_raw, reps);
        ratio[i] = tess_bench_median(pair, reps);
        gf_ours[i] = flops / to * 1e-9;
        gf_raw[i] = flops / tr * 1e-9;
        flops_step += g->count * flops;
        t_ours_step += g->count * to;
        t_raw_step += g->count * tr;
    }
    TESS_CHECK(tess_bench_sgemm_peak(1024, 5, &peak_w[1], &peak_c[1]));
    const double peak = opt[0] == 1 ? fmax(peak_c[0], peak_c[1]) : fmax(peak_w[0], peak_w[1]);
    printf("peak_gflops %.2f\n", peak);
    printf("| GEMM (row-major) | M x N x K | tess_matmul GFLOP/s | cblas_sgemm GFLOP/s | ratio | "
           "tess %% of peak |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < nc; i++) {
        const gemm_case *g = &cs[i];
        char shape[48] = "row blocks";
        if (g->kind == GEMM_ONE)
            snprintf(shape, sizeof shape, "%lld x %lld x %lld%s%s", (long long)g->M,
                     (long long)g->N, (long long)g->K, g->ta ? " (A^T)" : "", g->tb ? " (B^T)" : "");
        printf("| %s | %s | %.1f | %.1f | %.3f | %.0f%% |\n", g->name, shape, gf_ours[i],
               gf_raw[i], ratio[i], 100.0 * gf_ours[i] / peak);
    }
    printf("| **step total** (C256 and C512 layers, weighted by use) | | %.1f | %.1f | **%.3f** | "
           "%.0f%% |\n",
           flops_step / t_ours_step * 1e-9, flops_step / t_raw_step * 1e-9,
           t_raw_step / t_ours_step, 100.0 * flops_step / t_ours_step * 1e-9 / peak);
    printf("matmul_step_ratio %.4f\n", t_raw_step / t_ours_step);
    free(a);
    free(b);
    free(c);
    return TESS_OK;
}

int main(int argc, char **argv) {
    tess_status s = run(argc, argv);
    if (s != TESS_OK) {
        tess_error_write();
        return tess_status_exit_code(s);
    }
    return 0;
}
