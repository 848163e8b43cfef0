/* test_state - the checkpointable state list (nn/state.h), one rank, no MPI calls: entries added
 * one by one (shapes, local blocks and offsets of each layout, dtype, borrowed data), the
 * rejections and their messages (bad names, duplicates, a name that is a group of another, bad
 * dtypes, shapes and layouts, NULL data), registry and like-registry entries (names, shapes,
 * layouts, tags, data at the flat offsets), private flags, lookup (also over thousands of entries),
 * and a NULL-safe destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/registry.h" /* tess_registry_* */
#include "nn/state.h"    /* tess_state_* */
#include "tess_test.h"

/* The add is refused with TESS_ERR_ARG and needle in the record. */
static void expect_refused(tess_status s, const char *needle, const char *what) {
    const char *t = tess_error_text();
    TESS_TEST_CHECK(s == TESS_ERR_ARG, "%s: status %s, expected TESS_ERR_ARG", what,
                    tess_status_name(s));
    TESS_TEST_CHECK(strstr(t, needle), "%s: no '%s' in:\n%s", what, needle, t);
    tess_error_clear();
}

static void test_entries(void) {
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_state_create(&st) == TESS_OK && tess_state_count(st) == 0, "create");
    float w[12];
    double x[3];
    int64_t step = 0;
    double lr = 0.0;
    const int64_t ws[2] = {6, 4}, xs[1] = {7};
    /* rows 2..3 of 6 (part 1 of 3), and the last part of an uneven split */
    const tess_layout sh = tess_layout_sharded(0, 3, 1), last = tess_layout_sharded(0, 3, 2);
    TESS_TEST_CHECK(tess_state_add(st, "params/layers.0.w", TESS_F32, 2, ws, &sh, w) == TESS_OK,
                    "add sharded: %s", tess_error_text());
    TESS_TEST_CHECK(tess_state_add(st, "zo/x", TESS_F64, 1, xs, &last, x) == TESS_OK,
                    "add uneven: %s", tess_error_text());
    TESS_TEST_CHECK(tess_state_add_i64(st, "optim/step_count", &step) == TESS_OK &&
                        tess_state_add_f64(st, "run/lr", &lr) == TESS_OK,
                    "add scalars: %s", tess_error_text());
    TESS_TEST_CHECK(tess_state_count(st) == 4, "count %lld", (long long)tess_state_count(st));
    const tess_state_entry *e = tess_state_get(st, 0);
    TESS_TEST_CHECK(strcmp(e->name, "params/layers.0.w") == 0 && e->dtype == TESS_F32 &&
                        e->ndim == 2 && e->shape[0] == 6 && e->shape[1] == 4 &&
                        e->local_shape[0] == 2 && e->local_shape[1] == 4 &&
                        e->global_offset[0] == 2 && e->global_offset[1] == 0 &&
                        e->global_count == 24 && e->local_count == 8 && e->data == w &&
                        !e->private_to_rank && e->tags == 0 &&
                        e->layout.kind == TESS_LAYOUT_SHARDED,
                    "sharded entry: local [%lld,%lld] at %lld, %lld of %lld",
                    (long long)e->local_shape[0], (long long)e->local_shape[1], (long long)e->global_offset[0],
                    (long long)e->local_count, (long long)e->global_count);
    e = tess_state_get(st, 1); /* 7 rows over 3 parts of ceil(7/3) = 3: the last holds 1 */
    TESS_TEST_CHECK(e->dtype == TESS_F64 && e->local_shape[0] == 1 && e->global_offset[0] == 6 &&
                        e->local_count == 1,
                    "uneven entry: %lld rows at %lld", (long long)e->local_shape[0],
                    (long long)e->global_offset[0]);
    e = tess_state_get(st, 2);
    TESS_TEST_CHECK(e->dtype == TESS_I64 && e->ndim == 1 && e->shape[0] == 1 &&
                        e->local_count == 1 && e->data == &step &&
                        e->layout.kind == TESS_LAYOUT_REPLICATED,
                    "i64 scalar");
    TESS_TEST_CHECK(tess_state_get(st, 3)->dtype == TESS_F64 && tess_state_get(st, 3)->data == &lr,
                    "f64 scalar");
    TESS_TEST_CHECK(tess_state_find(st, "zo/x") == 1 && tess_state_find(st, "zo") == -1 &&
                        tess_state_find(st, "run/lr") == 3 && tess_state_find(st, "nope") == -1,
                    "find");

    /* names */
    expect_refused(tess_state_add_i64(st, "optim/step_count", &step), "state entry "
                   "'optim/step_count' added twice", "duplicate");
    expect_refused(tess_state_add_i64(st, "zo/x/more", &step),
                   "state entries 'zo/x' and 'zo/x/more': one names a group of the other",
                   "under an entry");
    expect_refused(tess_state_add_i64(st, "optim", &step),
                   "state entries 'optim/step_count' and 'optim': one names a group of the other",
                   "a group of an entry");
    const char *bad[] = {"", "/a", "a/", "a//b", "a b", "a-b", "a/b\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "bad name %zu", i);
        expect_refused(tess_state_add_i64(st, bad[i], &step), i == 0 ? "name length 0" : "bad name",
                       what);
    }
    char longname[TESS_STATE_NAME_MAX + 1];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    expect_refused(tess_state_add_i64(st, longname, &step), "name length 192 not in 1..191",
                   "long name");
    longname[TESS_STATE_NAME_MAX - 1] = '\0'; /* 191 bytes: the longest name */
    TESS_TEST_CHECK(tess_state_add_i64(st, longname, &step) == TESS_OK, "191-byte name: %s",
                    tess_error_text());

    /* dtype, shape, layout, data */
    const int64_t zero[1] = {0}, three[3] = {2, 3, 4};
    const tess_layout rep = tess_layout_replicated(), dim5 = tess_layout_sharded(5, 2, 0),
                      part9 = tess_layout_sharded(0, 2, 9),
                      bc = tess_layout_block_cyclic(1, 1, 0, 0, 2, 2);
    expect_refused(tess_state_add(st, "t/dtype", (tess_dtype)7, 1, xs, &rep, x),
                   "state entry 't/dtype': unknown dtype 7", "dtype");
    expect_refused(tess_state_add(st, "t/ndim", TESS_F64, 0, xs, &rep, x),
                   "state entry 't/ndim': ndim 0 not in 1..4", "ndim");
    expect_refused(tess_state_add(st, "t/dim0", TESS_F64, 1, zero, &rep, x),
                   "state entry 't/dim0': dimension 0 is 0, must be > 0", "empty dimension");
    expect_refused(tess_state_add(st, "t/dim5", TESS_F64, 1, xs, &dim5, x),
                   "state entry 't/dim5': bad sharded layout (dim 5 of 1, part 0 of 2)",
                   "shard dimension");
    expect_refused(tess_state_add(st, "t/part9", TESS_F64, 1, xs, &part9, x),
                   "bad sharded layout (dim 0 of 1, part 9 of 2)", "shard part");
    expect_refused(tess_state_add(st, "t/bc3", TESS_F32, 3, three, &bc, w),
                   "state entry 't/bc3': block-cyclic layout needs 2 dims, got 3",
                   "block-cyclic");
    expect_refused(tess_state_add(st, "t/null", TESS_F64, 1, xs, &rep, NULL),
                   "state entry 't/null': NULL data for 7 local elements", "NULL data");
    TESS_TEST_CHECK(tess_state_count(st) == 5, "refused adds left %lld entries",
                    (long long)tess_state_count(st));
    tess_state_destroy(&st);
    TESS_TEST_CHECK(st == NULL, "destroy sets NULL");
    tess_state_destroy(&st);
    tess_state_destroy(NULL);
}

