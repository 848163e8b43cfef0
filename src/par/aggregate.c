/* aggregate.c - the federated average: weighted, in client-id order, slice-owned (see
 * aggregate.h). */
#include "par/aggregate.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "par/coll.h"      /* tess_par_agree, tess_par_alltoallv, tess_par_allgatherv */
#include "par/layout.h"    /* tess_par_block_range */

typedef struct {
    int64_t id;
    double w;
} client_meta;

/* A client's id and its position in rank order, sorted by id for the summation order. */
typedef struct {
    int64_t id, pos;
} client_key;

/* What a client selects: entry count, floats, and a digest of the names and counts. */
typedef struct {
    int64_t nsel, len;
    int64_t digest; /* 62 bits, so that it can be negated in the agreement */
} selection;

/* The buffers of one call, allocated together. */
typedef struct {
    client_meta *meta;  /* (nclients) every client's id and weight, in rank order */
    client_key *order;  /* (nclients) the clients by increasing id */
    float *send;        /* (nlocal * L) slice j of every local client, for rank j in turn */
    float *recv;        /* (nclients * ms) my slice of every client, in rank order */
    double *acc;        /* (ms) the weighted sums of my slice */
    float *mine;        /* (ms) my averaged slice */
    float *full;        /* (L) the averaged vector */
    int64_t *rows;      /* (3 * size) send rows, receive rows, rows per rank */
} agg_buffers;

static bool selected(const tess_registry_entry *e, uint32_t tags) {
    return (e->tags & tags) == tags;
}

