/* test_coll.c - every collective against an expectation computed locally (rank r's data is a
 * function of r), once with the default per-call limit and again with limits of 7 and 3
 * elements, so the chunked large-count paths run on small buffers. Also: capacity and count
 * errors are reported by every rank, and MPI's own errors come back as TESS_ERR_MPI. The verdict
 * (tess_par_agree): the lowest failing rank's status and message, also a long multi-line one,
 * reach every rank. */
#include <stdio.h>
#include <stdlib.h>

#include "par/coll.h" /* tess_par_* */
#include "par_test.h"

enum { N_MAX = 512 };

/* The value rank r holds at element i: small multiples of 1/4, so float sums are exact. */
static float val(int r, int64_t i) { return (float)((r * 7 + i * 3) % 11 - 5) + 0.25f * r; }

static void check_allreduce(const tess_group *g, int64_t n) {
    static float x[N_MAX];
    const tess_par_op ops[] = {TESS_PAR_SUM, TESS_PAR_MEAN, TESS_PAR_MAX, TESS_PAR_MIN};
    for (int k = 0; k < 4; k++) {
        for (int64_t i = 0; i < n; i++) x[i] = val(g->rank, i);
        DIST_TEST_OK(tess_par_allreduce(g, x, n, ops[k]));
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double sum = 0, mx = -1e30, mn = 1e30;
            for (int r = 0; r < g->size; r++) {
                double v = val(r, i);
                sum += v;
                mx = v > mx ? v : mx;
                mn = v < mn ? v : mn;
            }
            double want = k == 0 ? sum : k == 1 ? sum / g->size : k == 2 ? mx : mn;
            bad += fabs(x[i] - want) > 1e-6 * (1 + fabs(want));
        }
        TESS_TEST_CHECK(bad == 0, "all-reduce op %d n=%lld max_count=%lld: %d wrong", k,
                        (long long)n, (long long)g->max_count, bad);
    }
    static double d[N_MAX];
    static int64_t l[N_MAX];
    for (int64_t i = 0; i < n; i++) {
        d[i] = val(g->rank, i) / 3.0;
        l[i] = ((int64_t)(g->rank + 1) << 33) + i;
    }
    DIST_TEST_OK(tess_par_allreduce_f64(g, d, n, TESS_PAR_MEAN));
    DIST_TEST_OK(tess_par_allreduce_i64(g, l, n, TESS_PAR_SUM));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double sum = 0;
        for (int r = 0; r < g->size; r++) sum += val(r, i) / 3.0;
        bad += fabs(d[i] - sum / g->size) > 1e-12;
        int64_t p = g->size;
        bad += l[i] != ((p * (p + 1) / 2) << 33) + p * i;
    }
    TESS_TEST_CHECK(bad == 0, "f64 mean / i64 sum n=%lld: %d wrong", (long long)n, bad);
    int64_t one = 1;
    DIST_TEST_FAILS(tess_par_allreduce_i64(g, &one, 1, TESS_PAR_MEAN), TESS_ERR_ARG,
                    "mean of int64");
}

static void check_iallreduce(const tess_group *g) {
    static float a[64], b[64], c[64];
    int64_t na = 23, nb = 40, nc = 33;
    for (int i = 0; i < 64; i++) a[i] = b[i] = c[i] = val(g->rank, i);
    tess_par_request ra = {0}, rb = {0}, rc = {0};
    DIST_TEST_OK(tess_par_iallreduce(g, a, na, TESS_PAR_SUM, &ra));
    DIST_TEST_OK(tess_par_iallreduce(g, b, nb, TESS_PAR_MEAN, &rb));
    DIST_TEST_FAILS(tess_par_iallreduce(g, a, na, TESS_PAR_SUM, &ra), TESS_ERR_ARG,
                    "still has");
    DIST_TEST_OK(tess_par_iallreduce(g, c, nc, TESS_PAR_MAX, &rc));
    DIST_TEST_OK(tess_par_wait(&rb)); /* any completion order */
    DIST_TEST_OK(tess_par_wait(&ra));
    bool done = false;
    for (int spin = 0; spin < 1000000 && !done; spin++) DIST_TEST_OK(tess_par_test(&rc, &done));
    TESS_TEST_CHECK(done, "tess_par_test completes");
    DIST_TEST_OK(tess_par_wait(&ra)); /* inactive: returns at once */
    int bad = 0;
    for (int i = 0; i < 64; i++) {
        double sum = 0, mx = -1e30;
        for (int r = 0; r < g->size; r++) {
            sum += val(r, i);
            mx = val(r, i) > mx ? val(r, i) : mx;
        }
        double mine = val(g->rank, i);
        bad += fabs(a[i] - (i < na ? sum : mine)) > 1e-6 * (1 + fabs(sum));
        bad += fabs(b[i] - (i < nb ? sum / g->size : mine)) > 1e-6 * (1 + fabs(sum));
        bad += c[i] != (i < nc ? mx : mine);
    }
    TESS_TEST_CHECK(bad == 0, "non-blocking all-reduce max_count=%lld: %d wrong",
                    (long long)g->max_count, bad);
    if (g->max_count * TESS_PAR_REQUEST_CHUNKS < 64) {
        DIST_TEST_FAILS(tess_par_iallreduce(g, a, 64, TESS_PAR_SUM, &ra), TESS_ERR_ARG,
                        "split the buffer");
        TESS_TEST_CHECK(ra.nreq == 0, "a refused request stays inactive");
    }
}

