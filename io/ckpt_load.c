/* ckpt_load.c - loading a checkpoint into a model's state on any rank count (see ckpt.h).
 *
 * Order (OPERATIONS.md 4 and 5): the plan is agreed, rank 0 checks the file's structure alone
 * (ckpt_probe), and only a file that passed is opened collectively. The tensors are then read in
 * batches of LOAD_BATCH datasets: every rank opens the batch's datasets and reads their stored
 * hashes (collective metadata reads: rank 0 reads, the others receive), then reads its own
 * hyperslabs with independent MPI-IO, so no rank waits for another between datasets; rank q of P
 * starts q/P of the way into the batch, so that at any moment the ranks read far-apart parts of
 * the file rather than neighbouring slabs of one tensor. Each rank reads its part in slabs of at
 * most LOAD_SLAB_BYTES and queues the hash of each slab on the background worker
 * (ckpt_hasher.h), which hashes slab j while slab j+1 is read. Block-cyclic entries are read by
 * rank 0 and scattered, in registry order on every rank (collective). A local failure
 * is recorded and the sequence continues (ckpt_read_err); the hash sums are all-reduced and
 * judged identically everywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"      /* tess_log_info */
#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "par/gather.h"   /* tess_par_scatter_global */
#include "par/mesh.h"     /* tess_group_create */
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

/* Read this rank's local block of entry e (row-sharded or replicated layouts) from dataset d into
 * local, in slabs of whole rows, queueing the hash terms of region rg's part of each slab into
 * *acc. Independent I/O: local. */
static void read_block(hid_t d, const tess_registry_entry *e, const ckpt_region *rg, float *local,
                       ckpt_hasher *hq, tess_ckpt_hash_scheme h, hid_t dxpl, uint64_t *acc,
                       ckpt_read_err *r) {
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
    const int64_t rows = e->local_shape[0], row_bytes = e->local_count / rows * 4;
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
            H5Dread(d, H5T_NATIVE_FLOAT, msel, fsel, dxpl, local) < 0) {
            ckpt_rfail(r, TESS_ERR_DATA, "cannot read dataset of %s", e->name);
            break;
        }
        const ckpt_region part = region_rows(rg, a, b);
        if (part.count > 0) ckpt_hasher_add(hq, h, e, &part, local, acc);
    }
    if (msel >= 0) H5Sclose(msel);
    if (fsel >= 0) H5Sclose(fsel);
}

/* Block-cyclic entry e: rank 0 reads the whole tensor (independent I/O) and hashes it, then it
 * is scattered to every rank's local block. Collective on g->comm. */
static void read_block_cyclic(hid_t d, const tess_registry_entry *e, const ckpt_region *rg,
                              float *local, const tess_group *g, tess_ckpt_hash_scheme h,
                              int rank, hid_t dxpl, uint64_t *acc, ckpt_read_err *r,
                              tess_status *fatal) {
    float *global = rank == 0 ? malloc((size_t)e->global_count * sizeof *global) : NULL;
    *fatal = ckpt_agree(g->comm, rank != 0 || global ? TESS_OK : TESS_ERR_MEM,
                        "allocating a block-cyclic tensor on rank 0");
    if (*fatal != TESS_OK) return;
    if (rank == 0) {
        if (d < 0 || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, dxpl, global) < 0)
            ckpt_rfail(r, TESS_ERR_DATA, "cannot read dataset of %s", e->name);
        else
            *acc = ckpt_hash_region(h, *acc, e, rg, global);
    }
    tess_status s = tess_par_scatter_global(g, &e->layout, e->ndim, e->shape, global, local);
    if (s != TESS_OK)
        *fatal = tess_error_push(s, __FILE__, __LINE__, __func__, "scattering %s", e->name);
    free(global);
}

/* Read this rank's range of array a (collective: every rank calls it, possibly selecting
 * nothing) and return the hash terms of its span; the stored hash goes to *stored. */
static uint64_t read_array(hid_t f, const tess_ckpt_array *a, const ckpt_span *sp,
                           tess_ckpt_hash_scheme h, hid_t dxpl, uint64_t *stored,
                           ckpt_read_err *r) {
    char path[CKPT_SET_NAME_MAX + 2];
    snprintf(path, sizeof path, "/%s", a->name);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) ckpt_rfail(r, TESS_ERR_DATA, "cannot open dataset %s", path);
    if (d >= 0 && ckpt_attr_read_u64(d, "hash", stored) != 0)
        ckpt_rfail(r, TESS_ERR_DATA, "cannot read the hash of %s", path);
    hsize_t dims = (hsize_t)a->n_global, off = (hsize_t)a->first, cnt = (hsize_t)a->n_local,
            one = 1;
    hid_t fsel = H5Screate_simple(1, &dims, NULL);
    hid_t msel = H5Screate_simple(1, a->n_local > 0 ? &cnt : &one, NULL);
    if (a->n_local > 0) {
        H5Sselect_hyperslab(fsel, H5S_SELECT_SET, &off, NULL, &cnt, NULL);
    } else {
        H5Sselect_none(fsel);
        H5Sselect_none(msel);
    }
    static int64_t dummy;
    if (d < 0 || H5Dread(d, ckpt_dtype_mem(a->dtype), msel, fsel, dxpl,
                         a->n_local > 0 ? a->data : (void *)&dummy) < 0)
        ckpt_rfail(r, TESS_ERR_DATA, "cannot read dataset %s", path);
    H5Sclose(msel);
    H5Sclose(fsel);
    if (d >= 0) H5Dclose(d);
    return ckpt_array_hash(h, 0, a, sp);
}

