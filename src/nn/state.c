/* state.c - the list of checkpointable arrays (see state.h). */
#include "nn/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tess_state {
    tess_state_entry *entries;
    int64_t count, capacity;
};

tess_status tess_state_create(tess_state **st) {
    TESS_REQUIRE(st, TESS_ERR_ARG, "st must not be NULL");
    *st = calloc(1, sizeof **st);
    TESS_REQUIRE(*st, TESS_ERR_MEM, "out of memory allocating a state list");
    return TESS_OK;
}

void tess_state_destroy(tess_state **st) {
    if (!st || !*st) return;
    free((*st)->entries);
    free(*st);
    *st = NULL;
}

/* Components of [A-Za-z0-9_.]+ joined by single '/'; length checked by the caller. */
static bool name_is_valid(const char *name) {
    bool component_empty = true;
    for (const char *c = name; *c; c++) {
        if (*c == '/') {
            if (component_empty) return false;
            component_empty = true;
        } else if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                   (*c >= '0' && *c <= '9') || *c == '_' || *c == '.') {
            component_empty = false;
        } else {
            return false;
        }
    }
    return !component_empty;
}

/* true if a names a group of b ("x/y" of "x/y/z") */
static bool is_group_of(const char *a, const char *b) {
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && b[n] == '/';
}

static tess_status add_entry(tess_state *st, const char *name, tess_dtype dtype, int ndim,
                             const int64_t *shape, const tess_layout *l, void *data,
                             bool private_to_rank, uint32_t tags) {
    TESS_REQUIRE(st && name && shape && l, TESS_ERR_ARG, "NULL argument");
    const size_t len = strlen(name);
    TESS_REQUIRE(len > 0 && len < TESS_STATE_NAME_MAX, TESS_ERR_ARG,
                 "state entry '%.64s': name length %zu not in 1..%d", name, len,
                 TESS_STATE_NAME_MAX - 1);
    TESS_REQUIRE(name_is_valid(name), TESS_ERR_ARG,
                 "state entry '%s': bad name (want [A-Za-z0-9_.] components joined by single '/')",
                 name);
    TESS_REQUIRE(dtype == TESS_F32 || dtype == TESS_F64 || dtype == TESS_I64, TESS_ERR_ARG,
                 "state entry '%s': unknown dtype %d", name, (int)dtype);
    char what[TESS_STATE_NAME_MAX + 16];
    snprintf(what, sizeof what, "state entry '%s'", name);
    TESS_CHECK(tess_layout_check(what, ndim, shape, l));
    for (int64_t i = 0; i < st->count; i++) {
        const char *other = st->entries[i].name;
        TESS_REQUIRE(strcmp(other, name) != 0, TESS_ERR_ARG, "state entry '%s' added twice", name);
        TESS_REQUIRE(!is_group_of(other, name) && !is_group_of(name, other), TESS_ERR_ARG,
                     "state entries '%s' and '%s': one names a group of the other", other, name);
    }
    if (st->count == st->capacity) {
        const int64_t cap = st->capacity ? 2 * st->capacity : 32;
        tess_state_entry *grown = realloc(st->entries, (size_t)cap * sizeof *grown);
        TESS_REQUIRE(grown, TESS_ERR_MEM, "state entry '%s': out of memory growing the list to %lld",
                     name, (long long)cap);
        st->entries = grown;
        st->capacity = cap;
    }
    tess_state_entry *e = &st->entries[st->count];
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, len + 1);
    e->dtype = dtype;
    e->ndim = ndim;
    e->layout = *l;
    e->global_count = 1;
    for (int d = 0; d < ndim; d++) {
        e->shape[d] = shape[d];
        e->global_count *= shape[d];
    }
    tess_layout_local_shape(l, ndim, e->shape, e->local_shape, e->global_offset);
    e->local_count = tess_layout_local_count(l, ndim, e->shape);
    e->private_to_rank = private_to_rank;
    e->tags = tags;
    e->data = data;
    TESS_REQUIRE(data || e->local_count == 0, TESS_ERR_ARG,
                 "state entry '%s': NULL data for %lld local elements", name,
                 (long long)e->local_count);
    st->count++;
    return TESS_OK;
}

tess_status tess_state_add(tess_state *st, const char *name, tess_dtype dtype, int ndim,
                           const int64_t *shape, const tess_layout *l, void *data) {
    TESS_CHECK(add_entry(st, name, dtype, ndim, shape, l, data, false, 0));
    return TESS_OK;
}

tess_status tess_state_add_private(tess_state *st, const char *name, tess_dtype dtype, int ndim,
                                   const int64_t *shape, void *data) {
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(add_entry(st, name, dtype, ndim, shape, &rep, data, true, 0));
    return TESS_OK;
}

tess_status tess_state_add_i64(tess_state *st, const char *name, int64_t *value) {
    const int64_t one[1] = {1};
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(add_entry(st, name, TESS_I64, 1, one, &rep, value, false, 0));
    return TESS_OK;
}

tess_status tess_state_add_f64(tess_state *st, const char *name, double *value) {
    const int64_t one[1] = {1};
    const tess_layout rep = tess_layout_replicated();
    TESS_CHECK(add_entry(st, name, TESS_F64, 1, one, &rep, value, false, 0));
    return TESS_OK;
}

/* Entries of reg as "<prefix>/<name>" at base + flat_offset. */
static tess_status add_flat(tess_state *st, const char *prefix, const tess_registry *reg,
                            float *base, bool private_to_rank) {
    TESS_REQUIRE(st && prefix && reg, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(tess_registry_is_final(reg), TESS_ERR_ARG, "'%s': the registry is not finalized",
                 prefix);
    TESS_REQUIRE(base || tess_registry_local_total(reg) == 0, TESS_ERR_ARG,
                 "'%s': no buffer for the registry's %lld local elements", prefix,
                 (long long)tess_registry_local_total(reg));
    for (int64_t i = 0; i < tess_registry_count(reg); i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        char name[TESS_STATE_NAME_MAX];
        const int n = snprintf(name, sizeof name, "%s/%s", prefix, e->name);
        TESS_REQUIRE(n > 0 && n < (int)sizeof name, TESS_ERR_ARG,
                     "state entry '%s/%s': name longer than %d bytes", prefix, e->name,
                     TESS_STATE_NAME_MAX - 1);
        TESS_CHECK(add_entry(st, name, TESS_F32, e->ndim, e->shape, &e->layout,
                             base + e->flat_offset, private_to_rank, e->tags));
    }
    return TESS_OK;
}

tess_status tess_state_add_registry(tess_state *st, const char *prefix, const tess_registry *reg,
                                    bool private_to_rank) {
    TESS_CHECK(add_flat(st, prefix, reg, reg ? tess_registry_params(reg) : NULL, private_to_rank));
    return TESS_OK;
}

tess_status tess_state_add_like(tess_state *st, const char *prefix, const tess_registry *reg,
                                float *buf, bool private_to_rank) {
    TESS_CHECK(add_flat(st, prefix, reg, buf, private_to_rank));
    return TESS_OK;
}

int64_t tess_state_count(const tess_state *st) { return st->count; }

const tess_state_entry *tess_state_get(const tess_state *st, int64_t i) {
    TESS_ASSERT(i >= 0 && i < st->count);
    return &st->entries[i];
}

int64_t tess_state_find(const tess_state *st, const char *name) {
    for (int64_t i = 0; i < st->count; i++)
        if (strcmp(st->entries[i].name, name) == 0) return i;
    return -1;
}
