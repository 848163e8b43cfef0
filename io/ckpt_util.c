/* ckpt_util.c - HDF5 helpers, problem lists, agreement and the write/read plan (ckpt_impl.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "io/ckpt_impl.h"

/* --- HDF5 error printing -------------------------------------------------------------------- */

void ckpt_quiet_begin(ckpt_quiet *q) {
    if (H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data) < 0) {
        q->fn = NULL;
        q->data = NULL;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void ckpt_quiet_end(const ckpt_quiet *q) { H5Eset_auto2(H5E_DEFAULT, q->fn, q->data); }

typedef struct {
    char *buf;
    size_t n;
    bool found;
} walk_ctx;

static herr_t first_error(unsigned n, const H5E_error2_t *err, void *data) {
    walk_ctx *w = data;
    (void)n;
    if (!w->found && err->desc) {
        snprintf(w->buf, w->n, "%s", err->desc);
        w->found = true;
    }
    return 0;
}

void ckpt_h5_message(char *buf, size_t n) {
    walk_ctx w = {buf, n, false};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_error, &w);
    if (!w.found) snprintf(buf, n, "no detail from HDF5");
}

/* --- attributes ------------------------------------------------------------------------------ */

static int attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, const void *value) {
    hid_t space = H5Screate(H5S_SCALAR);
    if (space < 0) return -1;
    hid_t a = H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, mtype, value) >= 0 ? 0 : -1;
    if (a >= 0 && H5Aclose(a) < 0) rc = -1;
    H5Sclose(space);
    return rc;
}

