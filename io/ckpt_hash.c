/* ckpt_hash.c - the position-keyed checkpoint hash and the model digest (see ckpt.h). */
#include <stdio.h>
#include <string.h>

#include "io/ckpt.h"

static const uint64_t hash_gamma = 0x9E3779B97F4A7C15ull;

/* SplitMix64's finaliser: a bijection on 64-bit words with full avalanche. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t term(uint64_t index, uint64_t bits) {
    return mix64(mix64(index + hash_gamma) ^ bits);
}

uint64_t tess_ckpt_hash_add(uint64_t acc, const void *data, size_t elem_size, int64_t first,
                            int64_t n) {
    const unsigned char *p = data;
    uint64_t i0 = (uint64_t)first;
    switch (elem_size) {
    case 1:
        for (int64_t j = 0; j < n; j++) acc += term(i0 + (uint64_t)j, p[j]);
        break;
    case 4:
        for (int64_t j = 0; j < n; j++) {
            uint32_t x;
            memcpy(&x, p + 4 * j, 4); /* the value's bit pattern, whatever the host byte order */
            acc += term(i0 + (uint64_t)j, x);
        }
        break;
    default:
        TESS_ASSERT(elem_size == 8);
        for (int64_t j = 0; j < n; j++) {
            uint64_t x;
            memcpy(&x, p + 8 * j, 8);
            acc += term(i0 + (uint64_t)j, x);
        }
        break;
    }
    return acc;
}

uint64_t tess_ckpt_hash_final(uint64_t acc, int64_t count) { return mix64(acc ^ (uint64_t)count); }

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
