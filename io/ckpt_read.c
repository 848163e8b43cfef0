/* ckpt_read.c - opening, checking and verifying checkpoints (see ckpt.h; loading is in
 * ckpt_load.c, the resume policy in ckpt_resume.c).
 *
 * Every collective function follows the same order (verdicts before data moves): rank 0 opens the
 * file alone and checks its structure, pushes its problem list to its record and the verdict is
 * agreed (tess_par_agree forwards that record to every rank), and only a file that passed is
 * opened collectively. Reads then run on every rank in the same sequence;
 * a local failure is recorded and the sequence continues, so no rank waits in a collective for
 * one that gave up. Hash sums are all-reduced and judged identically everywhere. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "io/ckpt_impl.h"

enum { VERIFY_ROUND_ELEMS = 4 << 20 };

/* --- opening --------------------------------------------------------------------------------- */

static tess_status verify_structure(hid_t f, const char *path, int64_t version, char **manifest,
                                    ckpt_msgs *m);

/* The first bytes of path: a format 4 file starts with its integrity record, older formats with
 * the HDF5 signature (they have no user block). */
static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* Before HDF5 sees the file: a format 4 file passes its integrity record (*sealed), an older one
 * starts with the HDF5 signature (*sealed false). Anything else is refused here, so that HDF5
 * never searches further into a damaged file for a superblock. */
static tess_status precheck(const char *path, const struct stat *sb, ckpt_seal_info *seal,
                            bool *sealed, ckpt_msgs *m) {
    unsigned char head[8] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        ckpt_msgs_add(m, "cannot open checkpoint '%s': %s", path, strerror(errno));
        return TESS_ERR_NOINPUT;
    }
    const size_t got = fread(head, 1, sizeof head, fp);
    fclose(fp);
    *sealed = ckpt_seal_magic(head, got);
    if (*sealed) return ckpt_seal_check(path, seal, m);
    if (got == sizeof head && memcmp(head, hdf5_signature, sizeof head) == 0) return TESS_OK;
    if (H5Fis_hdf5(path) > 0)
        ckpt_msgs_add(m, "corrupt checkpoint '%s' (%lld bytes): no integrity record (its start "
                      "is damaged)",
                      path, (long long)sb->st_size);
    else
        ckpt_msgs_add(m, "checkpoint '%s' is not an HDF5 file (%lld bytes)", path,
                      (long long)sb->st_size);
    return TESS_ERR_DATA;
}

/* The root attributes against their ranges and, for format 4, against the integrity record. */
static const char *check_ranges(const tess_ckpt_info *in, const ckpt_seal_info *seal,
                                bool sealed, char *buf, size_t n) {
    if (in->step < 0)
        snprintf(buf, n, "root attribute step = %lld is negative", (long long)in->step);
    else if (in->data_cursor < 0)
        snprintf(buf, n, "root attribute data_cursor = %lld is negative",
                 (long long)in->data_cursor);
    else if (in->world_size < 1)
        snprintf(buf, n, "root attribute world_size = %lld is not positive",
                 (long long)in->world_size);
    else if (sealed && (in->format_version != seal->format_version || in->step != seal->step ||
                        in->data_cursor != seal->data_cursor || in->seed != seal->seed ||
                        in->world_size != seal->world_size))
        snprintf(buf, n, "root attributes (format_version %lld, step %lld, data_cursor %lld, "
                 "world_size %lld) differ from the integrity record's (%lld, %lld, %lld, %lld)",
                 (long long)in->format_version, (long long)in->step, (long long)in->data_cursor,
                 (long long)in->world_size, (long long)seal->format_version,
                 (long long)seal->step, (long long)seal->data_cursor,
                 (long long)seal->world_size);
    else if (!sealed && in->format_version >= 4)
        snprintf(buf, n, "format_version %lld without its integrity record",
                 (long long)in->format_version);
    else
        return NULL;
    return buf;
}

