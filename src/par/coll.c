/* coll.c - collectives on a group (see coll.h). Each call takes the plain MPI path when every
 * count fits g->max_count, and a chunked path otherwise; both give the same result. */
#include "par/coll.h"

#include <stdio.h>
#include <string.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static tess_status check_op(tess_par_op op) {
    TESS_REQUIRE(op >= TESS_PAR_SUM && op <= TESS_PAR_MIN, TESS_ERR_ARG,
                 "unknown reduction %d", (int)op);
    return TESS_OK;
}

static MPI_Op mpi_op(tess_par_op op) {
    switch (op) {
    case TESS_PAR_MAX: return MPI_MAX;
    case TESS_PAR_MIN: return MPI_MIN;
    case TESS_PAR_SUM:
    case TESS_PAR_MEAN: break;
    }
    return MPI_SUM;
}

static tess_status check_group(const tess_group *g, int64_t n, const char *what) {
    TESS_REQUIRE(g, TESS_ERR_ARG, "group is NULL");
    TESS_REQUIRE(n >= 0, TESS_ERR_ARG, "%s on '%s': count %lld < 0", what, g->name, (long long)n);
    return TESS_OK;
}

/* In-place all-reduce of n elements of `elem` bytes, in chunks of at most g->max_count. */
static tess_status allreduce_chunks(const tess_group *g, void *x, int64_t n, size_t elem,
                                    MPI_Datatype type, tess_par_op op) {
    for (int64_t off = 0; off < n; off += g->max_count) {
        int len = tess_par_int(min64(g->max_count, n - off));
        TESS_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, (char *)x + (size_t)off * elem, len, type,
                                     mpi_op(op), g->comm));
    }
    return TESS_OK;
}

static tess_status bcast_chunks(const tess_group *g, void *x, int64_t n, size_t elem,
                                MPI_Datatype type, int root) {
    for (int64_t off = 0; off < n; off += g->max_count) {
        int len = tess_par_int(min64(g->max_count, n - off));
        TESS_MPI_CHECK(MPI_Bcast((char *)x + (size_t)off * elem, len, type, root, g->comm));
    }
    return TESS_OK;
}

static void divide_f32(float *x, int64_t n, int d) {
    for (int64_t i = 0; i < n; i++) x[i] /= (float)d;
}

tess_status tess_par_agree(const tess_group *g, tess_status local) {
    TESS_REQUIRE(g, TESS_ERR_ARG, "group is NULL");
    int first = local == TESS_OK ? g->size : g->rank;
    TESS_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, g->comm));
    if (first == g->size) return TESS_OK;
    struct {
        int code;
        char text[TESS_PAR_AGREE_TEXT];
    } v = {(int)local, ""};
    if (g->rank == first) snprintf(v.text, sizeof v.text, "%s", tess_error_text());
    TESS_MPI_CHECK(MPI_Bcast(&v, (int)sizeof v, MPI_BYTE, first, g->comm));
    if (g->rank == first) return local;
    size_t len = strnlen(v.text, sizeof v.text);
    while (len > 0 && v.text[len - 1] == '\n') v.text[--len] = '\0';
    return tess_error_push((tess_status)v.code, __FILE__, __LINE__, __func__,
                           "rank %d of '%s' failed:\n%s", first, g->name, v.text);
}

tess_status tess_par_allreduce(const tess_group *g, float *x, int64_t n, tess_par_op op) {
    TESS_CHECK(check_group(g, n, "all-reduce"));
    TESS_CHECK(check_op(op));
    TESS_CHECK(allreduce_chunks(g, x, n, sizeof *x, MPI_FLOAT, op));
    if (op == TESS_PAR_MEAN) divide_f32(x, n, g->size);
    return TESS_OK;
}

tess_status tess_par_allreduce_f64(const tess_group *g, double *x, int64_t n, tess_par_op op) {
    TESS_CHECK(check_group(g, n, "all-reduce"));
    TESS_CHECK(check_op(op));
    TESS_CHECK(allreduce_chunks(g, x, n, sizeof *x, MPI_DOUBLE, op));
    if (op == TESS_PAR_MEAN)
        for (int64_t i = 0; i < n; i++) x[i] /= g->size;
    return TESS_OK;
}

tess_status tess_par_allreduce_i64(const tess_group *g, int64_t *x, int64_t n, tess_par_op op) {
    TESS_CHECK(check_group(g, n, "all-reduce"));
    TESS_CHECK(check_op(op));
    TESS_REQUIRE(op != TESS_PAR_MEAN, TESS_ERR_ARG,
                 "the mean of int64 values is not an int64: reduce with SUM and divide");
    TESS_CHECK(allreduce_chunks(g, x, n, sizeof *x, MPI_INT64_T, op));
    return TESS_OK;
}

