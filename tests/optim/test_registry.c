/* test_registry.c - the parameter registry: packed views, offsets, find, flags, rejected input
 * with the tensor's name in the message, local counts of sharded and block-cyclic layouts,
 * aligned zeroed buffers, the printed table, deferred zeroing. Sharding is pure arithmetic: one
 * process. */
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "nn/registry.h" /* tess_registry_* */
#include "tess_test.h"

static bool aligned(const void *p) { return (uintptr_t)p % TESS_REGISTRY_ALIGN == 0; }

/* add must fail with TESS_ERR_ARG and a message containing `needle` */
static void expect_rejected(tess_registry *reg, const char *name, int ndim, const int64_t *shape,
                            tess_layout l, const char *needle) {
    tess_error_clear();
    tess_status s = tess_registry_add(reg, name, ndim, shape, &l, NULL);
    TESS_TEST_CHECK(s == TESS_ERR_ARG, "'%s' rejected, got %s", name, tess_status_name(s));
    TESS_TEST_CHECK(strstr(tess_error_text(), needle) != NULL, "message names '%s': %s", needle,
                    tess_error_text());
    tess_error_clear();
}

static void test_rejections(tess_registry *reg) {
    const int64_t s2[2] = {3, 4}, zero[2] = {3, 0}, neg[2] = {-1, 4};
    const int64_t s5[5] = {1, 1, 1, 1, 1};
    const tess_layout rep = tess_layout_replicated();
    expect_rejected(reg, "layers.0.w", 2, s2, rep, "'layers.0.w': duplicate name");
    const char *bad[] = {"a..b", ".a", "a.", "a b", "a/b", "a-b", "w\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_rejected(reg, bad[i], 2, s2, rep, bad[i]);
    expect_rejected(reg, "", 2, s2, rep, "name length 0");
    char longname[TESS_REGISTRY_NAME_MAX + 1];
    memset(longname, 'x', TESS_REGISTRY_NAME_MAX);
    longname[TESS_REGISTRY_NAME_MAX] = '\0';
    expect_rejected(reg, longname, 2, s2, rep, "name length 128");
    expect_rejected(reg, "scalar", 0, s2, rep, "'scalar': ndim 0");
    expect_rejected(reg, "five", 5, s5, rep, "'five': ndim 5");
    expect_rejected(reg, "zero", 2, zero, rep, "'zero': dimension 1 is 0");
    expect_rejected(reg, "neg", 2, neg, rep, "'neg': dimension 0 is -1");
    expect_rejected(reg, "shard_dim", 2, s2, tess_layout_sharded(2, 2, 0), "'shard_dim'");
    expect_rejected(reg, "shard_part", 2, s2, tess_layout_sharded(0, 2, 2), "'shard_part'");
    expect_rejected(reg, "bc_1d", 1, s2, tess_layout_block_cyclic(1, 1, 0, 0, 2, 2),
                    "'bc_1d': block-cyclic layout needs 2 dims");
    expect_rejected(reg, "bc_grid", 2, s2, tess_layout_block_cyclic(2, 2, 2, 0, 2, 2),
                    "'bc_grid'");
}

/* Every part of a sharded (rows, cols) tensor: local counts add up to the global count and the
 * offsets tile the split dimension. */
static void test_shard_counts(int dim, int nparts, int64_t rows, int64_t cols) {
    const int64_t shape[2] = {rows, cols};
    int64_t sum = 0, next = 0;
    for (int part = 0; part < nparts; part++) {
        tess_registry *reg = NULL;
        tess_layout l = tess_layout_sharded(dim, nparts, part);
        int64_t lo, hi;
        tess_par_block_range(shape[dim], nparts, part, &lo, &hi);
        TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK, "create");
        TESS_TEST_CHECK(tess_registry_add(reg, "x", 2, shape, &l, NULL) == TESS_OK, "add");
        const tess_registry_entry *e = tess_registry_get(reg, 0);
        TESS_TEST_CHECK(e->local_shape[dim] == hi - lo && e->local_shape[1 - dim] == shape[1 - dim],
                        "part %d/%d local shape [%lld, %lld]", part, nparts,
                        (long long)e->local_shape[0], (long long)e->local_shape[1]);
        TESS_TEST_CHECK(e->global_offset[dim] == (hi > lo ? next : lo), "part %d offset %lld",
                        part, (long long)e->global_offset[dim]);
        TESS_TEST_CHECK(e->local_count == tess_registry_local_total(reg), "one entry: total");
        TESS_TEST_CHECK(tess_registry_global_total(reg) == rows * cols, "global total");
        sum += e->local_count;
        next += e->local_shape[dim];
        tess_registry_destroy(&reg);
    }
    TESS_TEST_CHECK(sum == rows * cols, "dim %d over %d: local counts sum to %lld, got %lld", dim,
                    nparts, (long long)(rows * cols), (long long)sum);
}

