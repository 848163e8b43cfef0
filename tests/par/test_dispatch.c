/* test_dispatch.c - the all-to-all-v plan (par/dispatch.h) at 1, 2 and 4 ranks: uneven counts
 * (including empty slots and a rank that sends nothing), count conservation over the group, rows
 * arriving at the right (rank, slot) in [source][slot] order, regroup/ungroup, the reverse
 * exchange returning every row to its sender, several widths with one plan, bad counts; all of
 * it in both modes, all-to-all and the all-gather oracle. The fixed-size plan (equal blocks,
 * tess_dispatch_plan_fixed) in both modes: the same rows at the same places as a plan with those
 * counts, and in the all-to-all mode no count exchange and no all-to-all-v: the PMPI wrappers
 * below count the MPI_Alltoall and MPI_Alltoallv calls of the library. Integer rows
 * (tess_dispatch_forward_i32) and a local plan (tess_dispatch_plan_local) of the rows flagged in
 * them: no count exchange, the flagged rows at their places in both directions; both refused in
 * the all-gather mode. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "par/coll.h"     /* tess_par_allreduce_i64 */
#include "par/dispatch.h" /* tess_dispatch_* */
#include "par/mesh.h"     /* tess_group_* */
#include "par_test.h"

enum { S = 3 };

#include "mpi_count.h" /* n_alltoall, n_alltoallv: PMPI counters */

/* rows rank `from` sends to (rank to, slot j): uneven, sometimes 0; rank 1 sends nothing */
static int64_t count(int from, int to, int j) {
    return from == 1 ? 0 : (int64_t)((from * 7 + to * 3 + j * 5) % 6);
}

static void check_mode(tess_group *g, int rank, int size, bool allgather) {
    tess_dispatch *d = NULL;
    DIST_TEST_OK(allgather ? tess_dispatch_create_allgather(&d, g, S) : tess_dispatch_create(&d, g, S));
    int64_t *sc = calloc((size_t)(size * S), sizeof *sc);
    int64_t nsend = 0;
    for (int r = 0; r < size; r++)
        for (int j = 0; j < S; j++) nsend += (sc[r * S + j] = count(rank, r, j));
    DIST_TEST_OK(tess_dispatch_plan(d, sc));
    const int64_t nrecv = tess_dispatch_recv_rows(d);
    TESS_TEST_CHECK(tess_dispatch_send_rows(d) == nsend, "send rows");
    for (int q = 0; q < size; q++)
        for (int j = 0; j < S; j++)
            TESS_TEST_CHECK(tess_dispatch_recv_counts(d)[q * S + j] == count(q, rank, j),
                            "received count from %d slot %d", q, j);
    int64_t tot[2] = {nsend, nrecv};
    DIST_TEST_OK(tess_par_allreduce_i64(g, tot, 2, TESS_PAR_SUM));
    TESS_TEST_CHECK(tot[0] == tot[1], "count conservation: %lld sent, %lld received",
                    (long long)tot[0], (long long)tot[1]);

    for (int64_t w = 1; w <= 5; w += 4) { /* two widths, one plan */
        float *send = malloc((size_t)((nsend + 1) * w) * sizeof(float));
        float *back = malloc((size_t)((nsend + 1) * w) * sizeof(float));
        float *recv = malloc((size_t)((nrecv + 1) * w) * sizeof(float));
        float *grp = malloc((size_t)((nrecv + 1) * w) * sizeof(float));
        float *ung = malloc((size_t)((nrecv + 1) * w) * sizeof(float));
        /* row value: sender * 1e4 + dest * 1e3 + slot * 100 + index within (dest, slot), + c/10 */
        int64_t o = 0;
        for (int r = 0; r < size; r++)
            for (int j = 0; j < S; j++)
                for (int64_t i = 0; i < sc[r * S + j]; i++, o++)
                    for (int64_t c = 0; c < w; c++)
                        send[o * w + c] = (float)(rank * 10000 + r * 1000 + j * 100 + i) + 0.1f * (float)c;
        DIST_TEST_OK(tess_dispatch_forward(d, send, recv, w));
        o = 0;
        int bad = 0;
        for (int q = 0; q < size; q++)
            for (int j = 0; j < S; j++)
                for (int64_t i = 0; i < count(q, rank, j); i++, o++)
                    for (int64_t c = 0; c < w; c++)
                        bad += recv[o * w + c] != (float)(q * 10000 + rank * 1000 + j * 100 + i) + 0.1f * (float)c;
        TESS_TEST_CHECK(bad == 0, "forward: %d values at the wrong place (w=%lld)", bad, (long long)w);
        tess_dispatch_regroup(d, recv, grp, w);
        o = 0;
        bad = 0;
        for (int j = 0; j < S; j++) {
            TESS_TEST_CHECK(tess_dispatch_slot_rows(d, j) >= 0, "slot rows");
            for (int q = 0; q < size; q++)
                for (int64_t i = 0; i < count(q, rank, j); i++, o++)
                    bad += grp[o * w] != (float)(q * 10000 + rank * 1000 + j * 100 + i);
        }
        TESS_TEST_CHECK(bad == 0, "regroup: %d rows out of [slot][source] order", bad);
        tess_dispatch_ungroup(d, grp, ung, w);
        bad = 0;
        for (int64_t i = 0; i < nrecv * w; i++) bad += ung[i] != recv[i];
        TESS_TEST_CHECK(bad == 0, "ungroup undoes regroup");
        DIST_TEST_OK(tess_dispatch_reverse(d, recv, back, w));
        bad = 0;
        for (int64_t i = 0; i < nsend * w; i++) bad += back[i] != send[i];
        TESS_TEST_CHECK(bad == 0, "reverse returns every row to its sender");
        free(send), free(back), free(recv), free(grp), free(ung);
    }
    sc[0] = -1;
    DIST_TEST_FAILS(tess_dispatch_plan(d, sc), TESS_ERR_ARG, "send count -1");
    free(sc);
    tess_dispatch_destroy(&d);
}

