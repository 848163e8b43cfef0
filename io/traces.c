/* traces.c - multi-session recordings: reader, writer, Flavell-lab importer (see traces.h).
 *
 * The reader visits every session in name order on every rank, so each group open, attribute
 * read and collective H5Dread happens on all ranks alike; a rank that does not hold a session
 * (or has already failed) takes part with an empty selection. Metadata reads are collective
 * (rank 0 reads, the others receive), which keeps the file system quiet at scale.
 */
#include "io/traces.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par/layout.h" /* tess_par_block_range */
#include "io/dataset.h"  /* tess_ds_* */
#include "io/h5.h"       /* tess_h5_quiet_*, tess_h5_reason */
#include "par/coll.h"    /* tess_par_agree */

static const char *const TRACES_FORMAT = "tessera.traces";
enum { TRACES_VERSION = 1, OBJ_MAX = 2 * TESS_TRACES_NAME_MAX + 32 };

void tess_traces_free(tess_traces *tr) {
    for (int64_t i = 0; i < tr->num_sessions; i++) {
        free(tr->sessions[i].traces);
        free(tr->sessions[i].behavior);
    }
    free(tr->sessions);
    *tr = (tess_traces){0};
}

static int64_t count_names(const char *csv) {
    if (csv[0] == '\0') return 0;
    int64_t k = 1;
    for (; *csv; csv++) k += *csv == ',';
    return k;
}

/* --- reading ---------------------------------------------------------------------------------- */

typedef struct {
    char (*names)[TESS_TRACES_NAME_MAX];
    int64_t n, cap;
    bool too_long, oom;
} name_list;

static herr_t collect_name(hid_t g, const char *name, const H5L_info_t *info, void *data) {
    (void)g;
    (void)info;
    name_list *l = data;
    if (strlen(name) >= TESS_TRACES_NAME_MAX) {
        l->too_long = true;
        return 0;
    }
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 16;
        void *p = realloc(l->names, (size_t)cap * sizeof *l->names);
        if (!p) {
            l->oom = true;
            return 1;
        }
        l->names = p;
        l->cap = cap;
    }
    snprintf(l->names[l->n++], TESS_TRACES_NAME_MAX, "%s", name);
    return 0;
}

static tess_status list_sessions(const tess_ds_file *f, name_list *l) {
    TESS_REQUIRE(tess_ds_exists(f, "/sessions"), TESS_ERR_DATA, "'%s': group /sessions is missing",
                 f->path);
    hid_t g = H5Gopen2(f->file, "/sessions", H5P_DEFAULT);
    TESS_REQUIRE(g >= 0, TESS_ERR_DATA, "'%s': /sessions is not a group", f->path);
    herr_t e = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, collect_name, l);
    H5Gclose(g);
    TESS_REQUIRE(!l->oom, TESS_ERR_MEM, "out of memory listing sessions");
    TESS_REQUIRE(e >= 0, TESS_ERR_DATA, "'%s': cannot list /sessions", f->path);
    TESS_REQUIRE(!l->too_long, TESS_ERR_DATA,
                 "'%s': a session name under /sessions is longer "
                 "than %d bytes",
                 f->path, TESS_TRACES_NAME_MAX - 1);
    TESS_REQUIRE(l->n >= 1, TESS_ERR_DATA, "'%s': /sessions holds no session", f->path);
    return TESS_OK;
}