tess_status tess_par_iallreduce(const tess_group *g, float *x, int64_t n, tess_par_op op,
                                 tess_par_request *req) {
    TESS_CHECK(check_group(g, n, "non-blocking all-reduce"));
    TESS_CHECK(check_op(op));
    TESS_REQUIRE(req, TESS_ERR_ARG, "request is NULL");
    TESS_REQUIRE(req->nreq == 0, TESS_ERR_ARG,
                 "request still has %d chunks in flight (wait for it first)", req->nreq);
    int64_t nchunks = (n + g->max_count - 1) / g->max_count;
    TESS_REQUIRE(nchunks <= TESS_PAR_REQUEST_CHUNKS, TESS_ERR_ARG,
                 "non-blocking all-reduce on '%s' of %lld elements needs %lld chunks of %lld, "
                 "at most %d fit one request: split the buffer", g->name, (long long)n,
                 (long long)nchunks, (long long)g->max_count, TESS_PAR_REQUEST_CHUNKS);
    req->x = x;
    req->n = n;
    req->divisor = op == TESS_PAR_MEAN ? g->size : 1;
    for (int64_t off = 0; off < n; off += g->max_count) {
        int len = tess_par_int(min64(g->max_count, n - off));
        TESS_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, x + off, len, MPI_FLOAT, mpi_op(op), g->comm,
                                      &req->req[req->nreq]));
        req->nreq++;
    }
    return TESS_OK;
}

/* After completion: apply the mean's division; the request is inactive again. */
static void request_finish(tess_par_request *req) {
    req->nreq = 0;
    if (req->divisor > 1) divide_f32(req->x, req->n, req->divisor);
}

tess_status tess_par_wait(tess_par_request *req) {
    TESS_REQUIRE(req, TESS_ERR_ARG, "request is NULL");
    if (req->nreq == 0) return TESS_OK;
    int n = req->nreq;
    req->nreq = 0; /* inactive whatever the outcome: a failed request cannot be waited on again */
    TESS_MPI_CHECK(MPI_Waitall(n, req->req, MPI_STATUSES_IGNORE));
    request_finish(req);
    return TESS_OK;
}

tess_status tess_par_test(tess_par_request *req, bool *done) {
    TESS_REQUIRE(req && done, TESS_ERR_ARG, "request or done is NULL");
    *done = true;
    if (req->nreq == 0) return TESS_OK;
    int flag = 0;
    TESS_MPI_CHECK(MPI_Testall(req->nreq, req->req, &flag, MPI_STATUSES_IGNORE));
    *done = flag != 0;
    if (flag) request_finish(req);
    return TESS_OK;
}

tess_status tess_par_bcast(const tess_group *g, float *x, int64_t n, int root) {
    TESS_CHECK(check_group(g, n, "broadcast"));
    TESS_CHECK(bcast_chunks(g, x, n, sizeof *x, MPI_FLOAT, root));
    return TESS_OK;
}

tess_status tess_par_bcast_bytes(const tess_group *g, void *buf, size_t bytes, int root) {
    TESS_REQUIRE(bytes <= INT64_MAX, TESS_ERR_ARG, "broadcast of %zu bytes", bytes);
    TESS_CHECK(check_group(g, (int64_t)bytes, "byte broadcast"));
    TESS_CHECK(bcast_chunks(g, buf, (int64_t)bytes, 1, MPI_BYTE, root));
    return TESS_OK;
}

/* Large path of the all-gathers: rank r broadcasts its n_r elements, already at out + off_r. */
static tess_status gather_by_bcast(const tess_group *g, float *out, const int64_t *count,
                                   const int64_t *off) {
    for (int r = 0; r < g->size; r++)
        if (count[r] > 0) TESS_CHECK(bcast_chunks(g, out + off[r], count[r], sizeof *out,
                                                  MPI_FLOAT, r));
    return TESS_OK;
}

tess_status tess_par_allgather(const tess_group *g, const float *in, int64_t n, float *out) {
    TESS_CHECK(check_group(g, n, "all-gather"));
    if (n == 0) return TESS_OK;
    if (n * g->size <= g->max_count) {
        TESS_MPI_CHECK(MPI_Allgather(in, tess_par_int(n), MPI_FLOAT, out, tess_par_int(n),
                                     MPI_FLOAT, g->comm));
        return TESS_OK;
    }
    int64_t *count = g->lscratch, *off = g->lscratch + g->size;
    for (int r = 0; r < g->size; r++) {
        count[r] = n;
        off[r] = r * n;
    }
    memcpy(out + g->rank * n, in, (size_t)n * sizeof *out);
    TESS_CHECK(gather_by_bcast(g, out, count, off));
    return TESS_OK;
}

