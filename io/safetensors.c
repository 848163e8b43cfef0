/* safetensors.c - safetensors writer (see safetensors.h). */
#include "io/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tess_safetensors_dtype(tess_dtype t) {
    return t == TESS_F32 ? "F32" : t == TESS_F64 ? "F64" : "I64";
}

static int64_t entry_bytes(const tess_safetensors_entry *e) {
    int64_t n = (int64_t)tess_dtype_size(e->dtype);
    for (int d = 0; d < e->ndim; d++) n *= e->shape[d];
    return n;
}

/* The header object: tensors in entry order, then __metadata__. */
static tess_status build_header(const tess_safetensors_entry *e, int64_t n,
                                const char *const *meta, int nmeta, json_t **out) {
    json_t *h = json_object();
    TESS_REQUIRE(h, TESS_ERR_MEM, "out of memory for the safetensors header");
    int64_t offset = 0;
    tess_status s = TESS_OK;
    for (int64_t i = 0; i < n && s == TESS_OK; i++) {
        bool shape_ok = e[i].ndim >= 0 && e[i].ndim <= TESS_SAFETENSORS_MAX_DIMS;
        for (int d = 0; shape_ok && d < e[i].ndim; d++) shape_ok = e[i].shape[d] >= 0;
        if (!e[i].name[0] || strcmp(e[i].name, "__metadata__") == 0 || !shape_ok ||
            json_object_get(h, e[i].name)) {
            s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                "safetensors entry %lld '%s': empty, reserved or duplicate name, "
                                "or bad shape", (long long)i, e[i].name);
            break;
        }
        json_t *shape = json_array();
        for (int d = 0; d < e[i].ndim; d++) json_array_append_new(shape, json_integer(e[i].shape[d]));
        const int64_t end = offset + entry_bytes(&e[i]);
        json_t *t = json_pack("{s:s, s:o, s:[I, I]}", "dtype", tess_safetensors_dtype(e[i].dtype),
                              "shape", shape, "data_offsets", (json_int_t)offset, (json_int_t)end);
        if (!t || json_object_set_new(h, e[i].name, t) != 0)
            s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                "out of memory for the safetensors header");
        offset = end;
    }
    if (s == TESS_OK && nmeta > 0) {
        json_t *m = json_object();
        for (int k = 0; m && k < nmeta; k++) json_object_set_new(m, meta[2 * k], json_string(meta[2 * k + 1]));
        if (!m || json_object_set_new(h, "__metadata__", m) != 0)
            s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                "out of memory for the safetensors metadata");
    }
    if (s != TESS_OK) {
        json_decref(h);
        return s;
    }
    *out = h;
    return TESS_OK;
}

/* Header length and text, then every entry's bytes, into the open file f. */
static tess_status write_body(FILE *f, const char *path, const tess_safetensors_entry *e,
                              int64_t n, const char *text, tess_safetensors_read_fn read,
                              void *ctx) {
    size_t len = strlen(text);
    const size_t padded = (len + 7) / 8 * 8;
    unsigned char le[8];
    for (int b = 0; b < 8; b++) le[b] = (unsigned char)((uint64_t)padded >> (8 * b));
    bool ok = fwrite(le, 1, 8, f) == 8 && fwrite(text, 1, len, f) == len;
    for (; ok && len < padded; len++) ok = fputc(' ', f) != EOF;
    TESS_REQUIRE(ok, TESS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    for (int64_t i = 0; i < n; i++) {
        const size_t bytes = (size_t)entry_bytes(&e[i]);
        if (e[i].data) {
            TESS_REQUIRE(fwrite(e[i].data, 1, bytes, f) == bytes, TESS_ERR_IO,
                         "cannot write '%s': %s", path, strerror(errno));
            continue;
        }
        TESS_REQUIRE(read, TESS_ERR_ARG, "safetensors entry '%s' has no data", e[i].name);
        void *buf = malloc(bytes ? bytes : 1);
        TESS_REQUIRE(buf, TESS_ERR_MEM, "out of memory for '%s' (%zu bytes)", e[i].name, bytes);
        tess_status s = read(ctx, i, buf);
        const bool written = s == TESS_OK && fwrite(buf, 1, bytes, f) == bytes;
        free(buf);
        TESS_CHECK(s);
        TESS_REQUIRE(written, TESS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    return TESS_OK;
}

tess_status tess_safetensors_write(const char *path, const tess_safetensors_entry *e, int64_t n,
                                   const char *const *meta, int nmeta,
                                   tess_safetensors_read_fn read, void *ctx) {
    const uint16_t probe = 1;
    TESS_REQUIRE(*(const unsigned char *)&probe == 1, TESS_ERR_ARG,
                 "safetensors: a big-endian host is not supported");
    TESS_REQUIRE(n >= 0 && nmeta >= 0, TESS_ERR_ARG, "safetensors: %lld entries, %d metadata",
                 (long long)n, nmeta);
    json_t *h = NULL;
    TESS_CHECK(build_header(e, n, meta, nmeta, &h));
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    TESS_REQUIRE(text, TESS_ERR_MEM, "cannot format the safetensors header");
    char tmp[4200];
    const int w = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = w > 0 && w < (int)sizeof tmp ? fopen(tmp, "wb") : NULL;
    if (!f) {
        free(text);
        TESS_REQUIRE(false, TESS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    tess_status s = write_body(f, path, e, n, text, read, ctx);
    free(text);
    const bool closed = fclose(f) == 0;
    if (s == TESS_OK && (!closed || rename(tmp, path) != 0))
        s = tess_error_push(TESS_ERR_IO, __FILE__, __LINE__, __func__, "cannot write '%s': %s",
                            path, strerror(errno));
    if (s != TESS_OK) remove(tmp);
    return s;
}