static tess_status open_checked(const char *path, hid_t *file, tess_ckpt_info *info,
                                char **manifest_out, ckpt_msgs *m) {
    *file = -1;
    if (manifest_out) *manifest_out = NULL;
    struct stat sb;
    if (access(path, R_OK) != 0) {
        ckpt_msgs_add(m, "cannot open checkpoint '%s': %s", path, strerror(errno));
        return TESS_ERR_NOINPUT;
    }
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        ckpt_msgs_add(m, "cannot open checkpoint '%s': it is a directory", path);
        return TESS_ERR_NOINPUT;
    }
    ckpt_seal_info seal;
    bool sealed;
    tess_status ps = precheck(path, &sb, &seal, &sealed, m);
    if (ps != TESS_OK) return ps;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0) H5Pset_file_locking(fapl, 0, 1);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    char h5[256];
    tess_h5_reason(h5, sizeof h5); /* before the next call clears HDF5's error stack */
    if (fapl >= 0) H5Pclose(fapl);
    if (f < 0) {
        ckpt_msgs_add(m, "checkpoint '%s' is truncated or damaged (%lld bytes): %s", path,
                      (long long)sb.st_size, h5);
        return TESS_ERR_DATA;
    }
    tess_ckpt_info in;
    memset(&in, 0, sizeof in);
    char format[64];
    if (tess_h5_attr_read_str(f, "format", format, sizeof format) != 0) {
        ckpt_msgs_add(m, "'%s' is not a Tessera checkpoint (no 'format' attribute)", path);
        H5Fclose(f);
        return TESS_ERR_DATA;
    }
    if (strcmp(format, TESS_CKPT_FORMAT) != 0) {
        ckpt_msgs_add(m, "'%s' is not a Tessera checkpoint (format is '%s', expected '%s')", path,
                      format, TESS_CKPT_FORMAT);
        H5Fclose(f);
        return TESS_ERR_DATA;
    }
    if (tess_h5_attr_read_i64(f, "format_version", &in.format_version) != 0 ||
        in.format_version < 1 || in.format_version > TESS_CKPT_FORMAT_VERSION) {
        if (in.format_version > TESS_CKPT_FORMAT_VERSION)
            ckpt_msgs_add(m, "checkpoint '%s' has format_version %lld, newer than this build "
                          "reads (%d): use a newer Tessera",
                          path, (long long)in.format_version, TESS_CKPT_FORMAT_VERSION);
        else
            ckpt_msgs_add(m, "checkpoint '%s' has no valid format_version (expected 1..%d)", path,
                          TESS_CKPT_FORMAT_VERSION);
        H5Fclose(f);
        return TESS_ERR_DATA;
    }
    struct {
        const char *name;
        int64_t *v;
    } ints[] = {{"step", &in.step}, {"data_cursor", &in.data_cursor},
                {"world_size", &in.world_size}};
    struct {
        const char *name;
        char *buf;
        size_t n;
    } strs[] = {{"app", in.app, sizeof in.app},
                {"tessera_version", in.tessera_version, sizeof in.tessera_version},
                {"created_utc", in.created_utc, sizeof in.created_utc},
                {"model_digest", in.model_digest, sizeof in.model_digest}};
    const char *missing = NULL;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && !missing; i++)
        if (tess_h5_attr_read_i64(f, ints[i].name, ints[i].v) != 0) missing = ints[i].name;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0] && !missing; i++)
        if (tess_h5_attr_read_str(f, strs[i].name, strs[i].buf, strs[i].n) != 0)
            missing = strs[i].name;
    if (!missing && tess_h5_attr_read_u64(f, "seed", &in.seed) != 0) missing = "seed";
    if (missing) {
        ckpt_msgs_add(m, "corrupt checkpoint '%s': root attribute '%s' is missing or unreadable",
                      path, missing);
        H5Fclose(f);
        return TESS_ERR_DATA;
    }
    in.sealed = sealed;
    char why[320];
    if (check_ranges(&in, &seal, sealed, why, sizeof why)) {
        ckpt_msgs_add(m, "corrupt checkpoint '%s': %s", path, why);
        H5Fclose(f);
        return TESS_ERR_DATA;
    }
    char *manifest = NULL;
    if (verify_structure(f, path, in.format_version, &manifest, m) != TESS_OK) {
        H5Fclose(f);
        return TESS_ERR_DATA;
    }
    if (manifest_out) *manifest_out = manifest;
    else free(manifest);
    if (info) *info = in;
    *file = f;
    return TESS_OK;
}

