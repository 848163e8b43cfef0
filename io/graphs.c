/* graphs.c - reading and writing graph collections in HDF5 (see graphs.h; the TU converter is in
 * graphs_tu.c).
 *
 * A rank's graphs form increasing, disjoint runs of global ids [a, b). Reading takes three
 * collective rounds on the file's group: the pointer entries of the runs (node_ptr and
 * edge_ptr [a, b]), then the rows of every other dataset that belong to the runs. Each dataset is
 * read with one collective H5Dread of a union of hyperslabs, so the MPI-IO layer can merge the
 * ranks' requests. A rank that already failed takes part with an empty selection; the verdicts
 * are agreed at the end (tess_par_agree).
 */
#include "io/graphs.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "par/layout.h" /* tess_par_block_range */
#include "io/dataset.h"  /* tess_ds_* */
#include "io/h5.h"       /* tess_h5_quiet_* */
#include "par/coll.h"    /* tess_par_agree */

static const char *const GRAPHS_FORMAT = "tessera.graphs";
enum { GRAPHS_VERSION = 1 };

void tess_graphs_free(tess_graphs *gs) {
    free(gs->graph_ids);
    free(gs->node_ptr);
    free(gs->edge_ptr);
    free(gs->indptr);
    free(gs->indices);
    free(gs->x);
    free(gs->y);
    free(gs->label_values);
    *gs = (tess_graphs){0};
}

/* calloc of n elements, at least one, so empty parts need no NULL special cases. */
static void *alloc_n(int64_t n, size_t size) { return calloc(n > 0 ? (size_t)n : 1, size); }

static tess_status check_ptr(const int64_t *p, int64_t n, int64_t end, const char *what,
                             const char *name) {
    TESS_REQUIRE(p[0] == 0, TESS_ERR_DATA, "'%s': %s[0] = %lld, expected 0", what, name,
                 (long long)p[0]);
    for (int64_t i = 0; i < n; i++)
        TESS_REQUIRE(p[i + 1] >= p[i], TESS_ERR_DATA,
                     "'%s': %s decreases at entry %lld (%lld after %lld)", what, name,
                     (long long)(i + 1), (long long)p[i + 1], (long long)p[i]);
    TESS_REQUIRE(p[n] == end, TESS_ERR_DATA, "'%s': %s ends at %lld, expected %lld", what, name,
                 (long long)p[n], (long long)end);
    return TESS_OK;
}

tess_status tess_graphs_check(const tess_graphs *gs, const char *what) {
    const int64_t G = gs->num_graphs, N = gs->num_nodes, F = gs->num_features;
    TESS_REQUIRE(G >= 0 && N >= 0 && gs->nnz >= 0 && F >= 0 && gs->num_classes >= 1, TESS_ERR_DATA,
                 "'%s': bad counts G=%lld N=%lld nnz=%lld F=%lld C=%lld", what, (long long)G,
                 (long long)N, (long long)gs->nnz, (long long)F, (long long)gs->num_classes);
    TESS_CHECK(check_ptr(gs->node_ptr, G, N, what, "node_ptr"));
    TESS_CHECK(check_ptr(gs->edge_ptr, G, gs->nnz, what, "edge_ptr"));
    TESS_CHECK(check_ptr(gs->indptr, N, gs->nnz, what, "indptr"));
    for (int64_t g = 0; g < G; g++) {
        int64_t id = gs->graph_ids ? gs->graph_ids[g] : g;
        if (gs->graph_ids && g > 0)
            TESS_REQUIRE(id > gs->graph_ids[g - 1], TESS_ERR_DATA,
                         "'%s': graph ids not increasing (%lld after %lld)", what, (long long)id,
                         (long long)gs->graph_ids[g - 1]);
        int64_t n0 = gs->node_ptr[g], n1 = gs->node_ptr[g + 1], ng = n1 - n0;
        TESS_REQUIRE(gs->indptr[n0] == gs->edge_ptr[g], TESS_ERR_DATA,
                     "'%s': graph %lld: its first row starts at CSR entry %lld, but edge_ptr "
                     "says %lld",
                     what, (long long)id, (long long)gs->indptr[n0], (long long)gs->edge_ptr[g]);
        for (int64_t i = n0; i < n1; i++)
            for (int64_t e = gs->indptr[i]; e < gs->indptr[i + 1]; e++)
                TESS_REQUIRE(gs->indices[e] >= 0 && gs->indices[e] < ng, TESS_ERR_DATA,
                             "'%s': graph %lld, row %lld: neighbour %d is outside the graph's "
                             "%lld nodes (indices are local to the graph)",
                             what, (long long)id, (long long)(i - n0), gs->indices[e],
                             (long long)ng);
        TESS_REQUIRE(gs->y[g] >= 0 && gs->y[g] < gs->num_classes, TESS_ERR_DATA,
                     "'%s': graph %lld has label %d, expected 0..%lld", what, (long long)id,
                     gs->y[g], (long long)(gs->num_classes - 1));
    }
    for (int64_t k = 0; k < N * F; k++)
        TESS_REQUIRE(isfinite(gs->x[k]), TESS_ERR_DATA,
                     "'%s': node feature x[%lld, %lld] is not finite", what, (long long)(k / F),
                     (long long)(k % F));
    return TESS_OK;
}

