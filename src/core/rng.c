/* rng.c - Philox draws named by counters (see rng.h). */
#include "core/rng.h"

#include <Random123/philox.h>
#include <math.h>

#include "core/status.h" /* TESS_ASSERT */

static const double two_pi = 6.283185307179586476925286766559;
static const double two_m53 = 1.0 / 9007199254740992.0; /* 2^-53 */

uint64_t tess_rng_ctr(tess_rng_purpose purpose, uint64_t n) {
    TESS_ASSERT(n < ((uint64_t)1 << 48));
    return ((uint64_t)purpose << 48) | n;
}

void tess_rng_block(tess_rng_key key, uint64_t ctr, uint64_t block, uint32_t out[4]) {
    philox4x32_ctr_t c = {{(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)ctr,
                           (uint32_t)(ctr >> 32)}};
    philox4x32_key_t k = {{key.seed, key.stream}};
    philox4x32_ctr_t r = philox4x32(c, k);
    for (int i = 0; i < 4; i++) out[i] = r.v[i];
}

void tess_rng_blocks(tess_rng_key key, uint64_t ctr, uint64_t first, int64_t n, uint32_t *out) {
    /* Philox4x32-10 written out over a run of blocks (Random123's constants and round order),
     * one block per iteration with no cross-iteration state: the loop vectorises. */
    TESS_ASSERT(n >= 0);
    const uint32_t c2 = (uint32_t)ctr, c3 = (uint32_t)(ctr >> 32);
    for (int64_t b = 0; b < n; b++) {
        const uint64_t blk = first + (uint64_t)b;
        uint32_t x0 = (uint32_t)blk, x1 = (uint32_t)(blk >> 32), x2 = c2, x3 = c3;
        uint32_t k0 = key.seed, k1 = key.stream;
        for (int r = 0; r < 10; r++) {
            const uint64_t p0 = (uint64_t)0xD2511F53u * x0, p1 = (uint64_t)0xCD9E8D57u * x2;
            const uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0, y1 = (uint32_t)p1;
            const uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1, y3 = (uint32_t)p0;
            x0 = y0, x1 = y1, x2 = y2, x3 = y3;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        out[4 * b] = x0, out[4 * b + 1] = x1, out[4 * b + 2] = x2, out[4 * b + 3] = x3;
    }
}

static uint64_t half64(const uint32_t w[4], int half) {
    return (uint64_t)w[2 * half] | ((uint64_t)w[2 * half + 1] << 32);
}

/* [0, 1) from the top 53 bits. */
static double unit_open1(uint64_t bits) { return (double)(bits >> 11) * two_m53; }

/* The two normals of one block: z[0] for even idx, z[1] for odd. u1 in (0, 1] avoids log(0). */
static void box_muller(const uint32_t w[4], double z[2]) {
    double u1 = (double)((half64(w, 0) >> 11) + 1) * two_m53;
    double u2 = unit_open1(half64(w, 1));
    double r = sqrt(-2.0 * log(u1));
    z[0] = r * cos(two_pi * u2);
    z[1] = r * sin(two_pi * u2);
}

uint64_t tess_rng_u64(tess_rng_key key, uint64_t ctr, uint64_t idx) {
    uint32_t w[4];
    tess_rng_block(key, ctr, idx / 2, w);
    return half64(w, (int)(idx % 2));
}

double tess_rng_uniform(tess_rng_key key, uint64_t ctr, uint64_t idx, double a, double b) {
    return a + (b - a) * unit_open1(tess_rng_u64(key, ctr, idx));
}

double tess_rng_normal(tess_rng_key key, uint64_t ctr, uint64_t idx, double mean, double std) {
    uint32_t w[4];
    double z[2];
    tess_rng_block(key, ctr, idx / 2, w);
    box_muller(w, z);
    return mean + std * z[idx % 2];
}

/* Blocks per chunk of tess_rng_fill_uniform: 2 draws each, on the stack (1 KiB). */
enum { FILL_BLOCKS = 64 };

void tess_rng_fill_uniform(tess_rng_key key, uint64_t ctr, int64_t first, int64_t n, float *out,
                           float a, float b) {
    TESS_ASSERT(first >= 0 && n >= 0);
    const double lo = a, width = (double)b - (double)a;
    if (n == 0) return;
    int64_t j = 0;
    if (first % 2 == 1) { /* the odd element that starts the range: the upper half of its block */
        out[j++] = (float)tess_rng_uniform(key, ctr, (uint64_t)first, a, b);
    }
    /* whole blocks in chunks: Philox through tess_rng_blocks, then the same double arithmetic
     * as tess_rng_uniform on every half, in a loop that vectorises; bitwise the single draws */
    uint32_t w[4 * FILL_BLOCKS]; /* (FILL_BLOCKS, 4) */
    while (n - j >= 2) {
        const int64_t nb = (n - j) / 2 < FILL_BLOCKS ? (n - j) / 2 : FILL_BLOCKS;
        tess_rng_blocks(key, ctr, (uint64_t)(first + j) / 2, nb, w);
        for (int64_t i = 0; i < 2 * nb; i++) {
            const uint64_t bits = (uint64_t)w[2 * i] | ((uint64_t)w[2 * i + 1] << 32);
            out[j + i] = (float)(lo + width * unit_open1(bits));
        }
        j += 2 * nb;
    }
    if (j < n) out[j] = (float)tess_rng_uniform(key, ctr, (uint64_t)(first + j), a, b);
}

void tess_rng_fill_normal(tess_rng_key key, uint64_t ctr, int64_t first, int64_t n, float *out,
                          float mean, float std) {
    TESS_ASSERT(first >= 0 && n >= 0);
    uint32_t w[4];
    double z[2];
    for (int64_t j = 0; j < n; j++) {
        uint64_t idx = (uint64_t)(first + j);
        if (j == 0 || idx % 2 == 0) {
            tess_rng_block(key, ctr, idx / 2, w);
            box_muller(w, z);
        }
        out[j] = (float)((double)mean + (double)std * z[idx % 2]);
    }
}

void tess_rng_permutation(tess_rng_key key, uint64_t ctr, int64_t *perm, int64_t n) {
    TESS_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(tess_rng_u64(key, ctr, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
