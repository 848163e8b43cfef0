/* arena.c - bump allocation in one aligned buffer (see arena.h). */
#include "core/arena.h"

#include "core/zalloc.h" /* tess_zalloc: zeroed without touching the pages */

_Static_assert(TESS_ZALLOC_ALIGN % TESS_ARENA_ALIGN == 0, "the base carries the arena's alignment");

/* bytes rounded up to the alignment, or false if that overflows size_t. */
static bool round_up(size_t bytes, size_t *out) {
    if (bytes > SIZE_MAX - (TESS_ARENA_ALIGN - 1)) return false;
    *out = (bytes + TESS_ARENA_ALIGN - 1) / TESS_ARENA_ALIGN * TESS_ARENA_ALIGN;
    return true;
}

tess_status tess_arena_init(tess_arena *a, size_t bytes) {
    TESS_REQUIRE(a != NULL, TESS_ERR_ARG, "NULL arena");
    *a = (tess_arena){0};
    size_t cap;
    TESS_REQUIRE(round_up(bytes, &cap), TESS_ERR_MEM, "arena: %zu bytes is too large", bytes);
    if (cap > 0) {
        a->base = tess_zalloc(cap);
        TESS_REQUIRE(a->base != NULL, TESS_ERR_MEM, "arena: cannot allocate %zu bytes (%.1f MiB)",
                     cap, (double)cap / (1024.0 * 1024.0));
    }
    a->capacity = cap;
    return TESS_OK;
}

void tess_arena_init_measure(tess_arena *a) {
    *a = (tess_arena){.capacity = SIZE_MAX, .measure = true};
}

void tess_arena_free(tess_arena *a) {
    if (!a) return;
    tess_zalloc_free(a->base);
    *a = (tess_arena){0};
}

tess_status tess_arena_alloc(tess_arena *a, size_t bytes, void **ptr) {
    TESS_ASSERT(a != NULL && ptr != NULL);
    *ptr = NULL;
    size_t need;
    size_t left = a->capacity - a->used;
    TESS_REQUIRE(round_up(bytes, &need) && need <= left, TESS_ERR_MEM,
                 "arena: needed %zu bytes, %zu left of %zu", bytes, left, a->capacity);
    if (!a->measure) *ptr = a->base + a->used;
    a->used += need;
    if (a->used > a->high_water) a->high_water = a->used;
    return TESS_OK;
}

tess_status tess_arena_floats(tess_arena *a, int64_t n, float **ptr) {
    TESS_ASSERT(ptr != NULL);
    *ptr = NULL;
    TESS_REQUIRE(n >= 0 && (uint64_t)n <= SIZE_MAX / sizeof(float), TESS_ERR_MEM,
                 "arena: cannot allocate %lld floats", (long long)n);
    void *p;
    TESS_CHECK(tess_arena_alloc(a, (size_t)n * sizeof(float), &p));
    *ptr = p;
    return TESS_OK;
}

size_t tess_arena_mark(const tess_arena *a) { return a->used; }

void tess_arena_reset(tess_arena *a, size_t mark) {
    TESS_ASSERT(mark <= a->used && mark % TESS_ARENA_ALIGN == 0);
    a->used = mark;
}

size_t tess_arena_high_water(const tess_arena *a) { return a->high_water; }