tess_status tess_ckpt_open(const char *path, hid_t *file, tess_ckpt_info *info) {
    TESS_REQUIRE(path && file, TESS_ERR_ARG, "path and file must not be NULL");
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    ckpt_msgs m = {.lines = 0};
    m.text[0] = '\0';
    tess_status s = open_checked(path, file, info, NULL, &m);
    tess_h5_quiet_end(&q);
    if (s != TESS_OK) return CKPT_MSGS_PUSH(s, &m);
    return TESS_OK;
}

/* --- checking against the model (rank 0, file open) ------------------------------------------ */

/* Item paths sorted by strcmp, for looking up the datasets found in a file. */
static int cmp_paths(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct {
    const char **paths; /* sorted */
    int64_t n;
    ckpt_msgs *m;
} extra_ctx;

static herr_t find_extra(hid_t root, const char *name, const H5L_info_t *li, void *data) {
    extra_ctx *c = data;
    (void)li;
    hid_t o = H5Oopen(root, name, H5P_DEFAULT);
    if (o < 0) return 0;
    bool dataset = H5Iget_type(o) == H5I_DATASET;
    H5Oclose(o);
    char path[CKPT_DSET_PATH_MAX + 2];
    snprintf(path, sizeof path, "/%s", name);
    const char *key = path;
    if (dataset && strcmp(path, "/config") != 0 && strcmp(path, "/manifest") != 0 &&
        !bsearch(&key, c->paths, (size_t)c->n, sizeof *c->paths, cmp_paths))
        ckpt_msgs_add(c->m, "dataset %s is not in the state", path);
    return 0;
}

/* Formats 1 and 2: counter item it stored as attribute of its parent group. */
static bool counter_attr_exists(hid_t f, const ckpt_item *it) {
    char group[CKPT_DSET_PATH_MAX];
    const char *slash = strrchr(it->path, '/');
    snprintf(group, sizeof group, "%.*s", (int)(slash - it->path), it->path);
    hid_t g = tess_h5_path_exists(f, group) ? H5Gopen2(f, group, H5P_DEFAULT) : -1;
    int64_t v;
    bool ok = g >= 0 && tess_h5_attr_read_i64(g, slash + 1, &v) == 0;
    if (g >= 0) H5Gclose(g);
    return ok;
}

static void check_item(hid_t f, const ckpt_item *it, int64_t version, ckpt_msgs *m) {
    const char *path = it->path;
    char want[160];
    tess_h5_shape_text(want, sizeof want, it->ndim, it->shape, ",");
    if (!tess_h5_path_exists(f, path)) {
        if (version < 3 && ckpt_is_counter(it) && counter_attr_exists(f, it)) return;
        ckpt_msgs_add(m, "dataset %s is missing (expected %s %s)", path,
                      tess_h5_dtype_name(it->dtype), want);
        return;
    }
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) {
        ckpt_msgs_add(m, "%s is not a readable dataset", path);
        return;
    }
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    const H5T_class_t cls = it->dtype == TESS_I64 ? H5T_INTEGER : H5T_FLOAT;
    if (t < 0 || H5Tget_class(t) != cls || H5Tget_size(t) != tess_dtype_size(it->dtype) ||
        (cls == H5T_INTEGER && H5Tget_sign(t) != H5T_SGN_2)) {
        char tn[64] = "unknown";
        if (t >= 0) tess_h5_type_name(t, tn, sizeof tn);
        ckpt_msgs_add(m, "dataset %s has type %s, expected %s", path, tn,
                      tess_h5_dtype_name(it->dtype));
    }
    hsize_t dims[H5S_MAX_RANK];
    int nd = space >= 0 ? H5Sget_simple_extent_dims(space, dims, NULL) : -1;
    bool same = nd == it->ndim;
    int64_t found[H5S_MAX_RANK];
    for (int i = 0; i < nd && i < H5S_MAX_RANK; i++) {
        found[i] = (int64_t)dims[i];
        if (i < it->ndim && found[i] != it->shape[i]) same = false;
    }
    if (!same) {
        char a[160];
        if (nd == 0) snprintf(a, sizeof a, "a scalar");
        else tess_h5_shape_text(a, sizeof a, nd < 0 ? 0 : nd, found, ",");
        ckpt_msgs_add(m, "dataset %s has shape %s, expected %s", path, a, want);
    }
    if (!tess_h5_attr_exists(d, "hash")) ckpt_msgs_add(m, "dataset %s has no hash attribute", path);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
}