static void test_private(void) {
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_state_create(&st) == TESS_OK, "create");
    float w[15];
    const int64_t ws[2] = {5, 3};
    TESS_TEST_CHECK(tess_state_add_private(st, "clients/4/w", TESS_F32, 2, ws, w) == TESS_OK,
                    "add private: %s", tess_error_text());
    const tess_state_entry *e = tess_state_get(st, 0);
    TESS_TEST_CHECK(e->private_to_rank && e->layout.kind == TESS_LAYOUT_REPLICATED &&
                        e->local_shape[0] == 5 && e->local_shape[1] == 3 && e->local_count == 15 &&
                        e->global_offset[0] == 0,
                    "a private entry is held whole by its rank");
    expect_refused(tess_state_add_private(st, "clients/4/w", TESS_F32, 2, ws, w),
                   "state entry 'clients/4/w' added twice", "private duplicate");
    expect_refused(tess_state_add_private(st, "clients/4", TESS_F32, 2, ws, w),
                   "one names a group of the other", "private group");
    tess_state_destroy(&st);
}

static void test_registry(void) {
    tess_registry *reg = NULL;
    const int64_t a[2] = {4, 3}, b[1] = {5};
    const tess_layout sh = tess_layout_sharded(1, 3, 2), rep = tess_layout_replicated();
    int64_t ia, ib;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "layers.0.w", 2, a, &sh, &ia) == TESS_OK &&
                        tess_registry_add(reg, "layers.0.b", 1, b, &rep, &ib) == TESS_OK &&
                        tess_registry_set_tags(reg, ib, TESS_TAG_SHARED | TESS_TAG_DENSE) ==
                            TESS_OK,
                    "registry: %s", tess_error_text());
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_state_create(&st) == TESS_OK, "create");
    expect_refused(tess_state_add_registry(st, "params", reg, false),
                   "'params': the registry is not finalized", "not finalized");
    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK, "finalize");
    float *m = NULL;
    TESS_TEST_CHECK(tess_registry_alloc_state(reg, &m) == TESS_OK, "alloc");
    TESS_TEST_CHECK(tess_state_add_registry(st, "params", reg, false) == TESS_OK &&
                        tess_state_add_like(st, "opt/m", reg, m, false) == TESS_OK &&
                        tess_state_add_registry(st, "clients/0/params", reg, true) == TESS_OK,
                    "add registry: %s", tess_error_text());
    TESS_TEST_CHECK(tess_state_count(st) == 6, "count %lld", (long long)tess_state_count(st));
    const char *names[6] = {"params/layers.0.w",      "params/layers.0.b",
                            "opt/m/layers.0.w",       "opt/m/layers.0.b",
                            "clients/0/params/layers.0.w", "clients/0/params/layers.0.b"};
    for (int64_t i = 0; i < 6 && i < tess_state_count(st); i++) {
        const tess_state_entry *e = tess_state_get(st, i);
        const tess_registry_entry *r = tess_registry_get(reg, i % 2);
        const float *base = i / 2 == 1 ? m : tess_registry_params(reg);
        bool same = strcmp(e->name, names[i]) == 0 && e->dtype == TESS_F32 &&
                    e->ndim == r->ndim && e->layout.kind == r->layout.kind &&
                    e->local_count == r->local_count && e->tags == r->tags &&
                    e->data == base + r->flat_offset && e->private_to_rank == (i >= 4);
        for (int d = 0; d < r->ndim; d++)
            same = same && e->shape[d] == r->shape[d] && e->local_shape[d] == r->local_shape[d] &&
                   e->global_offset[d] == r->global_offset[d];
        TESS_TEST_CHECK(same, "entry %lld: %s (expected %s like %s)", (long long)i, e->name,
                        names[i], r->name);
    }
    /* layers.0.w: dimension 1 of 3 split over 3 parts, this is part 2 -> column 2 */
    const tess_state_entry *w = tess_state_get(st, 0);
    TESS_TEST_CHECK(w->local_shape[0] == 4 && w->local_shape[1] == 1 && w->global_offset[1] == 2,
                    "sharded registry entry: local [%lld,%lld] at column %lld",
                    (long long)w->local_shape[0], (long long)w->local_shape[1],
                    (long long)w->global_offset[1]);
    TESS_TEST_CHECK(tess_state_get(st, 1)->tags == (TESS_TAG_SHARED | TESS_TAG_DENSE),
                    "tags copied from the registry");
    expect_refused(tess_state_add_registry(st, "params", reg, false),
                   "state entry 'params/layers.0.w' added twice", "registry added twice");
    expect_refused(tess_state_add_like(st, "opt/v", reg, NULL, false),
                   "'opt/v': no buffer for the registry's 9 local elements",
                   "like without a buffer");
    char prefix[TESS_STATE_NAME_MAX];
    memset(prefix, 'p', sizeof prefix - 5);
    prefix[sizeof prefix - 5] = '\0';
    expect_refused(tess_state_add_registry(st, prefix, reg, false), "name longer than 191 bytes",
                   "long prefix");
    free(m);
    tess_state_destroy(&st);
    tess_registry_destroy(&reg);
}

