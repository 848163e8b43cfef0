/* ckpt_plan.c - the datasets of a checkpoint and the part of each that this rank writes, hashes
 * and reads (ckpt_impl.h): the state's non-private entries agreed across ranks, the private
 * entries of every rank gathered, the row split of blocks held by several ranks, the region hash.
 *
 * Every rank ends with the same item list (the non-private entries in the state's order, then the
 * private entries of all ranks sorted by name), so the datasets are created and opened in the same
 * order everywhere, and every check below sees the same data on every rank and reaches the same
 * verdict. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "io/ckpt_impl.h"

/* An entry as exchanged between ranks (plain bytes: every rank runs this build). */
typedef struct {
    char name[TESS_STATE_NAME_MAX];
    int32_t dtype, ndim, kind, pad;
    int64_t shape[TESS_MAX_DIMS];
} wire_entry;

static void to_wire(const tess_state_entry *e, wire_entry *w) {
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", e->name);
    w->dtype = (int32_t)e->dtype;
    w->ndim = e->ndim;
    w->kind = (int32_t)e->layout.kind;
    for (int d = 0; d < e->ndim; d++) w->shape[d] = e->shape[d];
}

static bool wire_equal(const wire_entry *a, const wire_entry *b) {
    if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->ndim != b->ndim ||
        a->kind != b->kind)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* "f32 [3,4] sharded" */
static void wire_text(const wire_entry *w, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "%s [", tess_dtype_name((tess_dtype)w->dtype));
    for (int d = 0; d < w->ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? "," : "",
                                (long long)w->shape[d]);
    if (len < n)
        snprintf(buf + len, n - len, "] %s", tess_layout_kind_name((tess_layout_kind)w->kind));
}

static int64_t count_entries(const tess_state *st, bool private_to_rank) {
    int64_t n = 0;
    for (int64_t i = 0; i < tess_state_count(st); i++)
        n += tess_state_get(st, i)->private_to_rank == private_to_rank;
    return n;
}

/* The first component of name is word. */
static bool first_component_is(const char *name, const char *word) {
    size_t n = strlen(word);
    return strncmp(name, word, n) == 0 && (name[n] == '\0' || name[n] == '/');
}

/* Local checks of this rank's entries. */
static tess_status check_local(const tess_state *st, int size) {
    for (int64_t i = 0; i < tess_state_count(st); i++) {
        const tess_state_entry *e = tess_state_get(st, i);
        TESS_REQUIRE(!first_component_is(e->name, "config") &&
                         !first_component_is(e->name, "manifest"),
                     TESS_ERR_ARG,
                     "state entry '%s': the name is reserved for the checkpoint's own datasets",
                     e->name);
        if (e->layout.kind != TESS_LAYOUT_BLOCK_CYCLIC) continue;
        TESS_REQUIRE(e->dtype == TESS_F32, TESS_ERR_ARG,
                     "state entry '%s': a block-cyclic entry must be f32, not %s", e->name,
                     tess_dtype_name(e->dtype));
        TESS_REQUIRE(e->layout.nprow * e->layout.npcol == size, TESS_ERR_ARG,
                     "state entry '%s': block-cyclic on a %d x %d grid but %d ranks: "
                     "checkpointing a block-cyclic tensor on a sub-grid is not supported yet",
                     e->name, e->layout.nprow, e->layout.npcol, size);
    }
    return TESS_OK;
}

/* Rank 0's non-private entries against this rank's: the first difference as a message. */
static void compare_shared(const tess_state *st, int rank, const wire_entry *ref, int64_t nref,
                           char *msg, size_t n) {
    msg[0] = '\0';
    int64_t k = 0;
    for (int64_t i = 0; i < tess_state_count(st); i++) {
        const tess_state_entry *e = tess_state_get(st, i);
        if (e->private_to_rank) continue;
        if (k == nref) {
            snprintf(msg, n, "state entry '%s' is listed by rank %d but not by rank 0", e->name,
                     rank);
            return;
        }
        wire_entry w;
        to_wire(e, &w);
        if (strcmp(w.name, ref[k].name) != 0) {
            snprintf(msg, n, "state entry '%s' is listed by rank 0 where rank %d lists '%s' (the "
                     "ranks list different entries or a different order)", ref[k].name, rank,
                     w.name);
            return;
        }
        if (!wire_equal(&w, &ref[k])) {
            char a[160], b[160];
            wire_text(&ref[k], a, sizeof a);
            wire_text(&w, b, sizeof b);
            snprintf(msg, n, "state entry '%s' differs between ranks 0 and %d: rank 0 has %s, "
                     "rank %d has %s", w.name, rank, a, rank, b);
            return;
        }
        k++;
    }
    if (k < nref)
        snprintf(msg, n, "state entry '%s' is listed by rank 0 but not by rank %d", ref[k].name,
                 rank);
}