/* One session's metadata: identical on every rank. d[0] traces, d[1] behavior (or invalid). */
static tess_status session_meta(const tess_ds_file *f, const char *name, int64_t K,
                                tess_traces_session *s, hid_t d[2]) {
    char obj[OBJ_MAX], ds[OBJ_MAX + 16];
    snprintf(obj, sizeof obj, "/sessions/%s", name);
    TESS_CHECK(tess_ds_attr_double(f, obj, "sampling_rate_hz", &s->rate_hz));
    TESS_REQUIRE(isfinite(s->rate_hz) && s->rate_hz > 0.0, TESS_ERR_DATA,
                 "'%s': %s has sampling_rate_hz %g, expected a positive number", f->path, obj,
                 s->rate_hz);
    int64_t dims[2], want[2];
    snprintf(ds, sizeof ds, "%s/traces", obj);
    TESS_CHECK(tess_ds_dataset_open(f, ds, TESS_DS_FLOAT, 2, NULL, dims, &d[0]));
    TESS_REQUIRE(dims[0] >= 1 && dims[1] >= 1, TESS_ERR_DATA,
                 "'%s': %s has shape [%lld, %lld], expected at least one frame and one neuron",
                 f->path, ds, (long long)dims[0], (long long)dims[1]);
    s->frames = dims[0];
    s->neurons = dims[1];
    snprintf(ds, sizeof ds, "%s/behavior", obj);
    if (K > 0) {
        want[0] = s->frames;
        want[1] = K;
        TESS_CHECK(tess_ds_dataset_open(f, ds, TESS_DS_FLOAT, 2, want, dims, &d[1]));
    } else {
        TESS_REQUIRE(!tess_ds_exists(f, ds), TESS_ERR_DATA,
                     "'%s': %s exists but /sessions has no behavior_names", f->path, ds);
    }
    snprintf(s->name, sizeof s->name, "%s", name);
    return TESS_OK;
}

static tess_status check_finite(const tess_ds_file *f, const tess_traces *tr) {
    for (int64_t i = 0; i < tr->num_sessions; i++) {
        const tess_traces_session *s = &tr->sessions[i];
        for (int64_t k = 0; k < s->t * s->neurons; k++)
            TESS_REQUIRE(isfinite(s->traces[k]), TESS_ERR_DATA,
                         "'%s': /sessions/%s/traces[%lld, %lld] is not finite", f->path, s->name,
                         (long long)(s->t0 + k / s->neurons), (long long)(k % s->neurons));
        for (int64_t k = 0; k < s->t * tr->behavior_dim; k++)
            TESS_REQUIRE(isfinite(s->behavior[k]), TESS_ERR_DATA,
                         "'%s': /sessions/%s/behavior[%lld, %lld] is not finite", f->path, s->name,
                         (long long)(s->t0 + k / tr->behavior_dim),
                         (long long)(k % tr->behavior_dim));
    }
    return TESS_OK;
}