/* --- reading ---------------------------------------------------------------------------------- */

typedef struct {
    hid_t node_ptr, edge_ptr, indptr, indices, x, y, labels;
} graph_dsets;

static void dsets_close(graph_dsets *d) {
    hid_t *all[] = {&d->node_ptr, &d->edge_ptr, &d->indptr, &d->indices, &d->x, &d->y, &d->labels};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i] != H5I_INVALID_HID) H5Dclose(*all[i]);
        *all[i] = H5I_INVALID_HID;
    }
}

/* Attributes and dataset shapes: the same calls and verdicts on every rank. */
static tess_status open_meta(const tess_ds_file *f, tess_graphs *gs, graph_dsets *d) {
    TESS_CHECK(tess_ds_attr_string(f, "/graphs", "name", gs->name, sizeof gs->name));
    TESS_CHECK(tess_ds_attr_int(f, "/graphs", "num_classes", &gs->num_classes));
    TESS_CHECK(tess_ds_attr_int(f, "/graphs", "num_node_features", &gs->num_features));
    TESS_REQUIRE(gs->num_classes >= 1 && gs->num_features >= 0, TESS_ERR_DATA,
                 "'%s': /graphs has num_classes %lld and num_node_features %lld, expected >= 1 "
                 "and >= 0",
                 f->path, (long long)gs->num_classes, (long long)gs->num_features);
    if (H5Aexists_by_name(f->file, "/graphs", "feature_kind", H5P_DEFAULT) > 0)
        TESS_CHECK(tess_ds_attr_string(f, "/graphs", "feature_kind", gs->feature_kind,
                                       sizeof gs->feature_kind));
    int64_t dims[2], want[2];
    TESS_CHECK(
        tess_ds_dataset_open(f, "/graphs/node_ptr", TESS_DS_INT, 1, NULL, dims, &d->node_ptr));
    TESS_REQUIRE(dims[0] >= 1, TESS_ERR_DATA,
                 "'%s': dataset /graphs/node_ptr has shape [0], expected [G+1] with G >= 0",
                 f->path);
    gs->total_graphs = dims[0] - 1;
    want[0] = gs->total_graphs + 1;
    TESS_CHECK(
        tess_ds_dataset_open(f, "/graphs/edge_ptr", TESS_DS_INT, 1, want, dims, &d->edge_ptr));
    want[0] = gs->total_graphs;
    TESS_CHECK(tess_ds_dataset_open(f, "/graphs/y", TESS_DS_INT, 1, want, dims, &d->y));
    TESS_CHECK(tess_ds_dataset_open(f, "/graphs/indptr", TESS_DS_INT, 1, NULL, dims, &d->indptr));
    TESS_REQUIRE(dims[0] >= 1, TESS_ERR_DATA,
                 "'%s': dataset /graphs/indptr has shape [0], expected [N+1] with N >= 0", f->path);
    gs->total_nodes = dims[0] - 1;
    TESS_CHECK(tess_ds_dataset_open(f, "/graphs/indices", TESS_DS_INT, 1, NULL, dims, &d->indices));
    gs->total_nnz = dims[0];
    want[0] = gs->total_nodes;
    want[1] = gs->num_features;
    TESS_CHECK(tess_ds_dataset_open(f, "/graphs/x", TESS_DS_FLOAT, 2, want, dims, &d->x));
    want[0] = gs->num_classes;
    TESS_CHECK(
        tess_ds_dataset_open(f, "/graphs/label_values", TESS_DS_INT, 1, want, dims, &d->labels));
    return TESS_OK;
}