/* The non-private entries agree on every rank (rank 0's list is the reference); the lowest rank
 * that differs names the first difference. Collective on g. */
static tess_status agree_shared(const tess_group *g, const tess_state *st) {
    MPI_Comm comm = g->comm;
    const int rank = g->rank;
    int64_t nref = count_entries(st, false);
    TESS_MPI_CHECK(MPI_Bcast(&nref, 1, MPI_INT64_T, 0, comm));
    TESS_REQUIRE(nref < INT_MAX / (int64_t)sizeof(wire_entry), TESS_ERR_ARG,
                 "%lld state entries are too many", (long long)nref);
    wire_entry *ref = malloc((size_t)(nref + 1) * sizeof *ref);
    TESS_CHECK(tess_par_agree(
        g, CKPT_FAILED(ref ? TESS_OK : TESS_ERR_MEM, "allocating the entry list")));
    if (rank == 0) {
        int64_t k = 0;
        for (int64_t i = 0; i < tess_state_count(st); i++)
            if (!tess_state_get(st, i)->private_to_rank) to_wire(tess_state_get(st, i), &ref[k++]);
    }
    int e = MPI_Bcast(ref, (int)(nref * (int64_t)sizeof *ref), MPI_BYTE, 0, comm);
    char msg[1024] = "";
    if (e == MPI_SUCCESS) compare_shared(st, rank, ref, nref, msg, sizeof msg);
    free(ref);
    TESS_MPI_CHECK(e);
    TESS_CHECK(tess_par_agree(g, CKPT_FAILED(msg[0] ? TESS_ERR_ARG : TESS_OK, msg)));
    return TESS_OK;
}

/* Every rank's private entries: all[0..*total) with their owners. Collective on g. */
static tess_status gather_private(const tess_group *g, const tess_state *st, wire_entry **all,
                                  int **owner, int64_t *total) {
    MPI_Comm comm = g->comm;
    const int size = g->size;
    *all = NULL;
    *owner = NULL;
    int mine = (int)count_entries(st, true);
    int *counts = malloc((size_t)size * sizeof *counts);
    int *displs = malloc((size_t)size * sizeof *displs);
    wire_entry *local = malloc((size_t)(mine + 1) * sizeof *local);
    const tess_status ls = counts && displs && local ? TESS_OK : TESS_ERR_MEM;
    tess_status s = tess_par_agree(g, CKPT_FAILED(ls, "allocating the private entry list"));
    if (s != TESS_OK) {
        free(counts);
        free(displs);
        free(local);
        return s;
    }
    for (int64_t i = 0, k = 0; i < tess_state_count(st); i++)
        if (tess_state_get(st, i)->private_to_rank) to_wire(tess_state_get(st, i), &local[k++]);
    int e = MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, comm);
    int64_t n = 0;
    for (int p = 0; e == MPI_SUCCESS && p < size; p++) n += counts[p];
    s = e == MPI_SUCCESS ? TESS_OK
                         : tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__,
                                                       "MPI_Allgather of the private entry counts");
    if (s == TESS_OK && n >= INT_MAX / (int64_t)sizeof(wire_entry))
        s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                            "%lld private state entries are too many", (long long)n);
    if (s == TESS_OK) {
        *all = malloc((size_t)(n + 1) * sizeof **all);
        *owner = malloc((size_t)(n + 1) * sizeof **owner);
        s = tess_par_agree(g, CKPT_FAILED(*all && *owner ? TESS_OK : TESS_ERR_MEM,
                                          "allocating the private entry list"));
    }
    if (s == TESS_OK) {
        int at = 0;
        for (int p = 0; p < size; p++) {
            for (int k = 0; k < counts[p]; k++) (*owner)[at + k] = p;
            displs[p] = at * (int)sizeof(wire_entry);
            at += counts[p];
            counts[p] *= (int)sizeof(wire_entry);
        }
        e = MPI_Allgatherv(local, mine * (int)sizeof(wire_entry), MPI_BYTE, *all, counts, displs,
                           MPI_BYTE, comm);
        if (e != MPI_SUCCESS)
            s = tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__,
                                "MPI_Allgatherv of the private entries");
    }
    free(counts);
    free(displs);
    free(local);
    if (s != TESS_OK) {
        free(*all);
        free(*owner);
        *all = NULL;
        *owner = NULL;
        return s;
    }
    *total = n;
    return TESS_OK;
}

