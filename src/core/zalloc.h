/* zalloc.h - zeroed, 64-byte-aligned buffers whose pages the kernel supplies on first touch.
 *
 * aligned_alloc + memset writes every page at allocation: a set-up that reserves gigabytes of
 * activations or parameters spends seconds in page faults before it has used a byte of them
 * (tinylm --check with 1024 layers: 16 of 22 s). calloc returns fresh mmap'ed pages for large
 * sizes without writing them (they read as zero), so the cost moves to the first write, which
 * the run does anyway. The address space is still reserved at once: ulimit -v and an
 * impossible size fail here, not later.
 *
 *   float *p = tess_zalloc(n * sizeof(float));   NULL if the system refuses
 *   ...
 *   tess_zalloc_free(p);
 *
 * Not collective; thread-safe as malloc is. Memory from tess_zalloc must be released with
 * tess_zalloc_free, never free.
 */
#ifndef TESS_CORE_ZALLOC_H
#define TESS_CORE_ZALLOC_H

#include <stddef.h>

enum { TESS_ZALLOC_ALIGN = 64 };

/* bytes (0 allowed: a valid, unique pointer) of zeroed memory aligned to TESS_ZALLOC_ALIGN, or
 * NULL if they cannot be allocated (or bytes is too large to add the alignment to). */
void *tess_zalloc(size_t bytes);
/* Release p from tess_zalloc; NULL-safe. */
void tess_zalloc_free(void *p);

#endif