int ckpt_attr_write_str(hid_t loc, const char *name, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    int rc = -1;
    if (H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = attr_write(loc, name, t, t, &value);
    H5Tclose(t);
    return rc;
}

int ckpt_attr_write_i64(hid_t loc, const char *name, int64_t v) {
    return attr_write(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int ckpt_attr_write_u64(hid_t loc, const char *name, uint64_t v) {
    return attr_write(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}

int ckpt_attr_read_str(hid_t loc, const char *name, char *buf, size_t n) {
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    int rc = -1;
    hid_t ft = H5Aget_type(a), space = H5Aget_space(a);
    if (ft >= 0 && space >= 0 && H5Tget_class(ft) == H5T_STRING &&
        H5Sget_simple_extent_npoints(space) == 1) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        if (mt >= 0) H5Tset_cset(mt, H5Tget_cset(ft)); /* HDF5 converts no ASCII <-> UTF-8 */
        if (H5Tis_variable_str(ft) > 0) {
            char *s = NULL;
            if (mt >= 0 && H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Aread(a, mt, &s) >= 0) {
                snprintf(buf, n, "%s", s ? s : "");
                H5free_memory(s);
                rc = 0;
            }
        } else {
            size_t len = H5Tget_size(ft);
            char *s = calloc(len + 1, 1);
            if (s && mt >= 0 && H5Tset_size(mt, len + 1) >= 0 && H5Aread(a, mt, s) >= 0) {
                snprintf(buf, n, "%s", s);
                rc = 0;
            }
            free(s);
        }
        if (mt >= 0) H5Tclose(mt);
    }
    if (space >= 0) H5Sclose(space);
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

static int attr_read_int(hid_t loc, const char *name, hid_t mtype, void *v) {
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a), space = H5Aget_space(a);
    int rc = ft >= 0 && space >= 0 && H5Tget_class(ft) == H5T_INTEGER &&
                     H5Sget_simple_extent_npoints(space) == 1 && H5Aread(a, mtype, v) >= 0
                 ? 0
                 : -1;
    if (space >= 0) H5Sclose(space);
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

int ckpt_attr_read_i64(hid_t loc, const char *name, int64_t *v) {
    return attr_read_int(loc, name, H5T_NATIVE_INT64, v);
}

int ckpt_attr_read_u64(hid_t loc, const char *name, uint64_t *v) {
    return attr_read_int(loc, name, H5T_NATIVE_UINT64, v);
}

bool ckpt_attr_exists(hid_t loc, const char *name) { return H5Aexists(loc, name) > 0; }

bool ckpt_path_exists(hid_t loc, const char *path) {
    char buf[CKPT_DSET_PATH_MAX + 8];
    if (strlen(path) >= sizeof buf) return false;
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (H5Lexists(loc, buf, H5P_DEFAULT) <= 0) return false;
        *p = saved;
        if (saved == '\0') return true;
    }
}

void ckpt_type_name(hid_t type, char *buf, size_t n) {
    size_t bytes = H5Tget_size(type);
    switch (H5Tget_class(type)) {
    case H5T_FLOAT: snprintf(buf, n, "float%zu", 8 * bytes); break;
    case H5T_INTEGER:
        snprintf(buf, n, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", 8 * bytes);
        break;
    case H5T_STRING: snprintf(buf, n, "string"); break;
    case H5T_COMPOUND: snprintf(buf, n, "compound"); break;
    case H5T_ENUM: snprintf(buf, n, "enum"); break;
    default: snprintf(buf, n, "HDF5 type class %d", (int)H5Tget_class(type)); break;
    }
}

/* --- names and state ------------------------------------------------------------------------- */

bool ckpt_name_is_valid(const char *name) {
    size_t len = strlen(name);
    if (len == 0 || len >= CKPT_SET_NAME_MAX) return false;
    bool empty = true;
    for (const char *c = name; *c; c++) {
        if (*c == '/') {
            if (empty) return false;
            empty = true;
        } else if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                   (*c >= '0' && *c <= '9') || *c == '_') {
            empty = false;
        } else {
            return false;
        }
    }
    return !empty;
}

void ckpt_dataset_path(char *buf, size_t n, const char *set, const char *entry) {
    snprintf(buf, n, "/%s/%s", set, entry);
}

int ckpt_nsets(const tess_ckpt_state *st) { return st->reg ? 1 + st->nbuffers : 0; }

const char *ckpt_set_name(const tess_ckpt_state *st, int s) {
    return s == 0 ? "params" : st->buffers[s - 1].name;
}

float *ckpt_set_data(const tess_ckpt_state *st, int s) {
    return s == 0 ? tess_registry_params(st->reg) : st->buffers[s - 1].buf;
}

/* The first component of name equals word. */
static bool first_component_is(const char *name, const char *word) {
    size_t n = strlen(word);
    return strncmp(name, word, n) == 0 && (name[n] == '\0' || name[n] == '/');
}

tess_status ckpt_check_state(const tess_ckpt_state *st) {
    TESS_REQUIRE(st, TESS_ERR_ARG, "checkpoint state must not be NULL");
    TESS_REQUIRE(st->narrays >= 0 && st->narrays <= TESS_CKPT_MAX_ARRAYS &&
                     (st->narrays == 0 || st->arrays),
                 TESS_ERR_ARG, "narrays = %d must be in [0, %d] with arrays given", st->narrays,
                 TESS_CKPT_MAX_ARRAYS);
    TESS_REQUIRE(st->reg || (st->narrays > 0 && st->nbuffers == 0), TESS_ERR_ARG,
                 "checkpoint state without a registry needs arrays and no state sets");
    TESS_REQUIRE(!st->reg || tess_registry_is_final(st->reg), TESS_ERR_ARG,
                 "checkpoint state needs a finalized registry");
    TESS_REQUIRE(!st->reg || tess_registry_count(st->reg) > 0, TESS_ERR_ARG,
                 "checkpoint state needs a registry with at least one entry");
    TESS_REQUIRE(st->nbuffers >= 0 && st->nbuffers <= TESS_CKPT_MAX_SETS &&
                     (st->nbuffers == 0 || st->buffers),
                 TESS_ERR_ARG, "nbuffers = %d must be in [0, %d] with buffers given", st->nbuffers,
                 TESS_CKPT_MAX_SETS);
    TESS_REQUIRE(st->ncounters >= 0 && st->ncounters <= TESS_CKPT_MAX_COUNTERS &&
                     (st->ncounters == 0 || st->counters),
                 TESS_ERR_ARG, "ncounters = %d must be in [0, %d] with counters given",
                 st->ncounters, TESS_CKPT_MAX_COUNTERS);
    for (int s = 0; s < st->nbuffers; s++) {
        const char *name = st->buffers[s].name;
        TESS_REQUIRE(name && ckpt_name_is_valid(name), TESS_ERR_ARG,
                     "state set name '%s' must be 1..%d characters of [A-Za-z0-9_] in "
                     "'/'-separated components",
                     name ? name : "(null)", CKPT_SET_NAME_MAX - 1);
        TESS_REQUIRE(!first_component_is(name, "params") && !first_component_is(name, "config") &&
                         !first_component_is(name, "manifest"),
                     TESS_ERR_ARG, "state set name '%s' is reserved", name);
        TESS_REQUIRE(st->buffers[s].buf || tess_registry_local_total(st->reg) == 0, TESS_ERR_ARG,
                     "state set '%s' has no buffer", name);
        for (int t = 0; t < s; t++) {
            const char *other = st->buffers[t].name;
            /* one set's group may not contain another's datasets */
            TESS_REQUIRE(!first_component_is(name, other) && !first_component_is(other, name),
                         TESS_ERR_ARG, "state sets '%s' and '%s' overlap", other, name);
        }
    }
    for (int k = 0; k < st->narrays; k++) {
        const tess_ckpt_array *a = &st->arrays[k];
        TESS_REQUIRE(a->name && ckpt_name_is_valid(a->name), TESS_ERR_ARG,
                     "array name '%s' must be 1..%d characters of [A-Za-z0-9_] in '/'-separated "
                     "components",
                     a->name ? a->name : "(null)", CKPT_SET_NAME_MAX - 1);
        TESS_REQUIRE(!first_component_is(a->name, "params") &&
                         !first_component_is(a->name, "config") &&
                         !first_component_is(a->name, "manifest"),
                     TESS_ERR_ARG, "array name '%s' is reserved", a->name);
        TESS_REQUIRE(a->dtype == TESS_CKPT_F32 || a->dtype == TESS_CKPT_F64 ||
                         a->dtype == TESS_CKPT_I64,
                     TESS_ERR_ARG, "array %s: unknown dtype %d", a->name, (int)a->dtype);
        TESS_REQUIRE(a->n_global >= 1 && a->first >= 0 && a->n_local >= 0 &&
                         a->first + a->n_local <= a->n_global && (a->n_local == 0 || a->data),
                     TESS_ERR_ARG,
                     "array %s: range [%lld, %lld + %lld) must lie in [0, %lld) with data given",
                     a->name, (long long)a->first, (long long)a->first, (long long)a->n_local,
                     (long long)a->n_global);
        for (int s = 0; s < st->nbuffers; s++)
            TESS_REQUIRE(!first_component_is(a->name, st->buffers[s].name), TESS_ERR_ARG,
                         "array %s lies in state set %s", a->name, st->buffers[s].name);
        for (int t = 0; t < k; t++) {
            const char *other = st->arrays[t].name;
            TESS_REQUIRE(!first_component_is(a->name, other) &&
                             !first_component_is(other, a->name),
                         TESS_ERR_ARG, "arrays '%s' and '%s' overlap", other, a->name);
        }
    }
    for (int c = 0; c < st->ncounters; c++) {
        const char *name = st->counters[c].name;
        TESS_REQUIRE(name && ckpt_name_is_valid(name) && strchr(name, '/') && st->counters[c].value,
                     TESS_ERR_ARG,
                     "counter '%s' must be named 'group/attribute' with a value pointer",
                     name ? name : "(null)");
        for (int t = 0; t < c; t++)
            TESS_REQUIRE(strcmp(name, st->counters[t].name) != 0, TESS_ERR_ARG,
                         "counter '%s' given twice", name);
    }
    return TESS_OK;
}

/* --- problem lists --------------------------------------------------------------------------- */

void ckpt_msgs_add(ckpt_msgs *m, const char *fmt, ...) {
    if (m->lines >= CKPT_MSGS_MAX_LINES) {
        m->dropped++;
        return;
    }
    size_t len = strlen(m->text);
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len + strlen(line) + 2 > sizeof m->text) {
        m->dropped++;
        return;
    }
    snprintf(m->text + len, sizeof m->text - len, "%s\n", line);
    m->lines++;
}

tess_status ckpt_bcast_verdict(MPI_Comm comm, int root, tess_status *s, ckpt_msgs *m,
                               tess_ckpt_info *info) {
    int v[3] = {(int)*s, m->lines, m->dropped};
    TESS_MPI_CHECK(MPI_Bcast(v, 3, MPI_INT, root, comm));
    *s = (tess_status)v[0];
    m->lines = v[1];
    m->dropped = v[2];
    TESS_MPI_CHECK(MPI_Bcast(m->text, (int)sizeof m->text, MPI_CHAR, root, comm));
    if (info) TESS_MPI_CHECK(MPI_Bcast(info, (int)sizeof *info, MPI_BYTE, root, comm));
    return TESS_OK;
}

tess_status ckpt_msgs_push(tess_status s, const ckpt_msgs *m, const char *file, int line,
                           const char *func) {
    const char *p = m->text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        tess_error_push(s, file, line, func, "%.*s", len, p);
        p += len + (nl ? 1 : 0);
    }
    if (m->dropped) tess_error_push(s, file, line, func, "... and %d more problems", m->dropped);
    return s;
}

tess_status ckpt_agree(MPI_Comm comm, tess_status local, const char *what) {
    int v[2] = {local != TESS_OK, (int)local}, r[2];
    TESS_MPI_CHECK(MPI_Allreduce(v, r, 2, MPI_INT, MPI_MAX, comm));
    if (!r[0]) return TESS_OK;
    if (local != TESS_OK)
        return tess_error_push((tess_status)r[1], __FILE__, __LINE__, __func__, "%s", what);
    return tess_error_push((tess_status)r[1], __FILE__, __LINE__, __func__,
                           "%s: failed on another rank", what);
}

/* --- the plan -------------------------------------------------------------------------------- */

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

static uint64_t structure_digest(const tess_registry *reg) {
    uint64_t h = tess_ckpt_model_digest(reg);
    for (int64_t i = 0; i < tess_registry_count(reg); i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        h = (h ^ (uint64_t)e->layout.kind) * 0x100000001b3ull;
    }
    return h ^ (uint64_t)tess_registry_count(reg);
}

/* Region of entry e for rank `rank`, from the sorted holders hb[0..nh) of all ranks. */
static void region_from_holders(const tess_registry_entry *e, const held_block *hb, int64_t nh,
                                int rank, ckpt_region *r) {
    memset(r, 0, sizeof *r);
    int64_t first = -1, k = 0, j = -1;
    for (int64_t h = 0; h < nh; h++)
        if (hb[h].rank == rank) first = h;
    if (first < 0) return; /* this rank holds nothing */
    int64_t lo_h = first, hi_h = first;
    while (lo_h > 0 && memcmp(hb[lo_h - 1].key, hb[first].key, sizeof hb[first].key) == 0) lo_h--;
    while (hi_h + 1 < nh && memcmp(hb[hi_h + 1].key, hb[first].key, sizeof hb[first].key) == 0)
        hi_h++;
    k = hi_h - lo_h + 1;
    j = first - lo_h;
    int64_t lo, hi;
    tess_par_block_range(e->local_shape[0], (int)k, (int)j, &lo, &hi);
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

tess_status ckpt_plan(MPI_Comm comm, const tess_registry *reg, ckpt_region *regions,
                      bool *has_bc) {
    int rank, size;
    TESS_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    TESS_MPI_CHECK(MPI_Comm_size(comm, &size));
    const int64_t n = tess_registry_count(reg);
    uint64_t d[2] = {structure_digest(reg), 0}, dmax[2];
    d[1] = ~d[0];
    TESS_MPI_CHECK(MPI_Allreduce(d, dmax, 2, MPI_UINT64_T, MPI_MAX, comm));
    TESS_REQUIRE(dmax[0] == d[0] && dmax[1] == d[1], TESS_ERR_ARG,
                 "the registry differs between ranks (entry names, shapes or layout kinds)");
    TESS_REQUIRE(n * BLK <= INT32_MAX / 2, TESS_ERR_ARG, "%lld registry entries are too many",
                 (long long)n);

    int64_t *mine = calloc((size_t)(n * BLK) + 1, sizeof *mine);
    int64_t *all = malloc(((size_t)(n * BLK) * (size_t)size + 1) * sizeof *all);
    held_block *hb = malloc((size_t)size * sizeof *hb);
    int ok = mine && all && hb, all_ok;
    TESS_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
    tess_status s = TESS_OK;
    if (!all_ok) {
        s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                            "cannot allocate the checkpoint plan (%lld entries x %d ranks)",
                            (long long)n, size);
        goto done;
    }
    *has_bc = false;
    for (int64_t i = 0; i < n; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        if (e->layout.kind == TESS_LAYOUT_BLOCK_CYCLIC || e->local_count == 0) continue;
        for (int dd = 0; dd < e->ndim; dd++) {
            mine[i * BLK + dd] = e->global_offset[dd];
            mine[i * BLK + TESS_MAX_DIMS + dd] = e->local_shape[dd];
        }
    }
    int e_mpi = MPI_Allgather(mine, (int)(n * BLK), MPI_INT64_T, all, (int)(n * BLK), MPI_INT64_T,
                              comm);
    if (e_mpi != MPI_SUCCESS) {
        s = tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__,
                            "MPI_Allgather of the checkpoint plan failed");
        goto done;
    }
    for (int64_t i = 0; i < n && s == TESS_OK; i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        ckpt_region *r = &regions[i];
        memset(r, 0, sizeof *r);
        if (e->layout.kind == TESS_LAYOUT_BLOCK_CYCLIC) {
            *has_bc = true;
            if (e->layout.nprow * e->layout.npcol != size) {
                s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                    "entry %s: block-cyclic on a %d x %d grid but %d ranks: "
                                    "checkpointing a block-cyclic tensor on a sub-grid is not "
                                    "supported yet",
                                    e->name, e->layout.nprow, e->layout.npcol, size);
                break;
            }
            r->block_cyclic = true;
            if (rank == 0) {
                r->count = e->global_count;
                for (int dd = 0; dd < e->ndim; dd++) r->cnt[dd] = e->shape[dd];
            }
            continue;
        }
        int64_t nh = 0;
        for (int p = 0; p < size; p++) {
            const int64_t *k = all + ((int64_t)p * n + i) * BLK;
            int64_t cnt = 1;
            for (int dd = 0; dd < e->ndim; dd++) cnt *= k[TESS_MAX_DIMS + dd];
            if (cnt == 0) continue;
            memcpy(hb[nh].key, k, sizeof hb[nh].key);
            hb[nh++].rank = p;
        }
        qsort(hb, (size_t)nh, sizeof *hb, cmp_held);
        int64_t covered = 0;
        for (int64_t h = 0; h < nh; h++) {
            if (h > 0 && memcmp(hb[h].key, hb[h - 1].key, sizeof hb[h].key) == 0) continue;
            int64_t vol = 1;
            for (int dd = 0; dd < e->ndim; dd++) vol *= hb[h].key[TESS_MAX_DIMS + dd];
            covered += vol;
        }
        if (covered != e->global_count) {
            s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                "entry %s: the ranks' blocks hold %lld elements, the tensor has "
                                "%lld (a layout's group does not match the communicator?)",
                                e->name, (long long)covered, (long long)e->global_count);
            break;
        }
        region_from_holders(e, hb, nh, rank, r);
    }