/* Visit every session on every rank; ls is this rank's local status (allocation). */
static tess_status read_sessions(const tess_ds_file *f, tess_traces *tr, const name_list *l,
                                 tess_traces_split split, int64_t overlap, tess_status *ls) {
    const int64_t S = l->n, K = tr->behavior_dim;
    int64_t slo = 0, shi = S;
    if (split == TESS_TRACES_SPLIT_SESSIONS) tess_par_block_range(S, f->size, f->rank, &slo, &shi);
    tr->sessions = calloc((size_t)(shi - slo > 0 ? shi - slo : 1), sizeof *tr->sessions);
    if (!tr->sessions)
        *ls = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory");
    tess_status ms = TESS_OK;
    for (int64_t i = 0; i < S && ms == TESS_OK; i++) {
        tess_traces_session meta = {.index = i};
        hid_t d[2] = {H5I_INVALID_HID, H5I_INVALID_HID};
        ms = session_meta(f, l->names[i], K, &meta, d);
        bool mine = ms == TESS_OK && *ls == TESS_OK && i >= slo && i < shi;
        if (mine) {
            int64_t lo = 0, hi = meta.frames;
            if (split == TESS_TRACES_SPLIT_TIME) {
                tess_par_block_range(meta.frames, f->size, f->rank, &lo, &hi);
                if (hi > lo) hi = hi + overlap < meta.frames ? hi + overlap : meta.frames;
            }
            meta.t0 = lo;
            meta.t = hi - lo;
            meta.traces = calloc((size_t)(meta.t * meta.neurons > 0 ? meta.t * meta.neurons : 1),
                                 sizeof(float));
            meta.behavior =
                K > 0 ? calloc((size_t)(meta.t * K > 0 ? meta.t * K : 1), sizeof(float)) : NULL;
            tr->sessions[tr->num_sessions++] = meta;
            if (!meta.traces || (K > 0 && !meta.behavior))
                *ls = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                      "cannot allocate %lld frames of session %s",
                                      (long long)meta.t, meta.name);
        }
        if (ms == TESS_OK) {
            tess_traces_session *s = mine ? &tr->sessions[tr->num_sessions - 1] : NULL;
            int64_t nr = s && *ls == TESS_OK && s->t > 0 ? 1 : 0, t0 = s ? s->t0 : 0,
                    t = s ? s->t : 0;
            char name[OBJ_MAX + 16];
            snprintf(name, sizeof name, "/sessions/%s/traces", meta.name);
            tess_status r = tess_ds_read_runs(f, d[0], name, H5T_NATIVE_FLOAT, meta.neurons, &t0,
                                              &t, nr, s ? s->traces : NULL);
            if (r == TESS_OK && K > 0) {
                snprintf(name, sizeof name, "/sessions/%s/behavior", meta.name);
                r = tess_ds_read_runs(f, d[1], name, H5T_NATIVE_FLOAT, K, &t0, &t, nr,
                                      s ? s->behavior : NULL);
            }
            if (*ls == TESS_OK) *ls = r;
        }
        for (int j = 0; j < 2; j++)
            if (d[j] != H5I_INVALID_HID) H5Dclose(d[j]);
    }
    return ms;
}

tess_status tess_traces_read(tess_traces *tr, const tess_group *g, const char *path,
                             tess_traces_split split, int64_t overlap) {
    *tr = (tess_traces){0};
    TESS_REQUIRE(overlap >= 0, TESS_ERR_ARG, "overlap %lld", (long long)overlap);
    tess_ds_file f;
    TESS_CHECK(tess_ds_open(&f, g, path, TRACES_FORMAT, TRACES_VERSION, true));
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    name_list l = {0};
    tess_status s = tess_ds_attr_string(&f, "/sessions", "behavior_names", tr->behavior_names,
                                        sizeof tr->behavior_names);
    if (s == TESS_OK) s = list_sessions(&f, &l);
    s = tess_par_agree(g, s);
    if (s == TESS_OK) {
        tr->behavior_dim = count_names(tr->behavior_names);
        tr->total_sessions = l.n;
        tess_status ls = TESS_OK;
        tess_status ms = read_sessions(&f, tr, &l, split, overlap, &ls);
        s = tess_par_agree(g, ms != TESS_OK ? ms : ls);
        if (s == TESS_OK) s = tess_par_agree(g, check_finite(&f, tr));
    }
    free(l.names);
    tess_status sc = tess_ds_close(&f);
    tess_h5_quiet_end(&q);
    if (s == TESS_OK) s = sc;
    if (s != TESS_OK) tess_traces_free(tr);
    TESS_REQUIRE(s == TESS_OK, s, "reading traces from '%s'", path);
    return TESS_OK;
}

/* --- writing ---------------------------------------------------------------------------------- */