/* Declared inits: every shard of a (3, 5, 4) tensor split along dim `dim` over p parts holds
 * exactly the elements of the 1-part fill at the same global indices, and each kind fills what it
 * declares. Also tags, select and the init argument checks. */
static void test_init(int dim, int p) {
    const int64_t shape[3] = {3, 5, 4}, n = 60;
    const tess_init inits[3] = {tess_init_normal(0.5, 2.0), tess_init_uniform(-1.0, 3.0),
                                tess_init_const(7.0)};
    float whole[3][60];
    for (int part = -1; part < p; part++) { /* -1: the replicated reference */
        tess_registry *reg = NULL;
        TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK, "create");
        const tess_layout l = part < 0 ? tess_layout_replicated() : tess_layout_sharded(dim, p, part);
        const char *names[3] = {"a", "b", "c"};
        for (int i = 0; i < 3; i++) {
            TESS_TEST_CHECK(tess_registry_add(reg, names[i], 3, shape, &l, NULL) == TESS_OK, "add");
            TESS_TEST_CHECK(tess_registry_set_init(reg, i, inits[i]) == TESS_OK, "set_init");
        }
        TESS_TEST_CHECK(tess_registry_set_tags(reg, 1, TESS_TAG_SHARED | TESS_TAG_DENSE) == TESS_OK &&
                            tess_registry_set_tags(reg, 2, TESS_TAG_SHARED) == TESS_OK,
                        "set_tags");
        int64_t idx[3];
        TESS_TEST_CHECK(tess_registry_select(reg, TESS_TAG_SHARED, idx, 3) == 2 && idx[0] == 1 &&
                            idx[1] == 2 && tess_registry_select(reg, TESS_TAG_SHARED | TESS_TAG_DENSE,
                                                                NULL, 0) == 1 &&
                            tess_registry_select(reg, 0, NULL, 0) == 3,
                        "select by tags");
        TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK &&
                            tess_registry_init_params(reg, 99) == TESS_OK,
                        "init_params");
        for (int i = 0; i < 3; i++) {
            const tess_registry_entry *e = tess_registry_get(reg, i);
            const float *v = tess_registry_param(reg, i);
            if (part < 0) {
                memcpy(whole[i], v, sizeof whole[i]);
                double mean = 0.0;
                for (int64_t k = 0; k < n; k++) mean += v[k] / (double)n;
                if (i == 0) TESS_TEST_CHECK(fabs(mean - 0.5) < 1.0, "normal mean %g", mean);
                for (int64_t k = 0; k < n && i == 1; k++)
                    TESS_TEST_CHECK(v[k] >= -1.0f && v[k] <= 3.0f, "uniform range %g", v[k]);
                for (int64_t k = 0; k < n && i == 2; k++)
                    TESS_TEST_CHECK(v[k] == 7.0f, "const %g", v[k]);
                continue;
            }
            int64_t k = 0;
            for (int64_t a = 0; a < e->local_shape[0]; a++)
                for (int64_t b = 0; b < e->local_shape[1]; b++)
                    for (int64_t c = 0; c < e->local_shape[2]; c++, k++) {
                        int64_t g = ((e->global_offset[0] + a) * 5 + e->global_offset[1] + b) * 4 +
                                    e->global_offset[2] + c;
                        TESS_TEST_CHECK(v[k] == whole[i][g], "dim %d p %d part %d entry %d element %lld",
                                        dim, p, part, i, (long long)g);
                    }
        }
        tess_registry_destroy(&reg);
    }
    tess_registry *reg = NULL;
    const int64_t one[1] = {2};
    const tess_layout rep = tess_layout_replicated();
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "x", 1, one, &rep, NULL) == TESS_OK,
                    "add");
    TESS_TEST_CHECK(tess_registry_set_init(reg, 0, tess_init_normal(0.0, -1.0)) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "'x': normal init needs std >= 0"),
                    "negative std rejected: %s", tess_error_text());
    tess_error_clear();
    TESS_TEST_CHECK(tess_registry_set_init(reg, 0, tess_init_uniform(1.0, 0.0)) == TESS_ERR_ARG,
                    "empty uniform range rejected");
    tess_error_clear();
    tess_registry_destroy(&reg);
}

