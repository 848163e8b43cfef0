/* ckpt_hash.c - the position-keyed checkpoint hashes (v1 and v2) and the model digest (see
 * ckpt.h). v2's 4- and 8-byte loops are written so that GCC 12 vectorises them at -O2 as well as
 * -O3 (check with -fopt-info-vec; the byte loop, for short strings, only at -O3): 32-bit lanes
 * only, a key that advances by a constant, a main loop whose trip count is a multiple of 16 (the
 * -O2 cost model vectorises only loops that need no scalar epilogue), and word loops kept out of
 * line (inlined into the segment loop, GCC loses that the trip count is a multiple of 16). */
#include <stdio.h>
#include <string.h>

#include "io/ckpt.h"

/* --- tess-poshash64-v1 (format_version 1; read only) --------------------------------------- */

static const uint64_t hash_gamma = 0x9E3779B97F4A7C15ull;

/* SplitMix64's finaliser: a bijection on 64-bit words with full avalanche. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t term_v1(uint64_t index, uint64_t bits) {
    return mix64(mix64(index + hash_gamma) ^ bits);
}

static uint64_t hash_add_v1(uint64_t acc, const unsigned char *p, size_t elem_size, uint64_t i0,
                            int64_t n) {
    switch (elem_size) {
    case 1:
        for (int64_t j = 0; j < n; j++) acc += term_v1(i0 + (uint64_t)j, p[j]);
        break;
    case 4:
        for (int64_t j = 0; j < n; j++) {
            uint32_t x;
            memcpy(&x, p + 4 * j, 4); /* the value's bit pattern, whatever the host byte order */
            acc += term_v1(i0 + (uint64_t)j, x);
        }
        break;
    default:
        for (int64_t j = 0; j < n; j++) {
            uint64_t x;
            memcpy(&x, p + 8 * j, 8);
            acc += term_v1(i0 + (uint64_t)j, x);
        }
        break;
    }
    return acc;
}

/* --- tess-poshash32x-v2 (format_version 2) ------------------------------------------------- */

static const uint32_t key_lo = 0x9E3779B1u, key_hi = 0x85EBCA77u;

/* murmur3's 32-bit finaliser: a bijection on 32-bit words. */
static inline uint32_t fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    return h ^ (h >> 16);
}

/* In the functions below the words have indices k0, k0 + 1, ... that all share k0 >> 32, so the
 * key of word k0 + j is (kl + j * key_lo) ^ kh in 32-bit arithmetic. */

__attribute__((noinline)) static uint64_t words_v2_u8(const unsigned char *p, uint32_t kl,
                                                   uint32_t kh, int64_t n) {
    const int64_t m = n & ~(int64_t)15;
    uint64_t s = 0;
    uint32_t k = kl;
    for (int64_t j = 0; j < m; j++) {
        s += fmix32(p[j] ^ k ^ kh);
        k += key_lo;
    }
    for (int64_t j = m; j < n; j++) {
        s += fmix32(p[j] ^ k ^ kh);
        k += key_lo;
    }
    return s;
}

__attribute__((noinline)) static uint64_t words_v2_u32(const unsigned char *p, uint32_t kl,
                                                   uint32_t kh, int64_t n) {
    const int64_t m = n & ~(int64_t)15;
    uint64_t s = 0;
    uint32_t k = kl;
    for (int64_t j = 0; j < m; j++) {
        uint32_t x;
        memcpy(&x, p + 4 * j, 4); /* the value's bit pattern, whatever the host byte order */
        s += fmix32(x ^ k ^ kh);
        k += key_lo;
    }
    for (int64_t j = m; j < n; j++) {
        uint32_t x;
        memcpy(&x, p + 4 * j, 4);
        s += fmix32(x ^ k ^ kh);
        k += key_lo;
    }
    return s;
}