/* Every tensor dataset of st (nsets * n of them, index k * n + i for set k and entry i): its
 * stored hash into stored[], this rank's hash terms into acc[] (complete once hq is finished).
 * Collective on comm (and on g->comm when a block-cyclic entry is present). */
static void read_tensors(hid_t f, const char *path, const tess_ckpt_state *st,
                         const ckpt_region *regions, const tess_group *g,
                         tess_ckpt_hash_scheme h, int rank, int size, ckpt_hasher *hq,
                         uint64_t *acc, uint64_t *stored, ckpt_read_err *r, tess_status *fatal) {
    const int64_t n = ckpt_reg_count(st), nt = ckpt_nsets(st) * n;
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (dxpl < 0 || H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) < 0)
        ckpt_rfail(r, TESS_ERR_DATA, "cannot set up independent reads of '%s'", path);
    for (int64_t b0 = 0; b0 < nt && *fatal == TESS_OK; b0 += LOAD_BATCH) {
        const int64_t b1 = b0 + LOAD_BATCH < nt ? b0 + LOAD_BATCH : nt;
        hid_t d[LOAD_BATCH];
        for (int64_t t = b0; t < b1; t++) { /* collective metadata: same order on every rank */
            const int k = (int)(t / n);
            const tess_registry_entry *e = tess_registry_get(st->reg, t % n);
            char p[CKPT_DSET_PATH_MAX];
            ckpt_dataset_path(p, sizeof p, ckpt_set_name(st, k), e->name);
            d[t - b0] = H5Dopen2(f, p, H5P_DEFAULT);
            if (d[t - b0] < 0) ckpt_rfail(r, TESS_ERR_DATA, "cannot open dataset %s", p);
            if (d[t - b0] >= 0 && ckpt_attr_read_u64(d[t - b0], "hash", &stored[t]) != 0)
                ckpt_rfail(r, TESS_ERR_DATA, "cannot read the hash of %s", p);
        }
        for (int64_t t = b0; t < b1 && *fatal == TESS_OK; t++) { /* collective: in order */
            const tess_registry_entry *e = tess_registry_get(st->reg, t % n);
            if (regions[t % n].block_cyclic)
                read_block_cyclic(d[t - b0], e, &regions[t % n],
                                  ckpt_set_data(st, (int)(t / n)) + e->flat_offset, g, h, rank,
                                  dxpl, &acc[t], r, fatal);
        }
        /* local, rank q of P starting q/P of the way into the batch (file comment) */
        const int64_t len = b1 - b0, first = rank * len / size;
        for (int64_t j = 0; j < len && *fatal == TESS_OK && r->status == TESS_OK; j++) {
            const int64_t t = b0 + (first + j) % len;
            const tess_registry_entry *e = tess_registry_get(st->reg, t % n);
            if (!regions[t % n].block_cyclic && d[t - b0] >= 0)
                read_block(d[t - b0], e, &regions[t % n],
                           ckpt_set_data(st, (int)(t / n)) + e->flat_offset, hq, h, dxpl, &acc[t],
                           r);
        }
        for (int64_t t = b0; t < b1; t++)
            if (d[t - b0] >= 0) H5Dclose(d[t - b0]);
    }
    if (dxpl >= 0) H5Pclose(dxpl);
}

