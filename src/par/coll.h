/* coll.h - collectives on a group: all-reduce (blocking and non-blocking), broadcast, all-gather(v),
 * reduce-scatter, all-to-all(v), on fp32 buffers (plus double/int64 all-reduce for scalars and stat
 * vectors).
 *
 * Every call is collective on its group g: all ranks of g call it in the same order, with the
 * arguments each comment says must be the same. Counts are int64_t elements (or rows of `width`
 * floats). Open MPI 4.1 has no large-count API, so no single MPI call moves more than
 * g->max_count (TESS_PAR_MAX_COUNT = 2^30) elements: all-reduce and broadcast loop over chunks;
 * all-gather(v) and reduce-scatter fall back to one chunked broadcast / reduction per rank, and
 * all-to-all(v) to pairwise chunked messages (tag TESS_PAR_TAG on g->comm) when their buffers
 * exceed the limit. tess_group_set_max_count lowers the limit so tests run those paths on small
 * buffers. Nothing here allocates: the v-collectives use the group's scratch.
 *
 * Errors: argument errors detected from arguments that are the same on every rank return
 * TESS_ERR_ARG on every rank. A capacity error found after a counts exchange is agreed on, so all
 * ranks return it together. MPI errors come back as TESS_ERR_MPI with MPI's text (the group's
 * communicator has MPI_ERRORS_RETURN); such an error may be local to one rank, and the caller
 * ends the run (its main calls MPI_Abort) rather than calling further collectives.
 */
#ifndef TESS_PAR_COLL_H
#define TESS_PAR_COLL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h" /* TESS_ASSERT */
#include "par/mesh.h"   /* tess_group */

enum {
    TESS_PAR_TAG = 30011,         /* tag of the library's point-to-point messages on g->comm */
    TESS_PAR_REQUEST_CHUNKS = 16, /* non-blocking all-reduce: at most 16 * max_count elements */
    /* bytes of the failing rank's record that tess_par_agree sends: room for a problem list of
     * some 20 lines (a checkpoint's, io/ckpt_impl.h) within the 8 KiB record (core/status.c) */
    TESS_PAR_AGREE_TEXT = 7168,
};

typedef enum {
    TESS_PAR_SUM = 0,
    TESS_PAR_MEAN, /* sum divided by g->size; not for int64 */
    TESS_PAR_MAX,
    TESS_PAR_MIN,
} tess_par_op;

/* The one checked narrowing of a count to the int that MPI wants; callers guarantee the fit
 * (counts <= g->max_count), so a failure is a bug (TESS_ASSERT). */
static inline int tess_par_int(int64_t n) {
    TESS_ASSERT(n >= 0 && n <= INT_MAX);
    return (int)n;
}

/* A non-blocking all-reduce in flight. Caller-owned (no allocation per call); fields private.
 * Zero-initialised or completed, it is inactive and tess_par_wait returns at once. */
typedef struct {
    MPI_Request req[TESS_PAR_REQUEST_CHUNKS];
    int nreq;
    float *x;
    int64_t n;
    int divisor; /* TESS_PAR_MEAN: group size, applied on completion; else 1 */
} tess_par_request;

/* The one verdict: every rank passes its locally decided status and all return the same one.
 * If no rank failed, TESS_OK. Otherwise the failing rank with the lowest group rank f decides:
 * f returns its own status with its record untouched; every other rank returns f's status and
 * appends one line "rank f of '<group>' failed:" followed by f's record (at most
 * TESS_PAR_AGREE_TEXT bytes of it), so whichever rank prints (rank 0 for a collective failure)
 * names the failing rank and its message. Collective on g (one all-reduce; one broadcast only
 * when some rank failed). An MPI failure here is TESS_ERR_MPI on the rank that saw it. */
tess_status tess_par_agree(const tess_group *g, tess_status local);

/* x (n) <- op over the ranks of g of x (n), in place. Collective on g; n and op the same on
 * every rank. x may be NULL if n == 0. MEAN is the sum divided by g->size. */
