/* test_gradsync.c - bucketed overlapped gradient sync gives each entry the mean over its group
 * for any bucket size and any way of cutting the ready ranges, repeatedly (state resets per
 * step), and refuses ranges out of order. With an even number of ranks, a dp x ep mesh: dense
 * entries are averaged over all ranks and expert entries (sharded over "ep") over the
 * expert-data-parallel group (the "dp" axis), compared with the means computed here by hand, and
 * no bucket spans two groups. A zero_deferred entry whose owner never wrote its gradient this
 * step reduces as zeros, not as the stale values in its memory. argv[1]: the registered world
 * size. */
#include <stdlib.h>

#include "par/gradsync.h" /* tess_gradsync_* */
#include "par/mesh.h"     /* tess_mesh_* */
#include "par_test.h"

enum { N = 1000 };

/* Value of gradient i on rank r at step s: exact in float, so the mean is exact too. */
static float grad_value(int r, int s, int64_t i) { return (float)((r + 1) * 4 + s) + (float)(i % 17); }

/* A registry of one replicated entry of N floats (no group: the default group reduces it). */
static tess_registry *flat_registry(void) {
    tess_registry *reg = NULL;
    const int64_t shape[1] = {N};
    const tess_layout rep = tess_layout_replicated();
    DIST_TEST_OK(tess_registry_create(&reg));
    DIST_TEST_OK(tess_registry_add(reg, "w", 1, shape, &rep, NULL));
    DIST_TEST_OK(tess_registry_finalize(reg));
    return reg;
}

static void test_flat(const tess_group *g, int rank, int size) {
    tess_registry *reg = flat_registry();
    float *grads = tess_registry_grads(reg);
    const int64_t buckets[] = {1, 7, 64, 333, N, 5 * N};
    const int64_t cuts[] = {1, 13, 250, N}; /* length of each ready range, from the end */
    for (size_t bi = 0; bi < sizeof buckets / sizeof buckets[0]; bi++) {
        tess_gradsync *gs = NULL;
        TESS_TEST_CHECK(tess_gradsync_create(&gs, reg, g, buckets[bi]) == TESS_OK, "create");
        for (int step = 0; step < 4; step++) {
            const int64_t cut = cuts[step];
            for (int64_t i = 0; i < N; i++) grads[i] = grad_value(rank, step, i);
            tess_status st = TESS_OK;
            for (int64_t hi = N; hi > 0 && step < 3 && st == TESS_OK; hi -= cut) /* step 3: finish alone */
                st = tess_gradsync_ready(gs, hi - cut > 0 ? hi - cut : 0, hi);
            TESS_TEST_CHECK(st == TESS_OK && tess_gradsync_finish(gs, NULL) == TESS_OK, "finish:\n%s",
                            tess_error_text());
            int bad = 0;
            for (int64_t i = 0; i < N; i++) {
                double mean = 0.0;
                for (int r = 0; r < size; r++) mean += grad_value(r, step, i);
                mean /= size;
                bad += grads[i] != (float)mean;
            }
            TESS_TEST_CHECK(bad == 0, "bucket %lld, ranges of %lld: %d wrong means",
                            (long long)buckets[bi], (long long)cut, bad);
        }
        tess_gradsync_destroy(&gs);
        TESS_TEST_CHECK(gs == NULL, "destroy clears the handle");
    }

    tess_gradsync *gs = NULL;
    TESS_TEST_CHECK(tess_gradsync_create(&gs, reg, g, 100) == TESS_OK, "create");
    DIST_TEST_FAILS(tess_gradsync_ready(gs, 0, 500), TESS_ERR_ARG, "expected a range ending at 1000");
    TESS_TEST_CHECK(tess_gradsync_ready(gs, 500, N) == TESS_OK, "in-order range accepted");
    tess_gradsync_hook(gs, 0, 400); /* a gap: [400, 500) never reported */
    DIST_TEST_FAILS(tess_gradsync_finish(gs, NULL), TESS_ERR_ARG, "does not continue the step");
    TESS_TEST_CHECK(tess_gradsync_finish(gs, NULL) == TESS_OK, "a later step works again");
    tess_gradsync_destroy(&gs);
    DIST_TEST_FAILS(tess_gradsync_create(&gs, reg, g, 0), TESS_ERR_ARG, "bucket must hold");
    DIST_TEST_FAILS(tess_gradsync_create(&gs, reg, NULL, 10), TESS_ERR_ARG,
                    "'w' has no reduction group");
    tess_registry_destroy(&reg);
}