/* strcmp with '/' before every other character, so that the names of a group's members follow
 * the group's name directly ("a/b", "a/b/c", "a/b.x"). */
static int cmp_names(const char *a, const char *b) {
    for (;; a++, b++) {
        const int x = *a == '/' ? 1 : (unsigned char)*a, y = *b == '/' ? 1 : (unsigned char)*b;
        if (x != y || !x) return x - y;
    }
}

static int cmp_items(const void *a, const void *b) {
    const ckpt_item *x = *(const ckpt_item *const *)a, *y = *(const ckpt_item *const *)b;
    const int c = cmp_names(x->path, y->path);
    return c ? c : (x->owner > y->owner) - (x->owner < y->owner);
}

static void owner_text(const ckpt_item *it, char *buf, size_t n) {
    if (it->owner < 0) snprintf(buf, n, "every rank");
    else snprintf(buf, n, "rank %d", it->owner);
}

/* No two items share a name or have one name a group of the other. Pure (same on every rank). */
static tess_status check_names(const ckpt_plan *p) {
    const ckpt_item **by = malloc((size_t)(p->n + 1) * sizeof *by);
    TESS_REQUIRE(by, TESS_ERR_MEM, "out of memory sorting %lld entries", (long long)p->n);
    for (int64_t i = 0; i < p->n; i++) by[i] = &p->items[i];
    qsort(by, (size_t)p->n, sizeof *by, cmp_items);
    tess_status s = TESS_OK;
    for (int64_t i = 1; i < p->n && s == TESS_OK; i++) {
        const ckpt_item *a = by[i - 1], *b = by[i];
        const size_t la = strlen(a->path);
        char wa[32], wb[32];
        owner_text(a, wa, sizeof wa);
        owner_text(b, wb, sizeof wb);
        if (strcmp(a->path, b->path) == 0) /* a: every rank or the lower rank */
            s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                "private state entry '%s' is listed by %s and by %s (a private "
                                "entry belongs to one rank)",
                                a->path + 1, a->owner < 0 ? wb : wa, a->owner < 0 ? wa : wb);
        else if (strncmp(a->path, b->path, la) == 0 && b->path[la] == '/')
            s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                "state entries '%s' (%s) and '%s' (%s): one names a group of the "
                                "other", a->path + 1, wa, b->path + 1, wb);
    }
    free(by);
    return s;
}

enum { BLK = 2 * TESS_MAX_DIMS }; /* int64 per entry per rank: offset, local shape */

typedef struct {
    int64_t key[BLK];
    int rank;
} held_block;