/* Fixed-size blocks of `rows` rows per (rank, slot), width w = 3: forward and reverse equal to a
 * counted plan with every count = rows; in the all-to-all mode the fixed plan makes no MPI call
 * and each exchange is one MPI_Alltoall. */
static void check_fixed(tess_group *g, int size, bool allgather, int64_t rows) {
    enum { W = 3 };
    tess_dispatch *fx = NULL, *cn = NULL;
    DIST_TEST_OK(allgather ? tess_dispatch_create_allgather(&fx, g, S) : tess_dispatch_create(&fx, g, S));
    DIST_TEST_OK(allgather ? tess_dispatch_create_allgather(&cn, g, S) : tess_dispatch_create(&cn, g, S));
    const int64_t n = (int64_t)size * S * rows;
    int64_t *sc = malloc((size_t)(size * S) * sizeof *sc);
    for (int i = 0; i < size * S; i++) sc[i] = rows;
    DIST_TEST_OK(tess_dispatch_plan(cn, sc));
    const int a0 = n_alltoall, v0 = n_alltoallv;
    DIST_TEST_OK(tess_dispatch_plan_fixed(fx, rows));
    TESS_TEST_CHECK(n_alltoall == a0 && n_alltoallv == v0, "the fixed plan communicates");
    TESS_TEST_CHECK(tess_dispatch_send_rows(fx) == n && tess_dispatch_recv_rows(fx) == n,
                    "fixed plan: %lld rows sent, %lld received, expected %lld",
                    (long long)tess_dispatch_send_rows(fx), (long long)tess_dispatch_recv_rows(fx),
                    (long long)n);
    for (int j = 0; j < S; j++)
        TESS_TEST_CHECK(tess_dispatch_slot_rows(fx, j) == size * rows, "slot %d rows", j);
    float *send = malloc((size_t)(n * W + 1) * sizeof(float));
    float *r1 = malloc((size_t)(n * W + 1) * sizeof(float)), *r2 = malloc((size_t)(n * W + 1) * sizeof(float));
    float *b1 = malloc((size_t)(n * W + 1) * sizeof(float)), *b2 = malloc((size_t)(n * W + 1) * sizeof(float));
    for (int64_t i = 0; i < n * W; i++) send[i] = (float)(g->rank * 100000 + i);
    DIST_TEST_OK(tess_dispatch_forward(cn, send, r2, W));
    DIST_TEST_OK(tess_dispatch_reverse(cn, r2, b2, W));
    const int a1 = n_alltoall, v1 = n_alltoallv;
    DIST_TEST_OK(tess_dispatch_forward(fx, send, r1, W));
    DIST_TEST_OK(tess_dispatch_reverse(fx, r1, b1, W));
    if (!allgather)
        TESS_TEST_CHECK(n_alltoall == a1 + 2 && n_alltoallv == v1,
                        "fixed exchanges: %d MPI_Alltoall and %d MPI_Alltoallv calls, expected 2 "
                        "and 0", n_alltoall - a1, n_alltoallv - v1);
    TESS_TEST_CHECK(memcmp(r1, r2, (size_t)(n * W) * sizeof(float)) == 0,
                    "fixed forward differs from the counted one (%s, rows %lld)",
                    allgather ? "all-gather" : "all-to-all", (long long)rows);
    TESS_TEST_CHECK(memcmp(b1, send, (size_t)(n * W) * sizeof(float)) == 0 &&
                        memcmp(b2, send, (size_t)(n * W) * sizeof(float)) == 0,
                    "fixed reverse returns every row to its sender");
    /* row (q, j, i) arrives at [q][j][i] */
    int bad = 0;
    for (int q = 0; q < size; q++)
        for (int64_t i = 0; i < S * rows * W; i++)
            bad += r1[(int64_t)q * S * rows * W + i] !=
                   (float)(q * 100000 + (int64_t)g->rank * S * rows * W + i);
    TESS_TEST_CHECK(bad == 0, "fixed forward: %d values at the wrong place", bad);
    DIST_TEST_FAILS(tess_dispatch_plan_fixed(fx, -1), TESS_ERR_ARG, "rows per (rank, slot)");
    free(sc), free(send), free(r1), free(r2), free(b1), free(b2);
    tess_dispatch_destroy(&fx);
    tess_dispatch_destroy(&cn);
}