static tess_status check_compat(hid_t f, const char *path, const tess_ckpt_info *info,
                                const ckpt_plan *p, ckpt_msgs *m) {
    ckpt_msgs det = {.lines = 0};
    det.text[0] = '\0';
    for (int64_t i = 0; i < p->n; i++) check_item(f, &p->items[i], info->format_version, &det);
    const char **paths = malloc((size_t)(p->n + 1) * sizeof *paths);
    if (!paths) {
        ckpt_msgs_add(m, "out of memory checking '%s'", path);
        return TESS_ERR_MEM;
    }
    for (int64_t i = 0; i < p->n; i++) paths[i] = p->items[i].path;
    qsort(paths, (size_t)p->n, sizeof *paths, cmp_paths);
    extra_ctx c = {paths, p->n, &det};
    H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, find_extra, &c);
    free(paths);
    if (det.lines == 0) return TESS_OK;
    char digest[24];
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)ckpt_plan_digest(p));
    const bool other_model = strcmp(digest, info->model_digest) != 0;
    ckpt_msgs_add(m, "incompatible checkpoint '%s' (step %lld): %d problem%s%s%s%s%s%s", path,
                  (long long)info->step, det.lines + det.dropped,
                  det.lines + det.dropped == 1 ? "" : "s",
                  other_model ? "; written for a different model (model_digest " : "",
                  other_model ? info->model_digest : "", other_model ? ", this model " : "",
                  other_model ? digest : "", other_model ? ")" : "");
    const char *q = det.text;
    while (*q) {
        const char *nl = strchr(q, '\n');
        int len = nl ? (int)(nl - q) : (int)strlen(q);
        ckpt_msgs_add(m, "  %.*s", len, q);
        q += len + (nl ? 1 : 0);
    }
    m->dropped += det.dropped;
    return TESS_ERR_DATA;
}

/* --- collective helpers (ckpt_impl.h) ------------------------------------------------------- */

tess_status ckpt_probe(const tess_group *g, const char *path, const ckpt_plan *p,
                       tess_ckpt_info *info) {
    tess_status s = TESS_OK;
    memset(info, 0, sizeof *info);
    if (g->rank == 0) {
        ckpt_msgs m = {.lines = 0};
        m.text[0] = '\0';
        hid_t f;
        s = open_checked(path, &f, info, NULL, &m);
        if (s == TESS_OK && p) s = check_compat(f, path, info, p, &m);
        if (f >= 0) H5Fclose(f);
        if (s != TESS_OK) CKPT_MSGS_PUSH(s, &m);
    }
    s = tess_par_agree(g, s); /* no line of its own: the record names just the problems */
    if (s != TESS_OK) return s;
    TESS_CHECK(tess_par_bcast_bytes(g, info, sizeof *info, 0));
    return TESS_OK;
}

void ckpt_rfail(ckpt_read_err *r, tess_status s, const char *fmt, const char *arg) {
    if (r->status != TESS_OK) return;
    char h5[256];
    tess_h5_reason(h5, sizeof h5);
    r->status = s;
    snprintf(r->what, sizeof r->what, fmt, arg);
    size_t len = strlen(r->what);
    snprintf(r->what + len, sizeof r->what - len, ": %s", h5);
}

/* --- verify ---------------------------------------------------------------------------------- */

typedef struct {
    const char *manifest; /* "\n"-separated, sorted as written */
    ckpt_msgs *m;
} visit_ctx;