static int64_t fnv(int64_t h, const void *p, size_t n) {
    uint64_t x = (uint64_t)h;
    for (size_t i = 0; i < n; i++) x = (x ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return (int64_t)x;
}

/* Describe reg's selection into *s, refusing entries that must not be averaged. Local. */
static tess_status describe(const tess_registry *reg, uint32_t tags, selection *s) {
    TESS_REQUIRE(reg && tess_registry_is_final(reg), TESS_ERR_ARG,
                 "a client registry is NULL or not finalized");
    *s = (selection){0, 0, (int64_t)0xcbf29ce484222325ull};
    for (int64_t i = 0; i < tess_registry_count(reg); i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (!selected(e, tags)) continue;
        TESS_REQUIRE(!(e->tags & TESS_TAG_LOCAL), TESS_ERR_ARG,
                     "'%s' is tagged LOCAL and must never leave its client", e->name);
        TESS_REQUIRE(e->layout.kind == TESS_LAYOUT_REPLICATED, TESS_ERR_ARG,
                     "'%s' is %s: only whole (replicated) client tensors can be averaged", e->name,
                     tess_layout_kind_name(e->layout.kind));
        s->nsel++;
        s->len += e->local_count;
        s->digest = fnv(s->digest, e->name, strlen(e->name) + 1);
        s->digest = fnv(s->digest, &e->local_count, sizeof e->local_count);
    }
    s->digest &= (int64_t)(((uint64_t)1 << 62) - 1);
    return TESS_OK;
}

/* Everything one rank can check alone: arguments and the local clients' selections. */
static tess_status check_local(tess_registry *const *clients, const int64_t *ids,
                               const double *weights, int nlocal, uint32_t tags, selection *s) {
    TESS_REQUIRE(nlocal >= 0, TESS_ERR_ARG, "nlocal = %d < 0", nlocal);
    TESS_REQUIRE(nlocal == 0 || (clients && ids && weights), TESS_ERR_ARG,
                 "%d local clients but clients, ids or weights is NULL", nlocal);
    for (int k = 0; k < nlocal; k++) {
        TESS_REQUIRE(isfinite(weights[k]) && weights[k] >= 0.0, TESS_ERR_ARG,
                     "client %lld: weight %g is not finite and >= 0", (long long)ids[k],
                     weights[k]);
        selection c = {0, 0, 0};
        TESS_CHECK(describe(clients[k], tags, &c));
        if (k == 0) *s = c;
        TESS_REQUIRE(c.nsel == s->nsel && c.len == s->len && c.digest == s->digest, TESS_ERR_ARG,
                     "client %lld selects %lld entries of %lld floats with tags 0x%x, client %lld "
                     "%lld entries of %lld floats (or other names)",
                     (long long)ids[k], (long long)c.nsel, (long long)c.len, (unsigned)tags,
                     (long long)ids[0], (long long)s->nsel, (long long)s->len);
    }
    return TESS_OK;
}

/* Copy floats [a, b) of reg's selected vector to dst (b - a). */
static void pack(const tess_registry *reg, uint32_t tags, int64_t a, int64_t b, float *dst) {
    int64_t pos = 0;
    for (int64_t i = 0; i < tess_registry_count(reg) && pos < b; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (!selected(e, tags)) continue;
        const int64_t lo = a > pos ? a : pos, end = pos + e->local_count, hi = b < end ? b : end;
        if (lo < hi)
            memcpy(dst + (lo - a), tess_registry_param(reg, i) + (lo - pos),
                   (size_t)(hi - lo) * sizeof *dst);
        pos = end;
    }
}

/* Write the whole selected vector src (len) into reg's selected entries. */
static void unpack(tess_registry *reg, uint32_t tags, const float *src) {
    int64_t pos = 0;
    for (int64_t i = 0; i < tess_registry_count(reg); i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (!selected(e, tags)) continue;
        memcpy(tess_registry_param(reg, i), src + pos, (size_t)e->local_count * sizeof *src);
        pos += e->local_count;
    }
}

static void buffers_free(agg_buffers *b) {
    free(b->meta);
    free(b->order);
    free(b->send);
    free(b->recv);
    free(b->acc);
    free(b->mine);
    free(b->full);
    free(b->rows);
}

static void *alloc_n(int64_t n, size_t elem) { return malloc((size_t)(n > 0 ? n : 1) * elem); }

static int by_id(const void *a, const void *b) {
    const int64_t x = ((const client_key *)a)->id, y = ((const client_key *)b)->id;
    return (x > y) - (x < y);
}

/* The exchange proper, once every check has passed and b is allocated. cnt/displ: the
 * all-gathered client counts and their byte displacements. */
static tess_status average(const tess_group *g, tess_registry *const *clients,
                           const int64_t *ids, const double *weights, int nlocal,
                           int64_t nclients, uint32_t tags, int64_t L, const int *cnt,
                           const int *displ, agg_buffers *b, int64_t *bytes) {
    const int P = g->size, me = g->rank;
    /* 1. Ids and weights of every client, in rank order; the summation order by id. */
    int64_t first = 0;
    for (int r = 0; r < me; r++) first += cnt[r];
    for (int k = 0; k < nlocal; k++) b->meta[first + k] = (client_meta){ids[k], weights[k]};
    int *bcnt = g->iscratch + 2 * P; /* bytes per rank */
    for (int r = 0; r < P; r++) bcnt[r] = cnt[r] * (int)sizeof(client_meta);
    TESS_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b->meta, bcnt, displ,
                                  MPI_BYTE, g->comm));
    for (int64_t p = 0; p < nclients; p++) b->order[p] = (client_key){b->meta[p].id, p};
    qsort(b->order, (size_t)nclients, sizeof *b->order, by_id);
    double wsum = 0.0;
    for (int64_t q = 0; q < nclients; q++) {
        TESS_REQUIRE(q == 0 || b->order[q].id != b->order[q - 1].id, TESS_ERR_ARG,
                     "client id %lld is used twice", (long long)b->order[q].id);
        wsum += b->meta[b->order[q].pos].w;
    }
    TESS_REQUIRE(wsum > 0.0 && isfinite(wsum), TESS_ERR_ARG,
                 "the clients' weights sum to %g: nothing to average", wsum);

    /* 2. Slice j of every local client to rank j. */
    int64_t *send_rows = b->rows, *recv_rows = b->rows + P, *per_rank = b->rows + 2 * P;
    int64_t off = 0, mlo, mhi;
    for (int j = 0; j < P; j++) {
        int64_t lo, hi;
        tess_par_block_range(L, P, j, &lo, &hi);
        send_rows[j] = (int64_t)nlocal * (hi - lo);
        for (int k = 0; k < nlocal; k++, off += hi - lo)
            pack(clients[k], tags, lo, hi, b->send + off);
        if (j != me) *bytes += send_rows[j] * (int64_t)sizeof(float);
    }
    tess_par_block_range(L, P, me, &mlo, &mhi);
    const int64_t ms = mhi - mlo;
    TESS_CHECK(tess_par_alltoallv(g, b->send, send_rows, 1, b->recv, nclients * ms, recv_rows));

    /* 3. My slice: client after client in id order, each element's sum in double. Rank-order
     * position p of a client is also its row block in recv. */
    for (int64_t i = 0; i < ms; i++) b->acc[i] = 0.0;
    for (int64_t q = 0; q < nclients; q++) {
        const int64_t p = b->order[q].pos;
        const double w = b->meta[p].w;
        const float *x = b->recv + p * ms;
        for (int64_t i = 0; i < ms; i++) b->acc[i] += w * (double)x[i];
    }
    for (int64_t i = 0; i < ms; i++) b->mine[i] = (float)(b->acc[i] / wsum);

    /* 4. Every rank gets every slice, and every local client the average. */
    TESS_CHECK(tess_par_allgatherv(g, b->mine, ms, 1, b->full, L, per_rank));
    *bytes += (int64_t)(P - 1) * ms * (int64_t)sizeof(float);
    for (int k = 0; k < nlocal; k++) unpack(clients[k], tags, b->full);
    return TESS_OK;
}

