/* zalloc.c - zeroed aligned buffers (see zalloc.h). The calloc'ed block holds a header slot and
 * up to TESS_ZALLOC_ALIGN - 1 bytes of padding before the aligned pointer; the slot just below
 * that pointer keeps the block's address for tess_zalloc_free. */
#include "core/zalloc.h"

#include <stdint.h>
#include <stdlib.h>

void *tess_zalloc(size_t bytes) {
    const size_t extra = sizeof(void *) + TESS_ZALLOC_ALIGN - 1;
    if (bytes > SIZE_MAX - extra) return NULL;
    unsigned char *block = calloc(1, bytes + extra);
    if (!block) return NULL;
    const uintptr_t first = (uintptr_t)(block + sizeof(void *));
    void **p = (void **)(first + (TESS_ZALLOC_ALIGN - first % TESS_ZALLOC_ALIGN) %
                                     TESS_ZALLOC_ALIGN);
    p[-1] = block;
    return p;
}

void tess_zalloc_free(void *p) {
    if (p) free(((void **)p)[-1]);
}