static bool in_manifest(const char *manifest, const char *path) {
    size_t len = strlen(path);
    for (const char *p = manifest; *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l == len && memcmp(p, path, len) == 0) return true;
        p += l + (nl ? 1 : 0);
    }
    return false;
}

static herr_t find_unlisted(hid_t root, const char *name, const H5L_info_t *li, void *data) {
    visit_ctx *c = data;
    (void)li;
    hid_t o = H5Oopen(root, name, H5P_DEFAULT);
    if (o < 0) return 0;
    bool dataset = H5Iget_type(o) == H5I_DATASET;
    H5Oclose(o);
    char path[CKPT_DSET_PATH_MAX + 2];
    snprintf(path, sizeof path, "/%s", name);
    if (dataset && strcmp(path, "/config") != 0 && strcmp(path, "/manifest") != 0 &&
        !in_manifest(c->manifest, path))
        ckpt_msgs_add(c->m, "dataset %s is not in the manifest", path);
    return 0;
}

/* Rank 0: the manifest as "path\n" lines (malloc'ed) and its structural problems. */
static tess_status read_manifest(hid_t f, const char *path, char **out, ckpt_msgs *m) {
    *out = NULL;
    hid_t d = tess_h5_path_exists(f, "/manifest") ? H5Dopen2(f, "/manifest", H5P_DEFAULT) : -1;
    if (d < 0) {
        ckpt_msgs_add(m, "corrupt checkpoint '%s': dataset /manifest is missing", path);
        return TESS_ERR_DATA;
    }
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    hssize_t rows = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    size_t width = t >= 0 ? H5Tget_size(t) : 0;
    char *raw = NULL, *text = NULL;
    tess_status s = TESS_OK;
    if (t < 0 || H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) > 0 || rows < 0 ||
        width == 0) {
        ckpt_msgs_add(m, "corrupt checkpoint '%s': /manifest is not a fixed-length string list",
                      path);
        s = TESS_ERR_DATA;
    } else {
        raw = calloc((size_t)rows * width + 1, 1);
        text = calloc((size_t)rows * (width + 1) + 1, 1);
        if (!raw || !text || H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0) {
            ckpt_msgs_add(m, "corrupt checkpoint '%s': cannot read /manifest", path);
            s = TESS_ERR_DATA;
        } else {
            size_t len = 0;
            for (hssize_t r = 0; r < rows; r++) {
                size_t l = strnlen(raw + (size_t)r * width, width);
                memcpy(text + len, raw + (size_t)r * width, l);
                len += l;
                text[len++] = '\n';
            }
            text[len] = '\0';
        }
    }
    free(raw);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
    if (s != TESS_OK) {
        free(text);
        return s;
    }
    *out = text;
    return TESS_OK;
}

/* Rank 0: text dataset ds (/config or /manifest, fixed-length strings) against its stored hash
 * under scheme h; a problem goes to m. */
static void check_text_hash(hid_t f, const char *ds, tess_ckpt_hash_scheme h, ckpt_msgs *m) {
    hid_t d = tess_h5_path_exists(f, ds) ? H5Dopen2(f, ds, H5P_DEFAULT) : -1;
    uint64_t stored = 0;
    if (d < 0 || tess_h5_attr_read_u64(d, "hash", &stored) != 0) {
        ckpt_msgs_add(m, "dataset %s is missing or has no hash attribute", ds);
        if (d >= 0) H5Dclose(d);
        return;
    }
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    const hssize_t rows = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    const size_t width = t >= 0 ? H5Tget_size(t) : 0;
    const int64_t total = rows > 0 ? (int64_t)rows * (int64_t)width : 0;
    char *raw = total > 0 && total < ((int64_t)1 << 31) ? malloc((size_t)total) : NULL;
    if (t < 0 || H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) != 0 || !raw ||
        H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0) {
        ckpt_msgs_add(m, "dataset %s is not a readable fixed-length string", ds);
    } else {
        const uint64_t got =
            tess_ckpt_hash_final(tess_ckpt_hash_add(h, 0, raw, 1, 0, total), total);
        if (got != stored)
            ckpt_msgs_add(m, "dataset %s does not match its hash (stored %016llx, data %016llx)",
                          ds, (unsigned long long)stored, (unsigned long long)got);
    }
    free(raw);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
}