static tess_status check_whole(const tess_traces *tr) {
    TESS_REQUIRE(tr->num_sessions == tr->total_sessions && tr->num_sessions >= 1, TESS_ERR_ARG,
                 "tess_traces_write needs whole sessions (holds %lld of %lld)",
                 (long long)tr->num_sessions, (long long)tr->total_sessions);
    TESS_REQUIRE(tr->behavior_dim == count_names(tr->behavior_names), TESS_ERR_ARG,
                 "behavior_dim %lld but behavior_names '%s'", (long long)tr->behavior_dim,
                 tr->behavior_names);
    for (int64_t i = 0; i < tr->num_sessions; i++) {
        const tess_traces_session *s = &tr->sessions[i];
        TESS_REQUIRE(s->name[0] != '\0' && strchr(s->name, '/') == NULL &&
                         strcmp(s->name, ".") != 0,
                     TESS_ERR_ARG, "session %lld: bad name '%s'", (long long)i, s->name);
        for (int64_t j = 0; j < i; j++)
            TESS_REQUIRE(strcmp(tr->sessions[j].name, s->name) != 0, TESS_ERR_ARG,
                         "two sessions are named '%s'", s->name);
        TESS_REQUIRE(s->t0 == 0 && s->t == s->frames && s->frames >= 1 && s->neurons >= 1 &&
                         isfinite(s->rate_hz) && s->rate_hz > 0.0,
                     TESS_ERR_ARG,
                     "session '%s': frames %lld (held [%lld, +%lld)), neurons %lld, "
                     "rate %g Hz",
                     s->name, (long long)s->frames, (long long)s->t0, (long long)s->t,
                     (long long)s->neurons, s->rate_hz);
    }
    return TESS_OK;
}

static tess_status write_all(tess_ds_writer *w, const tess_traces *tr) {
    TESS_CHECK(tess_ds_write_group(w, "/sessions"));
    TESS_CHECK(tess_ds_write_attr_string(w, "/sessions", "behavior_names", tr->behavior_names));
    for (int64_t i = 0; i < tr->num_sessions; i++) {
        const tess_traces_session *s = &tr->sessions[i];
        char obj[OBJ_MAX], ds[OBJ_MAX + 16];
        snprintf(obj, sizeof obj, "/sessions/%s", s->name);
        TESS_CHECK(tess_ds_write_group(w, obj));
        TESS_CHECK(tess_ds_write_attr_double(w, obj, "sampling_rate_hz", s->rate_hz));
        int64_t d[2] = {s->frames, s->neurons};
        snprintf(ds, sizeof ds, "%s/traces", obj);
        TESS_CHECK(tess_ds_write_array(w, ds, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d, s->traces));
        if (tr->behavior_dim > 0) {
            d[1] = tr->behavior_dim;
            snprintf(ds, sizeof ds, "%s/behavior", obj);
            TESS_CHECK(
                tess_ds_write_array(w, ds, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d, s->behavior));
        }
    }
    return TESS_OK;
}

tess_status tess_traces_write(const char *path, const tess_traces *tr) {
    TESS_CHECK(check_whole(tr));
    tess_ds_writer w;
    TESS_CHECK(tess_ds_writer_create(&w, path, TRACES_FORMAT, TRACES_VERSION));
    tess_status s = write_all(&w, tr);
    if (s != TESS_OK) {
        tess_ds_writer_abandon(&w);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "writing traces to '%s'", path);
    }
    TESS_CHECK(tess_ds_writer_commit(&w));
    return TESS_OK;
}

/* --- Flavell-lab import ----------------------------------------------------------------------- */

