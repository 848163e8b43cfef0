/* test_aggregate.c - the federated average: 7 hand-made clients with unsorted ids and uneven
 * weights, spread unevenly over the ranks (some ranks hold none) in two different assignments.
 * The averaged SHARED entries must equal, bitwise, the average computed here in client-id order
 * (which does not depend on the rank count, so 1, 2 and 4 ranks give the same bits); LOCAL and
 * other unselected entries stay untouched even where the clients' registries differ; bytes sent
 * are reported; bad arguments fail on every rank. argv[1]: the registered world size. */
#include <math.h>
#include <stdlib.h>

#include "par/aggregate.h" /* tess_par_aggregate */
#include "par/layout.h"    /* tess_par_block_range */
#include "par_test.h"

enum { NC = 7, NA = 13, NB_R = 3, NB_C = 5, NL = 4, NX = 6 };
static const int64_t ids[NC] = {42, 3, 17, 8, 100, 5, 23};
static const double weights[NC] = {1.5, 0.25, 3.0, 1.0, 0.75, 2.0, 0.5};

/* Element j of entry `which` (0: shared.a, 1: shared.b, 2: local.bias, 3: local.extra) of the
 * client with id `id`, before averaging. In the shared entries clients 42 and 3 hold huge values
 * whose weighted sum cancels (1.5 * 2^33 - 0.25 * 6 * 2^33 = 0): summed in id order (3 first)
 * they swallow the low bits of the clients between them, so any other order gives other bits. */
static float value(int64_t id, int which, int64_t j) {
    if (which < 2 && id == 42) return 8589934592.0f;   /* 2^33 */
    if (which < 2 && id == 3) return -51539607552.0f;  /* -6 * 2^33 */
    return (float)sin(0.37 * (double)id + 0.11 * (double)j + 1.3 * which);
}

/* Client registry: shared.a (SHARED, na floats), [local.extra (LOCAL) for even ids], local.bias
 * (LOCAL), shared.b (SHARED|USER). */
static tess_registry *client_sized(int64_t id, int64_t na) {
    const tess_layout rep = tess_layout_replicated();
    const int64_t sa[1] = {na}, sb[2] = {NB_R, NB_C}, sl[1] = {NL}, sx[1] = {NX};
    tess_registry *reg = NULL;
    int64_t ia, ib, il, ix = -1;
    DIST_TEST_OK(tess_registry_create(&reg));
    DIST_TEST_OK(tess_registry_add(reg, "shared.a", 1, sa, &rep, &ia));
    if (id % 2 == 0) DIST_TEST_OK(tess_registry_add(reg, "local.extra", 1, sx, &rep, &ix));
    DIST_TEST_OK(tess_registry_add(reg, "local.bias", 1, sl, &rep, &il));
    DIST_TEST_OK(tess_registry_add(reg, "shared.b", 2, sb, &rep, &ib));
    DIST_TEST_OK(tess_registry_set_tags(reg, ia, TESS_TAG_SHARED));
    DIST_TEST_OK(tess_registry_set_tags(reg, ib, TESS_TAG_SHARED | TESS_TAG_USER));
    DIST_TEST_OK(tess_registry_set_tags(reg, il, TESS_TAG_LOCAL));
    if (ix >= 0) DIST_TEST_OK(tess_registry_set_tags(reg, ix, TESS_TAG_LOCAL));
    DIST_TEST_OK(tess_registry_finalize(reg));
    const int64_t idx[4] = {ia, ib, il, ix};
    for (int w = 0; w < 4; w++) {
        if (idx[w] < 0) continue;
        float *x = tess_registry_param(reg, idx[w]);
        for (int64_t j = 0; j < tess_registry_get(reg, idx[w])->local_count; j++)
            x[j] = value(id, w, j);
    }
    return reg;
}

static tess_registry *client(int64_t id) { return client_sized(id, NA); }

/* The expected average of element j of entry `which` over all clients: sums in double in
 * increasing id order, rounded once. */
