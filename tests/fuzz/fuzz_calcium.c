/* fuzz_calcium.c - the calcium importer (tess_traces_import_flavell, io/traces.h) past the HDF5
 * open: the checks on the datasets' presence, types, shapes and values.
 *
 * The input is not an HDF5 file (fuzzing HDF5's own parser is not the point here) but a
 * description of one, decoded with the fuzz.h cursor and written with the HDF5 API to
 * "<scratch>/fz-data.h5":
 *   behaviour list   0..5 comma-separated words of "a", "b", "c", "", "a/b", "d e", ".", "bb"
 *                    (the importer's behavior_names argument)
 *   trace name       one of "raw", "zs", "", "a/b" (dataset /gcamp/<name>)
 *   /gcamp/<name>    a dataset, or absent
 *   /timing/timestamp_confocal   a dataset (optionally increasing by the decoded steps), or absent
 *   /behavior/<tok>  for each distinct non-empty token of the list: a dataset, or absent
 * where "a dataset" is: type (float64, float32, int64, int8, fixed-length string), rank 0..3,
 * each dimension 0..5 (0..7 for a 1-D one), values from the cursor.
 * Properties checked (fuzz_fail otherwise), besides no crash under ASan/UBSan:
 *   - a refused file leaves an error record and an empty session;
 *   - an accepted file had a 2-D float /gcamp/<name> (T, N) and the session holds exactly its
 *     values as float32; every timestamp used (the first T) was finite and the rate is finite
 *     and positive; every name of the list is a non-empty name of a numeric dataset of at least
 *     T values, and behaviour column k holds exactly the first T values of the k-th name's
 *     dataset, all finite.
 */
#include <hdf5.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io/h5.h"     /* tess_h5_quiet_* */
#include "io/traces.h" /* tess_traces_import_flavell */

enum { FZ_MAXV = 125, FZ_NAMES = 48, FZ_MAXTOK = 16 }; /* 5^3 values: rank 3, dimensions <= 5 */

typedef enum { FZ_F64 = 0, FZ_F32, FZ_I64, FZ_I8, FZ_STR, FZ_NTYPES } fz_type;

/* One decoded dataset: what was written, and its values as the stored type holds them. */
typedef struct {
    bool present;
    fz_type type;
    int rank;
    hsize_t dims[3];
    int64_t n; /* product of dims (1 for rank 0) */
    double v[FZ_MAXV];
} fz_dset;

int LLVMFuzzerInitialize(int *argc, char ***argv) { return fuzz_start(argc, argv); }

/* A value as the stored type holds it. */
static double fz_stored(fz_type t, double x) {
    switch (t) {
    case FZ_F32: return (double)(float)x;
    case FZ_I64: return isfinite(x) && fabs(x) < 1e15 ? (double)(int64_t)x : 0.0;
    case FZ_I8: return isfinite(x) ? (double)(int8_t)((int)fmod(x, 128.0)) : 0.0;
    default: return x;
    }
}

/* Decode a dataset; `steps`: values are running sums of the decoded numbers (timestamps). */
static void fz_decode(fuzz_bytes *b, fz_dset *d, bool steps) {
    *d = (fz_dset){0};
    d->present = fuzz_pick(b, 8) != 0;
    d->type = (fz_type)fuzz_pick(b, FZ_NTYPES);
    uint8_t r = fuzz_u8(b);
    d->rank = r < 160 ? (r < 80 ? 1 : 2) : r % 4; /* mostly 1-D and 2-D */
    d->n = 1;
    for (int k = 0; k < d->rank; k++) {
        d->dims[k] = (hsize_t)fuzz_pick(b, d->rank == 1 ? 8 : 6);
        d->n *= (int64_t)d->dims[k];
    }
    double acc = 0.0;
    for (int64_t i = 0; i < d->n; i++) {
        double x = fuzz_real(b);
        acc = steps ? acc + x : x;
        d->v[i] = fz_stored(d->type, acc);
    }
}

/* Write d as dataset `name` of file f (intermediate groups created). Returns false if HDF5
 * refuses the name (e.g. "."), in which case the dataset does not exist. */