static tess_status verify_structure(hid_t f, const char *path, int64_t version, char **manifest,
                                    ckpt_msgs *m) {
    TESS_CHECK(read_manifest(f, path, manifest, m) == TESS_OK ? TESS_OK : TESS_ERR_DATA);
    int before = m->lines;
    char *p = *manifest;
    while (*p) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        hid_t d = tess_h5_path_exists(f, p) ? H5Dopen2(f, p, H5P_DEFAULT) : -1;
        if (d < 0) {
            ckpt_msgs_add(m, "dataset %s is missing", p);
        } else {
            if (!tess_h5_attr_exists(d, "hash"))
                ckpt_msgs_add(m, "dataset %s has no hash attribute", p);
            H5Dclose(d);
        }
        *nl = '\n';
        p = nl + 1;
    }
    check_text_hash(f, "/config", ckpt_scheme(version), m);
    check_text_hash(f, "/manifest", ckpt_scheme(version), m);
    visit_ctx c = {*manifest, m};
    H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, find_unlisted, &c);
    if (m->lines == before && m->dropped == 0) return TESS_OK;
    /* put a headline in front of the problems */
    ckpt_msgs body = *m;
    m->lines = m->dropped = 0;
    m->text[0] = '\0';
    ckpt_msgs_add(m, "corrupt checkpoint '%s': %d structural problem%s", path,
                  body.lines + body.dropped, body.lines + body.dropped == 1 ? "" : "s");
    for (const char *q = body.text; *q;) {
        const char *nl = strchr(q, '\n');
        int len = nl ? (int)(nl - q) : (int)strlen(q);
        ckpt_msgs_add(m, "  %.*s", len, q);
        q += len + (nl ? 1 : 0);
    }
    m->dropped += body.dropped;
    return TESS_ERR_DATA;
}

/* Hash sum of this rank's rows of dataset path (rounds of whole rows, the same number of
 * collective reads on every rank). Strings are hashed as bytes. */
