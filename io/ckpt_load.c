/* ckpt_load.c - loading a checkpoint into a state on any rank count (see ckpt.h).
 *
 * Order (verdicts before data moves, so no rank waits on a failed peer): the plan is agreed, rank 0 checks the file's structure alone
 * (ckpt_probe), and only a file that passed is opened collectively. The tensors are then read in
 * batches of LOAD_BATCH datasets: every rank opens the batch's datasets and reads their stored
 * hashes (collective metadata reads: rank 0 reads, the others receive), then reads its own
 * hyperslabs with independent MPI-IO, so no rank waits for another between datasets; rank q of P
 * starts q/P of the way into the batch, so that at any moment the ranks read far-apart parts of
 * the file rather than neighbouring slabs of one tensor. Each rank reads its part in slabs of at
 * most LOAD_SLAB_BYTES and queues the hash of each slab on the background worker
 * (ckpt_hasher.h), which hashes slab j while slab j+1 is read. Block-cyclic entries are read by
 * rank 0 and scattered, in plan order on every rank (collective). A local failure
 * is recorded and the sequence continues (ckpt_read_err); the hash sums are all-reduced and
 * judged identically everywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"      /* tess_log_info */
#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "par/gather.h"   /* tess_par_scatter_global */
#include "io/ckpt_hasher.h"
#include "io/ckpt_impl.h"

enum {
    LOAD_BATCH = 64, /* datasets open at once */
    /* bytes per read call (at least one row): small, so that the worker's hash of the last slab
     * is short; of 1-64 MiB, 2 MiB read fastest at 2 ranks (docs/benchmarks.md, Checkpoints) */
    LOAD_SLAB_BYTES = 2 << 20,
};

/* The rows [lo, hi) (local coordinates, dim 0) of region rg, as a region; count 0 if none. */
static ckpt_region region_rows(const ckpt_region *rg, int64_t lo, int64_t hi) {
    ckpt_region sub = *rg;
    const int64_t first = rg->moff[0], end = rg->moff[0] + rg->cnt[0];
    if (lo < first) lo = first;
    if (hi > end) hi = end;
    if (rg->count == 0 || hi <= lo) {
        sub.count = 0;
        return sub;
    }
    sub.off[0] = rg->off[0] + (lo - first);
    sub.moff[0] = lo;
    sub.cnt[0] = hi - lo;
    sub.count = rg->count / rg->cnt[0] * (hi - lo);
    return sub;
}

/* Read this rank's local block of item it (row-sharded, replicated or private) from dataset d
 * into its entry's data, in slabs of whole rows, queueing the hash terms of the region's part of
 * each slab into *acc. Independent I/O: local. */
static void read_block(hid_t d, const ckpt_item *it, ckpt_hasher *hq, tess_ckpt_hash_scheme h,
                       hid_t dxpl, uint64_t *acc, ckpt_read_err *r) {
    const tess_state_entry *e = it->e;
    if (e->local_count == 0) return;
    hsize_t gd[TESS_MAX_DIMS], ld[TESS_MAX_DIMS], start[TESS_MAX_DIMS], mstart[TESS_MAX_DIMS],
        cnt[TESS_MAX_DIMS];
    for (int i = 0; i < e->ndim; i++) {
        gd[i] = (hsize_t)e->shape[i];
        ld[i] = (hsize_t)e->local_shape[i];
        start[i] = (hsize_t)e->global_offset[i];
        mstart[i] = 0;
        cnt[i] = ld[i];
    }
    const int64_t rows = e->local_shape[0],
                  row_bytes = e->local_count / rows * (int64_t)tess_dtype_size(e->dtype);
    int64_t per = LOAD_SLAB_BYTES / row_bytes;
    if (per < 1) per = 1;
    hid_t fsel = H5Screate_simple(e->ndim, gd, NULL), msel = H5Screate_simple(e->ndim, ld, NULL);
    for (int64_t a = 0; a < rows && r->status == TESS_OK; a += per) {
        const int64_t b = a + per < rows ? a + per : rows;
        start[0] = (hsize_t)(e->global_offset[0] + a);
        mstart[0] = (hsize_t)a;
        cnt[0] = (hsize_t)(b - a);
        if (fsel < 0 || msel < 0 ||
            H5Sselect_hyperslab(fsel, H5S_SELECT_SET, start, NULL, cnt, NULL) < 0 ||
            H5Sselect_hyperslab(msel, H5S_SELECT_SET, mstart, NULL, cnt, NULL) < 0 ||
            H5Dread(d, tess_h5_dtype_mem(e->dtype), msel, fsel, dxpl, e->data) < 0) {
            ckpt_rfail(r, TESS_ERR_DATA, "cannot read dataset %s", it->path);
            break;
        }
        const ckpt_region part = region_rows(&it->r, a, b);
        if (part.count > 0) ckpt_hasher_add(hq, h, e, &part, e->data, acc);
    }
    if (msel >= 0) H5Sclose(msel);
    if (fsel >= 0) H5Sclose(fsel);
}

