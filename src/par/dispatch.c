/* dispatch.c - the all-to-all-v exchange plan (dispatch.h). */
#include "par/dispatch.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */

struct tess_dispatch {
    const tess_group *g;
    int64_t S;                 /* slots per rank */
    int *scnt, *rcnt;          /* (P*S) int32 counts sent / received, [rank][slot] */
    int *srows, *sdisp;        /* (P) rows and displacements per destination */
    int *rrows, *rdisp;        /* (P) rows and displacements per source */
    int64_t *rcnt64;           /* (P*S) received counts as int64 (the public view) */
    int64_t nsend, nrecv;
    bool fixed;                /* the plan has equal blocks (tess_dispatch_plan_fixed) */
    /* all-gather mode */
    bool allgather;
    int *acnt;                 /* (P, P*S) every rank's send counts */
    int64_t *qoff;             /* (P) offset of the rows for this rank in rank q's send order */
    int64_t M;                 /* the largest send total over the ranks */
    float *big;                /* (P M, width) exchange buffer, grown on demand */
    size_t big_cap;            /* floats */
};

tess_status tess_dispatch_create(tess_dispatch **d, const tess_group *g, int64_t slots) {
    *d = NULL;
    TESS_REQUIRE(slots >= 1, TESS_ERR_ARG, "dispatch: slots per rank must be >= 1, got %lld",
                 (long long)slots);
    tess_dispatch *x = calloc(1, sizeof *x);
    TESS_REQUIRE(x, TESS_ERR_MEM, "dispatch: cannot allocate a plan");
    const size_t ps = (size_t)g->size * (size_t)slots, p = (size_t)g->size;
    x->g = g;
    x->S = slots;
    x->scnt = calloc(ps, sizeof(int));
    x->rcnt = calloc(ps, sizeof(int));
    x->rcnt64 = calloc(ps, sizeof(int64_t));
    x->srows = calloc(p, sizeof(int));
    x->sdisp = calloc(p, sizeof(int));
    x->rrows = calloc(p, sizeof(int));
    x->rdisp = calloc(p, sizeof(int));
    if (!x->scnt || !x->rcnt || !x->rcnt64 || !x->srows || !x->sdisp || !x->rrows || !x->rdisp) {
        tess_dispatch_destroy(&x);
        TESS_REQUIRE(false, TESS_ERR_MEM, "dispatch: cannot allocate counts for %d ranks x %lld",
                     g->size, (long long)slots);
    }
    *d = x;
    return TESS_OK;
}

tess_status tess_dispatch_create_allgather(tess_dispatch **d, const tess_group *g, int64_t slots) {
    TESS_CHECK(tess_dispatch_create(d, g, slots));
    tess_dispatch *x = *d;
    x->allgather = true;
    x->acnt = calloc((size_t)g->size * (size_t)g->size * (size_t)slots, sizeof(int));
    x->qoff = calloc((size_t)g->size, sizeof(int64_t));
    if (!x->acnt || !x->qoff) {
        tess_dispatch_destroy(d);
        TESS_REQUIRE(false, TESS_ERR_MEM, "dispatch: cannot allocate all-gather counts for %d "
                     "ranks x %lld", g->size, (long long)slots);
    }
    return TESS_OK;
}

void tess_dispatch_destroy(tess_dispatch **d) {
    if (!d || !*d) return;
    tess_dispatch *x = *d;
    free(x->scnt), free(x->rcnt), free(x->rcnt64), free(x->srows), free(x->sdisp);
    free(x->rrows), free(x->rdisp), free(x->acnt), free(x->qoff), free(x->big);
    free(x);
    *d = NULL;
}