static void hash_rows(hid_t f, const char *path, tess_ckpt_hash_scheme h, int rank, int size,
                      hid_t dxpl, void **buf, size_t *cap, uint64_t *sum, int64_t *count,
                      uint64_t *stored, ckpt_read_err *r) {
    *sum = 0;
    *count = 0;
    *stored = 0;
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) ckpt_rfail(r, TESS_ERR_DATA, "cannot open dataset %s", path);
    if (d >= 0 && tess_h5_attr_read_u64(d, "hash", stored) != 0)
        ckpt_rfail(r, TESS_ERR_DATA, "cannot read the hash of %s", path);
    hid_t ft = d >= 0 ? H5Dget_type(d) : -1, space = d >= 0 ? H5Dget_space(d) : -1;
    bool text = ft >= 0 && H5Tget_class(ft) == H5T_STRING;
    hid_t mt = ft >= 0 ? (text ? H5Tcopy(ft) : H5Tget_native_type(ft, H5T_DIR_ASCEND)) : -1;
    size_t esize = ft >= 0 ? H5Tget_size(ft) : 1;
    if (!text && esize != 1 && esize != 4 && esize != 8)
        ckpt_rfail(r, TESS_ERR_DATA, "dataset %s has an element size the hash does not cover",
                   path);
    hsize_t dims[H5S_MAX_RANK];
    int nd = space >= 0 ? H5Sget_simple_extent_dims(space, dims, NULL) : 0;
    if (nd < 0) nd = 0;
    int64_t rows = nd ? (int64_t)dims[0] : 1, rowlen = 1;
    for (int i = 1; i < nd; i++) rowlen *= (int64_t)dims[i];
    *count = rows * rowlen * (text ? (int64_t)esize : 1);
    int64_t per = VERIFY_ROUND_ELEMS / (rowlen > 0 ? rowlen : 1);
    if (per < 1) per = 1;
    int64_t rounds = (rows + per * size - 1) / (per * size);
    size_t need = (size_t)(per * rowlen) * esize;
    if (need > *cap) {
        void *grown = realloc(*buf, need);
        if (grown) {
            *buf = grown;
            *cap = need;
        } else {
            ckpt_rfail(r, TESS_ERR_MEM, "cannot allocate a read buffer for %s", path);
        }
    }
    for (int64_t t = 0; t < rounds; t++) {
        int64_t lo = (t * size + rank) * per, hi = lo + per;
        if (lo > rows) lo = rows;
        if (hi > rows) hi = rows;
        bool mine = hi > lo && r->status == TESS_OK && space >= 0;
        hid_t fsel = space >= 0 ? H5Scopy(space) : -1, msel;
        hsize_t mdim = (hsize_t)((hi - lo) * rowlen), one = 1;
        if (mine && nd > 0) {
            hsize_t start[H5S_MAX_RANK] = {0}, cnt[H5S_MAX_RANK];
            start[0] = (hsize_t)lo;
            cnt[0] = (hsize_t)(hi - lo);
            for (int i = 1; i < nd; i++) cnt[i] = dims[i];
            H5Sselect_hyperslab(fsel, H5S_SELECT_SET, start, NULL, cnt, NULL);
            msel = H5Screate_simple(1, &mdim, NULL);
        } else if (mine) {
            msel = H5Screate(H5S_SCALAR);
        } else {
            if (fsel >= 0) H5Sselect_none(fsel);
            msel = H5Screate_simple(1, &one, NULL);
            H5Sselect_none(msel);
        }
        if (d >= 0 && mt >= 0 && *buf && H5Dread(d, mt, msel, fsel, dxpl, *buf) < 0)
            ckpt_rfail(r, TESS_ERR_DATA, "cannot read dataset %s", path);
        else if (mine)
            *sum = text ? tess_ckpt_hash_add(h, *sum, *buf, 1, lo * rowlen * (int64_t)esize,
                                             (hi - lo) * rowlen * (int64_t)esize)
                        : tess_ckpt_hash_add(h, *sum, *buf, esize, lo * rowlen,
                                             (hi - lo) * rowlen);
        H5Sclose(msel);
        if (fsel >= 0) H5Sclose(fsel);
    }
    if (mt >= 0) H5Tclose(mt);
    if (space >= 0) H5Sclose(space);
    if (ft >= 0) H5Tclose(ft);
    if (d >= 0) H5Dclose(d);
}