/* zero_deferred entries: zero_grads leaves their memory alone; grad_overwrite hands the first
 * taker beta 0 (once) and later takers 1; every other accessor (grad, grads, grads_range) writes
 * the pending zeros of what it returns and only of that, so readers see zeros either way. */
static void test_zero_deferred(void) {
    tess_registry *reg = NULL;
    const int64_t s3[1] = {3};
    const tess_layout rep = tess_layout_replicated();
    const char *names[4] = {"a", "b", "c", "d"}; /* b and d deferred */
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK, "create");
    for (int i = 0; i < 4; i++)
        TESS_TEST_CHECK(tess_registry_add(reg, names[i], 1, s3, &rep, NULL) == TESS_OK, "add");
    TESS_TEST_CHECK(tess_registry_set_zero_deferred(reg, 1, true) == TESS_OK &&
                        tess_registry_set_zero_deferred(reg, 3, true) == TESS_OK,
                    "set_zero_deferred");
    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK, "finalize");
    TESS_TEST_CHECK(tess_registry_get(reg, 1)->zero_deferred &&
                        !tess_registry_get(reg, 0)->zero_deferred,
                    "the flag is on the entries");
    float *raw = tess_registry_grads(reg); /* nothing pending yet */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 12; i++) raw[i] = 7.0f;
        tess_registry_zero_grads(reg);
        bool ok = true;
        for (int i = 0; i < 12; i++) ok = ok && raw[i] == (i / 3 % 2 ? 7.0f : 0.0f);
        TESS_TEST_CHECK(ok, "zero_grads writes only the entries not deferred");
        if (round == 0) { /* the owner of b takes it: beta 0 once, then 1; d read by grad */
            float beta = -1.0f;
            float *gb = tess_registry_grad_overwrite(reg, 1, &beta);
            TESS_TEST_CHECK(gb == raw + 3 && beta == 0.0f && raw[3] == 7.0f,
                            "overwrite of a pending entry: beta 0, nothing written");
            tess_registry_grad_overwrite(reg, 1, &beta);
            TESS_TEST_CHECK(beta == 1.0f, "a second take adds: beta 1");
            float *gd = tess_registry_grad(reg, 3);
            TESS_TEST_CHECK(gd == raw + 9 && gd[0] == 0.0f && gd[2] == 0.0f,
                            "grad writes a pending entry's zeros");
            tess_registry_grad_overwrite(reg, 3, &beta);
            TESS_TEST_CHECK(beta == 1.0f, "after a read, the owner adds");
        } else { /* a range over a's end and b: only b's zeros written; then all of them */
            float *r = tess_registry_grads_range(reg, 2, 4);
            TESS_TEST_CHECK(r == raw + 2 && raw[3] == 0.0f && raw[5] == 0.0f && raw[9] == 7.0f,
                            "grads_range writes the zeros of the entries it overlaps only");
            tess_registry_grads(reg);
            TESS_TEST_CHECK(raw[9] == 0.0f && raw[11] == 0.0f, "grads writes every pending zero");
            float beta = -1.0f;
            tess_registry_grad_overwrite(reg, 3, &beta);
            TESS_TEST_CHECK(beta == 1.0f, "nothing pending after grads");
        }
    }
    tess_registry_destroy(&reg);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_zero_deferred();
    tess_registry *reg = NULL;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK && reg, "create");

    /* name, shape, layout; expected local count and flat offset */
    const int64_t w[2] = {3, 4}, b[1] = {4}, emb[2] = {10, 3}, bc[2] = {5, 7}, empty[2] = {2, 5};
    const int64_t w4[4] = {2, 1, 3, 2};
    const tess_layout rep = tess_layout_replicated();
    const tess_layout emb_l = tess_layout_sharded(0, 4, 3);               /* rows [9,10) */
    const tess_layout bc_l = tess_layout_block_cyclic(2, 2, 0, 1, 2, 2);  /* 3 x 3 local */
    const tess_layout empty_l = tess_layout_sharded(0, 4, 3);             /* rows [2,2): none */
    struct {
        const char *name;
        int ndim;
        const int64_t *shape;
        const tess_layout *l;
        int64_t local, offset;
        bool decay;
    } want[] = {
        {"layers.0.w", 2, w, &rep, 12, 0, true},
        {"layers.0.b", 1, b, &rep, 4, 12, false},
        {"emb", 2, emb, &emb_l, 3, 16, true},
        {"blk.a_1", 2, bc, &bc_l, 9, 19, true},
        {"empty", 2, empty, &empty_l, 0, 28, true},
        {"layers.1.w4", 4, w4, &rep, 12, 28, true},
    };
    const int n = (int)(sizeof want / sizeof want[0]);
    for (int i = 0; i < n; i++) {
        int64_t index = -1;
        tess_status s = tess_registry_add(reg, want[i].name, want[i].ndim, want[i].shape, want[i].l,
                                          &index);
        TESS_TEST_CHECK(s == TESS_OK && index == i, "add '%s' -> index %lld: %s", want[i].name,
                        (long long)index, tess_error_text());
    }
    TESS_TEST_CHECK(tess_registry_count(reg) == n, "count %lld",
                    (long long)tess_registry_count(reg));
    TESS_TEST_CHECK(tess_registry_local_total(reg) == 40, "local total %lld",
                    (long long)tess_registry_local_total(reg));
    TESS_TEST_CHECK(tess_registry_global_total(reg) == 12 + 4 + 30 + 35 + 10 + 12, "global total");
    for (int i = 0; i < n; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        TESS_TEST_CHECK(strcmp(e->name, want[i].name) == 0, "entry %d is '%s'", i, e->name);
        TESS_TEST_CHECK(e->local_count == want[i].local && e->flat_offset == want[i].offset,
                        "'%s': local %lld offset %lld", e->name, (long long)e->local_count,
                        (long long)e->flat_offset);
        TESS_TEST_CHECK(e->trainable && e->decay == want[i].decay, "'%s': default flags",
                        e->name);
        TESS_TEST_CHECK(tess_registry_find(reg, want[i].name) == i, "find '%s'", want[i].name);
    }
    const tess_registry_entry *e = tess_registry_get(reg, 2);
    TESS_TEST_CHECK(e->local_shape[0] == 1 && e->local_shape[1] == 3 && e->global_offset[0] == 9 &&
                        e->global_offset[1] == 0 && e->global_count == 30,
                    "sharded entry: local [1, 3] at row 9");
    e = tess_registry_get(reg, 3);
    TESS_TEST_CHECK(e->local_shape[0] == 3 && e->local_shape[1] == 3, "block-cyclic local 3x3");
    TESS_TEST_CHECK(tess_registry_find(reg, "nope") == -1 &&
                        tess_registry_find(reg, "layers.0") == -1 &&
                        tess_registry_find(reg, "layers.0.w.x") == -1,
                    "find of unknown names gives -1");
    TESS_TEST_CHECK(tess_registry_params(reg) == NULL && tess_registry_param(reg, 0) == NULL,
                    "no storage before finalize");

    test_rejections(reg);
    TESS_TEST_CHECK(tess_registry_count(reg) == n, "rejected adds leave the registry unchanged");
    TESS_TEST_CHECK(tess_registry_set_decay(reg, 1, true) == TESS_OK &&
                        tess_registry_get(reg, 1)->decay,
                    "set_decay overrides the default");
    TESS_TEST_CHECK(tess_registry_set_decay(reg, 1, false) == TESS_OK, "set_decay back");
    TESS_TEST_CHECK(tess_registry_set_trainable(reg, 4, false) == TESS_OK &&
                        !tess_registry_get(reg, 4)->trainable,
                    "set_trainable");
    TESS_TEST_CHECK(tess_registry_set_trainable(reg, n, false) == TESS_ERR_ARG, "index range");
    tess_error_clear();

    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK && tess_registry_is_final(reg),
                    "finalize");
    float *params = tess_registry_params(reg), *grads = tess_registry_grads(reg);
    TESS_TEST_CHECK(params && grads && aligned(params) && aligned(grads), "aligned buffers");
    /* Views tile the flat buffer: writing i+1 through view i covers each element exactly once. */
    int64_t total = tess_registry_local_total(reg);
    for (int64_t k = 0; k < total; k++)
        TESS_TEST_CHECK(params[k] == 0.0f && grads[k] == 0.0f, "zeroed at %lld", (long long)k);
    for (int i = 0; i < n; i++) {
        float *p = tess_registry_param(reg, i), *g = tess_registry_grad(reg, i);
        TESS_TEST_CHECK(p == params + want[i].offset && g == grads + want[i].offset, "view %d", i);
        for (int64_t k = 0; k < want[i].local; k++) {
            p[k] += (float)(i + 1);
            g[k] = 1.0f;
        }
    }
    int64_t k = 0;
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < want[i].local; j++, k++)
            TESS_TEST_CHECK(params[k] == (float)(i + 1), "element %lld belongs to entry %d only",
                            (long long)k, i);
    tess_registry_zero_grads(reg);
    int nonzero = 0;
    for (k = 0; k < total; k++) nonzero += grads[k] != 0.0f;
    TESS_TEST_CHECK(nonzero == 0, "zero_grads: %d non-zero", nonzero);

    float *state = NULL;
    TESS_TEST_CHECK(tess_registry_alloc_state(reg, &state) == TESS_OK && aligned(state),
                    "state buffer");
    if (state) TESS_TEST_CHECK(state[0] == 0.0f && state[total - 1] == 0.0f, "state zeroed");
    free(state);

    const int64_t more[1] = {2};
    TESS_TEST_CHECK(tess_registry_add(reg, "late", 1, more, &rep, NULL) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "'late': registry already finalized"),
                    "add after finalize rejected: %s", tess_error_text());
    tess_error_clear();
    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_ERR_ARG, "finalize twice rejected");
    tess_error_clear();

    char *table = NULL;
    size_t table_len = 0;
    FILE *mem = open_memstream(&table, &table_len);
    TESS_TEST_CHECK(tess_registry_print(reg, mem) == TESS_OK, "print");
    fclose(mem);
    TESS_TEST_CHECK(table && strstr(table, "layers.0.w ") && strstr(table, "[3, 4]") &&
                        strstr(table, "sharded(dim=0,part 3/4)") &&
                        strstr(table, "block_cyclic(2x2,2x2)") && strstr(table, "frozen") &&
                        strstr(table, "total: 6 entries, 40 local elements"),
                    "table:\n%s", table ? table : "(null)");
    free(table);

    tess_registry_destroy(&reg);
    TESS_TEST_CHECK(reg == NULL, "destroy sets NULL");
    tess_registry_destroy(&reg);
    tess_registry_destroy(NULL);

    for (int p = 1; p <= 7; p++) {
        test_shard_counts(0, p, 10, 3);
        test_shard_counts(1, p, 2, 5);
    }
    for (int p = 1; p <= 4; p++)
        for (int dim = 0; dim < 3; dim++) test_init(dim, p);
    int rc = tess_test_finish("registry");
    MPI_Finalize();
    return rc;
}