static int cmp_held(const void *a, const void *b) {
    const held_block *x = a, *y = b;
    for (int i = 0; i < BLK; i++)
        if (x->key[i] != y->key[i]) return x->key[i] < y->key[i] ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Region of entry e for rank `rank`, from the sorted holders hb[0..nh) of all ranks: the ranks
 * holding the same block split its rows. */
static void region_from_holders(const tess_state_entry *e, const held_block *hb, int64_t nh,
                                int rank, ckpt_region *r) {
    memset(r, 0, sizeof *r);
    int64_t first = -1;
    for (int64_t h = 0; h < nh; h++)
        if (hb[h].rank == rank) first = h;
    if (first < 0) return; /* this rank holds nothing */
    int64_t lo_h = first, hi_h = first;
    while (lo_h > 0 && memcmp(hb[lo_h - 1].key, hb[first].key, sizeof hb[first].key) == 0) lo_h--;
    while (hi_h + 1 < nh && memcmp(hb[hi_h + 1].key, hb[first].key, sizeof hb[first].key) == 0)
        hi_h++;
    int64_t lo, hi;
    tess_par_block_range(e->local_shape[0], (int)(hi_h - lo_h + 1), (int)(first - lo_h), &lo, &hi);
    r->count = hi > lo ? 1 : 0;
    for (int d = 0; d < e->ndim; d++) {
        r->off[d] = e->global_offset[d];
        r->cnt[d] = e->local_shape[d];
        r->moff[d] = 0;
    }
    r->off[0] += lo;
    r->cnt[0] = hi - lo;
    r->moff[0] = lo;
    if (r->count)
        for (int d = 0; d < e->ndim; d++) r->count *= r->cnt[d];
}

/* Regions of the non-private items items[0..ns): the blocks of all ranks, gathered. Collective
 * on g. */
static tess_status plan_blocks(const tess_group *g, ckpt_plan *p, int64_t ns) {
    const int rank = g->rank, size = g->size;
    TESS_REQUIRE(ns * BLK <= INT_MAX / 2, TESS_ERR_ARG, "%lld state entries are too many",
                 (long long)ns);
    int64_t *mine = calloc((size_t)(ns * BLK) + 1, sizeof *mine);
    int64_t *all = malloc(((size_t)(ns * BLK) * (size_t)size + 1) * sizeof *all);
    held_block *hb = malloc((size_t)size * sizeof *hb);
    tess_status s = tess_par_agree(g, CKPT_FAILED(mine && all && hb ? TESS_OK : TESS_ERR_MEM,
                                                  "allocating the checkpoint plan"));
    for (int64_t i = 0; i < ns && s == TESS_OK; i++) {
        const tess_state_entry *e = p->items[i].e;
        if (e->layout.kind == TESS_LAYOUT_BLOCK_CYCLIC || e->local_count == 0) continue;
        for (int d = 0; d < e->ndim; d++) {
            mine[i * BLK + d] = e->global_offset[d];
            mine[i * BLK + TESS_MAX_DIMS + d] = e->local_shape[d];
        }
    }
    if (s == TESS_OK &&
        MPI_Allgather(mine, (int)(ns * BLK), MPI_INT64_T, all, (int)(ns * BLK), MPI_INT64_T,
                      g->comm) != MPI_SUCCESS)
        s = tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__,
                            "MPI_Allgather of the checkpoint plan failed");
    for (int64_t i = 0; i < ns && s == TESS_OK; i++) {
        ckpt_item *it = &p->items[i];
        const tess_state_entry *e = it->e;
        ckpt_region *r = &it->r;
        memset(r, 0, sizeof *r);
        if (e->layout.kind == TESS_LAYOUT_BLOCK_CYCLIC) {
            p->has_bc = true;
            r->block_cyclic = true;
            if (rank == 0) {
                r->count = e->global_count;
                for (int d = 0; d < e->ndim; d++) r->cnt[d] = e->shape[d];
            }
            continue;
        }
        int64_t nh = 0;
        for (int q = 0; q < size; q++) {
            const int64_t *k = all + ((int64_t)q * ns + i) * BLK;
            int64_t cnt = 1;
            for (int d = 0; d < e->ndim; d++) cnt *= k[TESS_MAX_DIMS + d];
            if (cnt == 0) continue;
            memcpy(hb[nh].key, k, sizeof hb[nh].key);
            hb[nh++].rank = q;
        }
        qsort(hb, (size_t)nh, sizeof *hb, cmp_held);
        int64_t covered = 0;
        for (int64_t h = 0; h < nh; h++) {
            if (h > 0 && memcmp(hb[h].key, hb[h - 1].key, sizeof hb[h].key) == 0) continue;
            int64_t vol = 1;
            for (int d = 0; d < e->ndim; d++) vol *= hb[h].key[TESS_MAX_DIMS + d];
            covered += vol;
        }
        if (covered != e->global_count) {
            s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                "state entry %s: the ranks' blocks hold %lld elements, the tensor "
                                "has %lld (a layout's group does not match the checkpoint's?)",
                                e->name, (long long)covered, (long long)e->global_count);
            break;
        }
        region_from_holders(e, hb, nh, rank, r);
    }
    free(mine);
    free(all);
    free(hb);
    return s;
}

static void item_from_wire(ckpt_item *it, const wire_entry *w, int owner) {
    memset(it, 0, sizeof *it);
    snprintf(it->path, sizeof it->path, "/%s", w->name);
    it->dtype = (tess_dtype)w->dtype;
    it->ndim = w->ndim;
    it->count = 1;
    for (int d = 0; d < w->ndim; d++) {
        it->shape[d] = w->shape[d];
        it->count *= w->shape[d];
    }
    it->owner = owner;
}

static int cmp_wire_names(const void *a, const void *b) {
    return strcmp(((const wire_entry *)a)->name, ((const wire_entry *)b)->name);
}