/* Integer rows (sender, index, flag = index odd) with the plan of check_mode; then a local plan
 * of the flagged rows only, its counts from the flags on both sides: its exchanges carry exactly
 * the flagged rows, in order, and the plan itself makes no MPI call. */
static void check_local(tess_group *g, int rank, int size) {
    tess_dispatch *d = NULL, *sub = NULL;
    DIST_TEST_OK(tess_dispatch_create(&d, g, S));
    DIST_TEST_OK(tess_dispatch_create(&sub, g, S));
    int64_t *sc = calloc((size_t)(size * S), sizeof *sc), *fs = calloc((size_t)(size * S), sizeof *fs);
    int64_t *fr = calloc((size_t)(size * S), sizeof *fr);
    int64_t nsend = 0;
    for (int r = 0; r < size; r++)
        for (int j = 0; j < S; j++) nsend += (sc[r * S + j] = count(rank, r, j));
    DIST_TEST_OK(tess_dispatch_plan(d, sc));
    const int64_t nrecv = tess_dispatch_recv_rows(d);
    int32_t *ids = malloc((size_t)(3 * nsend + 1) * sizeof(int32_t));
    int32_t *rids = malloc((size_t)(3 * nrecv + 1) * sizeof(int32_t));
    float *val = malloc((size_t)(nsend + 1) * sizeof(float)), *rval = malloc((size_t)(nrecv + 1) * sizeof(float));
    int64_t o = 0, nf = 0;
    for (int r = 0; r < size; r++)
        for (int j = 0; j < S; j++)
            for (int64_t i = 0; i < sc[r * S + j]; i++, o++) {
                ids[3 * o] = rank, ids[3 * o + 1] = (int32_t)o, ids[3 * o + 2] = (int32_t)(o & 1);
                if (o & 1) val[nf++] = (float)(rank * 1000 + o), fs[r * S + j]++;
            }
    DIST_TEST_OK(tess_dispatch_forward_i32(d, ids, rids, 3));
    /* the receiver's flagged counts per (source, slot), and the values it expects, in order */
    int64_t nr = 0, bad = 0;
    const int64_t *rc = tess_dispatch_recv_counts(d);
    o = 0;
    for (int q = 0; q < size; q++)
        for (int j = 0; j < S; j++)
            for (int64_t i = 0; i < rc[q * S + j]; i++, o++) {
                bad += rids[3 * o] != q;
                if (rids[3 * o + 2]) fr[q * S + j]++, nr++;
            }
    TESS_TEST_CHECK(bad == 0, "int rows: %lld rows from the wrong sender", (long long)bad);
    const int a0 = n_alltoall, v0 = n_alltoallv;
    DIST_TEST_OK(tess_dispatch_plan_local(sub, fs, fr));
    TESS_TEST_CHECK(n_alltoall == a0 && n_alltoallv == v0, "the local plan communicates");
    TESS_TEST_CHECK(tess_dispatch_send_rows(sub) == nf && tess_dispatch_recv_rows(sub) == nr,
                    "local plan: %lld / %lld rows, expected %lld / %lld",
                    (long long)tess_dispatch_send_rows(sub), (long long)tess_dispatch_recv_rows(sub),
                    (long long)nf, (long long)nr);
    DIST_TEST_OK(tess_dispatch_forward(sub, val, rval, 1));
    int64_t f = 0;
    bad = 0;
    for (int64_t i = 0; i < nrecv; i++)
        if (rids[3 * i + 2]) bad += rval[f++] != (float)(rids[3 * i] * 1000 + rids[3 * i + 1]);
    TESS_TEST_CHECK(bad == 0 && f == nr, "local plan forward: %lld flagged rows misplaced",
                    (long long)bad);
    for (int64_t i = 0; i < nr; i++) rval[i] += 0.5f;
    DIST_TEST_OK(tess_dispatch_reverse(sub, rval, val, 1));
    bad = 0;
    f = 0;
    for (int64_t i = 0; i < nsend; i++)
        if (i & 1) bad += val[f++] != (float)(rank * 1000 + i) + 0.5f;
    TESS_TEST_CHECK(bad == 0, "local plan reverse: %lld rows misplaced", (long long)bad);
    tess_dispatch *ag = NULL;
    DIST_TEST_OK(tess_dispatch_create_allgather(&ag, g, S));
    DIST_TEST_FAILS(tess_dispatch_plan_local(ag, fs, fr), TESS_ERR_ARG, "all-to-all mode");
    DIST_TEST_FAILS(tess_dispatch_forward_i32(ag, ids, rids, 3), TESS_ERR_ARG, "all-to-all mode");
    fs[0] = -1;
    DIST_TEST_FAILS(tess_dispatch_plan_local(sub, fs, fr), TESS_ERR_ARG, "out of range");
    tess_dispatch_destroy(&ag);
    tess_dispatch_destroy(&sub);
    tess_dispatch_destroy(&d);
    free(sc), free(fs), free(fr), free(ids), free(rids), free(val), free(rval);
}

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    tess_group *g = NULL;
    DIST_TEST_OK(tess_group_create(MPI_COMM_WORLD, "ep", &g));
    check_mode(g, rank, size, false);
    check_mode(g, rank, size, true);
    check_local(g, rank, size);
    for (int64_t rows = 0; rows <= 2; rows += 2) {
        check_fixed(g, size, false, rows);
        check_fixed(g, size, true, rows);
    }
    tess_group_destroy(&g);
    int rc = tess_test_finish_mpi("par_dispatch", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
