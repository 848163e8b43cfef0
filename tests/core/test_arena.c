/* test_arena.c - alignment, zeroed memory, overflow message, mark/reset, high-water mark, and a
 * measuring arena that sizes a real one for the same allocation sequence. */
#include <stdint.h>
#include <string.h>

#include "core/arena.h" /* tess_arena_* */
#include "tess_test.h"

/* The allocation sequence of a pretend model: two persistent buffers, then scratch. */
static tess_status alloc_model(tess_arena *a, float **w, void **s) {
    float *x;
    TESS_CHECK(tess_arena_floats(a, 100, w));
    TESS_CHECK(tess_arena_alloc(a, 10, s));
    size_t m = tess_arena_mark(a);
    TESS_CHECK(tess_arena_floats(a, 300, &x));
    tess_arena_reset(a, m);
    TESS_CHECK(tess_arena_floats(a, 50, &x));
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_arena a;
    TESS_TEST_CHECK(tess_arena_init(&a, 1000) == TESS_OK, "init");
    TESS_TEST_CHECK(a.capacity == 1024, "capacity rounded to 64: %zu", a.capacity);
    void *p, *q;
    TESS_TEST_CHECK(tess_arena_alloc(&a, 10, &p) == TESS_OK, "alloc 10");
    TESS_TEST_CHECK(tess_arena_alloc(&a, 1, &q) == TESS_OK, "alloc 1");
    TESS_TEST_CHECK((uintptr_t)p % 64 == 0 && (uintptr_t)q % 64 == 0, "64-byte aligned");
    TESS_TEST_CHECK((char *)q - (char *)p == 64, "bump by rounded size");
    float *f;
    TESS_TEST_CHECK(tess_arena_floats(&a, 3, &f) == TESS_OK && (uintptr_t)f % 64 == 0,
                    "floats aligned");
    TESS_TEST_CHECK(f[0] == 0.0f && f[2] == 0.0f, "memory zeroed at init");
    size_t mark = tess_arena_mark(&a);
    TESS_TEST_CHECK(mark == 192, "mark after three allocations: %zu", mark);
    TESS_TEST_CHECK(tess_arena_alloc(&a, 500, &p) == TESS_OK, "alloc 500");
    tess_arena_reset(&a, mark);
    TESS_TEST_CHECK(tess_arena_mark(&a) == 192, "reset to mark");
    TESS_TEST_CHECK(tess_arena_high_water(&a) == 192 + 512, "high water kept: %zu",
                    tess_arena_high_water(&a));
    p = &a;
    tess_status s = tess_arena_alloc(&a, 2000, &p);
    TESS_TEST_CHECK(s == TESS_ERR_MEM && p == NULL, "overflow is TESS_ERR_MEM, ptr NULL");
    TESS_TEST_CHECK(strstr(tess_error_text(), "arena: needed 2000 bytes, 832 left of 1024"),
                    "message names the sizes: %s", tess_error_text());
    tess_error_clear();
    TESS_TEST_CHECK(tess_arena_floats(&a, -1, &f) == TESS_ERR_MEM, "negative count refused");
    TESS_TEST_CHECK(tess_arena_alloc(&a, SIZE_MAX, &p) == TESS_ERR_MEM, "huge size refused");
    tess_error_clear();
    TESS_TEST_CHECK(tess_arena_alloc(&a, 832, &p) == TESS_OK, "exactly the rest fits");
    TESS_TEST_CHECK(tess_arena_alloc(&a, 0, &p) == TESS_OK, "zero bytes always fit");
    TESS_TEST_CHECK(tess_arena_alloc(&a, 1, &p) == TESS_ERR_MEM, "then it is full");
    tess_error_clear();
    tess_arena_free(&a);
    TESS_TEST_CHECK(a.base == NULL && a.capacity == 0, "free zeroes the struct");

    /* measure, then size a real arena exactly */
    tess_arena m;
    float *w;
    tess_arena_init_measure(&m);
    TESS_TEST_CHECK(alloc_model(&m, &w, &p) == TESS_OK && w == NULL && p == NULL,
                    "measuring hands out NULL");
    size_t need = tess_arena_high_water(&m);
    TESS_TEST_CHECK(need == 448 + 64 + 1216, "measured %zu bytes", need);
    tess_arena_free(&m);
    TESS_TEST_CHECK(tess_arena_init(&a, need) == TESS_OK, "init measured size");
    TESS_TEST_CHECK(alloc_model(&a, &w, &p) == TESS_OK && w != NULL, "same code fits: %s",
                    tess_error_text());
    TESS_TEST_CHECK(tess_arena_high_water(&a) == need, "same high water");
    tess_arena_free(&a);
    int rc = tess_test_finish("arena");
    MPI_Finalize();
    return rc;
}
