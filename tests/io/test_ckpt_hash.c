/* test_ckpt_hash - the position-keyed checkpoint hashes (io/ckpt.h), both schemes: values pinned
 * by an independent NumPy implementation (tests/io/check_h5py.py --pins), independent of how the
 * elements are split among hashers (also across the 2^32 word-index boundary of v2), and changed
 * by every single-bit flip and by swapping two elements; the model digest follows names and shapes
 * but not layouts. */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "io/ckpt.h" /* tess_ckpt_hash_*, tess_ckpt_model_digest */
#include "tess_test.h"

static uint64_t hash_all(tess_ckpt_hash_scheme h, const void *x, size_t es, int64_t first,
                         int64_t n) {
    return tess_ckpt_hash_final(tess_ckpt_hash_add(h, 0, x, es, first, n), n);
}

/* The hash of x[0..n) (elements first..) summed in `parts` consecutive pieces, last first. */
static uint64_t hash_split(tess_ckpt_hash_scheme h, const void *x, size_t es, int64_t first,
                           int64_t n, int parts) {
    uint64_t acc = 0;
    for (int p = parts - 1; p >= 0; p--) {
        int64_t lo, hi;
        tess_par_block_range(n, parts, p, &lo, &hi);
        acc = tess_ckpt_hash_add(h, acc, (const char *)x + (size_t)lo * es, es, first + lo,
                                 hi - lo);
    }
    return tess_ckpt_hash_final(acc, n);
}

static uint64_t digest_of(int64_t rows, tess_layout l) {
    tess_registry *reg = NULL;
    const int64_t shape[2] = {rows, 3}, bias[1] = {3};
    const tess_layout rep = tess_layout_replicated();
    uint64_t d = 0;
    if (tess_registry_create(&reg) == TESS_OK &&
        tess_registry_add(reg, "layers.0.w", 2, shape, &l, NULL) == TESS_OK &&
        tess_registry_add(reg, "layers.0.b", 1, bias, &rep, NULL) == TESS_OK)
        d = tess_ckpt_model_digest(reg);
    tess_registry_destroy(&reg);
    return d;
}