static bool fz_write(hid_t f, const char *name, fz_dset *d) {
    hid_t space = d->rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(d->rank, d->dims, NULL);
    hid_t ftype, mtype;
    static const hid_t *const ftypes[] = {&H5T_IEEE_F64LE_g, &H5T_IEEE_F32LE_g, &H5T_STD_I64LE_g,
                                          &H5T_STD_I8LE_g};
    char text[FZ_MAXV][16];
    if (d->type == FZ_STR) {
        ftype = H5Tcopy(H5T_C_S1);
        H5Tset_size(ftype, sizeof text[0]);
        mtype = H5Tcopy(ftype);
        for (int64_t i = 0; i < d->n; i++) snprintf(text[i], sizeof text[i], "%.6g", d->v[i]);
    } else {
        ftype = H5Tcopy(*ftypes[d->type]);
        mtype = H5Tcopy(H5T_NATIVE_DOUBLE);
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t ds = H5Dcreate2(f, name, ftype, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    bool ok = ds >= 0;
    if (ok && d->n > 0 &&
        H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, d->type == FZ_STR ? (void *)text : d->v) < 0)
        fuzz_fail("cannot write %s", name);
    if (ok) H5Dclose(ds);
    H5Pclose(lcpl);
    H5Tclose(mtype);
    H5Tclose(ftype);
    H5Sclose(space);
    return ok;
}

/* The comma-separated tokens of list, empty ones included; returns the count (at most max). */
static int fz_split(const char *list, char tok[][FZ_NAMES], int max) {
    if (list[0] == '\0') return 0;
    int n = 0;
    const char *p = list;
    for (; n < max; n++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        snprintf(tok[n], FZ_NAMES, "%.*s", (int)len, p);
        if (!c) return n + 1;
        p = c + 1;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_bytes b = {data, size, 0};
    static const char *const name_words[] = {"a", "b", "c", "", "a/b", "d e", ".", "bb"};
    static const char *const trace_names[] = {"raw", "zs", "", "a/b"};
    char names[FZ_NAMES] = "";
    for (int k = 0, n = fuzz_pick(&b, 6); k < n; k++) {
        size_t at = strlen(names);
        snprintf(names + at, sizeof names - at, "%s%s", k ? "," : "", name_words[fuzz_pick(&b, 8)]);
    }
    const char *trace_name = trace_names[fuzz_pick(&b, 4)];

    static fz_dset gcamp, ts, beh[FZ_MAXTOK];
    static char tok[FZ_MAXTOK][FZ_NAMES];
    static bool written[FZ_MAXTOK];
    char path[300], ds[FZ_MAXTOK * FZ_NAMES + 16];
    fuzz_path(path, sizeof path, "fz-data.h5");
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 16, 1); /* built in memory, written once at close */
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) fuzz_fail("cannot create %s", path);
    fz_decode(&b, &gcamp, false);
    snprintf(ds, sizeof ds, "/gcamp/%s", trace_name);
    gcamp.present = gcamp.present && fz_write(f, ds, &gcamp);
    fz_decode(&b, &ts, fuzz_pick(&b, 4) != 0);
    ts.present = ts.present && fz_write(f, "/timing/timestamp_confocal", &ts);
    int ntok = fz_split(names, tok, FZ_MAXTOK);
    for (int k = 0; k < ntok; k++) {
        int first = 0; /* a repeated name is the same dataset */
        while (strcmp(tok[first], tok[k]) != 0) first++;
        if (first < k) {
            beh[k] = beh[first];
            written[k] = written[first];
            continue;
        }
        written[k] = false;
        if (tok[k][0] == '\0') continue;
        fz_decode(&b, &beh[k], false);
        snprintf(ds, sizeof ds, "/behavior/%s", tok[k]);
        written[k] = beh[k].present && fz_write(f, ds, &beh[k]);
    }
    if (H5Fclose(f) < 0) fuzz_fail("cannot close %s", path);
    tess_h5_quiet_end(&q);

    tess_traces_session s;
    tess_status st = tess_traces_import_flavell(&s, path, trace_name, names);
    fuzz_verdict("import", st);
    if (st != TESS_OK) {
        if (tess_error_text()[0] == '\0') fuzz_fail("refused without an error record");
        if (s.traces || s.behavior || s.frames) fuzz_fail("a refused import left data");
        tess_error_clear();
        return 0;
    }
    /* accepted: everything read must be what was written */
    if (!gcamp.present || gcamp.rank != 2 || (gcamp.type != FZ_F64 && gcamp.type != FZ_F32))
        fuzz_fail("accepted without a 2-D float /gcamp/%s", trace_name);
    int64_t T = (int64_t)gcamp.dims[0], N = (int64_t)gcamp.dims[1];
    if (s.frames != T || s.neurons != N || s.t0 != 0 || s.t != T)
        fuzz_fail("session %lld x %lld, file %lld x %lld", (long long)s.frames,
                  (long long)s.neurons, (long long)T, (long long)N);
    for (int64_t i = 0; i < T * N; i++)
        if (s.traces[i] != (float)gcamp.v[i]) fuzz_fail("traces[%lld] differs", (long long)i);
    if (!ts.present || ts.rank != 1 || ts.type == FZ_STR || (int64_t)ts.dims[0] < T)
        fuzz_fail("accepted without a 1-D numeric timestamp dataset of %lld values", (long long)T);
    for (int64_t i = 0; i < T; i++)
        if (!isfinite(ts.v[i])) fuzz_fail("accepted timestamp %lld = %g", (long long)i, ts.v[i]);
    if (!isfinite(s.rate_hz) || s.rate_hz <= 0.0) fuzz_fail("rate %g", s.rate_hz);
    for (int k = 0; k < ntok; k++) {
        if (tok[k][0] == '\0') fuzz_fail("accepted an empty name at position %d of '%s'", k, names);
        const fz_dset *d = &beh[k];
        if (!written[k] || d->rank != 1 || d->type == FZ_STR || (int64_t)d->dims[0] < T)
            fuzz_fail("accepted behaviour '%s' without a 1-D numeric dataset of %lld values",
                      tok[k], (long long)T);
        for (int64_t t = 0; t < T; t++)
            if (!isfinite(d->v[t]) || s.behavior[t * ntok + k] != (float)d->v[t])
                fuzz_fail("behaviour '%s'[%lld]: %g, file %g", tok[k], (long long)t,
                          (double)s.behavior[t * ntok + k], d->v[t]);
    }
    free(s.traces);
    free(s.behavior);
    return 0;
}