static int double_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A 1-D numeric dataset of at least `min_len` values, read as double: *out (len) malloc'ed. */
static tess_status read_column(const tess_ds_file *f, const char *name, int64_t min_len,
                               double **out, int64_t *len) {
    TESS_REQUIRE(tess_ds_exists(f, name), TESS_ERR_DATA, "'%s': dataset %s is missing", f->path,
                 name);
    hid_t d = H5Dopen2(f->file, name, H5P_DEFAULT);
    TESS_REQUIRE(d >= 0, TESS_ERR_DATA, "'%s': %s is not a dataset", f->path, name);
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    H5T_class_t c = H5Tget_class(t);
    int nd = H5Sget_simple_extent_ndims(sp);
    hsize_t n = 0;
    if (nd == 1) H5Sget_simple_extent_dims(sp, &n, NULL);
    H5Tclose(t);
    H5Sclose(sp);
    tess_status s = TESS_OK;
    if (c != H5T_INTEGER && c != H5T_FLOAT)
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "'%s': %s holds %s, expected numbers (one per frame)", f->path, name,
                            c == H5T_STRING ? "strings" : "neither integers nor reals");
    else if (nd != 1)
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "'%s': %s has %d dimensions, expected 1 (one value per frame)",
                            f->path, name, nd);
    else if ((int64_t)n < min_len)
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "'%s': %s has %lld values, expected at least %lld (one per frame)",
                            f->path, name, (long long)n, (long long)min_len);
    double *v = s == TESS_OK ? malloc((size_t)(n > 0 ? n : 1) * sizeof *v) : NULL;
    if (s == TESS_OK && !v) s = TESS_ERR_MEM;
    if (s == TESS_OK && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__, "'%s': cannot read %s",
                            f->path, name);
    H5Dclose(d);
    if (s != TESS_OK) {
        free(v);
        return s;
    }
    *out = v;
    *len = (int64_t)n;
    return TESS_OK;
}

static tess_status flavell_rate(const tess_ds_file *f, int64_t T, double *rate) {
    double *ts = NULL;
    int64_t n = 0;
    TESS_REQUIRE(T >= 2, TESS_ERR_DATA, "'%s': %lld frames, need 2 to measure the frame rate",
                 f->path, (long long)T);
    TESS_CHECK(read_column(f, "/timing/timestamp_confocal", T, &ts, &n));
    for (int64_t i = 0; i < T; i++) {
        if (isfinite(ts[i])) continue;
        free(ts);
        TESS_REQUIRE(false, TESS_ERR_DATA,
                     "'%s': /timing/timestamp_confocal[%lld] is not finite (every frame needs a "
                     "time)",
                     f->path, (long long)i);
    }
    for (int64_t i = 0; i + 1 < T; i++) ts[i] = ts[i + 1] - ts[i];
    qsort(ts, (size_t)(T - 1), sizeof *ts, double_cmp);
    double dt = ts[(T - 1) / 2];
    free(ts);
    TESS_REQUIRE(isfinite(dt) && dt > 0.0, TESS_ERR_DATA,
                 "'%s': median frame interval of /timing/timestamp_confocal is %g s", f->path, dt);
    *rate = 1.0 / dt;
    return TESS_OK;
}

static tess_status flavell_behavior(const tess_ds_file *f, tess_traces_session *s,
                                    const char *names) {
    int64_t K = count_names(names), T = s->frames;
    if (K == 0) return TESS_OK;
    s->behavior = malloc((size_t)(T * K) * sizeof(float));
    TESS_REQUIRE(s->behavior != NULL, TESS_ERR_MEM, "out of memory");
    char list[TESS_TRACES_NAMES_MAX];
    snprintf(list, sizeof list, "%s", names);
    char *save = NULL, *name = strtok_r(list, ",", &save);
    for (int64_t k = 0; k < K && name; k++, name = strtok_r(NULL, ",", &save)) {
        char ds[OBJ_MAX];
        snprintf(ds, sizeof ds, "/behavior/%s", name);
        double *v = NULL;
        int64_t n = 0;
        TESS_CHECK(read_column(f, ds, T, &v, &n));
        tess_status st = TESS_OK;
        if (n != T)
            st = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                 "'%s': %s has %lld frames, the traces %lld", f->path, ds,
                                 (long long)n, (long long)T);
        for (int64_t t = 0; t < T && st == TESS_OK; t++) {
            if (!isfinite(v[t]))
                st = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                     "'%s': %s[%lld] is not finite (choose other behaviour "
                                     "variables)",
                                     f->path, ds, (long long)t);
            s->behavior[t * K + k] = (float)v[t];
        }
        free(v);
        if (st != TESS_OK) return st;
    }
    return TESS_OK;
}