/* Splits, single-bit flips, a swap and the count, for scheme h. */
static void check_properties(tess_ckpt_hash_scheme h) {
    enum { N = 1000 };
    float x[N];
    double y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.37f - 11.0f;
        y[i] = (double)i * 1.37 - 5.0;
    }
    const int64_t near = (INT64_C(1) << 32) - 300; /* v2: float32 words cross 2^32 */
    const int64_t near8 = (INT64_C(1) << 31) - 300; /* v2: float64 words cross 2^32 */
    const uint64_t whole = hash_all(h, x, 4, 0, N);
    for (int parts = 1; parts <= 7; parts++) {
        TESS_TEST_CHECK(hash_split(h, x, 4, 0, N, parts) == whole, "v%d: split into %d parts",
                        (int)h, parts);
        TESS_TEST_CHECK(hash_split(h, x, 4, near, N, parts) == hash_all(h, x, 4, near, N),
                        "v%d: float32 near 2^32, split into %d parts", (int)h, parts);
        TESS_TEST_CHECK(hash_split(h, y, 8, near8, N, parts) == hash_all(h, y, 8, near8, N),
                        "v%d: float64 near 2^31, split into %d parts", (int)h, parts);
        TESS_TEST_CHECK(hash_split(h, "tessera checkpoint", 1, 3, 18, parts) ==
                            hash_all(h, "tessera checkpoint", 1, 3, 18),
                        "v%d: bytes split into %d parts", (int)h, parts);
    }
    TESS_TEST_CHECK(hash_all(h, x, 4, near, N) != hash_all(h, x, 4, near + 1, N),
                    "v%d: the position is part of the hash", (int)h);
    int unchanged = 0;
    for (int i = 0; i < 64; i++)
        for (int bit = 0; bit < 32; bit++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            u ^= 1u << bit;
            float saved = x[i];
            memcpy(&x[i], &u, 4);
            unchanged += hash_all(h, x, 4, 0, N) == whole;
            x[i] = saved;
        }
    TESS_TEST_CHECK(unchanged == 0, "v%d: %d of 2048 single-bit flips left the hash unchanged",
                    (int)h, unchanged);
    const uint64_t whole8 = hash_all(h, y, 8, 0, N);
    unchanged = 0;
    for (int i = 0; i < 8; i++)
        for (int bit = 0; bit < 64; bit++) {
            uint64_t u;
            memcpy(&u, &y[i], 8);
            u ^= UINT64_C(1) << bit;
            double saved = y[i];
            memcpy(&y[i], &u, 8);
            unchanged += hash_all(h, y, 8, 0, N) == whole8;
            y[i] = saved;
        }
    TESS_TEST_CHECK(unchanged == 0, "v%d: %d of 512 float64 bit flips left the hash unchanged",
                    (int)h, unchanged);
    float t = x[5];
    x[5] = x[6];
    x[6] = t;
    TESS_TEST_CHECK(hash_all(h, x, 4, 0, N) != whole, "v%d: swapping two elements left the hash "
                    "unchanged", (int)h);
    TESS_TEST_CHECK(hash_all(h, x, 4, 0, N - 1) != hash_all(h, x, 4, 0, N),
                    "v%d: the count is part of the hash", (int)h);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    /* pinned values (python3 tests/io/check_h5py.py --pins) */
    const float three[3] = {1.0f, -2.5f, 3.25f};
    const double two[2] = {1.5, -0.0};
    const struct {
        tess_ckpt_hash_scheme h;
        const void *data;
        size_t es;
        int64_t first, n;
        uint64_t expect;
        const char *what;
    } pins[] = {
        {TESS_CKPT_HASH_V1, three, 4, 0, 3, 0xdbea91fe1c1ecc48ull, "v1 float32"},
        {TESS_CKPT_HASH_V1, "tessera", 1, 0, 7, 0x3c0f6810b33b593eull, "v1 bytes"},
        {TESS_CKPT_HASH_V1, two, 8, 10, 2, 0xe25e6ad7ddc7fe65ull, "v1 float64 from index 10"},
        {TESS_CKPT_HASH_V2, three, 4, 0, 3, 0xcc2aba1e60ab46f8ull, "v2 float32"},
        {TESS_CKPT_HASH_V2, "tessera", 1, 0, 7, 0x413b985710f49ac7ull, "v2 bytes"},
        {TESS_CKPT_HASH_V2, two, 8, 10, 2, 0xc30fa2af2a7bf29full, "v2 float64 from index 10"},
    };
    for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
        uint64_t got = hash_all(pins[i].h, pins[i].data, pins[i].es, pins[i].first, pins[i].n);
        TESS_TEST_CHECK(got == pins[i].expect, "%s hash %016llx, expected %016llx", pins[i].what,
                        (unsigned long long)got, (unsigned long long)pins[i].expect);
    }
    /* 40 float32 (bits i * 2654435761) from element 2^32 - 17: the high key changes at 2^32 */
    uint32_t ramp[40];
    for (uint32_t i = 0; i < 40; i++) ramp[i] = i * 2654435761u;
    uint64_t r = hash_all(TESS_CKPT_HASH_V2, ramp, 4, (INT64_C(1) << 32) - 17, 40);
    TESS_TEST_CHECK(r == 0x42bdc70acbbcdcc2ull, "v2 ramp across 2^32: %016llx",
                    (unsigned long long)r);
    TESS_TEST_CHECK(strcmp(tess_ckpt_hash_name(TESS_CKPT_HASH_V1), "tess-poshash64-v1") == 0 &&
                        strcmp(tess_ckpt_hash_name(TESS_CKPT_HASH_V2), "tess-poshash32x-v2") == 0,
                    "hash names");

    check_properties(TESS_CKPT_HASH_V1);
    check_properties(TESS_CKPT_HASH_V2);

    /* the model digest: names and shapes, not layouts */
    const uint64_t d4 = digest_of(4, tess_layout_replicated());
    TESS_TEST_CHECK(d4 == digest_of(4, tess_layout_sharded(0, 3, 1)), "digest depends on layout");
    TESS_TEST_CHECK(d4 != digest_of(5, tess_layout_replicated()), "digest ignores shapes");

    int rc = tess_test_finish("test_ckpt_hash");
    MPI_Finalize();
    return rc;
}
