/* bench_common.c - shared helpers of the Foundation benchmarks (see bench_common.h). */
#include "bench_common.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"       /* tess_rng_fill_normal */
#include "core/team.h"      /* tess_team_* */
#include "core/timer.h"     /* tess_timer_now */
#include "tensor/matmul.h"  /* tess_matmul_tiles */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tess_bench_median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double tess_bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One n x n x n product C = A B, row-major, ready to be timed on either path: cblas_sgemm at the
 * current OpenBLAS thread count, or tess_matmul_tiles with the rows of C split over the team. */
struct tess_bench_peak {
    float *a, *b, *c;
    int64_t n;
    tess_team *team;
};

static void peak_tiles_part(void *ctx, int member, int nm) {
    const tess_bench_peak *p = ctx;
    const int64_t r0 = p->n * member / nm, r1 = p->n * (member + 1) / nm;
    tess_matmul_tiles(p->c + r0 * p->n, p->n, p->a + r0 * p->n, p->n, p->b, p->n, r1 - r0, p->n,
                      p->n, false, false, 1.0f, 0.0f, NULL);
}

void tess_bench_peak_destroy(tess_bench_peak **p) {
    if (!*p) return;
    tess_team_destroy(&(*p)->team);
    free((*p)->a), free((*p)->b), free((*p)->c);
    free(*p);
    *p = NULL;
}

tess_status tess_bench_peak_create(tess_bench_peak **out, int64_t n, int threads) {
    *out = NULL;
    TESS_REQUIRE(n >= 1 && n <= 8192 && threads >= 1, TESS_ERR_ARG,
                 "peak gemm: n = %lld must be in [1, 8192] and threads = %d >= 1", (long long)n,
                 threads);
    tess_bench_peak *p = calloc(1, sizeof *p);
    if (p) {
        p->n = n;
        p->a = malloc((size_t)(n * n) * sizeof(float));
        p->b = malloc((size_t)(n * n) * sizeof(float));
        p->c = malloc((size_t)(n * n) * sizeof(float));
    }
    if (!p || !p->a || !p->b || !p->c) {
        tess_bench_peak_destroy(&p);
        return tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                               "cannot allocate three %lld x %lld matrices", (long long)n,
                               (long long)n);
    }
    const tess_status s = tess_team_create(&p->team, threads);
    if (s != TESS_OK) {
        tess_bench_peak_destroy(&p);
        return s;
    }
    const tess_rng_key key = {.seed = 1, .stream = 0};
    tess_rng_fill_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1), 0, n * n, p->a, 0.0f, 1.0f);
    tess_rng_fill_normal(key, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 2), 0, n * n, p->b, 0.0f, 1.0f);
    double w, c; /* warm-up of both paths: page faults, OpenBLAS buffers, the team's threads */
    tess_bench_peak_time(p, false, 1, &w, &c);
    tess_bench_peak_time(p, true, 1, &w, &c);
    *out = p;
    return TESS_OK;
}

void tess_bench_peak_time(tess_bench_peak *p, bool tiles, int calls, double *wall,
                          double *cpu) {
    const int ni = (int)p->n;
    const double flops = 2.0 * (double)p->n * (double)p->n * (double)p->n;
    *wall = *cpu = 0.0;
    for (int r = 0; r < calls; r++) {
        const double w0 = tess_timer_now(), c0 = tess_bench_cpu_now();
        if (tiles)
            tess_team_run(p->team, peak_tiles_part, p);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, p->a, ni,
                        p->b, ni, 0.0f, p->c, ni);
        const double w = flops / (tess_timer_now() - w0) * 1e-9;
        const double c = flops / (tess_bench_cpu_now() - c0) * 1e-9;
        if (w > *wall) *wall = w;
        if (c > *cpu) *cpu = c;
    }
}

/* A peak object for one measurement (tess_bench_sgemm_peak, tess_bench_tiles_peak). */
static tess_status gemm_peak(int64_t n, int reps, int threads, bool tiles, double *wall,
                             double *cpu) {
    TESS_REQUIRE(reps >= 1, TESS_ERR_ARG, "peak gemm: reps = %d must be >= 1", reps);
    tess_bench_peak *p;
    TESS_CHECK(tess_bench_peak_create(&p, n, threads));
    tess_bench_peak_time(p, tiles, reps, wall, cpu);
    tess_bench_peak_destroy(&p);
    return TESS_OK;
}

tess_status tess_bench_sgemm_peak(int64_t n, int reps, double *wall, double *cpu) {
    return gemm_peak(n, reps, 1, false, wall, cpu);
}

tess_status tess_bench_tiles_peak(int64_t n, int threads, int reps, double *wall, double *cpu) {
    return gemm_peak(n, reps, threads, true, wall, cpu);
}

void tess_bench_blas_setup(int threads) {
    openblas_set_num_threads(threads);
    printf("blas_config %s\n", openblas_get_config());
    printf("blas_core %s\n", openblas_get_corename());
    printf("blas_threads %d\n", openblas_get_num_threads());
}

int64_t tess_bench_proc_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    const size_t len = strlen(field);
    int64_t kib = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = strtoll(line + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

bool tess_bench_reset_hwm(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

tess_status tess_bench_parse_ints(int argc, char **argv, const char *const *keys, int64_t *values,
                                  int nkeys, int64_t lo, int64_t hi) {
    for (int i = 1; i < argc; i += 2) {
        int k = 0;
        while (k < nkeys && strcmp(argv[i], keys[k]) != 0) k++;
        TESS_REQUIRE(k < nkeys, TESS_ERR_ARG, "unknown option '%s'", argv[i]);
        TESS_REQUIRE(i + 1 < argc, TESS_ERR_ARG, "option %s needs a value", argv[i]);
        char *end;
        errno = 0;
        long long v = strtoll(argv[i + 1], &end, 10);
        TESS_REQUIRE(errno == 0 && end != argv[i + 1] && *end == '\0' && v >= lo && v <= hi,
                     TESS_ERR_ARG, "option %s: '%s' is not an integer in [%lld, %lld]", argv[i],
                     argv[i + 1], (long long)lo, (long long)hi);
        values[k] = v;
    }
    return TESS_OK;
}

tess_tfm_config tess_bench_tfm_config(int64_t L) {
    return (tess_tfm_config){.V = 64, .T = 256, .C = 256, .NH = 4, .F = 704, .L = L,
                             .norm = TESS_NN_NORM_RMS, .mlp = TESS_NN_FFN_SWIGLU, .causal = true,
                             .norm_eps = 1e-5f, .rope_base = 10000.0f};
}

void tess_bench_tokens(int32_t *ids, int32_t *targets, int64_t n, int64_t V) {
    for (int64_t i = 0; i < n; i++) {
        ids[i] = (int32_t)((7 * i + 3) % V);
        targets[i] = (int32_t)((7 * i + 10) % V);
    }
}