/* Per-rank rows and displacements from per-slot counts; false if a total reaches INT_MAX. */
static int per_rank(const int *cnt, int64_t P, int64_t S, int *rows, int *disp) {
    int64_t off = 0;
    for (int64_t r = 0; r < P; r++) {
        int64_t n = 0;
        for (int64_t j = 0; j < S; j++) n += cnt[r * S + j];
        if (n > INT_MAX || off > INT_MAX) return -1;
        rows[r] = (int)n;
        disp[r] = (int)off;
        off += n;
    }
    return off > INT_MAX ? -1 : 0;
}

/* Rows and displacements per rank and the totals from scnt and rcnt; total rows sent. */
static tess_status finish_plan(tess_dispatch *d, int64_t total, bool fixed) {
    const int64_t P = d->g->size, S = d->S;
    TESS_REQUIRE(per_rank(d->scnt, P, S, d->srows, d->sdisp) == 0 &&
                     per_rank(d->rcnt, P, S, d->rrows, d->rdisp) == 0,
                 TESS_ERR_ARG, "dispatch: rows per exchange reach 2^31");
    d->nsend = total;
    d->nrecv = 0;
    for (int64_t i = 0; i < P * S; i++) d->nrecv += (d->rcnt64[i] = d->rcnt[i]);
    d->fixed = fixed;
    return TESS_OK;
}

tess_status tess_dispatch_plan(tess_dispatch *d, const int64_t *send_counts) {
    const int64_t P = d->g->size, S = d->S;
    int64_t total = 0;
    for (int64_t i = 0; i < P * S; i++) {
        TESS_REQUIRE(send_counts[i] >= 0 && send_counts[i] < INT_MAX, TESS_ERR_ARG,
                     "dispatch: send count %lld for rank %lld slot %lld out of range",
                     (long long)send_counts[i], (long long)(i / S), (long long)(i % S));
        d->scnt[i] = (int)send_counts[i];
        total += send_counts[i];
    }
    TESS_REQUIRE(total < INT_MAX, TESS_ERR_ARG, "dispatch: %lld rows to send reach 2^31",
                 (long long)total);
    if (d->allgather) {
        /* every rank's counts; this rank's share of rank q's: its block r = me */
        const int me = d->g->rank;
        TESS_MPI_CHECK(MPI_Allgather(d->scnt, (int)(P * S), MPI_INT, d->acnt, (int)(P * S),
                                     MPI_INT, d->g->comm));
        d->M = 0;
        for (int64_t q = 0; q < P; q++) {
            const int *c = d->acnt + q * P * S;
            int64_t tot = 0, off = 0;
            for (int64_t i = 0; i < P * S; i++) {
                tot += c[i];
                if (i < me * S) off += c[i];
            }
            for (int64_t j = 0; j < S; j++) d->rcnt[q * S + j] = c[me * S + j];
            d->qoff[q] = off;
            d->M = tot > d->M ? tot : d->M;
        }
    } else {
        TESS_MPI_CHECK(MPI_Alltoall(d->scnt, (int)S, MPI_INT, d->rcnt, (int)S, MPI_INT,
                                    d->g->comm));
    }
    return finish_plan(d, total, false);
}

tess_status tess_dispatch_plan_fixed(tess_dispatch *d, int64_t rows) {
    const int64_t P = d->g->size, S = d->S;
    TESS_REQUIRE(rows >= 0 && rows < INT_MAX / (P * S), TESS_ERR_ARG,
                 "dispatch: %lld rows per (rank, slot) x %lld ranks x %lld slots out of range",
                 (long long)rows, (long long)P, (long long)S);
    for (int64_t i = 0; i < P * S; i++) d->scnt[i] = d->rcnt[i] = (int)rows;
    if (d->allgather) { /* every rank's counts are rows: rank q's rows for me start at me*S*rows */
        for (int64_t i = 0; i < P * P * S; i++) d->acnt[i] = (int)rows;
        for (int64_t q = 0; q < P; q++) d->qoff[q] = d->g->rank * S * rows;
        d->M = P * S * rows;
    }
    return finish_plan(d, P * S * rows, true);
}