/* Entries "a" (written every step) and "b" (zero_deferred), over stale values: after
 * zero_grads rank 0 writes b (taken with grad_overwrite) and the other ranks leave it unwritten,
 * so b's mean is rank 0's values over the rank count: the other ranks' pending zeros must be
 * written before the reduction reads them, whether a bucket launches during backward (a
 * ready range) or at finish. */
static void test_deferred(const tess_group *g, int rank, int size) {
    tess_registry *reg = NULL;
    const int64_t shape[1] = {N};
    const tess_layout rep = tess_layout_replicated();
    int64_t ia, ib;
    DIST_TEST_OK(tess_registry_create(&reg));
    DIST_TEST_OK(tess_registry_add(reg, "a", 1, shape, &rep, &ia));
    DIST_TEST_OK(tess_registry_add(reg, "b", 1, shape, &rep, &ib));
    DIST_TEST_OK(tess_registry_set_zero_deferred(reg, ib, true));
    DIST_TEST_OK(tess_registry_finalize(reg));
    tess_gradsync *gs = NULL;
    TESS_TEST_CHECK(tess_gradsync_create(&gs, reg, g, 300) == TESS_OK, "create");
    for (int step = 0; step < 2; step++) {
        float *all = tess_registry_grads(reg);
        for (int64_t i = 0; i < 2 * N; i++) all[i] = 1e6f + (float)rank; /* stale */
        tess_registry_zero_grads(reg);
        float *ga = tess_registry_grad(reg, ia);
        for (int64_t i = 0; i < N; i++) ga[i] += grad_value(rank, step, i);
        if (rank == 0) {
            float beta;
            float *w = tess_registry_grad_overwrite(reg, ib, &beta);
            TESS_TEST_CHECK(beta == 0.0f, "b's zeros pending after zero_grads");
            for (int64_t i = 0; i < N; i++) w[i] = grad_value(0, step, i);
        }
        tess_status st = step == 0 ? tess_gradsync_ready(gs, 0, 2 * N) : TESS_OK;
        TESS_TEST_CHECK(st == TESS_OK && tess_gradsync_finish(gs, NULL) == TESS_OK, "finish:\n%s",
                        tess_error_text());
        const float *gb = tess_registry_grad(reg, ib);
        int bad = 0;
        for (int64_t i = 0; i < N; i++) {
            double mean = 0.0;
            for (int r = 0; r < size; r++) mean += grad_value(r, step, i);
            bad += ga[i] != (float)(mean / size) ||
                   gb[i] != grad_value(0, step, i) / (float)size;
        }
        TESS_TEST_CHECK(bad == 0, "step %d: %d wrong means", step, bad);
    }
    tess_gradsync_destroy(&gs);
    tess_registry_destroy(&reg);
}

/* The mixed model: dense (replicated, default group) and expert entries (rows sharded over ep,
 * reduced over the dp axis), interleaved so that the groups alternate and two expert entries
 * are adjacent. */
enum { NENT = 6 };
static const struct {
    const char *name;
    int ndim;
    int64_t shape[2];
    bool expert;
} model[NENT] = {
    {"embed", 1, {37, 0}, false},     {"l0.experts", 2, {5, 3}, true},
    {"l0.norm", 1, {11, 0}, false},   {"l1.experts", 2, {4, 6}, true},
    {"l1.experts_b", 1, {7, 0}, true}, {"head", 1, {50, 0}, false},
};

/* Gradient of global element j of entry e on world rank r at step s: exact in float. */
static float mixed_value(int r, int s, int e, int64_t j) {
    return (float)(r * 8 + s) + (float)(j % 13) + 0.5f * (float)e;
}

