/* state.c - the list of checkpointable arrays (see state.h). */
#include "nn/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names and groups of the entries, hashed, so that an add checks uniqueness and the group
 * rule in O(name length) instead of against every entry (a 1024-layer model with its optimizer
 * moments lists ~30 000 entries). A key is the first len bytes of entries[entry].name: the whole
 * name (name[len] == '\0') or one of its groups (name[len] == '/'), each group once. */
typedef struct {
    int64_t entry; /* -1: empty slot */
    size_t len;
} name_key;

struct tess_state {
    tess_state_entry *entries;
    int64_t count, capacity;
    name_key *keys; /* open addressing, linear probing; nkeys < keys_cap / 2 */
    int64_t nkeys, keys_cap;
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
    free((*st)->keys);
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

/* FNV-1a of s[0..len) */
static uint64_t hash(const char *s, size_t len) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* The slot of key s[0..len): the one holding it, or the empty slot where it would go.
 * keys_cap > 0. */
static name_key *find_key(const tess_state *st, const char *s, size_t len) {
    for (uint64_t i = hash(s, len);; i++) {
        name_key *k = &st->keys[i & (uint64_t)(st->keys_cap - 1)];
        if (k->entry < 0) return k;
        if (k->len == len && memcmp(st->entries[k->entry].name, s, len) == 0) return k;
    }
}

/* The entry whose name or group s[0..len) is, or -1. */
static int64_t find_entry(const tess_state *st, const char *s, size_t len) {
    return st->keys_cap ? find_key(st, s, len)->entry : -1;
}

/* Room for `more` keys, keeping the table at most half full. */
static tess_status reserve_keys(tess_state *st, int64_t more) {
    if (2 * (st->nkeys + more) < st->keys_cap) return TESS_OK;
    int64_t cap = st->keys_cap ? st->keys_cap : 64;
    while (2 * (st->nkeys + more) >= cap) cap *= 2;
    name_key *grown = malloc((size_t)cap * sizeof *grown);
    TESS_REQUIRE(grown, TESS_ERR_MEM, "out of memory growing a state's name index to %lld",
                 (long long)cap);
    for (int64_t i = 0; i < cap; i++) grown[i] = (name_key){.entry = -1};
    name_key *old = st->keys;
    const int64_t old_cap = st->keys_cap;
    st->keys = grown;
    st->keys_cap = cap;
    for (int64_t i = 0; i < old_cap; i++)
        if (old[i].entry >= 0)
            *find_key(st, st->entries[old[i].entry].name, old[i].len) = old[i];
    free(old);
    return TESS_OK;
}

/* Index entry i: its name and every group of it not indexed yet (reserve_keys first). */
static void index_entry(tess_state *st, int64_t i) {
    const char *name = st->entries[i].name;
    for (size_t len = 1;; len++) {
        if (name[len] != '/' && name[len] != '\0') continue;
        name_key *k = find_key(st, name, len);
        if (k->entry < 0) {
            *k = (name_key){.entry = i, .len = len};
            st->nkeys++;
        }
        if (name[len] == '\0') return;
    }
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
    /* Unique, and no group of an entry names an entry: name is neither an entry nor a group
     * of one, and none of name's groups is an entry. */
    int64_t other = find_entry(st, name, len);
    TESS_REQUIRE(other < 0 || st->entries[other].name[len] != '\0', TESS_ERR_ARG,
                 "state entry '%s' added twice", name);
    int64_t groups = 0;
    for (size_t g = 1; g < len && other < 0; g++) {
        if (name[g] != '/') continue;
        groups++;
        const int64_t e = find_entry(st, name, g);
        if (e >= 0 && st->entries[e].name[g] == '\0') other = e;
    }
    TESS_REQUIRE(other < 0, TESS_ERR_ARG,
                 "state entries '%s' and '%s': one names a group of the other",
                 st->entries[other].name, name);
    TESS_CHECK(reserve_keys(st, 1 + groups));
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
    index_entry(st, st->count);
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
    const size_t len = strlen(name);
    const int64_t i = find_entry(st, name, len);
    return i >= 0 && st->entries[i].name[len] == '\0' ? i : -1;
}