/* Runs [lo[r], lo[r] + cnt[r]) of graph ids from a strictly increasing id list. */
static tess_status ids_to_runs(const int64_t *ids, int64_t n, int64_t G, const char *path,
                               int64_t *lo, int64_t *cnt, int64_t *nruns) {
    *nruns = 0;
    for (int64_t i = 0; i < n; i++) {
        TESS_REQUIRE(ids[i] >= 0 && ids[i] < G, TESS_ERR_ARG,
                     "'%s': graph id ids[%lld] = %lld is outside 0..%lld", path, (long long)i,
                     (long long)ids[i], (long long)(G - 1));
        TESS_REQUIRE(i == 0 || ids[i] > ids[i - 1], TESS_ERR_ARG,
                     "graph ids must be strictly increasing: ids[%lld] = %lld after %lld",
                     (long long)i, (long long)ids[i], (long long)ids[i - 1]);
        if (*nruns > 0 && lo[*nruns - 1] + cnt[*nruns - 1] == ids[i]) {
            cnt[*nruns - 1]++;
        } else {
            lo[*nruns] = ids[i];
            cnt[*nruns] = 1;
            (*nruns)++;
        }
    }
    return TESS_OK;
}

/* Work arrays of one read: runs of graphs, and of nodes and entries derived from the pointers. */
typedef struct {
    int64_t nruns;
    int64_t *g_lo, *g_cnt;  /* graph runs */
    int64_t *n_lo, *n_cnt;  /* node runs */
    int64_t *e_lo, *e_cnt;  /* CSR entry runs */
    int64_t *np, *ep;       /* node_ptr, edge_ptr entries of the pointer runs */
    int64_t *indptr_global; /* (N_local) global indptr of the rows read */
} read_work;

static void work_free(read_work *w) {
    free(w->g_lo);
    free(w->g_cnt);
    free(w->n_lo);
    free(w->n_cnt);
    free(w->e_lo);
    free(w->e_cnt);
    free(w->np);
    free(w->ep);
    free(w->indptr_global);
    *w = (read_work){0};
}

static tess_status work_alloc_runs(read_work *w, int64_t maxruns) {
    int64_t **all[] = {&w->g_lo, &w->g_cnt, &w->n_lo, &w->n_cnt, &w->e_lo, &w->e_cnt};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        *all[i] = alloc_n(maxruns, sizeof(int64_t));
        TESS_REQUIRE(*all[i] != NULL, TESS_ERR_MEM, "cannot allocate %lld graph runs",
                     (long long)maxruns);
    }
    return TESS_OK;
}

/* From the pointer entries: the node and entry runs, and the local counts. */
static tess_status derive_runs(const tess_ds_file *f, tess_graphs *gs, read_work *w) {
    int64_t off = 0;
    gs->num_graphs = gs->num_nodes = gs->nnz = 0;
    for (int64_t r = 0; r < w->nruns; r++) {
        const int64_t *np = w->np + off, *ep = w->ep + off;
        for (int64_t k = 0; k < w->g_cnt[r]; k++) {
            int64_t g = w->g_lo[r] + k;
            TESS_REQUIRE(np[k + 1] >= np[k] && ep[k + 1] >= ep[k], TESS_ERR_DATA,
                         "'%s': /graphs/node_ptr or /graphs/edge_ptr decreases at graph %lld",
                         f->path, (long long)g);
        }
        int64_t c = w->g_cnt[r];
        TESS_REQUIRE(np[0] >= 0 && np[c] <= gs->total_nodes && ep[0] >= 0 && ep[c] <= gs->total_nnz,
                     TESS_ERR_DATA,
                     "'%s': graphs %lld..%lld point outside the file's %lld nodes / %lld "
                     "CSR entries",
                     f->path, (long long)w->g_lo[r], (long long)(w->g_lo[r] + c - 1),
                     (long long)gs->total_nodes, (long long)gs->total_nnz);
        w->n_lo[r] = np[0];
        w->n_cnt[r] = np[c] - np[0];
        w->e_lo[r] = ep[0];
        w->e_cnt[r] = ep[c] - ep[0];
        gs->num_graphs += c;
        gs->num_nodes += w->n_cnt[r];
        gs->nnz += w->e_cnt[r];
        off += c + 1;
    }
    return TESS_OK;
}

