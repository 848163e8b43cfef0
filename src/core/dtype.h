/* dtype.h - element types of stored state (registry entries, checkpoint arrays), stored
 * little-endian in checkpoints whatever the machine. */
#ifndef TESS_CORE_DTYPE_H
#define TESS_CORE_DTYPE_H

#include <stddef.h>

typedef enum { TESS_F32 = 0, TESS_F64, TESS_I64 } tess_dtype;

/* Bytes of one element: 4 or 8. */
static inline size_t tess_dtype_size(tess_dtype t) { return t == TESS_F32 ? 4 : 8; }
/* "f32", "f64" or "i64". */
static inline const char *tess_dtype_name(tess_dtype t) {
    return t == TESS_F32 ? "f32" : t == TESS_F64 ? "f64" : "i64";
}

#endif
