/* registry.c - named views into flat, aligned param/grad buffers (see registry.h). */
#include "nn/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"    /* tess_rng_fill_* */
#include "core/zalloc.h" /* tess_zalloc */

struct tess_registry {
    tess_registry_entry *entries;
    int64_t count, capacity;
    int64_t local_total, global_total;
    float *params, *grads; /* NULL until finalize */
    /* (count) from finalize on: entry i's gradient is zero but not yet written (a zero_deferred
     * entry after zero_grads, until its first access). Written by const accessors too: whether
     * the zeros are in memory yet is not part of the registry's observable value. */
    bool *zero_pending;
};

/* bytes for n floats, rounded up to the alignment (aligned_alloc needs a multiple), >= 1 block */
static size_t aligned_bytes(int64_t n) {
    size_t bytes = (size_t)n * sizeof(float);
    size_t a = TESS_REGISTRY_ALIGN;
    return bytes == 0 ? a : (bytes + a - 1) / a * a;
}

_Static_assert(TESS_ZALLOC_ALIGN % TESS_REGISTRY_ALIGN == 0, "the registry's alignment");

/* Zeroed; pages supplied on first touch (initialisation or the first gradient). */
static float *alloc_zeroed(int64_t n) { return tess_zalloc(aligned_bytes(n)); }

tess_status tess_registry_create(tess_registry **reg) {
    TESS_REQUIRE(reg, TESS_ERR_ARG, "reg must not be NULL");
    *reg = calloc(1, sizeof **reg);
    TESS_REQUIRE(*reg, TESS_ERR_MEM, "out of memory allocating a registry");
    return TESS_OK;
}

void tess_registry_destroy(tess_registry **reg) {
    if (!reg || !*reg) return;
    free((*reg)->entries);
    tess_zalloc_free((*reg)->params);
    tess_zalloc_free((*reg)->grads);
    free((*reg)->zero_pending);
    free(*reg);
    *reg = NULL;
}

/* Components of [A-Za-z0-9_]+ joined by single dots; length checked by the caller. */
static bool name_is_valid(const char *name) {
    bool component_empty = true;
    for (const char *c = name; *c; c++) {
        if (*c == '.') {
            if (component_empty) return false;
            component_empty = true;
        } else if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                   (*c >= '0' && *c <= '9') || *c == '_') {
            component_empty = false;
        } else {
            return false;
        }
    }
    return !component_empty;
}

tess_status tess_registry_add(tess_registry *reg, const char *name, int ndim, const int64_t *shape,
                              const tess_layout *l, int64_t *index) {
    TESS_REQUIRE(reg && name && shape && l, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(!reg->params, TESS_ERR_ARG, "'%s': registry already finalized", name);
    size_t len = strlen(name);
    TESS_REQUIRE(len > 0 && len < TESS_REGISTRY_NAME_MAX, TESS_ERR_ARG,
                 "'%.64s': name length %zu not in 1..%d", name, len, TESS_REGISTRY_NAME_MAX - 1);
    TESS_REQUIRE(name_is_valid(name), TESS_ERR_ARG,
                 "'%s': bad name (want [A-Za-z0-9_] components joined by single dots)", name);
    TESS_REQUIRE(tess_registry_find(reg, name) < 0, TESS_ERR_ARG, "'%s': duplicate name", name);
    char what[TESS_REGISTRY_NAME_MAX + 2];
    snprintf(what, sizeof what, "'%s'", name);
    TESS_CHECK(tess_layout_check(what, ndim, shape, l));

    if (reg->count == reg->capacity) {
        int64_t cap = reg->capacity ? 2 * reg->capacity : 16;
        tess_registry_entry *grown = realloc(reg->entries, (size_t)cap * sizeof *grown);
        TESS_REQUIRE(grown, TESS_ERR_MEM, "'%s': out of memory growing the registry to %lld",
                     name, (long long)cap);
        reg->entries = grown;
        reg->capacity = cap;
    }
    tess_registry_entry *e = &reg->entries[reg->count];
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, len + 1);
    e->ndim = ndim;
    e->layout = *l;
    e->global_count = 1;
    for (int d = 0; d < ndim; d++) {
        e->shape[d] = shape[d];
        e->global_count *= shape[d];
    }
    tess_layout_local_shape(l, ndim, e->shape, e->local_shape, e->global_offset);
    e->local_count = tess_layout_local_count(l, ndim, e->shape);
    e->flat_offset = reg->local_total;
    e->dtype = TESS_F32;
    e->trainable = true;
    e->decay = ndim >= 2;
    e->init = tess_init_zeros();
    reg->local_total += e->local_count;
    reg->global_total += e->global_count;
    if (index) *index = reg->count;
    reg->count++;
    return TESS_OK;
}