/* Collective on g. */
static tess_status verify_impl(const tess_group *g, const char *path, tess_ckpt_info *info) {
    MPI_Comm comm = g->comm;
    const int rank = g->rank, size = g->size;
    tess_ckpt_info in;
    tess_status s = TESS_OK;
    char *manifest = NULL;
    memset(&in, 0, sizeof in);
    if (rank == 0) {
        ckpt_msgs m = {.lines = 0};
        m.text[0] = '\0';
        hid_t f;
        s = open_checked(path, &f, &in, &manifest, &m);
        if (f >= 0) H5Fclose(f);
        if (s != TESS_OK) CKPT_MSGS_PUSH(s, &m);
    }
    s = tess_par_agree(g, s);
    if (s == TESS_OK) s = tess_par_bcast_bytes(g, &in, sizeof in, 0);
    if (s != TESS_OK) {
        free(manifest);
        return s;
    }
    int64_t len = rank == 0 ? (int64_t)strlen(manifest) : 0;
    TESS_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT64_T, 0, comm));
    if (rank != 0) manifest = malloc((size_t)len + 1);
    TESS_CHECK(tess_par_agree(
        g, CKPT_FAILED(manifest ? TESS_OK : TESS_ERR_MEM, "allocating the manifest")));
    TESS_MPI_CHECK(MPI_Bcast(manifest, (int)len, MPI_CHAR, 0, comm));
    manifest[len] = '\0';

    ckpt_read_err r = {TESS_OK, ""};
    hid_t f = tess_h5_open_collective(g, path, CKPT_FAPL);
    if (f < 0) ckpt_rfail(&r, TESS_ERR_DATA, "cannot open '%s' collectively", path);
    s = tess_par_agree(g, CKPT_FAILED(r.status, r.what));
    if (s != TESS_OK) {
        if (f >= 0) H5Fclose(f);
        free(manifest);
        return s;
    }
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    void *buf = NULL;
    size_t cap = 0;
    ckpt_msgs bad = {.lines = 0};
    bad.text[0] = '\0';
    /* the manifest's datasets (rank 0 checked /config and /manifest in open_checked) */
    int64_t ndatasets = 0;
    for (const char *p = manifest; *p; p++) ndatasets += *p == '\n';
    const char **paths = malloc((size_t)(ndatasets ? ndatasets : 1) * sizeof *paths);
    s = tess_par_agree(
        g, CKPT_FAILED(paths ? TESS_OK : TESS_ERR_MEM, "allocating the dataset list"));
    if (s != TESS_OK) {
        H5Pclose(dxpl);
        H5Fclose(f);
        free(manifest);
        return s;
    }
    int64_t np = 0;
    for (char *p = manifest, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        *nl = '\0';
        paths[np++] = p;
    }
    for (int64_t k = 0; k < np; k++) {
        uint64_t sum, total, stored;
        int64_t count;
        hash_rows(f, paths[k], ckpt_scheme(in.format_version), rank, size, dxpl, &buf,
                  &cap, &sum, &count, &stored, &r);
        int e = MPI_Allreduce(&sum, &total, 1, MPI_UINT64_T, MPI_SUM, comm);
        if (e != MPI_SUCCESS)
            ckpt_rfail(&r, TESS_ERR_MPI, "MPI_Allreduce of the hash of %s", paths[k]);
        uint64_t h = tess_ckpt_hash_final(total, count);
        if (h != stored)
            ckpt_msgs_add(&bad, "  dataset %s does not match its hash (stored %016llx, data "
                          "%016llx)",
                          paths[k], (unsigned long long)stored, (unsigned long long)h);
    }
    free(paths);
    free(buf);
    H5Pclose(dxpl);
    H5Fclose(f);
    free(manifest);
    TESS_CHECK(tess_par_agree(g, CKPT_FAILED(r.status, r.what)));
    if (bad.lines) {
        ckpt_msgs head = {.lines = 0};
        head.text[0] = '\0';
        ckpt_msgs_add(&head, "corrupt checkpoint '%s': %d of %lld datasets fail their hash check",
                      path, bad.lines + bad.dropped, (long long)ndatasets);
        CKPT_MSGS_PUSH(TESS_ERR_DATA, &head);
        return CKPT_MSGS_PUSH(TESS_ERR_DATA, &bad);
    }
    if (info) *info = in;
    return TESS_OK;
}

tess_status tess_ckpt_verify(const tess_group *g, const char *path, tess_ckpt_info *info) {
    TESS_REQUIRE(g && path, TESS_ERR_ARG, "g and path must not be NULL");
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    tess_status s = verify_impl(g, path, info);
    tess_h5_quiet_end(&q);
    TESS_REQUIRE(s == TESS_OK, s, "verifying checkpoint '%s'", path);
    return TESS_OK;
}

tess_status tess_ckpt_read_config(hid_t file, const char *path, char **text) {
    TESS_REQUIRE(text, TESS_ERR_ARG, "text must not be NULL");
    *text = NULL;
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    hid_t d = tess_h5_path_exists(file, "/config") ? H5Dopen2(file, "/config", H5P_DEFAULT) : -1;
    hid_t t = d >= 0 ? H5Dget_type(d) : -1;
    const size_t width = t >= 0 && H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) == 0
                             ? H5Tget_size(t)
                             : 0;
    char *buf = width > 0 ? calloc(width + 1, 1) : NULL;
    const bool read = buf && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
    if (t >= 0) H5Tclose(t);
    if (d >= 0) H5Dclose(d);
    tess_h5_quiet_end(&q);
    if (!read) {
        free(buf);
        TESS_REQUIRE(width == 0 || buf, TESS_ERR_MEM,
                     "cannot allocate %zu bytes for the config of '%s'", width + 1, path);
        return tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                               "cannot read the configuration (/config, a fixed-length string) "
                               "of checkpoint '%s'",
                               path);
    }
    *text = buf;
    return TESS_OK;
}