tess_status tess_par_allgatherv(const tess_group *g, const float *in, int64_t rows,
                                 int64_t width, float *out, int64_t out_cap_rows,
                                 int64_t *rows_per_rank) {
    TESS_CHECK(check_group(g, rows, "all-gatherv"));
    TESS_REQUIRE(width >= 1 && out_cap_rows >= 0 && rows_per_rank, TESS_ERR_ARG,
                 "all-gatherv on '%s': width %lld, capacity %lld rows, rows_per_rank %s", g->name,
                 (long long)width, (long long)out_cap_rows, rows_per_rank ? "set" : "NULL");
    /* Exchange (rows, capacity) pairs, so every rank checks every capacity: a shared verdict. */
    int p = g->size;
    int64_t mine[2] = {rows, out_cap_rows}, *pairs = g->lscratch;
    TESS_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT64_T, pairs, 2, MPI_INT64_T, g->comm));
    int64_t total = 0;
    for (int r = 0; r < p; r++) {
        rows_per_rank[r] = pairs[2 * r];
        total += rows_per_rank[r];
    }
    for (int r = 0; r < p; r++)
        TESS_REQUIRE(pairs[2 * r + 1] >= total, TESS_ERR_ARG,
                     "all-gatherv on '%s': rank %d has room for %lld rows, the ranks send %lld",
                     g->name, r, (long long)pairs[2 * r + 1], (long long)total);
    if (total == 0) return TESS_OK;
    int64_t *count = g->lscratch, *off = g->lscratch + p;
    int64_t acc = 0;
    for (int r = 0; r < p; r++) {
        count[r] = rows_per_rank[r] * width;
        off[r] = acc;
        acc += count[r];
    }
    if (acc <= g->max_count) {
        int *icount = g->iscratch, *ioff = g->iscratch + p;
        for (int r = 0; r < p; r++) {
            icount[r] = tess_par_int(count[r]);
            ioff[r] = tess_par_int(off[r]);
        }
        TESS_MPI_CHECK(MPI_Allgatherv(in, icount[g->rank], MPI_FLOAT, out, icount, ioff,
                                      MPI_FLOAT, g->comm));
        return TESS_OK;
    }
    if (count[g->rank] > 0)
        memcpy(out + off[g->rank], in, (size_t)count[g->rank] * sizeof *out);
    TESS_CHECK(gather_by_bcast(g, out, count, off));
    return TESS_OK;
}

tess_status tess_par_reduce_scatter(const tess_group *g, const float *in, float *out, int64_t m,
                                     tess_par_op op) {
    TESS_CHECK(check_group(g, m, "reduce-scatter"));
    TESS_CHECK(check_op(op));
    if (m == 0) return TESS_OK;
    if (m * g->size <= g->max_count) {
        TESS_MPI_CHECK(MPI_Reduce_scatter_block(in, out, tess_par_int(m), MPI_FLOAT, mpi_op(op),
                                                g->comm));
    } else {
        /* One chunked reduction to each rank in turn. */
        for (int r = 0; r < g->size; r++) {
            for (int64_t off = 0; off < m; off += g->max_count) {
                int len = tess_par_int(min64(g->max_count, m - off));
                TESS_MPI_CHECK(MPI_Reduce(in + r * m + off, r == g->rank ? out + off : NULL, len,
                                          MPI_FLOAT, mpi_op(op), r, g->comm));
            }
        }
    }
    if (op == TESS_PAR_MEAN) divide_f32(out, m, g->size);
    return TESS_OK;
}

/* Large path of the all-to-alls: rank me sends scount[j] elements at in + soff[j] to every rank
 * j and receives rcount[i] at out + roff[i] from every rank i. In round s it sends to me + s and
 * receives from me - s, one message of at most max_count elements each way per step; a message
 * k from i to j is matched by receive k of j from i, so no rank waits on one that has finished. */