done:
    free(mine);
    free(all);
    free(hb);
    return s;
}

uint64_t ckpt_hash_region(tess_ckpt_hash_scheme h, uint64_t acc, const tess_registry_entry *e,
                          const ckpt_region *r, const float *local) {
    if (r->count == 0) return acc;
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
                acc = tess_ckpt_hash_add(h, acc, local + m, sizeof(float), g, cnt[3]);
            }
    return acc;
}

/* --- files ----------------------------------------------------------------------------------- */

hid_t ckpt_fapl_mpio(MPI_Comm comm) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return fapl;
    if (H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) < 0 ||
        H5Pset_all_coll_metadata_ops(fapl, 1) < 0 || H5Pset_coll_metadata_write(fapl, 1) < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) < 0 ||
        /* our own tmp + rename protocol protects the file; locks fail on NFS and some Lustre */
        H5Pset_file_locking(fapl, 0, 1) < 0) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}

int ckpt_fsync_path(const char *path, bool directory) {
    int fd = open(path, directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

void ckpt_dirname(const char *path, char *buf, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, n, ".");
    } else if (slash == path) {
        snprintf(buf, n, "/");
    } else {
        snprintf(buf, n, "%.*s", (int)(slash - path), path);
    }
}

void ckpt_test_kill(const char *point) {
    const char *at = getenv("TESS_CKPT_TEST_KILL_AT");
    if (at && strcmp(at, point) == 0) raise(SIGKILL);
}