tess_status tess_par_aggregate(const tess_group *g, tess_registry *const *clients,
                               const int64_t *client_ids, const double *weights, int nlocal,
                               int64_t nclients, uint32_t tags, int64_t *bytes_sent) {
    TESS_REQUIRE(g, TESS_ERR_ARG, "group is NULL");
    TESS_REQUIRE(tags != 0, TESS_ERR_ARG, "federated average: tags must name the entries (got 0)");
    TESS_REQUIRE(nclients >= 1 && nclients <= INT_MAX / (int64_t)sizeof(client_meta),
                 TESS_ERR_ARG, "nclients = %lld outside 1..%lld", (long long)nclients,
                 (long long)(INT_MAX / (int64_t)sizeof(client_meta)));
    const int P = g->size;
    selection s = {0, 0, 0};
    tess_status st = check_local(clients, client_ids, weights, nlocal, tags, &s);
    TESS_CHECK(tess_par_agree(g, st));

    /* Client counts per rank in the group's count scratch: [0, P) counts, [P, 2P) byte
     * displacements, [2P, 3P) byte counts (average()); needed only until the metadata exchange,
     * before the collectives that reuse the scratch. */
    int *cnt = g->iscratch, *displ = g->iscratch + P;
    TESS_MPI_CHECK(MPI_Allgather(&nlocal, 1, MPI_INT, cnt, 1, MPI_INT, g->comm));
    int64_t total = 0;
    for (int r = 0; r < P; r++) total += cnt[r];
    TESS_REQUIRE(total == nclients, TESS_ERR_ARG,
                 "the ranks of '%s' hold %lld clients, nclients says %lld", g->name,
                 (long long)total, (long long)nclients);
    int at = 0; /* bytes; fits: nclients * sizeof(client_meta) <= INT_MAX */
    for (int r = 0; r < P; r++) {
        displ[r] = at;
        at += cnt[r] * (int)sizeof(client_meta);
    }
    /* The same selection on every rank that has clients: max and negated min agree. */
    const bool has = nlocal > 0;
    int64_t v[6] = {has ? s.nsel : -1,          has ? s.len : -1,
                    has ? s.digest : -1,        -(has ? s.nsel : INT64_MAX),
                    -(has ? s.len : INT64_MAX), -(has ? s.digest : INT64_MAX)};
    TESS_CHECK(tess_par_allreduce_i64(g, v, 6, TESS_PAR_MAX));
    TESS_REQUIRE(v[0] == -v[3] && v[1] == -v[4] && v[2] == -v[5], TESS_ERR_ARG,
                 "clients on the ranks of '%s' select different entries with tags 0x%x "
                 "(%lld..%lld entries, %lld..%lld floats, or other names)",
                 g->name, (unsigned)tags, (long long)-v[3], (long long)v[0], (long long)-v[4],
                 (long long)v[1]);
    const int64_t L = v[1];

    int64_t mlo, mhi;
    tess_par_block_range(L, P, g->rank, &mlo, &mhi);
    const int64_t ms = mhi - mlo;
    agg_buffers b = {
        .meta = alloc_n(nclients, sizeof *b.meta),
        .order = alloc_n(nclients, sizeof *b.order),
        .send = alloc_n((int64_t)nlocal * L, sizeof *b.send),
        .recv = alloc_n(nclients * ms, sizeof *b.recv),
        .acc = alloc_n(ms, sizeof *b.acc),
        .mine = alloc_n(ms, sizeof *b.mine),
        .full = alloc_n(L, sizeof *b.full),
        .rows = alloc_n(3 * (int64_t)P, sizeof *b.rows),
    };
    st = b.meta && b.order && b.send && b.recv && b.acc && b.mine && b.full && b.rows
             ? TESS_OK
             : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                               "federated average of %lld floats, %d local clients: out of memory",
                               (long long)L, nlocal);
    st = tess_par_agree(g, st);
    int64_t bytes = (int64_t)(P - 1) *
                    (int64_t)(sizeof(int) + (size_t)nlocal * sizeof(client_meta)); /* metadata */
    if (st == TESS_OK)
        st = average(g, clients, client_ids, weights, nlocal, nclients, tags, L, cnt, displ, &b,
                     &bytes);
    buffers_free(&b);
    TESS_REQUIRE(st == TESS_OK, st, "federated average of %lld clients over '%s'",
                 (long long)nclients, g->name);
    if (bytes_sent) *bytes_sent = bytes;
    return TESS_OK;
}