static tess_status alloc_local(tess_graphs *gs, read_work *w) {
    gs->graph_ids = alloc_n(gs->num_graphs, sizeof(int64_t));
    gs->node_ptr = alloc_n(gs->num_graphs + 1, sizeof(int64_t));
    gs->edge_ptr = alloc_n(gs->num_graphs + 1, sizeof(int64_t));
    gs->y = alloc_n(gs->num_graphs, sizeof(int32_t));
    gs->indptr = alloc_n(gs->num_nodes + 1, sizeof(int64_t));
    gs->indices = alloc_n(gs->nnz, sizeof(int32_t));
    gs->x = alloc_n(gs->num_nodes * gs->num_features, sizeof(float));
    gs->label_values = alloc_n(gs->num_classes, sizeof(int64_t));
    w->indptr_global = alloc_n(gs->num_nodes, sizeof(int64_t));
    TESS_REQUIRE(gs->graph_ids && gs->node_ptr && gs->edge_ptr && gs->y && gs->indptr &&
                     gs->indices && gs->x && gs->label_values && w->indptr_global,
                 TESS_ERR_MEM,
                 "cannot allocate %lld graphs, %lld nodes x %lld features, %lld "
                 "CSR entries",
                 (long long)gs->num_graphs, (long long)gs->num_nodes, (long long)gs->num_features,
                 (long long)gs->nnz);
    return TESS_OK;
}

/* Local pointer arrays from the global entries read. */
static void localize(tess_graphs *gs, const read_work *w) {
    int64_t off = 0, g = 0, node = 0, entry = 0;
    for (int64_t r = 0; r < w->nruns; r++) {
        const int64_t *np = w->np + off, *ep = w->ep + off;
        for (int64_t k = 0; k < w->g_cnt[r]; k++, g++) {
            gs->graph_ids[g] = w->g_lo[r] + k;
            gs->node_ptr[g] = node + np[k] - np[0];
            gs->edge_ptr[g] = entry + ep[k] - ep[0];
        }
        for (int64_t i = 0; i < w->n_cnt[r]; i++)
            gs->indptr[node + i] = entry + w->indptr_global[node + i] - ep[0];
        node += w->n_cnt[r];
        entry += w->e_cnt[r];
        off += w->g_cnt[r] + 1;
    }
    gs->node_ptr[g] = node;
    gs->edge_ptr[g] = entry;
    gs->indptr[node] = entry;
}