tess_status ckpt_plan_make(const tess_group *g, const tess_state *st, ckpt_plan *p) {
    memset(p, 0, sizeof *p);
    const int rank = g->rank;
    TESS_CHECK(tess_par_agree(
        g, CKPT_FAILED(st ? check_local(st, g->size) : TESS_ERR_ARG,
                       st ? "checking the state's entries" : "the state must not be NULL")));
    TESS_CHECK(agree_shared(g, st));
    wire_entry *priv;
    int *owner;
    int64_t np;
    TESS_CHECK(gather_private(g, st, &priv, &owner, &np));
    const int64_t ns = count_entries(st, false);
    p->n = ns + np;
    p->items = calloc((size_t)p->n + 1, sizeof *p->items);
    tess_status s = tess_par_agree(
        g, CKPT_FAILED(p->items ? TESS_OK : TESS_ERR_MEM, "allocating the plan"));
    if (s == TESS_OK && p->n == 0)
        s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                            "the state has no entries on any rank");
    if (s == TESS_OK) {
        for (int64_t i = 0, k = 0; i < tess_state_count(st); i++) {
            const tess_state_entry *e = tess_state_get(st, i);
            if (e->private_to_rank) continue;
            wire_entry w;
            to_wire(e, &w);
            item_from_wire(&p->items[k], &w, -1);
            p->items[k++].e = e;
        }
        /* sort the private entries by name, carrying their owners along */
        for (int64_t k = 0; k < np; k++) priv[k].pad = owner[k];
        qsort(priv, (size_t)np, sizeof *priv, cmp_wire_names);
        for (int64_t k = 0; k < np; k++) {
            ckpt_item *it = &p->items[ns + k];
            item_from_wire(it, &priv[k], priv[k].pad);
            if (it->owner != rank) continue;
            it->e = tess_state_get(st, tess_state_find(st, priv[k].name));
            it->r.count = it->count;
            for (int d = 0; d < it->ndim; d++) it->r.cnt[d] = it->shape[d];
        }
        s = tess_par_agree(
            g, CKPT_FAILED(check_names(p), "checking the names of every rank's entries"));
    }
    if (s == TESS_OK) s = plan_blocks(g, p, ns);
    free(priv);
    free(owner);
    if (s != TESS_OK) ckpt_plan_free(p);
    return s;
}

void ckpt_plan_free(ckpt_plan *p) {
    free(p->items);
    p->items = NULL;
    p->n = 0;
}

bool ckpt_is_counter(const ckpt_item *it) {
    return it->owner < 0 && it->dtype == TESS_I64 && it->count == 1 && strchr(it->path + 1, '/');
}

uint64_t ckpt_hash_region(tess_ckpt_hash_scheme h, uint64_t acc, const tess_state_entry *e,
                          const ckpt_region *r, const void *local) {
    if (r->count == 0) return acc;
    const size_t es = tess_dtype_size(e->dtype);
    /* pad to 4 dims with leading ones */
    int64_t gs[4] = {1, 1, 1, 1}, ls[4] = {1, 1, 1, 1}, off[4] = {0}, cnt[4] = {1, 1, 1, 1},
            mo[4] = {0};
    const int pad = 4 - e->ndim;
    for (int d = 0; d < e->ndim; d++) {
        gs[pad + d] = e->shape[d];
        ls[pad + d] = r->block_cyclic ? e->shape[d] : e->local_shape[d];
        off[pad + d] = r->off[d];
        cnt[pad + d] = r->cnt[d];
        mo[pad + d] = r->moff[d];
    }
    for (int64_t a = 0; a < cnt[0]; a++)
        for (int64_t b = 0; b < cnt[1]; b++)
            for (int64_t c = 0; c < cnt[2]; c++) {
                int64_t g = (((off[0] + a) * gs[1] + off[1] + b) * gs[2] + off[2] + c) * gs[3] +
                            off[3];
                int64_t m = (((mo[0] + a) * ls[1] + mo[1] + b) * ls[2] + mo[2] + c) * ls[3] + mo[3];
                acc = tess_ckpt_hash_add(h, acc, (const char *)local + (size_t)m * es, es, g,
                                         cnt[3]);
            }
    return acc;
}

/* FNV-1a over "name:d0,d1,...;" of every "/params/<name>" item, as tess_ckpt_model_digest. */
uint64_t ckpt_plan_digest(const ckpt_plan *p) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < p->n; i++) {
        const ckpt_item *it = &p->items[i];
        if (it->owner >= 0 || strncmp(it->path, "/params/", 8) != 0) continue;
        char text[TESS_STATE_NAME_MAX + 16 * TESS_MAX_DIMS + 4];
        int len = snprintf(text, sizeof text, "%s:", it->path + 8);
        for (int d = 0; d < it->ndim; d++)
            len += snprintf(text + len, sizeof text - (size_t)len, "%s%lld", d ? "," : "",
                            (long long)it->shape[d]);
        len += snprintf(text + len, sizeof text - (size_t)len, ";");
        for (int k = 0; k < len; k++) {
            h ^= (unsigned char)text[k];
            h *= 0x100000001b3ull;
        }
    }
    return h;
}