tess_status tess_dispatch_plan_local(tess_dispatch *d, const int64_t *send_counts,
                                     const int64_t *recv_counts) {
    const int64_t P = d->g->size, S = d->S;
    TESS_REQUIRE(!d->allgather, TESS_ERR_ARG,
                 "dispatch: a local plan needs the all-to-all mode (the all-gather mode needs "
                 "every rank's counts)");
    int64_t total = 0;
    for (int64_t i = 0; i < P * S; i++) {
        TESS_REQUIRE(send_counts[i] >= 0 && send_counts[i] < INT_MAX && recv_counts[i] >= 0 &&
                         recv_counts[i] < INT_MAX,
                     TESS_ERR_ARG, "dispatch: count %lld / %lld for rank %lld slot %lld out of range",
                     (long long)send_counts[i], (long long)recv_counts[i], (long long)(i / S),
                     (long long)(i % S));
        d->scnt[i] = (int)send_counts[i];
        d->rcnt[i] = (int)recv_counts[i];
        total += send_counts[i];
    }
    TESS_REQUIRE(total < INT_MAX, TESS_ERR_ARG, "dispatch: %lld rows to send reach 2^31",
                 (long long)total);
    return finish_plan(d, total, false);
}

int64_t tess_dispatch_send_rows(const tess_dispatch *d) { return d->nsend; }
int64_t tess_dispatch_recv_rows(const tess_dispatch *d) { return d->nrecv; }
const int64_t *tess_dispatch_recv_counts(const tess_dispatch *d) { return d->rcnt64; }
int64_t tess_dispatch_slot_rows(const tess_dispatch *d, int64_t j) {
    int64_t n = 0;
    for (int64_t q = 0; q < d->g->size; q++) n += d->rcnt64[q * d->S + j];
    return n;
}

/* One all-to-all(v) of rows of `width` elements of type el. */
static tess_status exchange(tess_dispatch *d, const void *in, const int *icnt, const int *idisp,
                            void *out, const int *ocnt, const int *odisp, int64_t width,
                            MPI_Datatype el) {
    TESS_REQUIRE(width >= 1 && width <= INT_MAX, TESS_ERR_ARG, "dispatch: row width %lld",
                 (long long)width);
    MPI_Datatype row;
    TESS_MPI_CHECK(MPI_Type_contiguous((int)width, el, &row));
    TESS_MPI_CHECK(MPI_Type_commit(&row));
    /* equal blocks: icnt[r] = ocnt[r] = S*rows for every r, displacements r*S*rows */
    const int rc = d->fixed ? MPI_Alltoall(in, icnt[0], row, out, ocnt[0], row, d->g->comm)
                            : MPI_Alltoallv(in, icnt, idisp, row, out, ocnt, odisp, row,
                                            d->g->comm);
    MPI_Type_free(&row);
    TESS_MPI_CHECK(rc);
    return TESS_OK;
}

/* The all-gather mode's buffer for (P M, width) floats (M at least 1). */
static tess_status big_buffer(tess_dispatch *d, int64_t width) {
    TESS_REQUIRE(width >= 1 && width <= INT_MAX && d->M * width <= INT_MAX, TESS_ERR_ARG,
                 "dispatch: %lld rows of width %lld per all-gather block", (long long)d->M,
                 (long long)width);
    const size_t need = (size_t)(d->g->size * (d->M > 0 ? d->M : 1) * width);
    if (need > d->big_cap) {
        float *b = realloc(d->big, need * sizeof(float));
        TESS_REQUIRE(b, TESS_ERR_MEM, "dispatch: cannot grow the all-gather buffer to %zu floats",
                     need);
        d->big = b, d->big_cap = need;
    }
    return TESS_OK;
}

