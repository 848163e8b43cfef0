/* ckpt_array.c - flat float32/float64/int64 arrays of a checkpoint: types, the write/hash plan and
 * the structural check on load (see ckpt.h, tess_ckpt_array). */
#include <stdlib.h>
#include <string.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "par/layout.h"   /* tess_par_block_range */
#include "io/ckpt_impl.h"

int64_t ckpt_reg_count(const tess_ckpt_state *st) {
    return st->reg ? tess_registry_count(st->reg) : 0;
}

size_t ckpt_dtype_size(tess_ckpt_dtype t) { return t == TESS_CKPT_F32 ? 4 : 8; }

hid_t ckpt_dtype_file(tess_ckpt_dtype t) {
    return t == TESS_CKPT_F32 ? H5T_IEEE_F32LE : t == TESS_CKPT_F64 ? H5T_IEEE_F64LE
                                                                    : H5T_STD_I64LE;
}

hid_t ckpt_dtype_mem(tess_ckpt_dtype t) {
    return t == TESS_CKPT_F32 ? H5T_NATIVE_FLOAT : t == TESS_CKPT_F64 ? H5T_NATIVE_DOUBLE
                                                                      : H5T_NATIVE_INT64;
}

const char *ckpt_dtype_name(tess_ckpt_dtype t) {
    return t == TESS_CKPT_F32 ? "float32" : t == TESS_CKPT_F64 ? "float64" : "int64";
}

enum { AK = 4 }; /* int64 per array per rank: first, n_local, n_global, dtype */

typedef struct {
    int64_t first, n;
    int rank;
} held_range;

static int cmp_range(const void *a, const void *b) {
    const held_range *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Span of `rank` for array a from the gathered ranges of all ranks (sorted into hr). */
static tess_status plan_one(const tess_ckpt_array *a, const int64_t *all, int64_t narr, int64_t k,
                            int size, int rank, held_range *hr, ckpt_span *sp) {
    int64_t nh = 0;
    for (int p = 0; p < size; p++) {
        const int64_t *v = all + ((int64_t)p * narr + k) * AK;
        TESS_REQUIRE(v[2] == a->n_global && v[3] == (int64_t)a->dtype, TESS_ERR_ARG,
                     "array %s: rank %d has %lld elements of %s, rank %d %lld of %s", a->name,
                     rank, (long long)a->n_global, ckpt_dtype_name(a->dtype), p, (long long)v[2],
                     ckpt_dtype_name((tess_ckpt_dtype)v[3]));
        if (v[1] > 0) hr[nh++] = (held_range){v[0], v[1], p};
    }
    qsort(hr, (size_t)nh, sizeof *hr, cmp_range);
    int64_t end = 0, parts = 0;
    memset(sp, 0, sizeof *sp);
    for (int64_t h = 0; h < nh;) {
        int64_t g = h;
        while (g < nh && hr[g].first == hr[h].first && hr[g].n == hr[h].n) g++;
        TESS_REQUIRE(hr[h].first == end, TESS_ERR_ARG,
                     "array %s: the ranks' ranges do not tile [0, %lld) (a range starts at %lld, "
                     "expected %lld)",
                     a->name, (long long)a->n_global, (long long)hr[h].first, (long long)end);
        for (int64_t i = h; i < g; i++)
            if (hr[i].rank == rank) { /* the holders of this range split it */
                int64_t lo, hi;
                tess_par_block_range(hr[h].n, (int)(g - h), (int)(i - h), &lo, &hi);
                *sp = (ckpt_span){.off = hr[h].first + lo, .count = hi - lo, .moff = lo};
            }
        end = hr[h].first + hr[h].n;
        parts++;
        h = g;
    }
    sp->parts = parts;
    TESS_REQUIRE(end == a->n_global, TESS_ERR_ARG,
                 "array %s: the ranks' ranges cover [0, %lld), the array has %lld elements",
                 a->name, (long long)end, (long long)a->n_global);
    return TESS_OK;
}

tess_status ckpt_array_plan(MPI_Comm comm, const tess_ckpt_state *st, ckpt_span *spans) {
    int rank, size;
    TESS_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    TESS_MPI_CHECK(MPI_Comm_size(comm, &size));
    const int64_t na = st->narrays;
    if (na == 0) return TESS_OK;
    int64_t *mine = malloc((size_t)(na * AK) * sizeof *mine);
    int64_t *all = malloc((size_t)(na * AK) * (size_t)size * sizeof *all);
    held_range *hr = malloc((size_t)size * sizeof *hr);
    tess_status s = ckpt_agree(comm, mine && all && hr ? TESS_OK : TESS_ERR_MEM,
                               "allocating the array plan");
    if (s == TESS_OK) {
        for (int64_t k = 0; k < na; k++) {
            const tess_ckpt_array *a = &st->arrays[k];
            const int64_t v[AK] = {a->first, a->n_local, a->n_global, (int64_t)a->dtype};
            memcpy(mine + k * AK, v, sizeof v);
        }
        int e = MPI_Allgather(mine, (int)(na * AK), MPI_INT64_T, all, (int)(na * AK),
                              MPI_INT64_T, comm);
        s = e == MPI_SUCCESS ? TESS_OK
                             : tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__,
                                               "MPI_Allgather of the array plan failed");
        /* every rank sees the same gathered table, so every rank reaches the same verdict */
        for (int64_t k = 0; k < na && s == TESS_OK; k++)
            s = plan_one(&st->arrays[k], all, na, k, size, rank, hr, &spans[k]);
    }
    free(mine);
    free(all);
    free(hr);
    return s;
}