static tess_status flavell_read(const tess_ds_file *f, tess_traces_session *s,
                                const char *trace_name, const char *behavior_names) {
    char ds[OBJ_MAX];
    snprintf(ds, sizeof ds, "/gcamp/%s", trace_name);
    int64_t dims[2];
    hid_t d;
    TESS_CHECK(tess_ds_dataset_open(f, ds, TESS_DS_FLOAT, 2, NULL, dims, &d));
    if (dims[0] < 1 || dims[1] < 1) H5Dclose(d);
    TESS_REQUIRE(dims[0] >= 1 && dims[1] >= 1, TESS_ERR_DATA,
                 "'%s': %s has shape [%lld, %lld], expected (frames, neurons) with at least one "
                 "frame and one neuron",
                 f->path, ds, (long long)dims[0], (long long)dims[1]);
    s->frames = s->t = dims[0];
    s->neurons = dims[1];
    s->traces = malloc((size_t)(dims[0] * dims[1] > 0 ? dims[0] * dims[1] : 1) * sizeof(float));
    herr_t e =
        s->traces ? H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->traces) : -1;
    H5Dclose(d);
    TESS_REQUIRE(e >= 0, TESS_ERR_DATA, "'%s': cannot read %s", f->path, ds);
    for (int64_t k = 0; k < dims[0] * dims[1]; k++)
        TESS_REQUIRE(isfinite(s->traces[k]), TESS_ERR_DATA, "'%s': %s[%lld, %lld] is not finite",
                     f->path, ds, (long long)(k / dims[1]), (long long)(k % dims[1]));
    TESS_CHECK(flavell_rate(f, s->frames, &s->rate_hz));
    TESS_CHECK(flavell_behavior(f, s, behavior_names));
    return TESS_OK;
}

tess_status tess_traces_import_flavell(tess_traces_session *s, const char *path,
                                       const char *trace_name, const char *behavior_names) {
    *s = (tess_traces_session){0};
    TESS_REQUIRE(strlen(behavior_names) < TESS_TRACES_NAMES_MAX, TESS_ERR_ARG,
                 "behaviour list too long");
    /* every name of the list becomes a column: an empty one ("a,,b", "a,", ",") has no data */
    int64_t k = 1;
    for (const char *c = behavior_names; *c; c++) {
        TESS_REQUIRE(!(*c == ',' && (c == behavior_names || c[1] == ',' || c[1] == '\0')),
                     TESS_ERR_ARG,
                     "behaviour list '%s': name %lld is empty (expected comma-separated names "
                     "of datasets under /behavior, e.g. velocity,head_angle)",
                     behavior_names, (long long)(c == behavior_names ? k : k + 1));
        k += *c == ',';
    }
    FILE *probe = fopen(path, "rb");
    TESS_REQUIRE(probe != NULL, TESS_ERR_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
    fclose(probe);
    const char *slash = strrchr(path, '/');
    snprintf(s->name, sizeof s->name, "%s", slash ? slash + 1 : path);
    char *cut = strstr(s->name, "-data.h5");
    if (!cut) cut = strstr(s->name, ".h5");
    if (cut) *cut = '\0';

    tess_ds_file f = {.file = H5I_INVALID_HID, .dxpl = H5I_INVALID_HID};
    snprintf(f.path, sizeof f.path, "%s", path);
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    f.file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    char why[256];
    tess_h5_reason(why, sizeof why);
    tess_status st = f.file >= 0
                         ? flavell_read(&f, s, trace_name, behavior_names)
                         : tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                           "'%s' is not a readable HDF5 file: %s", path, why);
    if (f.file >= 0) H5Fclose(f.file);
    tess_h5_quiet_end(&q);
    if (st != TESS_OK) {
        free(s->traces);
        free(s->behavior);
        *s = (tess_traces_session){0};
        TESS_REQUIRE(false, st, "importing Flavell-lab session '%s'", path);
    }
    return TESS_OK;
}
