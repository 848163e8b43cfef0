/* arena.h - one buffer sized up front, carved by 64-byte-aligned bump allocation.
 *
 * Setup allocates activations and workspaces from an arena; the step loop never calls malloc
 * (as ggml reserves its compute buffers). Scratch space that lives for one phase is taken after a mark and given back by
 * resetting to it. Running out is an error that says how much was needed and how much was left.
 *
 * Sizing: run the same allocation code once on a measuring arena (tess_arena_init_measure), which
 * hands out NULL pointers and only counts, then init a real arena of tess_arena_high_water bytes.
 *
 *   tess_arena a;
 *   TESS_CHECK(tess_arena_init(&a, bytes));
 *   float *act;
 *   TESS_CHECK(tess_arena_floats(&a, B * T * C, &act));
 *   size_t m = tess_arena_mark(&a); ... scratch ... tess_arena_reset(&a, m);
 *   tess_arena_free(&a);
 *
 * Not thread-safe; not collective. The memory is zeroed once, at init.
 */
#ifndef TESS_CORE_ARENA_H
#define TESS_CORE_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */

enum { TESS_ARENA_ALIGN = 64 };

typedef struct {
    unsigned char *base; /* NULL in measure mode */
    size_t capacity;     /* bytes; SIZE_MAX in measure mode */
    size_t used;         /* bytes handed out, a multiple of TESS_ARENA_ALIGN */
    size_t high_water;   /* largest `used` seen */
    bool measure;
} tess_arena;

/* Allocate `bytes` (rounded up to TESS_ARENA_ALIGN) of zeroed memory. TESS_ERR_MEM if the
 * system refuses, naming the size. */
tess_status tess_arena_init(tess_arena *a, size_t bytes);
/* A measuring arena: allocations succeed with *ptr = NULL and only advance the counters. */
void tess_arena_init_measure(tess_arena *a);
/* Release the buffer; the struct is zeroed. Safe on a zeroed or measuring arena. */
void tess_arena_free(tess_arena *a);

/* *ptr = the next `bytes` bytes, 64-byte aligned (bytes may be 0). TESS_ERR_MEM on overflow:
 * "arena: needed X bytes, Y left of Z". *ptr is NULL on failure and in measure mode. */
tess_status tess_arena_alloc(tess_arena *a, size_t bytes, void **ptr);
/* n floats (n >= 0), same contract. */
tess_status tess_arena_floats(tess_arena *a, int64_t n, float **ptr);

/* Current position, to pass to tess_arena_reset. */
size_t tess_arena_mark(const tess_arena *a);
/* Give back everything allocated after `mark` (mark <= used; TESS_ASSERT). Pointers handed out
 * after the mark must not be used afterwards. */
void tess_arena_reset(tess_arena *a, size_t mark);
/* Largest number of bytes ever in use: the capacity a real arena needs for the same code. */
size_t tess_arena_high_water(const tess_arena *a);

#endif