static tess_status exchange_pairwise(const tess_group *g, const float *in, const int64_t *scount,
                                     const int64_t *soff, float *out, const int64_t *rcount,
                                     const int64_t *roff) {
    int p = g->size, me = g->rank;
    if (scount[me] > 0) memcpy(out + roff[me], in + soff[me], (size_t)scount[me] * sizeof *out);
    for (int s = 1; s < p; s++) {
        int to = (me + s) % p, from = (me - s + p) % p;
        int64_t sent = 0, got = 0;
        while (sent < scount[to] || got < rcount[from]) {
            MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
            if (got < rcount[from]) {
                int len = tess_par_int(min64(g->max_count, rcount[from] - got));
                TESS_MPI_CHECK(MPI_Irecv(out + roff[from] + got, len, MPI_FLOAT, from,
                                         TESS_PAR_TAG, g->comm, &rq[0]));
                got += len;
            }
            if (sent < scount[to]) {
                int len = tess_par_int(min64(g->max_count, scount[to] - sent));
                TESS_MPI_CHECK(MPI_Isend(in + soff[to] + sent, len, MPI_FLOAT, to, TESS_PAR_TAG,
                                         g->comm, &rq[1]));
                sent += len;
            }
            TESS_MPI_CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        }
    }
    return TESS_OK;
}

tess_status tess_par_alltoall(const tess_group *g, const float *in, int64_t m, float *out) {
    TESS_CHECK(check_group(g, m, "all-to-all"));
    if (m == 0) return TESS_OK;
    int p = g->size;
    if (m * p <= g->max_count) {
        TESS_MPI_CHECK(MPI_Alltoall(in, tess_par_int(m), MPI_FLOAT, out, tess_par_int(m),
                                    MPI_FLOAT, g->comm));
        return TESS_OK;
    }
    int64_t *count = g->lscratch, *off = g->lscratch + p;
    for (int r = 0; r < p; r++) {
        count[r] = m;
        off[r] = r * m;
    }
    TESS_CHECK(exchange_pairwise(g, in, count, off, out, count, off));
    return TESS_OK;
}

tess_status tess_par_alltoallv(const tess_group *g, const float *in, const int64_t *send_rows,
                                int64_t width, float *out, int64_t out_cap_rows,
                                int64_t *recv_rows) {
    TESS_REQUIRE(g, TESS_ERR_ARG, "group is NULL");
    TESS_REQUIRE(width >= 1 && send_rows && recv_rows, TESS_ERR_ARG,
                 "all-to-allv on '%s': width %lld, send_rows %s, recv_rows %s", g->name,
                 (long long)width, send_rows ? "set" : "NULL", recv_rows ? "set" : "NULL");
    int p = g->size;
    TESS_MPI_CHECK(MPI_Alltoall(send_rows, 1, MPI_INT64_T, recv_rows, 1, MPI_INT64_T, g->comm));
    int64_t send_total = 0, recv_total = 0;
    int bad_count = 0;
    for (int r = 0; r < p; r++) {
        bad_count |= send_rows[r] < 0;
        send_total += send_rows[r];
        recv_total += recv_rows[r];
    }
    /* Agree on the verdicts that only some ranks can see: [bad count, no room, too big]. */
    int flags[3] = {bad_count, recv_total > out_cap_rows,
                    send_total * width > g->max_count || recv_total * width > g->max_count};
    int any[3];
    TESS_MPI_CHECK(MPI_Allreduce(flags, any, 3, MPI_INT, MPI_MAX, g->comm));
    TESS_REQUIRE(!flags[0], TESS_ERR_ARG, "all-to-allv on '%s': a send row count is negative",
                 g->name);
    TESS_REQUIRE(!flags[1], TESS_ERR_ARG,
                 "all-to-allv on '%s': %lld rows arrive, the receive buffer holds %lld", g->name,
                 (long long)recv_total, (long long)out_cap_rows);
    TESS_REQUIRE(!any[0] && !any[1], TESS_ERR_ARG,
                 "all-to-allv on '%s': another rank has a negative count or too small a buffer",
                 g->name);
    int64_t *scount = g->lscratch, *soff = scount + p, *rcount = soff + p, *roff = rcount + p;
    int64_t sacc = 0, racc = 0;
    for (int r = 0; r < p; r++) {
        scount[r] = send_rows[r] * width;
        rcount[r] = recv_rows[r] * width;
        soff[r] = sacc;
        roff[r] = racc;
        sacc += scount[r];
        racc += rcount[r];
    }
    if (any[2]) {
        TESS_CHECK(exchange_pairwise(g, in, scount, soff, out, rcount, roff));
        return TESS_OK;
    }
    int *isc = g->iscratch, *iso = isc + p, *irc = iso + p, *iro = irc + p;
    for (int r = 0; r < p; r++) {
        isc[r] = tess_par_int(scount[r]);
        iso[r] = tess_par_int(soff[r]);
        irc[r] = tess_par_int(rcount[r]);
        iro[r] = tess_par_int(roff[r]);
    }
    TESS_MPI_CHECK(MPI_Alltoallv(in, isc, iso, MPI_FLOAT, out, irc, iro, MPI_FLOAT, g->comm));
    return TESS_OK;
}