uint64_t ckpt_array_hash(tess_ckpt_hash_scheme h, uint64_t acc, const tess_ckpt_array *a,
                         const ckpt_span *sp) {
    if (sp->count == 0) return acc;
    const size_t es = ckpt_dtype_size(a->dtype);
    return tess_ckpt_hash_add(h, acc, (const char *)a->data + (size_t)sp->moff * es, es, sp->off,
                              sp->count);
}

void ckpt_array_check(hid_t f, const tess_ckpt_array *a, ckpt_msgs *m) {
    char path[CKPT_SET_NAME_MAX + 2];
    snprintf(path, sizeof path, "/%s", a->name);
    hid_t d = ckpt_path_exists(f, path) ? H5Dopen2(f, path, H5P_DEFAULT) : -1;
    if (d < 0) {
        ckpt_msgs_add(m, "dataset %s is missing (expected %lld elements of %s)", path,
                      (long long)a->n_global, ckpt_dtype_name(a->dtype));
        return;
    }
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    const H5T_class_t want = a->dtype == TESS_CKPT_I64 ? H5T_INTEGER : H5T_FLOAT;
    if (t < 0 || H5Tget_class(t) != want || H5Tget_size(t) != ckpt_dtype_size(a->dtype) ||
        (want == H5T_INTEGER && H5Tget_sign(t) != H5T_SGN_2)) {
        char tn[64] = "unknown";
        if (t >= 0) ckpt_type_name(t, tn, sizeof tn);
        ckpt_msgs_add(m, "dataset %s has type %s, expected %s", path, tn,
                      ckpt_dtype_name(a->dtype));
    }
    hsize_t dims[H5S_MAX_RANK];
    int nd = space >= 0 ? H5Sget_simple_extent_dims(space, dims, NULL) : -1;
    if (nd != 1 || (int64_t)dims[0] != a->n_global) {
        char found[64] = "unreadable";
        if (nd == 0) snprintf(found, sizeof found, "a scalar");
        else if (nd == 1) snprintf(found, sizeof found, "[%lld]", (long long)dims[0]);
        else if (nd > 1) snprintf(found, sizeof found, "%d dimensions", nd);
        ckpt_msgs_add(m, "dataset %s has shape %s, expected [%lld]", path, found,
                      (long long)a->n_global);
    }
    if (!ckpt_attr_exists(d, "hash")) ckpt_msgs_add(m, "dataset %s has no hash attribute", path);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
}