/* Many entries (the name index grows several times): every one found at its index, the
 * duplicate and group rules still caught against early and late entries. */
static void test_many(void) {
    enum { N = 3000 };
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_state_create(&st) == TESS_OK, "create");
    static int64_t v[N];
    char name[64];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "g%d/layers.%d/w", i % 7, i);
        TESS_TEST_CHECK(tess_state_add_i64(st, name, &v[i]) == TESS_OK, "add %s: %s", name,
                        tess_error_text());
    }
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "g%d/layers.%d/w", i % 7, i);
        TESS_TEST_CHECK(tess_state_find(st, name) == i, "find %s: %lld", name,
                        (long long)tess_state_find(st, name));
    }
    TESS_TEST_CHECK(tess_state_find(st, "g0/layers.0") == -1 && tess_state_find(st, "g0") == -1 &&
                        tess_state_find(st, "g0/layers.0/w/x") == -1 &&
                        tess_state_find(st, "g1/layers.0/w") == -1,
                    "groups and near names are not entries");
    expect_refused(tess_state_add_i64(st, "g2/layers.2998/w", &v[0]),
                   "state entry 'g2/layers.2998/w' added twice", "late duplicate");
    expect_refused(tess_state_add_i64(st, "g0/layers.7", &v[0]),
                   "state entries 'g0/layers.7/w' and 'g0/layers.7': one names a group",
                   "group of an early entry");
    expect_refused(tess_state_add_i64(st, "g3/layers.2999/w/x", &v[0]),
                   "state entries 'g3/layers.2999/w' and 'g3/layers.2999/w/x'",
                   "under a late entry");
    TESS_TEST_CHECK(tess_state_add_i64(st, "g0/layers.7x", &v[0]) == TESS_OK &&
                        tess_state_find(st, "g0/layers.7x") == N,
                    "a name that only starts like a group: %s", tess_error_text());
    tess_state_destroy(&st);
}

int main(void) {
    test_entries();
    test_private();
    test_registry();
    test_many();
    return tess_test_finish("test_state");
}