tess_status tess_par_allreduce(const tess_group *g, float *x, int64_t n, tess_par_op op);
/* The same for doubles (losses, norms, statistics). Collective on g; n and op the same on every
 * rank. */
tess_status tess_par_allreduce_f64(const tess_group *g, double *x, int64_t n, tess_par_op op);
/* The same for int64 (counts); op is SUM, MAX or MIN (MEAN returns TESS_ERR_ARG). Collective on
 * g; n and op the same on every rank. */
tess_status tess_par_allreduce_i64(const tess_group *g, int64_t *x, int64_t n, tess_par_op op);

/* Start tess_par_allreduce(g, x, n, op) and return at once; x must stay untouched until
 * tess_par_wait(req) (or tess_par_test reporting done). n <= TESS_PAR_REQUEST_CHUNKS *
 * g->max_count. Collective on g, in the same order as every other collective on g; n and op the
 * same on every rank. Several may be in flight on one group, each with its own request. */
tess_status tess_par_iallreduce(const tess_group *g, float *x, int64_t n, tess_par_op op,
                                 tess_par_request *req);
/* Complete req (x then holds the result) and make it inactive, even on failure. Not collective:
 * waits for this rank's part only. */
tess_status tess_par_wait(tess_par_request *req);
/* *done = whether req has completed (then as after tess_par_wait); never blocks. Not
 * collective. Calling it now and then during computation also lets MPI progress the reduction. */
tess_status tess_par_test(tess_par_request *req, bool *done);

/* x (n) on every rank <- x (n) on rank `root` of g. Collective on g; n and root the same on
 * every rank. An invalid root comes back from MPI as TESS_ERR_MPI ("MPI_ERR_ROOT: ..."). */
tess_status tess_par_bcast(const tess_group *g, float *x, int64_t n, int root);
/* The same for `bytes` raw bytes (configuration text, headers). Collective on g; bytes and root
 * the same on every rank. */
tess_status tess_par_bcast_bytes(const tess_group *g, void *buf, size_t bytes, int root);

/* out (size, n) <- in (n) of every rank, rank r's at row r. Collective on g; n the same on
 * every rank; in and out do not overlap. */
tess_status tess_par_allgather(const tess_group *g, const float *in, int64_t n, float *out);

/* out (sum_r rows_r, width) <- the rows of every rank in rank order; rank r contributes in
 * (rows_r, width). The row counts are exchanged for the caller: rows_per_rank (size) returns
 * every rank's rows_r. out has room for out_cap_rows rows; if the total exceeds that on any rank,
 * every rank returns TESS_ERR_ARG. Collective on g; width the same on every rank, rows may
 * differ; in and out do not overlap. */
tess_status tess_par_allgatherv(const tess_group *g, const float *in, int64_t rows,
                                 int64_t width, float *out, int64_t out_cap_rows,
                                 int64_t *rows_per_rank);

/* out (m) <- op over ranks of block `rank` of in (size, m): rank r receives the reduction of
 * every rank's in[r*m .. r*m+m). Collective on g; m and op the same on every rank; in and out
 * do not overlap. */
tess_status tess_par_reduce_scatter(const tess_group *g, const float *in, float *out, int64_t m,
                                     tess_par_op op);

/* Block j of in (size, m) goes to rank j; block i of out (size, m) comes from rank i.
 * Collective on g; m the same on every rank; in and out do not overlap. */
tess_status tess_par_alltoall(const tess_group *g, const float *in, int64_t m, float *out);

/* Variable all-to-all of rows of `width` floats (MoE token dispatch). in holds send_rows[j]
 * rows for rank j, destinations in rank order (send_rows: size). The counts are exchanged for
 * the caller: recv_rows (size) returns how many rows came from each rank, and out (sum recv_rows,
 * width) holds them in source-rank order. out has room for out_cap_rows rows; if any rank's
 * total exceeds its capacity, every rank returns TESS_ERR_ARG. Collective on g; width the same on
 * every rank; in and out do not overlap. */
tess_status tess_par_alltoallv(const tess_group *g, const float *in, const int64_t *send_rows,
                                int64_t width, float *out, int64_t out_cap_rows,
                                int64_t *recv_rows);

#endif