/* Block-cyclic item it (float32): rank 0 reads the whole tensor (independent I/O) and hashes it,
 * then it is scattered to every rank's local block. Collective on g. */
static void read_block_cyclic(hid_t d, const ckpt_item *it, const tess_group *g,
                              tess_ckpt_hash_scheme h, hid_t dxpl, uint64_t *acc,
                              ckpt_read_err *r, tess_status *fatal) {
    const tess_state_entry *e = it->e;
    float *global = g->rank == 0 ? malloc((size_t)e->global_count * sizeof *global) : NULL;
    *fatal = tess_par_agree(g, CKPT_FAILED(g->rank != 0 || global ? TESS_OK : TESS_ERR_MEM,
                                           "allocating a block-cyclic tensor on rank 0"));
    if (*fatal != TESS_OK) return;
    if (g->rank == 0) {
        if (d < 0 || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, dxpl, global) < 0)
            ckpt_rfail(r, TESS_ERR_DATA, "cannot read dataset %s", it->path);
        else
            *acc = ckpt_hash_region(h, *acc, e, &it->r, global);
    }
    tess_status s = tess_par_scatter_global(g, &e->layout, e->ndim, e->shape, global, e->data);
    if (s != TESS_OK)
        *fatal = tess_error_push(s, __FILE__, __LINE__, __func__, "scattering %s", it->path);
    free(global);
}

/* Formats 1 and 2: counter item it from the attribute of its parent group (every rank reads it:
 * collective metadata). */
static void read_counter_attr(hid_t f, const ckpt_item *it, ckpt_read_err *r) {
    char group[CKPT_DSET_PATH_MAX];
    const char *slash = strrchr(it->path, '/');
    snprintf(group, sizeof group, "%.*s", (int)(slash - it->path), it->path);
    hid_t gr = H5Gopen2(f, group, H5P_DEFAULT);
    if (gr < 0 || tess_h5_attr_read_i64(gr, slash + 1, (int64_t *)it->e->data) != 0)
        ckpt_rfail(r, TESS_ERR_DATA, "cannot read counter %s", it->path);
    if (gr >= 0) H5Gclose(gr);
}

/* Every dataset of the plan: its stored hash into stored[i], this rank's hash terms into acc[i]
 * (complete once hq is finished). Collective on g. */
static void read_items(hid_t f, const char *path, const ckpt_plan *p, const tess_group *g,
                       tess_ckpt_hash_scheme h, ckpt_hasher *hq, uint64_t *acc, uint64_t *stored,
                       ckpt_read_err *r, tess_status *fatal) {
    const int64_t nt = p->n;
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (dxpl < 0 || H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) < 0)
        ckpt_rfail(r, TESS_ERR_DATA, "cannot set up independent reads of '%s'", path);
    for (int64_t b0 = 0; b0 < nt && *fatal == TESS_OK; b0 += LOAD_BATCH) {
        const int64_t b1 = b0 + LOAD_BATCH < nt ? b0 + LOAD_BATCH : nt;
        hid_t d[LOAD_BATCH];
        for (int64_t t = b0; t < b1; t++) { /* collective metadata: same order on every rank */
            const ckpt_item *it = &p->items[t];
            d[t - b0] = -1;
            if (it->legacy_attr) {
                read_counter_attr(f, it, r);
                continue;
            }
            d[t - b0] = H5Dopen2(f, it->path, H5P_DEFAULT);
            if (d[t - b0] < 0) ckpt_rfail(r, TESS_ERR_DATA, "cannot open dataset %s", it->path);
            if (d[t - b0] >= 0 && tess_h5_attr_read_u64(d[t - b0], "hash", &stored[t]) != 0)
                ckpt_rfail(r, TESS_ERR_DATA, "cannot read the hash of %s", it->path);
        }
        for (int64_t t = b0; t < b1 && *fatal == TESS_OK; t++) /* collective: in order */
            if (p->items[t].r.block_cyclic)
                read_block_cyclic(d[t - b0], &p->items[t], g, h, dxpl, &acc[t], r, fatal);
        /* local, rank q of P starting q/P of the way into the batch (file comment) */
        const int64_t len = b1 - b0, first = g->rank * len / g->size;
        for (int64_t j = 0; j < len && *fatal == TESS_OK && r->status == TESS_OK; j++) {
            const int64_t t = b0 + (first + j) % len;
            const ckpt_item *it = &p->items[t];
            if (it->e && !it->r.block_cyclic && d[t - b0] >= 0)
                read_block(d[t - b0], it, hq, h, dxpl, &acc[t], r);
        }
        for (int64_t t = b0; t < b1; t++)
            if (d[t - b0] >= 0) H5Dclose(d[t - b0]);
    }
    if (dxpl >= 0) H5Pclose(dxpl);
}