static void test_mesh(const tess_group *world, int rank, int size) {
    if (size % 2 != 0) return;
    const tess_mesh_axis axes[2] = {{"dp", TESS_MESH_REST}, {"ep", 2}};
    tess_mesh *mesh = NULL;
    DIST_TEST_OK(tess_mesh_create(world, 2, axes, &mesh));
    const tess_group *all = tess_mesh_all(mesh), *dp = tess_mesh_axis_group(mesh, 0),
                     *ep = tess_mesh_axis_group(mesh, 1);
    tess_registry *reg = NULL;
    DIST_TEST_OK(tess_registry_create(&reg));
    for (int e = 0; e < NENT; e++) {
        tess_layout l = model[e].expert ? tess_layout_sharded(0, ep->size, ep->rank)
                                        : tess_layout_replicated();
        int64_t idx;
        DIST_TEST_OK(tess_registry_add(reg, model[e].name, model[e].ndim, model[e].shape, &l, &idx));
        DIST_TEST_OK(tess_registry_set_tags(reg, idx, model[e].expert ? TESS_TAG_EXPERT
                                                                      : TESS_TAG_DENSE));
        if (model[e].expert) DIST_TEST_OK(tess_registry_set_group(reg, idx, dp));
    }
    DIST_TEST_OK(tess_registry_finalize(reg));
    const int64_t n = tess_registry_local_total(reg);
    float *grads = tess_registry_grads(reg);

    const int64_t buckets[] = {1, 4, 10, 1000};
    for (size_t bi = 0; bi < sizeof buckets / sizeof buckets[0]; bi++) {
        tess_gradsync *gs = NULL;
        DIST_TEST_OK(tess_gradsync_create(&gs, reg, all, buckets[bi]));
        /* Buckets tile the buffer from its end, each inside entries of one group. */
        int64_t expect_hi = n, spans = 0;
        for (int64_t k = 0; k < tess_gradsync_bucket_count(gs); k++) {
            int64_t lo, hi;
            const tess_group *g;
            tess_gradsync_bucket(gs, k, &lo, &hi, &g);
            spans += hi != expect_hi || hi - lo > buckets[bi] || lo >= hi;
            for (int e = 0; e < NENT; e++) {
                const tess_registry_entry *en = tess_registry_get(reg, e);
                const bool overlaps = en->flat_offset < hi && en->flat_offset + en->local_count > lo;
                spans += overlaps && g != (model[e].expert ? dp : all);
            }
            expect_hi = lo;
        }
        TESS_TEST_CHECK(spans == 0 && expect_hi == 0,
                        "bucket %lld: buckets tile the buffer, one group each (%lld bad)",
                        (long long)buckets[bi], (long long)spans);
        for (int step = 0; step < 3; step++) {
            for (int e = 0; e < NENT; e++) {
                const tess_registry_entry *en = tess_registry_get(reg, e);
                const int64_t row = en->ndim == 2 ? en->shape[1] : 1;
                for (int64_t k = 0; k < en->local_count; k++)
                    grads[en->flat_offset + k] =
                        mixed_value(rank, step, e, en->global_offset[0] * row + k);
            }
            /* Report entry by entry from the last (as a model's backward does), or all at once. */
            tess_status st = TESS_OK;
            for (int e = NENT - 1; e >= 0 && step < 2 && st == TESS_OK; e--) {
                const tess_registry_entry *en = tess_registry_get(reg, e);
                if (en->local_count > 0)
                    st = tess_gradsync_ready(gs, en->flat_offset, en->flat_offset + en->local_count);
            }
            DIST_TEST_OK(st);
            DIST_TEST_OK(tess_gradsync_finish(gs, NULL));
            int bad = 0;
            for (int e = 0; e < NENT; e++) {
                const tess_registry_entry *en = tess_registry_get(reg, e);
                const int64_t row = en->ndim == 2 ? en->shape[1] : 1;
                for (int64_t k = 0; k < en->local_count; k++) {
                    const int64_t j = en->global_offset[0] * row + k;
                    double sum = 0.0;
                    int members = 0;
                    for (int r = 0; r < size; r++) { /* expert: the ranks with my ep coordinate */
                        if (model[e].expert && r % 2 != rank % 2) continue;
                        sum += mixed_value(r, step, e, j);
                        members++;
                    }
                    bad += grads[en->flat_offset + k] != (float)(sum / members);
                }
            }
            TESS_TEST_CHECK(bad == 0, "dp x ep, bucket %lld, step %d: %d wrong means",
                            (long long)buckets[bi], step, bad);
        }
        tess_gradsync_destroy(&gs);
    }
    tess_registry_destroy(&reg);
    tess_mesh_destroy(&mesh);
}

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    tess_group *g = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "dp", &g) == TESS_OK, "group");
    test_flat(g, rank, size);
    test_deferred(g, rank, size);
    test_mesh(g, rank, size);
    tess_group_destroy(&g);
    int rc = tess_test_finish_mpi("gradsync", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