/* n 8-byte elements: low word first, then high word. */
__attribute__((noinline)) static uint64_t words_v2_u64(const unsigned char *p, uint32_t kl,
                                                   uint32_t kh, int64_t n) {
    const int64_t m = n & ~(int64_t)15;
    uint64_t s = 0;
    uint32_t k = kl;
    for (int64_t j = 0; j < m; j++) {
        uint64_t x;
        memcpy(&x, p + 8 * j, 8);
        s += (uint64_t)fmix32((uint32_t)x ^ k ^ kh) +
             fmix32((uint32_t)(x >> 32) ^ (k + key_lo) ^ kh);
        k += 2 * key_lo;
    }
    for (int64_t j = m; j < n; j++) {
        uint64_t x;
        memcpy(&x, p + 8 * j, 8);
        s += (uint64_t)fmix32((uint32_t)x ^ k ^ kh) +
             fmix32((uint32_t)(x >> 32) ^ (k + key_lo) ^ kh);
        k += 2 * key_lo;
    }
    return s;
}

static uint64_t hash_add_v2(uint64_t acc, const unsigned char *p, size_t elem_size, uint64_t i0,
                            int64_t n) {
    const uint64_t wpe = elem_size == 8 ? 2 : 1; /* words per element */
    while (n > 0) {
        /* split where the word index crosses a multiple of 2^32 (k >> 32 changes); a multiple
         * of 2^32 is even, so an element's two words never straddle it */
        const uint64_t k0 = i0 * wpe;
        const int64_t room = (int64_t)(((UINT64_C(1) << 32) - (k0 & 0xFFFFFFFFu)) / wpe);
        const int64_t seg = n < room ? n : room;
        const uint32_t kl = (uint32_t)k0 * key_lo, kh = (uint32_t)(k0 >> 32) * key_hi;
        if (elem_size == 1)
            acc += words_v2_u8(p, kl, kh, seg);
        else if (elem_size == 4)
            acc += words_v2_u32(p, kl, kh, seg);
        else
            acc += words_v2_u64(p, kl, kh, seg);
        p += (size_t)seg * elem_size;
        i0 += (uint64_t)seg;
        n -= seg;
    }
    return acc;
}

uint64_t tess_ckpt_hash_add(tess_ckpt_hash_scheme h, uint64_t acc, const void *data,
                            size_t elem_size, int64_t first, int64_t n) {
    TESS_ASSERT(elem_size == 1 || elem_size == 4 || elem_size == 8);
    TESS_ASSERT(h == TESS_CKPT_HASH_V1 || h == TESS_CKPT_HASH_V2);
    return h == TESS_CKPT_HASH_V1 ? hash_add_v1(acc, data, elem_size, (uint64_t)first, n)
                                  : hash_add_v2(acc, data, elem_size, (uint64_t)first, n);
}

uint64_t tess_ckpt_hash_final(uint64_t acc, int64_t count) {
    return mix64(acc ^ (uint64_t)count);
}

const char *tess_ckpt_hash_name(tess_ckpt_hash_scheme h) {
    return h == TESS_CKPT_HASH_V1 ? TESS_CKPT_HASH_ALGORITHM_V1 : TESS_CKPT_HASH_ALGORITHM;
}

/* FNV-1a over the structure text "name:d0,d1,...;" of every entry. */
uint64_t tess_ckpt_model_digest(const tess_registry *reg) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; reg && i < tess_registry_count(reg); i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        char text[TESS_REGISTRY_NAME_MAX + 16 * TESS_MAX_DIMS + 4];
        int len = snprintf(text, sizeof text, "%s:", e->name);
        for (int d = 0; d < e->ndim; d++)
            len += snprintf(text + len, sizeof text - (size_t)len, "%s%lld", d ? "," : "",
                            (long long)e->shape[d]);
        len += snprintf(text + len, sizeof text - (size_t)len, ";");
        for (int k = 0; k < len; k++) {
            h ^= (unsigned char)text[k];
            h *= 0x100000001b3ull;
        }
    }
    return h;
}