tess_status tess_registry_set_trainable(tess_registry *reg, int64_t i, bool trainable) {
    TESS_REQUIRE(reg && i >= 0 && i < reg->count, TESS_ERR_ARG, "entry %lld out of range",
                 (long long)i);
    reg->entries[i].trainable = trainable;
    return TESS_OK;
}

tess_status tess_registry_set_decay(tess_registry *reg, int64_t i, bool decay) {
    TESS_REQUIRE(reg && i >= 0 && i < reg->count, TESS_ERR_ARG, "entry %lld out of range",
                 (long long)i);
    reg->entries[i].decay = decay;
    return TESS_OK;
}

static void write_pending_zero(const tess_registry *reg, int64_t i) {
    if (!reg->zero_pending || !reg->zero_pending[i]) return;
    const tess_registry_entry *e = &reg->entries[i];
    memset(reg->grads + e->flat_offset, 0, (size_t)e->local_count * sizeof(float));
    reg->zero_pending[i] = false;
}

tess_status tess_registry_set_zero_deferred(tess_registry *reg, int64_t i, bool deferred) {
    TESS_REQUIRE(reg && i >= 0 && i < reg->count, TESS_ERR_ARG, "entry %lld out of range",
                 (long long)i);
    write_pending_zero(reg, i);
    reg->entries[i].zero_deferred = deferred;
    return TESS_OK;
}

tess_status tess_registry_set_tags(tess_registry *reg, int64_t i, uint32_t tags) {
    TESS_REQUIRE(reg && i >= 0 && i < reg->count, TESS_ERR_ARG, "entry %lld out of range",
                 (long long)i);
    reg->entries[i].tags = tags;
    return TESS_OK;
}

tess_status tess_registry_set_group(tess_registry *reg, int64_t i, const struct tess_group *g) {
    TESS_REQUIRE(reg && i >= 0 && i < reg->count, TESS_ERR_ARG, "entry %lld out of range",
                 (long long)i);
    reg->entries[i].group = g;
    return TESS_OK;
}

tess_status tess_registry_set_init(tess_registry *reg, int64_t i, tess_init init) {
    TESS_REQUIRE(reg && i >= 0 && i < reg->count, TESS_ERR_ARG, "entry %lld out of range",
                 (long long)i);
    const char *name = reg->entries[i].name;
    TESS_REQUIRE(init.kind >= TESS_INIT_ZEROS && init.kind <= TESS_INIT_UNIFORM, TESS_ERR_ARG,
                 "'%s': unknown init kind %d", name, (int)init.kind);
    TESS_REQUIRE(init.kind != TESS_INIT_NORMAL || init.b >= 0.0, TESS_ERR_ARG,
                 "'%s': normal init needs std >= 0, got %g", name, init.b);
    TESS_REQUIRE(init.kind != TESS_INIT_UNIFORM || init.b >= init.a, TESS_ERR_ARG,
                 "'%s': uniform init needs lo <= hi, got [%g, %g)", name, init.a, init.b);
    reg->entries[i].init = init;
    return TESS_OK;
}

int64_t tess_registry_select(const tess_registry *reg, uint32_t all, int64_t *idx, int64_t n) {
    int64_t count = 0;
    for (int64_t i = 0; i < reg->count; i++) {
        if ((reg->entries[i].tags & all) != all) continue;
        if (idx && count < n) idx[count] = i;
        count++;
    }
    return count;
}

/* Fill n floats at p with draws first..first+n-1 of the entry's init under (key, ctr). */
static void init_run(const tess_init *in, tess_rng_key key, uint64_t ctr, int64_t first, int64_t n,
                     float *p) {
    switch (in->kind) {
    case TESS_INIT_ZEROS:
        memset(p, 0, (size_t)n * sizeof *p);
        break;
    case TESS_INIT_CONST:
        for (int64_t j = 0; j < n; j++) p[j] = (float)in->a;
        break;
    case TESS_INIT_NORMAL:
        tess_rng_fill_normal(key, ctr, first, n, p, (float)in->a, (float)in->b);
        break;
    case TESS_INIT_UNIFORM:
        tess_rng_fill_uniform(key, ctr, first, n, p, (float)in->a, (float)in->b);
        break;
    }
}