static void check_bcast(const tess_group *g, int64_t n) {
    static float x[N_MAX];
    for (int root = 0; root < g->size; root++) {
        for (int64_t i = 0; i < n; i++) x[i] = g->rank == root ? val(root, i) : -99.0f;
        DIST_TEST_OK(tess_par_bcast(g, x, n, root));
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += x[i] != val(root, i);
        TESS_TEST_CHECK(bad == 0, "bcast from %d n=%lld: %d wrong", root, (long long)n, bad);
    }
    char text[40] = "";
    if (g->rank == g->size - 1) snprintf(text, sizeof text, "[optim]\nlr = 0.5 ; from %d", g->rank);
    DIST_TEST_OK(tess_par_bcast_bytes(g, text, sizeof text, g->size - 1));
    char want[40];
    snprintf(want, sizeof want, "[optim]\nlr = 0.5 ; from %d", g->size - 1);
    TESS_TEST_CHECK(strcmp(text, want) == 0, "byte broadcast: '%s'", text);
}

static void check_allgather(const tess_group *g, int64_t n) {
    static float in[N_MAX], out[N_MAX];
    for (int64_t i = 0; i < n; i++) in[i] = val(g->rank, i);
    for (int i = 0; i < N_MAX; i++) out[i] = -99.0f;
    DIST_TEST_OK(tess_par_allgather(g, in, n, out));
    int bad = 0;
    for (int r = 0; r < g->size; r++)
        for (int64_t i = 0; i < n; i++) bad += out[r * n + i] != val(r, i);
    bad += out[g->size * n] != -99.0f;
    TESS_TEST_CHECK(bad == 0, "all-gather n=%lld max_count=%lld: %d wrong", (long long)n,
                    (long long)g->max_count, bad);
}

/* Rank r contributes (r + 2) % 3 rows of width 3 (rank 1 none). */
static int64_t gv_rows(int r) { return (r + 2) % 3; }

static void check_allgatherv(const tess_group *g) {
    enum { W = 3 };
    static float in[3 * W], out[N_MAX];
    int64_t rows_per_rank[8], total = 0;
    for (int64_t i = 0; i < gv_rows(g->rank) * W; i++) in[i] = val(g->rank, i);
    for (int r = 0; r < g->size; r++) total += gv_rows(r);
    for (int i = 0; i < N_MAX; i++) out[i] = -99.0f;
    DIST_TEST_OK(tess_par_allgatherv(g, in, gv_rows(g->rank), W, out, total, rows_per_rank));
    int bad = 0;
    int64_t at = 0;
    for (int r = 0; r < g->size; r++) {
        bad += rows_per_rank[r] != gv_rows(r);
        for (int64_t i = 0; i < gv_rows(r) * W; i++) bad += out[at + i] != val(r, i);
        at += gv_rows(r) * W;
    }
    bad += out[at] != -99.0f;
    TESS_TEST_CHECK(bad == 0, "all-gatherv max_count=%lld: %d wrong", (long long)g->max_count,
                    bad);
    /* The last rank is one row short: every rank reports it. */
    int64_t cap = g->rank == g->size - 1 ? total - 1 : total;
    char want[96];
    snprintf(want, sizeof want, "rank %d has room for %lld rows, the ranks send %lld",
             g->size - 1, (long long)total - 1, (long long)total);
    DIST_TEST_FAILS(tess_par_allgatherv(g, in, gv_rows(g->rank), W, out, cap, rows_per_rank),
                    TESS_ERR_ARG, want);
}