/* Stored against computed hashes of every dataset; the mismatches as a record. */
static tess_status judge_hashes(const char *path, const tess_ckpt_state *st,
                                const tess_ckpt_info *info, const uint64_t *sum,
                                const uint64_t *stored) {
    const int64_t n = ckpt_reg_count(st), nt = ckpt_nsets(st) * n;
    ckpt_msgs bad = {.lines = 0};
    bad.text[0] = '\0';
    for (int k = 0; k < ckpt_nsets(st); k++)
        for (int64_t i = 0; i < n; i++) {
            const tess_registry_entry *e = tess_registry_get(st->reg, i);
            uint64_t h = tess_ckpt_hash_final(sum[k * n + i], e->global_count);
            if (h != stored[k * n + i])
                ckpt_msgs_add(&bad, "  dataset /%s/%s does not match its hash (stored "
                              "%016llx, data %016llx)",
                              ckpt_set_name(st, k), e->name,
                              (unsigned long long)stored[k * n + i], (unsigned long long)h);
        }
    for (int k = 0; k < st->narrays; k++) {
        uint64_t h = tess_ckpt_hash_final(sum[nt + k], st->arrays[k].n_global);
        if (h != stored[nt + k])
            ckpt_msgs_add(&bad, "  dataset /%s does not match its hash (stored %016llx, data "
                          "%016llx)",
                          st->arrays[k].name, (unsigned long long)stored[nt + k],
                          (unsigned long long)h);
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

tess_status ckpt_load_state(MPI_Comm comm, const char *path, tess_ckpt_state *st) {
    int rank, size;
    TESS_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    TESS_MPI_CHECK(MPI_Comm_size(comm, &size));
    TESS_CHECK(ckpt_agree(comm, ckpt_check_state(st), "checking the checkpoint state"));
    const int64_t n = ckpt_reg_count(st), nt = ckpt_nsets(st) * n, nk = nt + st->narrays;
    TESS_REQUIRE(nk < INT32_MAX, TESS_ERR_ARG, "too many datasets (%lld)", (long long)nk);
    ckpt_region *regions = calloc((size_t)n + 1, sizeof *regions);
    ckpt_span *spans = calloc((size_t)st->narrays + 1, sizeof *spans);
    uint64_t *acc = calloc((size_t)nk + 1, sizeof *acc), *sum = calloc((size_t)nk + 1, sizeof *sum);
    uint64_t *stored = calloc((size_t)nk + 1, sizeof *stored);
    tess_status s = ckpt_agree(comm, regions && spans && acc && sum && stored ? TESS_OK
                                                                             : TESS_ERR_MEM,
                               "allocating the load plan");
    bool has_bc = false;
    tess_group *g = NULL;
    tess_ckpt_info info;
    ckpt_msgs m;
    if (s == TESS_OK && st->reg) s = ckpt_plan(comm, st->reg, regions, &has_bc);
    if (s == TESS_OK) s = ckpt_array_plan(comm, st, spans);
    if (s == TESS_OK) {
        s = ckpt_probe(comm, path, st, &info, &m);
        if (s != TESS_OK) CKPT_MSGS_PUSH(s, &m);
    }
    if (s == TESS_OK && has_bc) s = tess_group_create(comm, "ckpt", &g);
    hid_t f = -1;
    ckpt_read_err r = {TESS_OK, ""};
    if (s == TESS_OK) {
        if (info.world_size != size)
            tess_log_info("checkpoint '%s' was written by %lld ranks, now %d: resharding", path,
                          (long long)info.world_size, size);
        f = ckpt_open_collective(comm, path);
        if (f < 0) ckpt_rfail(&r, TESS_ERR_DATA, "cannot open '%s' collectively", path);
        s = ckpt_agree(comm, r.status, r.what);
    }
    if (s == TESS_OK) {
        const tess_ckpt_hash_scheme h = (tess_ckpt_hash_scheme)info.format_version;
        ckpt_hasher *hq = ckpt_hasher_start(); /* NULL: hash inline */
        read_tensors(f, path, st, regions, g, h, rank, size, hq, acc, stored, &r, &s);
        hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
        H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
        for (int k = 0; k < st->narrays && s == TESS_OK; k++)
            acc[nt + k] =
                read_array(f, &st->arrays[k], &spans[k], h, dxpl, &stored[nt + k], &r);
        H5Pclose(dxpl);
        for (int c = 0; c < st->ncounters && s == TESS_OK; c++) {
            const char *name = st->counters[c].name, *slash = strrchr(name, '/');
            char group[CKPT_SET_NAME_MAX + 1];
            snprintf(group, sizeof group, "/%.*s", (int)(slash - name), name);
            hid_t gr = H5Gopen2(f, group, H5P_DEFAULT);
            if (gr < 0 || ckpt_attr_read_i64(gr, slash + 1, st->counters[c].value) != 0)
                ckpt_rfail(&r, TESS_ERR_DATA, "cannot read counter %s", name);
            if (gr >= 0) H5Gclose(gr);
        }
        ckpt_hasher_finish(hq); /* acc[] complete from here */
    }
    if (f >= 0 && H5Fclose(f) < 0) ckpt_rfail(&r, TESS_ERR_DATA, "cannot close '%s'", path);
    if (s == TESS_OK) s = ckpt_agree(comm, r.status, r.what);
    if (s == TESS_OK) {
        int e = MPI_Allreduce(acc, sum, (int)nk, MPI_UINT64_T, MPI_SUM, comm);
        if (e != MPI_SUCCESS)
            s = tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__,
                                "MPI_Allreduce of the hashes failed");
    }
    if (s == TESS_OK) s = judge_hashes(path, st, &info, sum, stored);
    if (s == TESS_OK) {
        st->step = info.step;
        st->data_cursor = info.data_cursor;
        st->seed = info.seed;
    }
    tess_group_destroy(&g);
    free(regions);
    free(spans);
    free(acc);
    free(sum);
    free(stored);
    return s;
}

tess_status tess_ckpt_load(MPI_Comm comm, const char *path, tess_ckpt_state *st) {
    TESS_REQUIRE(path, TESS_ERR_ARG, "path must not be NULL");
    ckpt_quiet q;
    ckpt_quiet_begin(&q);
    tess_status s = ckpt_load_state(comm, path, st);
    ckpt_quiet_end(&q);
    TESS_REQUIRE(s == TESS_OK, s, "loading checkpoint '%s'", path);
    return TESS_OK;
}