tess_status tess_registry_init_params(tess_registry *reg, uint64_t seed) {
    TESS_REQUIRE(reg && reg->params, TESS_ERR_ARG, "registry not finalized");
    const tess_rng_key key = {.seed = (uint32_t)seed, .stream = (uint32_t)(seed >> 32)};
    for (int64_t i = 0; i < reg->count; i++) {
        const tess_registry_entry *e = &reg->entries[i];
        TESS_REQUIRE(e->layout.kind != TESS_LAYOUT_BLOCK_CYCLIC || e->init.kind == TESS_INIT_ZEROS ||
                         e->init.kind == TESS_INIT_CONST,
                     TESS_ERR_ARG, "'%s': random init of a block-cyclic entry is not supported",
                     e->name);
        const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_INIT, (uint64_t)i);
        float *p = reg->params + e->flat_offset;
        if (e->local_count == 0) continue;
        /* The local block is a box of the global tensor: its rows along the last dimension are
         * contiguous runs of global indices. Walk them in row-major order. */
        const int64_t run = e->local_shape[e->ndim - 1];
        int64_t pos[TESS_MAX_DIMS] = {0};
        for (int64_t done = 0; done < e->local_count; done += run) {
            int64_t g = 0;
            for (int d = 0; d < e->ndim; d++) g = g * e->shape[d] + e->global_offset[d] + pos[d];
            init_run(&e->init, key, ctr, g, run, p + done);
            for (int d = e->ndim - 2; d >= 0; d--) { /* next row of the box */
                if (++pos[d] < e->local_shape[d]) break;
                pos[d] = 0;
            }
        }
    }
    return TESS_OK;
}

tess_status tess_registry_finalize(tess_registry *reg) {
    TESS_REQUIRE(reg, TESS_ERR_ARG, "reg must not be NULL");
    TESS_REQUIRE(!reg->params, TESS_ERR_ARG, "registry already finalized");
    reg->params = alloc_zeroed(reg->local_total);
    reg->grads = alloc_zeroed(reg->local_total);
    reg->zero_pending = calloc((size_t)(reg->count > 0 ? reg->count : 1), sizeof(bool));
    if (!reg->params || !reg->grads || !reg->zero_pending) {
        tess_zalloc_free(reg->params);
        tess_zalloc_free(reg->grads);
        free(reg->zero_pending);
        reg->params = reg->grads = NULL;
        reg->zero_pending = NULL;
        return tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                               "out of memory: 2 x %zu bytes for %lld entries",
                               aligned_bytes(reg->local_total), (long long)reg->count);
    }
    return TESS_OK;
}

bool tess_registry_is_final(const tess_registry *reg) { return reg->params != NULL; }

int64_t tess_registry_count(const tess_registry *reg) { return reg->count; }

const tess_registry_entry *tess_registry_get(const tess_registry *reg, int64_t i) {
    TESS_ASSERT(i >= 0 && i < reg->count);
    return &reg->entries[i];
}

int64_t tess_registry_find(const tess_registry *reg, const char *name) {
    for (int64_t i = 0; i < reg->count; i++)
        if (strcmp(reg->entries[i].name, name) == 0) return i;
    return -1;
}

int64_t tess_registry_local_total(const tess_registry *reg) { return reg->local_total; }
int64_t tess_registry_global_total(const tess_registry *reg) { return reg->global_total; }

float *tess_registry_params(const tess_registry *reg) { return reg->params; }
float *tess_registry_grads(const tess_registry *reg) {
    for (int64_t i = 0; reg->zero_pending && i < reg->count; i++) write_pending_zero(reg, i);
    return reg->grads;
}

float *tess_registry_grads_range(const tess_registry *reg, int64_t lo, int64_t hi) {
    TESS_ASSERT(reg->grads && 0 <= lo && lo <= hi && hi <= reg->local_total);
    for (int64_t i = 0; i < reg->count; i++) {
        const tess_registry_entry *e = &reg->entries[i];
        if (e->flat_offset < hi && e->flat_offset + e->local_count > lo) write_pending_zero(reg, i);
    }
    return reg->grads + lo;
}

float *tess_registry_param(const tess_registry *reg, int64_t i) {
    TESS_ASSERT(i >= 0 && i < reg->count);
    return reg->params ? reg->params + reg->entries[i].flat_offset : NULL;
}

float *tess_registry_grad(const tess_registry *reg, int64_t i) {
    TESS_ASSERT(i >= 0 && i < reg->count);
    if (!reg->grads) return NULL;
    write_pending_zero(reg, i);
    return reg->grads + reg->entries[i].flat_offset;
}