/* Stored against computed hashes of every dataset; the mismatches as a record. */
static tess_status judge_hashes(const char *path, const ckpt_plan *p, const tess_ckpt_info *info,
                                const uint64_t *sum, const uint64_t *stored) {
    ckpt_msgs bad = {.lines = 0};
    bad.text[0] = '\0';
    for (int64_t i = 0; i < p->n; i++) {
        if (p->items[i].legacy_attr) continue;
        uint64_t h = tess_ckpt_hash_final(sum[i], p->items[i].count);
        if (h != stored[i])
            ckpt_msgs_add(&bad, "  dataset %s does not match its hash (stored %016llx, data "
                          "%016llx)",
                          p->items[i].path, (unsigned long long)stored[i], (unsigned long long)h);
    }
    if (bad.lines == 0) return TESS_OK;
    ckpt_msgs head = {.lines = 0};
    head.text[0] = '\0';
    ckpt_msgs_add(&head, "corrupt checkpoint '%s' (step %lld): %d dataset%s changed since it was "
                  "written",
                  path, (long long)info->step, bad.lines + bad.dropped,
                  bad.lines + bad.dropped == 1 ? "" : "s");
    CKPT_MSGS_PUSH(TESS_ERR_DATA, &head);
    return CKPT_MSGS_PUSH(TESS_ERR_DATA, &bad);
}

tess_status ckpt_load_state(const tess_group *g, const char *path, tess_ckpt_state *st) {
    ckpt_plan p;
    TESS_CHECK(ckpt_plan_make(g, st->state, &p));
    const int64_t nk = p.n;
    uint64_t *acc = calloc((size_t)nk + 1, sizeof *acc), *sum = calloc((size_t)nk + 1, sizeof *sum);
    uint64_t *stored = calloc((size_t)nk + 1, sizeof *stored);
    tess_status s = tess_par_agree(
        g, CKPT_FAILED(acc && sum && stored ? TESS_OK : TESS_ERR_MEM, "allocating the load plan"));
    if (s == TESS_OK && nk >= INT32_MAX)
        s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__, "too many datasets (%lld)",
                            (long long)nk);
    tess_ckpt_info info;
    if (s == TESS_OK) s = ckpt_probe(g, path, &p, &info);
    hid_t f = -1;
    ckpt_read_err r = {TESS_OK, ""};
    if (s == TESS_OK && !info.sealed)
        tess_log_warn("checkpoint '%s' has the unprotected format %lld (no integrity record): "
                      "its metadata is covered by no check; the next save writes format %d",
                      path, (long long)info.format_version, TESS_CKPT_FORMAT_VERSION);
    if (s == TESS_OK) {
        if (info.world_size != g->size)
            tess_log_info("checkpoint '%s' was written by %lld ranks, now %d: resharding", path,
                          (long long)info.world_size, g->size);
        f = tess_h5_open_collective(g, path, CKPT_FAPL);
        if (f < 0) ckpt_rfail(&r, TESS_ERR_DATA, "cannot open '%s' collectively", path);
        s = tess_par_agree(g, CKPT_FAILED(r.status, r.what));
    }
    if (s == TESS_OK) {
        /* formats 1 and 2 kept counters as attributes: the probe accepted those */
        for (int64_t i = 0; i < nk; i++)
            p.items[i].legacy_attr = info.format_version < 3 && ckpt_is_counter(&p.items[i]) &&
                                     H5Lexists(f, p.items[i].path, H5P_DEFAULT) <= 0;
        ckpt_hasher *hq = ckpt_hasher_start(); /* NULL: hash inline */
        read_items(f, path, &p, g, ckpt_scheme(info.format_version), hq, acc, stored, &r, &s);
        ckpt_hasher_finish(hq); /* acc[] complete from here */
    }
    if (f >= 0 && H5Fclose(f) < 0) ckpt_rfail(&r, TESS_ERR_DATA, "cannot close '%s'", path);
    if (s == TESS_OK) s = tess_par_agree(g, CKPT_FAILED(r.status, r.what));
    if (s == TESS_OK) {
        int e = MPI_Allreduce(acc, sum, (int)nk, MPI_UINT64_T, MPI_SUM, g->comm);
        if (e != MPI_SUCCESS)
            s = tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__,
                                "MPI_Allreduce of the hashes failed");
    }
    if (s == TESS_OK) s = judge_hashes(path, &p, &info, sum, stored);
    if (s == TESS_OK) {
        st->step = info.step;
        st->data_cursor = info.data_cursor;
        st->seed = info.seed;
    }
    ckpt_plan_free(&p);
    free(acc);
    free(sum);
    free(stored);
    return s;
}

tess_status tess_ckpt_load(const tess_group *g, const char *path, tess_ckpt_state *st) {
    TESS_REQUIRE(g && path && st, TESS_ERR_ARG, "g, path and st must not be NULL");
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    tess_status s = ckpt_load_state(g, path, st);
    tess_h5_quiet_end(&q);
    TESS_REQUIRE(s == TESS_OK, s, "loading checkpoint '%s'", path);
    return TESS_OK;
}
