/* rng.h - counter-based random numbers: Random123 Philox4x32-10, keyed by (seed, stream).
 *
 * A draw is a pure function of (key, ctr, idx): no state, no sequence. ctr names WHAT is drawn
 * (a purpose and a step, see tess_rng_ctr), idx names WHICH element (a global parameter index, a
 * sample number, a direction component), never which rank draws it. So a rank filling its shard
 * [first, first + n) of a tensor gets exactly the values a 1-rank fill of the whole tensor has,
 * and a restart that restores the step continues the exact stream.
 *
 * Bits: element idx uses Philox block (idx / 2) of counter (block, ctr) - 128 bits, two elements
 * per block. Uniform and u64 draws take the 64 bits of half (idx % 2); a normal takes a whole
 * block, Box-Muller in double, the cosine half for even idx and the sine half for odd idx.
 * Hence the single draws equal the fills element by element (before rounding to float), and
 * uniform, u64 and normal draws under one ctr are NOT independent: give each purpose its own ctr.
 */
#ifndef TESS_CORE_RNG_H
#define TESS_CORE_RNG_H

#include <stdint.h>

/* The Philox key: one seed per run, one stream per independent consumer (model init, data,
 * dropout, ...) or per federated client. */
typedef struct {
    uint32_t seed;
    uint32_t stream;
} tess_rng_key;

/* Purposes: the top 16 bits of a counter. One list for the whole code base so purposes never
 * collide; add new ones at the end (the numbers are part of restart determinism). */
typedef enum {
    TESS_RNG_PURPOSE_TEST = 0,   /* unit tests */
    TESS_RNG_PURPOSE_INIT = 1,   /* parameter initialisation; n = 0 */
    TESS_RNG_PURPOSE_DATA = 2,   /* data order; n = epoch */
    TESS_RNG_PURPOSE_DROPOUT = 3, /* dropout masks; n = step */
    TESS_RNG_PURPOSE_ZO = 4,     /* zero-order directions; n = step */
    TESS_RNG_PURPOSE_NOISE = 5,  /* simulated noise, e.g. Kalman process/measurement; n = step */
    TESS_RNG_PURPOSE_JITTER = 6, /* MoE router input jitter; n = step */
} tess_rng_purpose;

/* Counter for (purpose, n): purpose in the top 16 bits, n (a step, an epoch, a layer) in the low
 * 48. n must be < 2^48 (TESS_ASSERT). */
uint64_t tess_rng_ctr(tess_rng_purpose purpose, uint64_t n);

/* The raw Philox4x32-10 block: out = philox4x32({block_lo, block_hi, ctr_lo, ctr_hi},
 * {seed, stream}). */
void tess_rng_block(tess_rng_key key, uint64_t ctr, uint64_t block, uint32_t out[4]);

/* Blocks first .. first + n - 1 of counter ctr into out (n, 4): out[4 b .. 4 b + 3] =
 * tess_rng_block(key, ctr, first + b), computed in a loop that vectorises (for masks and other
 * bulk draws that take their own bits from the blocks). */
void tess_rng_blocks(tess_rng_key key, uint64_t ctr, uint64_t first, int64_t n, uint32_t *out);

/* 64 random bits for element idx. */
uint64_t tess_rng_u64(tess_rng_key key, uint64_t ctr, uint64_t idx);
/* Uniform in [a, b) for element idx (53 random bits). */
double tess_rng_uniform(tess_rng_key key, uint64_t ctr, uint64_t idx, double a, double b);
/* Normal(mean, std^2) for element idx. */
double tess_rng_normal(tess_rng_key key, uint64_t ctr, uint64_t idx, double mean, double std);

/* out[j] = tess_rng_uniform(key, ctr, first + j, a, b) rounded to float, j in [0, n) (bitwise; the
 * Philox blocks drawn in runs through tess_rng_blocks, the conversion vectorised); rounding
 * may give b itself when b - a is tiny relative to b. */
void tess_rng_fill_uniform(tess_rng_key key, uint64_t ctr, int64_t first, int64_t n, float *out,
                           float a, float b);
/* out[j] = tess_rng_normal(key, ctr, first + j, mean, std) rounded to float, j in [0, n). */
void tess_rng_fill_normal(tess_rng_key key, uint64_t ctr, int64_t first, int64_t n, float *out,
                          float mean, float std);

/* perm (n): a uniformly random permutation of 0..n-1 (Fisher-Yates; step i uses
 * tess_rng_u64(key, ctr, i) mod (i + 1), bias below (i + 1) / 2^64). Depends only on key, ctr
 * and n, so every rank computes the same data order. */
void tess_rng_permutation(tess_rng_key key, uint64_t ctr, int64_t *perm, int64_t n);

#endif
