/* bench_common.h - what every Foundation benchmark shares: timing statistics, the measured sgemm
 * peak, OpenBLAS facts, /proc/self/status readers, and the fixed shapes of the block benchmark.
 *
 * Benchmarks report ratios against a peer or a physical limit measured in the same run
 * (docs/benchmarks.md); bench/run_foundation.sh runs them and prints the tables.
 * Each program prints "key value" lines (one fact per line) that the driver collects.
 * Not collective; single-process. */
#ifndef TESS_BENCH_COMMON_H
#define TESS_BENCH_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"    /* tess_status */
#include "nn/transformer.h" /* tess_tfm_config */

/* Median of x (n >= 1 values); sorts x in place. */
double tess_bench_median(double *x, int n);

/* CPU seconds of this process, all threads (CLOCK_PROCESS_CPUTIME_ID). Unlike wall time it does
 * not count time spent descheduled, so single-threaded timings taken while other processes load
 * the machine stay close to what a quiet machine gives. */
double tess_bench_cpu_now(void);

/* GFLOP/s of a large square cblas_sgemm (n x n x n, row-major, no transposes) after one warm-up
 * call: the machine's practical fp32 peak at the current OpenBLAS thread count, from the fastest
 * of reps timed calls in wall time (*wall) and in process CPU time (*cpu). The fastest, not the
 * median: a peak is what the machine can do, and load from other processes only slows calls
 * down, so this errs towards a higher peak and a lower utilisation. TESS_ERR_MEM if the operands
 * cannot be allocated. */
tess_status tess_bench_sgemm_peak(int64_t n, int reps, double *wall, double *cpu);
/* The same for tess_matmul_tiles (tensor/matmul.h: single-threaded AVX-512 register tiles), the
 * rows of C split evenly over a core/team.h team of `threads` members, each member's rows one
 * tess_matmul_tiles call: what the tiles give on that many cores. Without AVX-512 at compile
 * time the tiles are tess_matmul_ld, so this measures OpenBLAS (at its current thread count)
 * per member. TESS_ERR_MEM as above, or when the team's threads cannot be started. */
tess_status tess_bench_tiles_peak(int64_t n, int threads, int reps, double *wall, double *cpu);

/* The n x n x n product of both peaks kept ready to time one call at a time, so that a benchmark
 * can pair each timed step with a peak measured right after it (the host's speed drifts by
 * several percent within a minute on a shared VM). create allocates and fills the operands,
 * starts a team of `threads` for the tiles and makes one warm-up call of each path
 * (TESS_ERR_MEM, or the team's error); time makes `calls` >= 1 calls of one path (tiles false:
 * cblas_sgemm at the current OpenBLAS thread count) and gives the fastest one's GFLOP/s in wall
 * and in process CPU time. */
typedef struct tess_bench_peak tess_bench_peak;
tess_status tess_bench_peak_create(tess_bench_peak **p, int64_t n, int threads);
void tess_bench_peak_time(tess_bench_peak *p, bool tiles, int calls, double *wall, double *cpu);
void tess_bench_peak_destroy(tess_bench_peak **p);

/* Set the OpenBLAS thread count (1 unless the driver asks for more) and print the library's
 * facts as "blas_config", "blas_core" and "blas_threads" lines on stdout. */
void tess_bench_blas_setup(int threads);

/* Value in KiB of a "Vm...:" field of /proc/self/status (e.g. "VmRSS", "VmHWM"), or -1 if the
 * file or field is missing. */
int64_t tess_bench_proc_kib(const char *field);
/* Reset VmHWM to the current VmRSS (writes "5" to /proc/self/clear_refs, Linux >= 4.0).
 * false if the kernel refused; VmHWM then keeps the peak since the process started. */
bool tess_bench_reset_hwm(void);

/* Parse "--key value" options: *value = the integer after argv[i] == key, in [lo, hi].
 * TESS_ERR_ARG naming the key for a missing, malformed or out-of-range value, or an unknown
 * option. keys and values: nkeys entries; values keep their defaults when absent. */
tess_status tess_bench_parse_ints(int argc, char **argv, const char *const *keys, int64_t *values,
                                  int nkeys, int64_t lo, int64_t hi);

/* The transformer shapes of the block and memory benchmarks (bench_block_torch.py mirrors them):
 * pre-norm RMSNorm, RoPE, causal, SwiGLU, vocabulary V = 64, T = 256, C = 256, NH = 4 (hs 64),
 * F = 704 (8C/3 rounded up to a multiple of 64), L layers. */
tess_tfm_config tess_bench_tfm_config(int64_t L);

/* Deterministic token ids and next-token targets for n = B*T tokens of vocabulary V:
 * ids[i] = (7*i + 3) mod V, targets[i] = (7*i + 10) mod V (the next id in the stream).
 * bench_block_torch.py uses the same tokens. */
void tess_bench_tokens(int32_t *ids, int32_t *targets, int64_t n, int64_t V);

#endif
