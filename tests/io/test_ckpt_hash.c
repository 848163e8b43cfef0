/* test_ckpt_hash - the position-keyed checkpoint hash (io/ckpt.h): values pinned by an independent
 * Python implementation, independent of how the elements are split among hashers, and changed by
 * every single-bit flip and by swapping two elements; the model digest follows names and shapes
 * but not layouts. */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "io/ckpt.h" /* tess_ckpt_hash_*, tess_ckpt_model_digest */
#include "tess_test.h"

static uint64_t hash_all(const float *x, int64_t n) {
    return tess_ckpt_hash_final(tess_ckpt_hash_add(0, x, sizeof *x, 0, n), n);
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

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    /* pinned values (computed with NumPy from the definition in io/ckpt.h) */
    const float three[3] = {1.0f, -2.5f, 3.25f};
    TESS_TEST_CHECK(hash_all(three, 3) == 0xdbea91fe1c1ecc48ull, "float32 hash %016llx",
                    (unsigned long long)hash_all(three, 3));
    uint64_t b = tess_ckpt_hash_final(tess_ckpt_hash_add(0, "tessera", 1, 0, 7), 7);
    TESS_TEST_CHECK(b == 0x3c0f6810b33b593eull, "byte hash %016llx", (unsigned long long)b);
    const double two[2] = {1.5, -0.0};
    uint64_t d = tess_ckpt_hash_final(tess_ckpt_hash_add(0, two, 8, 10, 2), 2);
    TESS_TEST_CHECK(d == 0xe25e6ad7ddc7fe65ull, "float64 hash from index 10 %016llx",
                    (unsigned long long)d);

    /* any split into consecutive pieces, hashed in any order, gives the same hash */
    enum { N = 1000 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.37f - 11.0f;
    const uint64_t whole = hash_all(x, N);
    for (int parts = 1; parts <= 7; parts++) {
        uint64_t acc = 0;
        for (int p = parts - 1; p >= 0; p--) {
            int64_t lo, hi;
            tess_dist_block_range(N, parts, p, &lo, &hi);
            acc = tess_ckpt_hash_add(acc, x + lo, sizeof *x, lo, hi - lo);
        }
        TESS_TEST_CHECK(tess_ckpt_hash_final(acc, N) == whole, "split into %d parts", parts);
    }
    /* every single-bit flip changes it; so does swapping two elements */
    int unchanged = 0;
    for (int i = 0; i < 64; i++)
        for (int bit = 0; bit < 32; bit++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            u ^= 1u << bit;
            float saved = x[i];
            memcpy(&x[i], &u, 4);
            unchanged += hash_all(x, N) == whole;
            x[i] = saved;
        }
    TESS_TEST_CHECK(unchanged == 0, "%d of 2048 single-bit flips left the hash unchanged",
                    unchanged);
    float t = x[5];
    x[5] = x[6];
    x[6] = t;
    TESS_TEST_CHECK(hash_all(x, N) != whole, "swapping two elements left the hash unchanged");
    TESS_TEST_CHECK(hash_all(x, N - 1) != hash_all(x, N), "the count is part of the hash");

    /* the model digest: names and shapes, not layouts */
    const uint64_t d4 = digest_of(4, tess_layout_replicated());
    TESS_TEST_CHECK(d4 == digest_of(4, tess_layout_sharded(0, 3, 1)), "digest depends on layout");
    TESS_TEST_CHECK(d4 != digest_of(5, tess_layout_replicated()), "digest ignores shapes");

    int rc = tess_test_finish("test_ckpt_hash");
    MPI_Finalize();
    return rc;
}