static tess_status ag_forward(tess_dispatch *d, const float *send, float *recv, int64_t width) {
    TESS_CHECK(big_buffer(d, width));
    const int64_t Mb = d->M > 0 ? d->M : 1;
    /* this rank's rows, padded to M, in its block; then every block from its rank */
    float *mine = d->big + d->g->rank * Mb * width;
    memcpy(mine, send, (size_t)(d->nsend * width) * sizeof(float));
    memset(mine + d->nsend * width, 0, (size_t)((Mb - d->nsend) * width) * sizeof(float));
    TESS_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d->big, (int)(Mb * width),
                                 MPI_FLOAT, d->g->comm));
    for (int64_t q = 0; q < d->g->size; q++)
        memcpy(recv + (int64_t)d->rdisp[q] * width, d->big + (q * Mb + d->qoff[q]) * width,
               (size_t)((int64_t)d->rrows[q] * width) * sizeof(float));
    return TESS_OK;
}

static tess_status ag_reverse(tess_dispatch *d, const float *recv, float *send, int64_t width) {
    TESS_CHECK(big_buffer(d, width));
    const int64_t Mb = d->M > 0 ? d->M : 1;
    memset(d->big, 0, (size_t)(d->g->size * Mb * width) * sizeof(float));
    for (int64_t q = 0; q < d->g->size; q++)
        memcpy(d->big + (q * Mb + d->qoff[q]) * width, recv + (int64_t)d->rdisp[q] * width,
               (size_t)((int64_t)d->rrows[q] * width) * sizeof(float));
    /* in place: this rank's block of the sum lands at the start of big */
    TESS_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, d->big, (int)(Mb * width), MPI_FLOAT,
                                            MPI_SUM, d->g->comm));
    memcpy(send, d->big, (size_t)(d->nsend * width) * sizeof(float));
    return TESS_OK;
}

tess_status tess_dispatch_forward(tess_dispatch *d, const float *send, float *recv, int64_t width) {
    if (d->allgather) return ag_forward(d, send, recv, width);
    TESS_CHECK(exchange(d, send, d->srows, d->sdisp, recv, d->rrows, d->rdisp, width, MPI_FLOAT));
    return TESS_OK;
}

tess_status tess_dispatch_forward_i32(tess_dispatch *d, const int32_t *send, int32_t *recv,
                                      int64_t width) {
    TESS_REQUIRE(!d->allgather, TESS_ERR_ARG,
                 "dispatch: integer rows need the all-to-all mode");
    TESS_CHECK(exchange(d, send, d->srows, d->sdisp, recv, d->rrows, d->rdisp, width, MPI_INT32_T));
    return TESS_OK;
}

tess_status tess_dispatch_reverse(tess_dispatch *d, const float *recv, float *send, int64_t width) {
    if (d->allgather) return ag_reverse(d, recv, send, width);
    TESS_CHECK(exchange(d, recv, d->rrows, d->rdisp, send, d->srows, d->sdisp, width, MPI_FLOAT));
    return TESS_OK;
}

/* Copy rows between the [source][slot] order (offsets a) and the [slot][source] order. */
static void reorder(const tess_dispatch *d, const float *in, float *out, int64_t width,
                    int to_slots) {
    const int64_t P = d->g->size, S = d->S;
    int64_t so = 0; /* offset in [slot][source] order */
    for (int64_t j = 0; j < S; j++)
        for (int64_t q = 0; q < P; q++) {
            int64_t qo = d->rdisp[q]; /* offset in [source][slot] order */
            for (int64_t i = 0; i < j; i++) qo += d->rcnt[q * S + i];
            const size_t bytes = (size_t)(d->rcnt[q * S + j] * width) * sizeof(float);
            if (to_slots)
                memcpy(out + so * width, in + qo * width, bytes);
            else
                memcpy(out + qo * width, in + so * width, bytes);
            so += d->rcnt[q * S + j];
        }
}

void tess_dispatch_regroup(const tess_dispatch *d, const float *in, float *out, int64_t width) {
    reorder(d, in, out, width, 1);
}

void tess_dispatch_ungroup(const tess_dispatch *d, const float *in, float *out, int64_t width) {
    reorder(d, in, out, width, 0);
}