float *tess_registry_grad_overwrite(tess_registry *reg, int64_t i, float *beta) {
    TESS_ASSERT(i >= 0 && i < reg->count && reg->grads);
    *beta = reg->zero_pending[i] ? 0.0f : 1.0f;
    reg->zero_pending[i] = false;
    return reg->grads + reg->entries[i].flat_offset;
}

void tess_registry_zero_grads(tess_registry *reg) {
    TESS_ASSERT(reg->grads);
    /* memset each maximal run of entries whose zeroing is not deferred */
    for (int64_t i = 0; i < reg->count;) {
        if (reg->entries[i].zero_deferred) {
            reg->zero_pending[i] = reg->entries[i].local_count > 0;
            i++;
            continue;
        }
        const int64_t lo = reg->entries[i].flat_offset;
        while (i < reg->count && !reg->entries[i].zero_deferred) i++;
        const int64_t hi = i < reg->count ? reg->entries[i].flat_offset : reg->local_total;
        memset(reg->grads + lo, 0, (size_t)(hi - lo) * sizeof(float));
    }
}

tess_status tess_registry_alloc_state(const tess_registry *reg, float **buf) {
    TESS_REQUIRE(reg && buf, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(reg->params, TESS_ERR_ARG, "registry not finalized");
    /* the caller frees it with free(): aligned_alloc, not tess_zalloc */
    const size_t bytes = aligned_bytes(reg->local_total);
    *buf = aligned_alloc(TESS_REGISTRY_ALIGN, bytes);
    TESS_REQUIRE(*buf, TESS_ERR_MEM, "out of memory: %zu bytes of optimizer state", bytes);
    memset(*buf, 0, bytes);
    return TESS_OK;
}

/* "[768, 2304]" into buf */
static void format_shape(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && n < size; d++) {
        int w = snprintf(buf + n, size - n, "%s%lld", d ? ", " : "[", (long long)shape[d]);
        if (w < 0) return;
        n += (size_t)w;
    }
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* "replicated", "sharded(dim=1,part 0/4)", "block_cyclic(2x2,64x64)" into buf */
static void format_layout(char *buf, size_t size, const tess_layout *l) {
    const char *kind = tess_layout_kind_name(l->kind);
    if (l->kind == TESS_LAYOUT_SHARDED)
        snprintf(buf, size, "%s(dim=%d,part %d/%d)", kind, l->dim, l->part, l->nparts);
    else if (l->kind == TESS_LAYOUT_BLOCK_CYCLIC)
        snprintf(buf, size, "%s(%dx%d,%lldx%lld)", kind, l->nprow, l->npcol, (long long)l->mb,
                 (long long)l->nb);
    else
        snprintf(buf, size, "%s", kind);
}

tess_status tess_registry_print(const tess_registry *reg, FILE *f) {
    TESS_REQUIRE(reg && f, TESS_ERR_ARG, "NULL argument");
    int name_w = 4;
    for (int64_t i = 0; i < reg->count; i++) {
        int len = (int)strlen(reg->entries[i].name);
        if (len > name_w) name_w = len;
    }
    fprintf(f, "%5s  %-*s  %-22s  %-26s  %12s  %12s  %s\n", "#", name_w, "name", "shape", "layout",
            "local", "global", "flags");
    int64_t trainable_local = 0;
    for (int64_t i = 0; i < reg->count; i++) {
        const tess_registry_entry *e = &reg->entries[i];
        char shape[96], layout[64];
        format_shape(shape, sizeof shape, e->ndim, e->shape);
        format_layout(layout, sizeof layout, &e->layout);
        const char *flags = !e->trainable ? "frozen" : e->decay ? "decay" : "-";
        fprintf(f, "%5lld  %-*s  %-22s  %-26s  %12lld  %12lld  %s\n", (long long)i, name_w,
                e->name, shape, layout, (long long)e->local_count, (long long)e->global_count,
                flags);
        if (e->trainable) trainable_local += e->local_count;
    }
    fprintf(f, "total: %lld entries, %lld local elements (%.2f MiB per buffer), %lld global, "
               "%lld local trainable\n",
            (long long)reg->count, (long long)reg->local_total,
            (double)reg->local_total * sizeof(float) / (1024.0 * 1024.0),
            (long long)reg->global_total, (long long)trainable_local);
    TESS_REQUIRE(!ferror(f), TESS_ERR_IO, "write error printing the parameter table");
    return TESS_OK;
}