static void check_reduce_scatter(const tess_group *g, int64_t m) {
    static float in[N_MAX], out[N_MAX];
    const tess_par_op ops[] = {TESS_PAR_SUM, TESS_PAR_MEAN, TESS_PAR_MAX};
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < g->size * m; i++) in[i] = val(g->rank, i);
        DIST_TEST_OK(tess_par_reduce_scatter(g, in, out, m, ops[k]));
        int bad = 0;
        for (int64_t i = 0; i < m; i++) {
            double sum = 0, mx = -1e30;
            for (int r = 0; r < g->size; r++) {
                double v = val(r, g->rank * m + i);
                sum += v;
                mx = v > mx ? v : mx;
            }
            double want = k == 0 ? sum : k == 1 ? sum / g->size : mx;
            bad += fabs(out[i] - want) > 1e-6 * (1 + fabs(want));
        }
        TESS_TEST_CHECK(bad == 0, "reduce-scatter op %d m=%lld max_count=%lld: %d wrong", k,
                        (long long)m, (long long)g->max_count, bad);
    }
}

/* Element i of the block rank `from` sends to rank `to`. */
static float a2a(int from, int to, int64_t i) { return val(from, 100 * to + i); }

static void check_alltoall(const tess_group *g, int64_t m) {
    static float in[N_MAX], out[N_MAX];
    for (int j = 0; j < g->size; j++)
        for (int64_t i = 0; i < m; i++) in[j * m + i] = a2a(g->rank, j, i);
    DIST_TEST_OK(tess_par_alltoall(g, in, m, out));
    int bad = 0;
    for (int s = 0; s < g->size; s++)
        for (int64_t i = 0; i < m; i++) bad += out[s * m + i] != a2a(s, g->rank, i);
    TESS_TEST_CHECK(bad == 0, "all-to-all m=%lld max_count=%lld: %d wrong", (long long)m,
                    (long long)g->max_count, bad);
}

/* Rows rank `from` sends to rank `to` (some zero). */
static int64_t a2av_rows(int from, int to) { return (from + 2 * to) % 3 + (from == to); }

static void check_alltoallv(const tess_group *g) {
    enum { W = 2 };
    static float in[N_MAX], out[N_MAX];
    int64_t send[8], recv[8], at = 0, total = 0;
    for (int j = 0; j < g->size; j++) {
        send[j] = a2av_rows(g->rank, j);
        for (int64_t i = 0; i < send[j] * W; i++) in[at++] = a2a(g->rank, j, i);
        total += a2av_rows(j, g->rank);
    }
    for (int i = 0; i < N_MAX; i++) out[i] = -99.0f;
    DIST_TEST_OK(tess_par_alltoallv(g, in, send, W, out, total, recv));
    int bad = 0;
    at = 0;
    for (int s = 0; s < g->size; s++) {
        bad += recv[s] != a2av_rows(s, g->rank);
        for (int64_t i = 0; i < a2av_rows(s, g->rank) * W; i++) bad += out[at++] != a2a(s, g->rank, i);
    }
    bad += out[at] != -99.0f;
    TESS_TEST_CHECK(bad == 0, "all-to-allv max_count=%lld: %d wrong", (long long)g->max_count,
                    bad);
    /* Rank 0's buffer is one row short: it says so, the others say another rank failed. */
    DIST_TEST_FAILS(tess_par_alltoallv(g, in, send, W, out, g->rank == 0 ? total - 1 : total,
                                        recv),
                    TESS_ERR_ARG, g->rank == 0 ? "rows arrive, the receive buffer holds"
                                               : "another rank has a negative count or too small");
    /* A negative count on the last rank is reported everywhere. */
    if (g->rank == g->size - 1) send[0] = -1;
    DIST_TEST_FAILS(tess_par_alltoallv(g, in, send, W, out, N_MAX, recv), TESS_ERR_ARG,
                    g->rank == g->size - 1 ? "send row count is negative" : "another rank");
}

