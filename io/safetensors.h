/* safetensors.h - write tensors in the safetensors format (the format PyTorch, JAX and the
 * Hugging Face tools read; public specification: github.com/huggingface/safetensors):
 *   8 bytes   N, the header length, unsigned little-endian
 *   N bytes   a JSON object (written with jansson): per tensor
 *             "name": {"dtype": "F32"|"F64"|"I64", "shape": [...], "data_offsets": [begin, end]}
 *             and "__metadata__": {"key": "value", ...} (strings only); padded with spaces so
 *             the data starts 8-byte aligned
 *   the data  every tensor's elements, row-major, little-endian, back to back in entry order
 *             (offsets relative to the start of the data, no holes).
 * Not collective; one process writes the file. */
#ifndef TESS_IO_SAFETENSORS_H
#define TESS_IO_SAFETENSORS_H

#include <stdint.h>

#include "core/dtype.h"  /* tess_dtype */
#include "core/status.h" /* tess_status */

enum { TESS_SAFETENSORS_MAX_DIMS = 8, TESS_SAFETENSORS_NAME_MAX = 256 };

typedef struct {
    char name[TESS_SAFETENSORS_NAME_MAX]; /* unique, not "__metadata__" */
    tess_dtype dtype;
    int ndim;                             /* 0..TESS_SAFETENSORS_MAX_DIMS (0: a scalar) */
    int64_t shape[TESS_SAFETENSORS_MAX_DIMS];
    const void *data;                     /* the elements in host order, or NULL: see read */
} tess_safetensors_entry;

/* Produce entry i's elements (row-major, host order) into buf, which holds exactly its bytes. */
typedef tess_status (*tess_safetensors_read_fn)(void *ctx, int64_t i, void *buf);

/* Write n entries to path (through path.tmp + rename: a failure leaves no partial file).
 * An entry with data == NULL gets its bytes from read(ctx, i, buf), one entry at a time, so a
 * large checkpoint is never held whole. meta: nmeta key/value string pairs
 * (meta[2k], meta[2k+1]) for "__metadata__". The host must be little-endian (checked).
 * TESS_ERR_ARG for a duplicate or empty name, a bad shape or an entry without data or read;
 * TESS_ERR_IO naming the path. */
tess_status tess_safetensors_write(const char *path, const tess_safetensors_entry *e, int64_t n,
                                   const char *const *meta, int nmeta,
                                   tess_safetensors_read_fn read, void *ctx);

/* "F32", "F64" or "I64": the safetensors dtype of t. */
const char *tess_safetensors_dtype(tess_dtype t);

#endif