/* The collective rounds. ls is this rank's status so far: a failed rank reads nothing. */
static tess_status read_data(const tess_ds_file *f, tess_graphs *gs, const graph_dsets *d,
                             read_work *w, tess_status ls) {
    /* Each run [a, b) needs node_ptr and edge_ptr entries a..b. The heads [a, b) of all runs
     * are disjoint, and so are the tails b: two selections, not one collective per run. */
    int64_t total_entries = 0;
    for (int64_t r = 0; r < w->nruns; r++) total_entries += w->g_cnt[r] + 1;
    w->np = alloc_n(total_entries, sizeof(int64_t));
    w->ep = alloc_n(total_entries, sizeof(int64_t));
    if (ls == TESS_OK && (!w->np || !w->ep))
        ls = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                             "cannot allocate %lld pointer entries", (long long)total_entries);
    int64_t nr = ls == TESS_OK ? w->nruns : 0;
    int64_t *heads = alloc_n(total_entries, sizeof(int64_t)), *tails = alloc_n(nr, sizeof(int64_t));
    int64_t *tail_lo = alloc_n(nr, sizeof(int64_t)), *ones = alloc_n(nr, sizeof(int64_t));
    if (ls == TESS_OK && (!heads || !tails || !tail_lo || !ones))
        ls = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory");
    nr = ls == TESS_OK ? nr : 0;
    for (int64_t r = 0; r < nr; r++) {
        tail_lo[r] = w->g_lo[r] + w->g_cnt[r];
        ones[r] = 1;
    }
    for (int pass = 0; pass < 2; pass++) {
        hid_t ds = pass == 0 ? d->node_ptr : d->edge_ptr;
        const char *name = pass == 0 ? "/graphs/node_ptr" : "/graphs/edge_ptr";
        int64_t *dst = pass == 0 ? w->np : w->ep;
        tess_status s1 =
            tess_ds_read_runs(f, ds, name, H5T_NATIVE_INT64, 1, w->g_lo, w->g_cnt, nr, heads);
        tess_status s2 =
            tess_ds_read_runs(f, ds, name, H5T_NATIVE_INT64, 1, tail_lo, ones, nr, tails);
        if (ls == TESS_OK) ls = s1 != TESS_OK ? s1 : s2;
        int64_t off = 0, h = 0;
        for (int64_t r = 0; r < nr && ls == TESS_OK; r++) {
            memcpy(dst + off, heads + h, (size_t)w->g_cnt[r] * sizeof(int64_t));
            dst[off + w->g_cnt[r]] = tails[r];
            h += w->g_cnt[r];
            off += w->g_cnt[r] + 1;
        }
    }
    free(heads);
    free(tails);
    free(tail_lo);
    free(ones);

    if (ls == TESS_OK) ls = derive_runs(f, gs, w);
    if (ls == TESS_OK) ls = alloc_local(gs, w);
    nr = ls == TESS_OK ? w->nruns : 0;
    tess_status s[5];
    s[0] =
        tess_ds_read_runs(f, d->y, "/graphs/y", H5T_NATIVE_INT32, 1, w->g_lo, w->g_cnt, nr, gs->y);
    s[1] = tess_ds_read_runs(f, d->indptr, "/graphs/indptr", H5T_NATIVE_INT64, 1, w->n_lo, w->n_cnt,
                             nr, w->indptr_global);
    s[2] = tess_ds_read_runs(f, d->indices, "/graphs/indices", H5T_NATIVE_INT32, 1, w->e_lo,
                             w->e_cnt, nr, gs->indices);
    s[3] = gs->num_features == 0
               ? TESS_OK
               : tess_ds_read_runs(f, d->x, "/graphs/x", H5T_NATIVE_FLOAT, gs->num_features,
                                   w->n_lo, w->n_cnt, nr, gs->x);
    int64_t zero = 0, C = gs->num_classes;
    s[4] = tess_ds_read_runs(f, d->labels, "/graphs/label_values", H5T_NATIVE_INT64, 1, &zero, &C,
                             ls == TESS_OK ? 1 : 0, gs->label_values);
    for (int i = 0; i < 5 && ls == TESS_OK; i++) ls = s[i];
    if (ls == TESS_OK) {
        localize(gs, w);
        ls = tess_graphs_check(gs, f->path);
    }
    return ls;
}