static void run_all(const tess_group *g) {
    const int64_t ns[] = {0, 1, 23, 100};
    for (int k = 0; k < 4; k++) {
        check_allreduce(g, ns[k]);
        check_bcast(g, ns[k]);
        check_allgather(g, ns[k] / 4);
    }
    check_iallreduce(g);
    check_allgatherv(g);
    const int64_t ms[] = {0, 1, 9, 30};
    for (int k = 0; k < 4; k++) {
        check_reduce_scatter(g, ms[k]);
        check_alltoall(g, ms[k] / 3);
    }
    check_alltoallv(g);
}

/* MPI validates arguments on MPI_ERRORS_RETURN communicators: an invalid root is its error. */
static void check_mpi_errors(const tess_group *g) {
    float x[4] = {0};
    DIST_TEST_FAILS(tess_par_bcast(g, x, 4, g->size), TESS_ERR_MPI, "MPI_ERR_ROOT");
    DIST_TEST_FAILS(tess_par_bcast(g, x, -1, 0), TESS_ERR_ARG, "count -1 < 0");
    DIST_TEST_FAILS(tess_par_allreduce(g, x, 4, (tess_par_op)9), TESS_ERR_ARG,
                    "unknown reduction 9");
}

/* Ranks 1 and up (or rank 0 alone) fail with different statuses: all return rank 1's (the
 * lowest failing), its own record kept, the others naming it; no failure gives TESS_OK. */
static void check_agree(const tess_group *g) {
    DIST_TEST_OK(tess_par_agree(g, TESS_OK));
    const int lowest = g->size > 1 ? 1 : 0;
    tess_status mine = TESS_OK;
    if (g->rank >= lowest)
        mine = tess_error_push(g->rank == lowest ? TESS_ERR_DATA : TESS_ERR_IO, __FILE__, __LINE__,
                               __func__, "probe failure on rank %d", g->rank);
    char want[96];
    snprintf(want, sizeof want, "probe failure on rank %d", lowest);
    tess_status s = tess_par_agree(g, mine);
    TESS_TEST_CHECK(s == TESS_ERR_DATA, "agree: every rank returns the lowest failing rank's "
                    "status, got %s", tess_status_name(s));
    TESS_TEST_CHECK(strstr(tess_error_text(), want) != NULL, "agree: the record names rank %d's "
                    "message:\n%s", lowest, tess_error_text());
    if (g->rank != lowest) {
        snprintf(want, sizeof want, "rank %d of '%s' failed:", lowest, g->name);
        TESS_TEST_CHECK(strstr(tess_error_text(), want) != NULL, "agree: '%s' in\n%s", want,
                        tess_error_text());
    }
    tess_error_clear();

    /* A problem list of 20 long lines (about 3.5 KB, as a checkpoint's) on the failing rank:
     * its last line still reaches every rank. */
    for (int i = 0; i < 20 && g->rank == lowest; i++)
        mine = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                               "  problem %02d: dataset /params/layer.%02d.w has shape [1024,4096], "
                               "expected [1024,2048]", i, i);
    s = tess_par_agree(g, g->rank == lowest ? mine : TESS_OK);
    TESS_TEST_CHECK(s == TESS_ERR_DATA, "agree (long): got %s", tess_status_name(s));
    TESS_TEST_CHECK(strstr(tess_error_text(), "problem 19: dataset /params/layer.19.w") != NULL,
                    "agree (long): the last problem is missing from\n%s", tess_error_text());
    tess_error_clear();
}

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    tess_group *g = NULL;
    DIST_TEST_OK(tess_group_create(MPI_COMM_WORLD, "coll", &g));
    if (g && size <= 8) {
        const int64_t limits[] = {TESS_PAR_MAX_COUNT, 7, 3};
        for (int k = 0; k < 3; k++) {
            DIST_TEST_OK(tess_group_set_max_count(g, limits[k]));
            run_all(g);
        }
        check_mpi_errors(g);
        check_agree(g);
        /* A group that is not rank-aligned with the world: the odd and even ranks. */
        tess_group *half = NULL;
        DIST_TEST_OK(tess_group_split(g, rank % 2, rank, "parity", &half));
        if (half) {
            DIST_TEST_OK(tess_group_set_max_count(half, 5));
            run_all(half);
        }
        tess_group_destroy(&half);
    }
    tess_group_destroy(&g);
    int rc = tess_test_finish_mpi("par_coll", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