static float expected(int which, int64_t j) {
    int order[NC];
    for (int k = 0; k < NC; k++) order[k] = k;
    for (int a = 1; a < NC; a++) /* insertion sort by id */
        for (int b = a; b > 0 && ids[order[b]] < ids[order[b - 1]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    double acc = 0.0, wsum = 0.0;
    for (int q = 0; q < NC; q++) {
        acc += weights[order[q]] * (double)value(ids[order[q]], which, j);
        wsum += weights[order[q]];
    }
    return (float)(acc / wsum);
}

/* Clients of this rank under assignment `a`: client c goes to rank owner(a, c). */
static int owner(int a, int c, int size) { return a == 0 ? (c * c + 1) % size : (NC - 1 - c) % size; }

static void run_assignment(const tess_group *g, int a) {
    tess_registry *regs[NC];
    int64_t my_ids[NC];
    double my_w[NC];
    int n = 0;
    for (int c = 0; c < NC; c++) {
        if (owner(a, c, g->size) != g->rank) continue;
        regs[n] = client(ids[c]);
        my_ids[n] = ids[c];
        my_w[n++] = weights[c];
    }
    int64_t bytes = -1;
    DIST_TEST_OK(tess_par_aggregate(g, regs, my_ids, my_w, n, NC, TESS_TAG_SHARED, &bytes));

    /* Bytes: ids and weights, slices of my clients to the other ranks, my slice to the others. */
    const int64_t L = NA + NB_R * NB_C;
    int64_t want = (int64_t)(g->size - 1) * (int64_t)(sizeof(int) + (size_t)n * 16);
    for (int j = 0; j < g->size; j++) {
        int64_t lo, hi;
        tess_par_block_range(L, g->size, j, &lo, &hi);
        if (j != g->rank) want += (int64_t)n * (hi - lo) * 4;
        else want += (int64_t)(g->size - 1) * (hi - lo) * 4;
    }
    TESS_TEST_CHECK(bytes == want, "assignment %d: %lld bytes sent, expected %lld", a,
                    (long long)bytes, (long long)want);

    int bad_avg = 0, bad_local = 0;
    for (int k = 0; k < n; k++) {
        const char *names[4] = {"shared.a", "shared.b", "local.bias", "local.extra"};
        for (int w = 0; w < 4; w++) {
            const int64_t i = tess_registry_find(regs[k], names[w]);
            if (i < 0) continue;
            const float *x = tess_registry_param(regs[k], i);
            for (int64_t j = 0; j < tess_registry_get(regs[k], i)->local_count; j++) {
                if (w < 2) bad_avg += x[j] != expected(w, j);
                else bad_local += x[j] != value(my_ids[k], w, j);
            }
        }
    }
    TESS_TEST_CHECK(bad_avg == 0, "assignment %d: %d averaged elements differ from the id-order "
                    "reference", a, bad_avg);
    TESS_TEST_CHECK(bad_local == 0, "assignment %d: %d LOCAL elements changed", a, bad_local);

    /* A second round over SHARED|USER averages shared.b only: shared.a, rewritten here, stays. */
    for (int k = 0; k < n; k++) {
        float *x = tess_registry_param(regs[k], tess_registry_find(regs[k], "shared.a"));
        for (int64_t j = 0; j < NA; j++) x[j] = value(my_ids[k], 0, j);
    }
    DIST_TEST_OK(tess_par_aggregate(g, regs, my_ids, my_w, n, NC, TESS_TAG_SHARED | TESS_TAG_USER,
                                    NULL));
    int bad_sub = 0;
    for (int k = 0; k < n; k++) {
        const float *x = tess_registry_param(regs[k], tess_registry_find(regs[k], "shared.a"));
        for (int64_t j = 0; j < NA; j++) bad_sub += x[j] != value(my_ids[k], 0, j);
        const float *y = tess_registry_param(regs[k], tess_registry_find(regs[k], "shared.b"));
        for (int64_t j = 0; j < NB_R * NB_C; j++) bad_sub += y[j] != expected(1, j);
    }
    TESS_TEST_CHECK(bad_sub == 0, "assignment %d: tags SHARED|USER touched %d wrong elements", a,
                    bad_sub);
    for (int k = 0; k < n; k++) tess_registry_destroy(&regs[k]);
}

static void run_errors(const tess_group *g) {
    /* Every rank holds one client; ids collide on rank 0 and 1 (or within rank 0 alone). */
    tess_registry *regs[2] = {client(ids[0]), client(ids[1])};
    int64_t dup[2] = {7, g->rank == 0 ? 7 : 9 + g->rank};
    double w[2] = {1.0, 1.0};
    DIST_TEST_FAILS(tess_par_aggregate(g, regs, dup, w, 2, 2 * g->size, TESS_TAG_SHARED, NULL),
                    TESS_ERR_ARG, "client id 7 is used twice");
    int64_t mine[2] = {2 * g->rank, 2 * g->rank + 1};
    DIST_TEST_FAILS(tess_par_aggregate(g, regs, mine, w, 2, 2 * g->size + 1, TESS_TAG_SHARED, NULL),
                    TESS_ERR_ARG, "nclients says");
    DIST_TEST_FAILS(tess_par_aggregate(g, regs, mine, w, 2, 2 * g->size, TESS_TAG_LOCAL, NULL),
                    TESS_ERR_ARG, "tagged LOCAL");
    double neg[2] = {1.0, g->rank == g->size - 1 ? -1.0 : 1.0}; /* only the last rank sees it */
    DIST_TEST_FAILS(tess_par_aggregate(g, regs, mine, neg, 2, 2 * g->size, TESS_TAG_SHARED, NULL),
                    TESS_ERR_ARG, "is not finite and >= 0");
    /* The last rank's second client has a longer shared.a: refused there, agreed everywhere. */
    tess_registry_destroy(&regs[1]);
    regs[1] = client_sized(ids[1], g->rank == g->size - 1 ? NA + 1 : NA);
    DIST_TEST_FAILS(tess_par_aggregate(g, regs, mine, w, 2, 2 * g->size, TESS_TAG_SHARED, NULL),
                    TESS_ERR_ARG, "selects 2 entries of 29 floats");
    /* Every client of the last rank is longer: each rank is consistent, the ranks are not. */
    if (g->size > 1) {
        tess_registry_destroy(&regs[0]);
        regs[0] = client_sized(ids[0], g->rank == g->size - 1 ? NA + 1 : NA);
        DIST_TEST_FAILS(tess_par_aggregate(g, regs, mine, w, 2, 2 * g->size, TESS_TAG_SHARED,
                                           NULL),
                        TESS_ERR_ARG, "select different entries");
    }
    tess_registry_destroy(&regs[0]);
    tess_registry_destroy(&regs[1]);
}

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    tess_group *g = NULL;
    DIST_TEST_OK(tess_group_create(MPI_COMM_WORLD, "fed", &g));
    run_assignment(g, 0);
    run_assignment(g, 1);
    run_errors(g);
    tess_group_destroy(&g);
    int rc = tess_test_finish_mpi("aggregate", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