static tess_status graphs_read(tess_graphs *gs, const tess_group *g, const char *path,
                               const int64_t *ids,
                               int64_t n, bool block) {
    *gs = (tess_graphs){0};
    tess_ds_file f;
    TESS_CHECK(tess_ds_open(&f, g, path, GRAPHS_FORMAT, GRAPHS_VERSION, true));
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    graph_dsets d = {H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID,
                     H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID};
    read_work w = {0};
    tess_status s = tess_par_agree(g, open_meta(&f, gs, &d));
    if (s == TESS_OK) {
        tess_status ls = work_alloc_runs(&w, block ? 1 : n);
        if (ls == TESS_OK && block) {
            int64_t lo, hi;
            tess_par_block_range(gs->total_graphs, f.size, f.rank, &lo, &hi);
            w.g_lo[0] = lo;
            w.g_cnt[0] = hi - lo;
            w.nruns = hi > lo ? 1 : 0;
        } else if (ls == TESS_OK) {
            ls = ids_to_runs(ids, n, gs->total_graphs, path, w.g_lo, w.g_cnt, &w.nruns);
        }
        s = tess_par_agree(g, read_data(&f, gs, &d, &w, ls));
    }
    work_free(&w);
    dsets_close(&d);
    tess_status sc = tess_ds_close(&f);
    tess_h5_quiet_end(&q);
    if (s == TESS_OK) s = sc;
    if (s != TESS_OK) tess_graphs_free(gs);
    TESS_REQUIRE(s == TESS_OK, s, "reading graphs from '%s'", path);
    return TESS_OK;
}

tess_status tess_graphs_read(tess_graphs *gs, const tess_group *g, const char *path) {
    return graphs_read(gs, g, path, NULL, 0, true);
}

tess_status tess_graphs_read_ids(tess_graphs *gs, const tess_group *g, const char *path,
                                 const int64_t *ids, int64_t n) {
    TESS_REQUIRE(n >= 0 && (n == 0 || ids != NULL), TESS_ERR_ARG, "bad id list (n = %lld)",
                 (long long)n);
    return graphs_read(gs, g, path, ids, n, false);
}

/* --- writing ---------------------------------------------------------------------------------- */

static tess_status write_all(tess_ds_writer *w, const tess_graphs *gs) {
    const int64_t G = gs->num_graphs, N = gs->num_nodes;
    int64_t d[2];
    TESS_CHECK(tess_ds_write_group(w, "/graphs"));
    TESS_CHECK(tess_ds_write_attr_string(w, "/graphs", "name", gs->name));
    TESS_CHECK(tess_ds_write_attr_int(w, "/graphs", "num_classes", gs->num_classes));
    TESS_CHECK(tess_ds_write_attr_int(w, "/graphs", "num_node_features", gs->num_features));
    TESS_CHECK(tess_ds_write_attr_string(w, "/graphs", "feature_kind", gs->feature_kind));
    d[0] = G + 1;
    TESS_CHECK(tess_ds_write_array(w, "/graphs/node_ptr", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d,
                                   gs->node_ptr));
    TESS_CHECK(tess_ds_write_array(w, "/graphs/edge_ptr", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d,
                                   gs->edge_ptr));
    d[0] = N + 1;
    TESS_CHECK(tess_ds_write_array(w, "/graphs/indptr", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d,
                                   gs->indptr));
    d[0] = gs->nnz;
    TESS_CHECK(tess_ds_write_array(w, "/graphs/indices", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, d,
                                   gs->indices));
    d[0] = N;
    d[1] = gs->num_features;
    TESS_CHECK(tess_ds_write_array(w, "/graphs/x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d, gs->x));
    d[0] = G;
    TESS_CHECK(tess_ds_write_array(w, "/graphs/y", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, d, gs->y));
    d[0] = gs->num_classes;
    TESS_CHECK(tess_ds_write_array(w, "/graphs/label_values", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d,
                                   gs->label_values));
    return TESS_OK;
}

tess_status tess_graphs_write(const char *path, const tess_graphs *gs) {
    TESS_REQUIRE(gs->num_graphs == gs->total_graphs && gs->num_nodes == gs->total_nodes &&
                     gs->nnz == gs->total_nnz,
                 TESS_ERR_ARG,
                 "tess_graphs_write needs a whole collection (holds %lld of %lld "
                 "graphs)",
                 (long long)gs->num_graphs, (long long)gs->total_graphs);
    TESS_CHECK(tess_graphs_check(gs, path));
    tess_ds_writer w;
    TESS_CHECK(tess_ds_writer_create(&w, path, GRAPHS_FORMAT, GRAPHS_VERSION));
    tess_status s = write_all(&w, gs);
    if (s != TESS_OK) {
        tess_ds_writer_abandon(&w);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "writing graphs to '%s'", path);
    }
    TESS_CHECK(tess_ds_writer_commit(&w));
    return TESS_OK;
}
