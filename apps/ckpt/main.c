/* tess-ckpt - look inside Tessera checkpoints (io/ckpt.h, docs/checkpoints.md).
 *
 *   tess-ckpt ls CKPT             groups and datasets: dtype, global shape, bytes, layout
 *   tess-ckpt show CKPT NAME      one tensor: stats (min/max/mean/std/norm, NaN/Inf) and values
 *   tess-ckpt meta CKPT           run metadata (root attributes), counters, the config text
 *   tess-ckpt diff A B            per-tensor max abs/rel difference; exit 1 if the states differ
 *   tess-ckpt verify CKPT...      integrity check (structure + hashes); exit 65 on any failure
 *   tess-ckpt export CKPT OUT.safetensors [--names tessera|torch] [--split-qkv] [--group G]
 *                                 the tensors of group G (params) as safetensors (io/safetensors.h)
 * CKPT is a checkpoint file or a checkpoint directory (its `latest` pointer is followed). NAME is
 * a dataset path ("/optim/m/emb.w"), a registry name ("emb.w", looked up under /params) or an
 * unambiguous suffix of a dataset path at a '.' or '/' ("0.attn.w_qkv").
 *
 * Works on one rank on a checkpoint written by any number of ranks; under mpiexec, verify shares
 * the hashing among the ranks and the other commands run on rank 0. Exit codes: 0 fine (diff:
 * identical), 1 diff found differences, 64 bad command line or unknown NAME, 65 not a valid
 * checkpoint, 66 missing file.
 */
#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mpicheck.h" /* TESS_MPI_CHECK */
#include "core/runtime.h"  /* tess_runtime_* */
#include "core/version.h"  /* tess_version_line */
#include "io/ckpt.h"       /* tess_ckpt_* */
#include "io/h5.h"         /* tess_h5_attr_read_str, tess_h5_quiet_*, tess_h5_reason */
#include "io/safetensors.h" /* tess_safetensors_write */
#include "par/mesh.h"      /* tess_group_* */

enum { CHUNK_ELEMS = 1 << 20, MAX_DIMS = 32 };

static const char usage[] =
    "usage: tess-ckpt COMMAND ...  (or --help, --version)\n"
    "  ls CKPT            groups and datasets with dtype, shape, size and layout\n"
    "  show CKPT NAME     statistics and first values of one tensor (NAME: registry name or path)\n"
    "  meta CKPT          run metadata, counters and the resolved config\n"
    "  diff A B           per-tensor max abs/rel differences (exit 1 if the states differ)\n"
    "  verify CKPT...     integrity check: structure and per-dataset hashes\n"
    "  export CKPT OUT.safetensors [--names tessera|torch] [--split-qkv] [--group G]\n"
    "                     group G's tensors (default params) as safetensors; --names torch:\n"
    "                     PyTorch names (w -> weight, b -> bias, w_X -> X.weight, else +.weight);\n"
    "                     --split-qkv: each fused [q|k|v] w_qkv as three (C, C) tensors q, k, v\n"
    "CKPT is a checkpoint file or a directory holding a 'latest' pointer. NAME is a dataset path,\n"
    "a name under /params, or an unambiguous suffix of a dataset path ('0.attn.w_qkv').\n";

/* A checkpoint directory means the file its `latest` names: one line holding the name of a
 * file in that directory. A missing, unreadable, empty or malformed `latest` is an error naming
 * it; path is always set (to arg on failure). */
static tess_status resolve(const char *arg, char *path, size_t n) {
    snprintf(path, n, "%s", arg);
    struct stat sb;
    if (stat(arg, &sb) != 0 || !S_ISDIR(sb.st_mode)) return TESS_OK;
    char latest[TESS_CKPT_PATH_MAX], name[256] = "";
    snprintf(latest, sizeof latest, "%s/latest", arg);
    TESS_REQUIRE(stat(latest, &sb) == 0, TESS_ERR_NOINPUT,
                 "'%s' is a directory without a 'latest' pointer (%s): name a checkpoint file",
                 arg, strerror(errno));
    TESS_REQUIRE(S_ISREG(sb.st_mode), TESS_ERR_DATA,
                 "'%s' is not a file: expected one line naming a checkpoint", latest);
    FILE *f = fopen(latest, "r");
    TESS_REQUIRE(f, TESS_ERR_NOINPUT, "cannot read '%s': %s", latest, strerror(errno));
    const bool got = fgets(name, sizeof name, f) != NULL;
    fclose(f);
    const size_t len = strcspn(name, "\n");
    const bool one_line = got && name[len] == '\n';
    name[len] = '\0';
    TESS_REQUIRE(len > 0, TESS_ERR_DATA, "'%s' is empty: expected one line naming a checkpoint",
                 latest);
    TESS_REQUIRE(one_line && !strchr(name, '/') && strcmp(name, "..") != 0 &&
                     strcmp(name, ".") != 0,
                 TESS_ERR_DATA,
                 "'%s' does not hold one line naming a file of its directory (e.g. "
                 "ckpt_00000400.h5)",
                 latest);
    snprintf(path, n, "%s/%s", arg, name);
    return TESS_OK;
}

static void human_bytes(char *buf, size_t n, double b) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        u++;
    }
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

static void type_text(hid_t t, char *buf, size_t n) {
    size_t bytes = H5Tget_size(t);
    switch (H5Tget_class(t)) {
    case H5T_FLOAT: snprintf(buf, n, "float%zu", 8 * bytes); break;
    case H5T_INTEGER:
        snprintf(buf, n, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", 8 * bytes);
        break;
    case H5T_STRING: snprintf(buf, n, "string"); break;
    default: snprintf(buf, n, "other"); break;
    }
}

/* Shape text "[11,6]" ("scalar" for rank 0) and the element count. */
static int64_t shape_text(hid_t space, char *buf, size_t n) {
    hsize_t dims[MAX_DIMS];
    int nd = H5Sget_simple_extent_dims(space, dims, NULL);
    int64_t count = 1;
    if (nd <= 0) {
        snprintf(buf, n, "scalar");
        return 1;
    }
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < nd && len < n; i++) {
        len += (size_t)snprintf(buf + len, n - len, "%s%llu", i ? "," : "",
                                (unsigned long long)dims[i]);
        count *= (int64_t)dims[i];
    }
    if (len < n) snprintf(buf + len, n - len, "]");
    return count;
}

/* Print " attr=value" (data NULL) or "  attr  value\n" (data not NULL) for the integer and
 * string attributes of an object. */
static herr_t print_attr(hid_t loc, const char *name, const H5A_info_t *ai, void *data) {
    (void)ai;
    const char *fmt_i = data ? "  %-16s %lld\n" : " %s=%lld";
    const char *fmt_u = data ? "  %-16s %llu\n" : " %s=%llu";
    const char *fmt_s = data ? "  %-16s %s\n" : " %s=%s";
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a);
    if (H5Tget_class(t) == H5T_INTEGER) {
        if (H5Tget_sign(t) == H5T_SGN_NONE) {
            unsigned long long v = 0;
            H5Aread(a, H5T_NATIVE_ULLONG, &v);
            printf(fmt_u, name, v);
        } else {
            long long v = 0;
            H5Aread(a, H5T_NATIVE_LLONG, &v);
            printf(fmt_i, name, v);
        }
    } else if (H5Tget_class(t) == H5T_STRING) { /* fixed-length (format 4) or variable */
        char s[512];
        if (tess_h5_attr_read_str(loc, name, s, sizeof s) == 0) printf(fmt_s, name, s);
    }
    H5Tclose(t);
    H5Aclose(a);
    return 0;
}

typedef struct {
    int64_t datasets;
    double bytes;
} ls_totals;

static herr_t ls_one(hid_t root, const char *name, const H5L_info_t *li, void *data) {
    ls_totals *tot = data;
    (void)li;
    hid_t o = H5Oopen(root, name, H5P_DEFAULT);
    if (o < 0) return 0;
    char path[600];
    snprintf(path, sizeof path, "/%s", name);
    if (H5Iget_type(o) == H5I_GROUP) {
        printf("%-40s group    ", path);
        H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, NULL, print_attr, NULL);
        printf("\n");
    } else if (H5Iget_type(o) == H5I_DATASET) {
        hid_t t = H5Dget_type(o), space = H5Dget_space(o);
        char tt[32], sh[128], hb[32], layout[96] = "";
        type_text(t, tt, sizeof tt);
        int64_t count = shape_text(space, sh, sizeof sh);
        double bytes = (double)count * (double)H5Tget_size(t);
        human_bytes(hb, sizeof hb, bytes);
        if (H5Aexists(o, "layout") > 0) tess_h5_attr_read_str(o, "layout", layout, sizeof layout);
        printf("%-40s %-8s %-14s %10s  %s\n", path, tt, sh, hb, layout);
        tot->datasets++;
        tot->bytes += bytes;
        H5Sclose(space);
        H5Tclose(t);
    }
    H5Oclose(o);
    return 0;
}

static void print_headline(const char *path, const tess_ckpt_info *in) {
    printf("%s: %s v%lld, step %lld, written by %lld rank%s (%s, Tessera %s, %s)\n", path,
           TESS_CKPT_FORMAT, (long long)in->format_version, (long long)in->step,
           (long long)in->world_size, in->world_size == 1 ? "" : "s",
           in->app[0] ? in->app : "no app name", in->tessera_version, in->created_utc);
}

static tess_status cmd_ls(const char *arg) {
    char path[TESS_CKPT_PATH_MAX];
    TESS_CHECK(resolve(arg, path, sizeof path));
    hid_t f;
    tess_ckpt_info in;
    TESS_CHECK(tess_ckpt_open(path, &f, &in));
    print_headline(path, &in);
    ls_totals tot = {0, 0.0};
    const herr_t visited = H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, ls_one, &tot);
    if (visited < 0) {
        char h5[256];
        tess_h5_reason(h5, sizeof h5);
        H5Fclose(f);
        TESS_REQUIRE(false, TESS_ERR_DATA, "corrupt checkpoint '%s': cannot list its objects: %s",
                     path, h5);
    }
    struct stat sb;
    char db[32], fb[32];
    human_bytes(db, sizeof db, tot.bytes);
    human_bytes(fb, sizeof fb, stat(path, &sb) == 0 ? (double)sb.st_size : 0.0);
    printf("%lld datasets, %s of data, file %s\n", (long long)tot.datasets, db, fb);
    H5Fclose(f);
    return TESS_OK;
}

static char *manifest_of(hid_t f);

/* The one manifest entry that ends with name at a '.' or '/' boundary into path, looking under
 * /params first (as for registry names) and then everywhere; TESS_ERR_ARG naming the candidates
 * when several match, and when none does. */
static tess_status find_suffix(hid_t f, const char *file, const char *name, char *path, size_t n) {
    char *man = manifest_of(f);
    TESS_REQUIRE(man, TESS_ERR_DATA, "'%s' has no readable /manifest", file);
    const size_t len = strlen(name);
    int found = 0;
    char seen[512] = "";
    for (int pass = 0; pass < 2 && found == 0; pass++) {
        for (const char *p = man; *p; p += strcspn(p, "\n"), p += *p == '\n') {
            char line[600];
            snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
            const size_t l = strlen(line);
            if (pass == 0 && strncmp(line, "/params/", 8) != 0) continue;
            if (l <= len || strcmp(line + l - len, name) != 0) continue;
            const char before = line[l - len - 1];
            if (before != '.' && before != '/' && name[0] != '.' && name[0] != '/') continue;
            if (found++ == 0) snprintf(path, n, "%s", line);
            if (strlen(seen) + l + 3 < sizeof seen)
                snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%s",
                         found > 1 ? ", " : "", line);
        }
    }
    free(man);
    TESS_REQUIRE(found > 0, TESS_ERR_ARG, "no dataset '%s' in '%s' (see tess-ckpt ls)", name, file);
    TESS_REQUIRE(found == 1, TESS_ERR_ARG, "'%s' is ambiguous in '%s': %d datasets end with it (%s)",
                 name, file, found, seen);
    return TESS_OK;
}

/* The dataset NAME means: a path, else /NAME, else /params/NAME, else the one dataset whose path
 * ends with NAME. */
static tess_status open_named(hid_t f, const char *file, const char *name, char *path, size_t n,
                              hid_t *d) {
    const char *forms[3] = {"%s", "/%s", "/params/%s"};
    H5E_auto2_t fn;
    void *data;
    H5Eget_auto2(H5E_DEFAULT, &fn, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    *d = -1;
    for (int i = name[0] == '/' ? 0 : 1; i < 3 && *d < 0; i++) {
        snprintf(path, n, forms[i], name);
        if (H5Lexists(f, path, H5P_DEFAULT) > 0) *d = H5Dopen2(f, path, H5P_DEFAULT);
    }
    H5Eset_auto2(H5E_DEFAULT, fn, data);
    if (*d < 0) {
        TESS_CHECK(find_suffix(f, file, name, path, n));
        *d = H5Dopen2(f, path, H5P_DEFAULT);
    }
    TESS_REQUIRE(*d >= 0, TESS_ERR_ARG, "no dataset '%s' in '%s' (see tess-ckpt ls)", name, file);
    return TESS_OK;
}

/* Read rows [first_row, first_row + nrows) of a dataset, in row-major order, as mtype (8-byte
 * elements: H5T_NATIVE_DOUBLE, or H5T_NATIVE_INT64 to keep int64 values exact). */
static herr_t read_rows(hid_t d, hid_t space, int64_t first_row, int64_t nrows, hid_t mtype,
                        void *buf) {
    hsize_t dims[MAX_DIMS], start[MAX_DIMS] = {0}, cnt[MAX_DIMS];
    int nd = H5Sget_simple_extent_dims(space, dims, NULL);
    hid_t fsel = H5Scopy(space), msel;
    if (nd > 0) {
        start[0] = (hsize_t)first_row;
        cnt[0] = (hsize_t)nrows;
        hsize_t total = (hsize_t)nrows;
        for (int i = 1; i < nd; i++) {
            cnt[i] = dims[i];
            total *= dims[i];
        }
        H5Sselect_hyperslab(fsel, H5S_SELECT_SET, start, NULL, cnt, NULL);
        msel = H5Screate_simple(1, &total, NULL);
    } else {
        msel = H5Screate(H5S_SCALAR);
    }
    herr_t e = H5Dread(d, mtype, msel, fsel, H5P_DEFAULT, buf);
    H5Sclose(msel);
    H5Sclose(fsel);
    return e;
}

/* Rows per chunk of about CHUNK_ELEMS elements, at least 1; *rows and *rowlen of the dataset. */
static int64_t chunk_rows(hid_t space, int64_t *rows, int64_t *rowlen) {
    hsize_t dims[MAX_DIMS];
    int nd = H5Sget_simple_extent_dims(space, dims, NULL);
    *rows = nd > 0 ? (int64_t)dims[0] : 1;
    *rowlen = 1;
    for (int i = 1; i < nd; i++) *rowlen *= (int64_t)dims[i];
    int64_t per = CHUNK_ELEMS / (*rowlen > 0 ? *rowlen : 1);
    return per < 1 ? 1 : per;
}

static tess_status show_text(hid_t d, const char *path) {
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    hssize_t rows = H5Sget_simple_extent_npoints(space);
    size_t width = H5Tget_size(t);
    char *buf = H5Tis_variable_str(t) > 0 ? NULL : calloc((size_t)rows * width + 1, 1);
    tess_status s = TESS_OK;
    if (!buf || H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "cannot read string dataset %s", path);
    } else {
        for (hssize_t r = 0; r < rows; r++) {
            const char *row = buf + (size_t)r * width;
            int len = (int)strnlen(row, width);
            printf("%.*s%s", len, row, len > 0 && row[len - 1] == '\n' ? "" : "\n");
        }
    }
    free(buf);
    H5Sclose(space);
    H5Tclose(t);
    return s;
}

static tess_status cmd_show(const char *arg, const char *name, int64_t nfirst) {
    char file[TESS_CKPT_PATH_MAX], path[700];
    TESS_CHECK(resolve(arg, file, sizeof file));
    hid_t f, d;
    TESS_CHECK(tess_ckpt_open(file, &f, NULL));
    tess_status s = open_named(f, file, name, path, sizeof path, &d);
    if (s != TESS_OK) {
        H5Fclose(f);
        return s;
    }
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    char tt[32], sh[128], hb[32];
    type_text(t, tt, sizeof tt);
    int64_t count = shape_text(space, sh, sizeof sh);
    human_bytes(hb, sizeof hb, (double)count * (double)H5Tget_size(t));
    haddr_t off = H5Dget_offset(d);
    printf("%s: %s %s, %lld elements, %s, file offset %lld,", path, tt, sh, (long long)count, hb,
           off == HADDR_UNDEF ? -1LL : (long long)off);
    H5Aiterate2(d, H5_INDEX_NAME, H5_ITER_INC, NULL, print_attr, NULL);
    printf("\n");
    if (H5Tget_class(t) == H5T_STRING) {
        s = show_text(d, path);
    } else if (H5Tget_class(t) != H5T_FLOAT && H5Tget_class(t) != H5T_INTEGER) {
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "%s is neither numbers nor text", path);
    } else {
        int64_t rows, rowlen, per = chunk_rows(space, &rows, &rowlen);
        double *buf = malloc((size_t)(per * rowlen) * sizeof *buf);
        double mn = INFINITY, mx = -INFINITY, sum = 0.0, sq = 0.0;
        int64_t nan = 0, inf = 0, finite = 0, shown = 0;
        if (!buf) s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory");
        printf("first values:");
        for (int64_t r0 = 0; r0 < rows && s == TESS_OK; r0 += per) {
            int64_t nr = rows - r0 < per ? rows - r0 : per;
            if (read_rows(d, space, r0, nr, H5T_NATIVE_DOUBLE, buf) < 0) {
                s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                    "cannot read %s", path);
                break;
            }
            for (int64_t j = 0; j < nr * rowlen; j++) {
                double x = buf[j];
                if (shown < nfirst) {
                    printf(" %.9g", x);
                    shown++;
                }
                if (isnan(x)) {
                    nan++;
                } else if (isinf(x)) {
                    inf++;
                } else {
                    finite++;
                    mn = x < mn ? x : mn;
                    mx = x > mx ? x : mx;
                    sum += x;
                    sq += x * x;
                }
            }
        }
        printf("%s\n", shown < count ? " ..." : "");
        free(buf);
        if (s == TESS_OK) {
            double mean = finite ? sum / (double)finite : NAN;
            double var = finite ? sq / (double)finite - mean * mean : NAN;
            printf("min %.9g  max %.9g  mean %.9g  std %.9g  norm %.9g  nan %lld  inf %lld\n",
                   finite ? mn : NAN, finite ? mx : NAN, mean, var > 0 ? sqrt(var) : 0.0, sqrt(sq),
                   (long long)nan, (long long)inf);
        }
    }
    H5Sclose(space);
    H5Tclose(t);
    H5Dclose(d);
    H5Fclose(f);
    return s;
}

/* "counters of /group: name=value ..." for every group that has attributes. */
static herr_t print_counters(hid_t root, const char *name, const H5L_info_t *li, void *data) {
    (void)li;
    (void)data;
    hid_t o = H5Oopen(root, name, H5P_DEFAULT);
    if (o < 0) return 0;
    H5O_info_t oi;
    if (H5Iget_type(o) == H5I_GROUP && H5Oget_info2(o, &oi, H5O_INFO_NUM_ATTRS) >= 0 &&
        oi.num_attrs > 0) {
        printf("counters of /%s:", name);
        H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, NULL, print_attr, NULL);
        printf("\n");
    }
    H5Oclose(o);
    return 0;
}

static tess_status cmd_meta(const char *arg) {
    char path[TESS_CKPT_PATH_MAX];
    TESS_CHECK(resolve(arg, path, sizeof path));
    hid_t f;
    tess_ckpt_info in;
    TESS_CHECK(tess_ckpt_open(path, &f, &in));
    print_headline(path, &in);
    static int one_per_line;
    printf("root attributes:\n");
    if (H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, NULL, print_attr, &one_per_line) < 0 ||
        H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, print_counters, NULL) < 0) {
        char h5[256];
        tess_h5_reason(h5, sizeof h5);
        H5Fclose(f);
        TESS_REQUIRE(false, TESS_ERR_DATA,
                     "corrupt checkpoint '%s': cannot list its attributes: %s", path, h5);
    }
    printf("config (/config):\n");
    hid_t d = H5Dopen2(f, "/config", H5P_DEFAULT);
    tess_status s = d >= 0 ? show_text(d, "/config") : TESS_ERR_DATA;
    if (d >= 0) H5Dclose(d);
    H5Fclose(f);
    TESS_REQUIRE(s == TESS_OK, s, "cannot read the config of '%s'", path);
    return TESS_OK;
}

/* --- diff ------------------------------------------------------------------------------------ */

/* Manifest of an open checkpoint as a malloc'ed "path\n..." list. */
static char *manifest_of(hid_t f) {
    hid_t d = H5Dopen2(f, "/manifest", H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    hssize_t rows = H5Sget_simple_extent_npoints(space);
    size_t width = H5Tget_size(t);
    char *raw = calloc((size_t)rows * width + 1, 1);
    char *out = calloc((size_t)rows * (width + 1) + 1, 1);
    if (raw && out && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0) {
        size_t len = 0;
        for (hssize_t r = 0; r < rows; r++) {
            size_t l = strnlen(raw + (size_t)r * width, width);
            memcpy(out + len, raw + (size_t)r * width, l);
            len += l;
            out[len++] = '\n';
        }
    } else {
        free(out);
        out = NULL;
    }
    free(raw);
    H5Sclose(space);
    H5Tclose(t);
    H5Dclose(d);
    return out;
}

/* True if every component of path exists in f (HDF5 errors count as absent). */
static bool path_exists(hid_t f, const char *path) {
    char buf[700];
    snprintf(buf, sizeof buf, "%s", path);
    bool ok = true;
    for (char *p = buf + 1; ok; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        ok = H5Lexists(f, buf, H5P_DEFAULT) > 0;
        *p = saved;
        if (saved == '\0') break;
    }
    return ok;
}

/* Compare one tensor present in both files; returns true if it differs. */
static bool diff_tensor(hid_t fa, hid_t fb, const char *path, tess_status *s) {
    hid_t da = H5Dopen2(fa, path, H5P_DEFAULT), db = H5Dopen2(fb, path, H5P_DEFAULT);
    hid_t sa = H5Dget_space(da), sb = H5Dget_space(db);
    char sha[128], shb[128];
    int64_t na = shape_text(sa, sha, sizeof sha), nb = shape_text(sb, shb, sizeof shb);
    bool differs = false;
    hid_t ta = H5Dget_type(da), tb = H5Dget_type(db);
    /* int64 datasets (both integer, 8 bytes) are compared as int64, everything else as doubles */
    const bool i64 = H5Tget_class(ta) == H5T_INTEGER && H5Tget_class(tb) == H5T_INTEGER &&
                     H5Tget_size(ta) == 8 && H5Tget_size(tb) == 8;
    const hid_t mtype = i64 ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE;
    char tna[32], tnb[32];
    type_text(ta, tna, sizeof tna);
    type_text(tb, tnb, sizeof tnb);
    H5Tclose(ta);
    H5Tclose(tb);
    if (strcmp(sha, shb) != 0 || strcmp(tna, tnb) != 0) {
        printf("  %-40s %s%s vs %s%s\n", path, tna, sha, tnb, shb);
        differs = true;
    } else {
        int64_t rows, rowlen, per = chunk_rows(sa, &rows, &rowlen);
        double *a = malloc((size_t)(per * rowlen) * sizeof *a);
        double *b = malloc((size_t)(per * rowlen) * sizeof *b);
        double max_abs = 0.0, max_mag = 0.0;
        int64_t ndiff = 0;
        if (!a || !b)
            *s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory");
        for (int64_t r0 = 0; r0 < rows && *s == TESS_OK; r0 += per) {
            int64_t nr = rows - r0 < per ? rows - r0 : per;
            if (read_rows(da, sa, r0, nr, mtype, a) < 0 ||
                read_rows(db, sb, r0, nr, mtype, b) < 0) {
                *s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                     "cannot read %s", path);
                break;
            }
            for (int64_t j = 0; j < nr * rowlen; j++) {
                /* doubles hold every float32 exactly: equal bits <=> equal doubles, NaNs aside */
                bool same = memcmp(&a[j], &b[j], sizeof a[j]) == 0;
                ndiff += !same;
                if (i64) { /* the bits are int64: compare their values as doubles from here */
                    int64_t ia, ib;
                    memcpy(&ia, &a[j], sizeof ia);
                    memcpy(&ib, &b[j], sizeof ib);
                    a[j] = (double)ia;
                    b[j] = (double)ib;
                }
                double d = fabs(a[j] - b[j]);
                if (!same && (isnan(d) || d > max_abs)) max_abs = isnan(d) ? INFINITY : d;
                double m = fmax(fabs(a[j]), fabs(b[j]));
                if (m > max_mag) max_mag = m;
            }
        }
        free(a);
        free(b);
        if (ndiff) {
            printf("  %-40s max_abs %.6g  max_rel %.6g  differing %lld of %lld\n", path, max_abs,
                   max_mag > 0 ? max_abs / max_mag : max_abs, (long long)ndiff, (long long)na);
            differs = true;
        }
    }
    (void)nb;
    H5Sclose(sa);
    H5Sclose(sb);
    H5Dclose(da);
    H5Dclose(db);
    return differs;
}

/* Integer attributes of group `group` compared between the files; true if any differs. */
static bool diff_counters(hid_t fa, hid_t fb, const char *group) {
    if (H5Lexists(fa, group, H5P_DEFAULT) <= 0 || H5Lexists(fb, group, H5P_DEFAULT) <= 0)
        return false;
    hid_t ga = H5Gopen2(fa, group, H5P_DEFAULT), gb = H5Gopen2(fb, group, H5P_DEFAULT);
    H5O_info_t oi;
    bool differs = false;
    if (H5Oget_info2(ga, &oi, H5O_INFO_NUM_ATTRS) >= 0)
        for (hsize_t i = 0; i < oi.num_attrs; i++) {
            char name[256];
            if (H5Aget_name_by_idx(ga, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                                   H5P_DEFAULT) < 0)
                continue;
            long long va = 0, vb = 0;
            hid_t a = H5Aopen(ga, name, H5P_DEFAULT);
            hid_t b = H5Aexists(gb, name) > 0 ? H5Aopen(gb, name, H5P_DEFAULT) : -1;
            if (a >= 0) H5Aread(a, H5T_NATIVE_LLONG, &va);
            if (b >= 0) H5Aread(b, H5T_NATIVE_LLONG, &vb);
            if (b < 0 || va != vb) {
                printf("  counter %s/%s: %lld vs %lld%s\n", group, name, va, vb,
                       b < 0 ? " (missing in B)" : "");
                differs = true;
            }
            if (a >= 0) H5Aclose(a);
            if (b >= 0) H5Aclose(b);
        }
    H5Gclose(ga);
    H5Gclose(gb);
    return differs;
}

static tess_status cmd_diff(const char *arg_a, const char *arg_b, bool *differ) {
    char pa[TESS_CKPT_PATH_MAX], pb[TESS_CKPT_PATH_MAX];
    TESS_CHECK(resolve(arg_a, pa, sizeof pa));
    TESS_CHECK(resolve(arg_b, pb, sizeof pb));
    hid_t fa, fb;
    tess_ckpt_info ia, ib;
    TESS_CHECK(tess_ckpt_open(pa, &fa, &ia));
    tess_status s = tess_ckpt_open(pb, &fb, &ib);
    if (s != TESS_OK) {
        H5Fclose(fa);
        return s;
    }
    printf("A: ");
    print_headline(pa, &ia);
    printf("B: ");
    print_headline(pb, &ib);
    int64_t ndiff = 0, ntensors = 0;
    if (ia.step != ib.step || ia.data_cursor != ib.data_cursor || ia.seed != ib.seed) {
        printf("  state: step %lld vs %lld, data_cursor %lld vs %lld, seed %llu vs %llu\n",
               (long long)ia.step, (long long)ib.step, (long long)ia.data_cursor,
               (long long)ib.data_cursor, (unsigned long long)ia.seed,
               (unsigned long long)ib.seed);
        ndiff++;
    }
    if (strcmp(ia.model_digest, ib.model_digest) != 0)
        printf("  model_digest %s vs %s: different models\n", ia.model_digest, ib.model_digest);
    ndiff += diff_counters(fa, fb, "/optim");
    char *ma = manifest_of(fa), *mb = manifest_of(fb);
    if (!ma || !mb) {
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "cannot read the manifest of '%s'", ma ? pb : pa);
    } else {
        /* tensors of A (in both, or only in A), then those only in B */
        for (int pass = 0; pass < 2 && s == TESS_OK; pass++) {
            char *list = pass == 0 ? ma : mb;
            hid_t other = pass == 0 ? fb : fa;
            for (char *p = list, *nl; *p && s == TESS_OK; p = nl + 1) {
                nl = strchr(p, '\n');
                *nl = '\0';
                bool in_other = path_exists(other, p);
                if (pass == 0) ntensors++;
                if (!in_other) {
                    printf("  %-40s only in %s\n", p, pass == 0 ? "A" : "B");
                    ndiff++;
                } else if (pass == 0) {
                    ndiff += diff_tensor(fa, fb, p, &s);
                }
                *nl = '\n';
            }
        }
    }
    free(ma);
    free(mb);
    H5Fclose(fa);
    H5Fclose(fb);
    TESS_CHECK(s);
    if (ndiff)
        printf("%lld difference%s (%lld tensors in A)\n", (long long)ndiff, ndiff == 1 ? "" : "s",
               (long long)ntensors);
    else
        printf("identical: %lld tensors, counters and state bitwise equal\n", (long long)ntensors);
    *differ = ndiff > 0;
    return TESS_OK;
}

/* --- verify (collective) --------------------------------------------------------------------- */

static tess_status cmd_verify(const tess_runtime *rt, int n, char **args) {
    tess_group *g;
    TESS_CHECK(tess_group_create(rt->comm, "verify", &g));
    tess_status worst = TESS_OK;
    for (int i = 0; i < n; i++) {
        char path[TESS_CKPT_PATH_MAX];
        tess_status s = resolve(args[i], path, sizeof path);
        tess_ckpt_info in;
        if (s == TESS_OK) s = tess_ckpt_verify(g, path, &in);
        if (s == TESS_OK) {
            if (rt->rank == 0 && in.sealed)
                printf("%s: ok (step %lld, written by %lld rank%s, integrity record and every "
                       "hash match)\n",
                       path, (long long)in.step, (long long)in.world_size,
                       in.world_size == 1 ? "" : "s");
            else if (rt->rank == 0)
                printf("%s: ok, unprotected format %lld (step %lld, written by %lld rank%s, every "
                       "hash matches; no integrity record covers its metadata)\n",
                       path, (long long)in.format_version, (long long)in.step,
                       (long long)in.world_size, in.world_size == 1 ? "" : "s");
        } else {
            if (rt->rank == 0) {
                printf("%s: FAILED\n", path);
                fflush(stdout);
                tess_error_write();
            }
            tess_error_clear();
            if (worst == TESS_OK) worst = s;
        }
    }
    tess_group_destroy(&g);
    return worst;
}

/* ---- export ---- */

/* Where an exported tensor's elements come from: rows [row0, row0 + nrows) of a dataset. */
typedef struct {
    char path[TESS_SAFETENSORS_NAME_MAX + 64];
    int64_t row0, nrows;
} export_src;

typedef struct {
    hid_t file;
    const export_src *src;
    const tess_safetensors_entry *e;
} export_ctx;

static tess_status export_read(void *vctx, int64_t i, void *buf) {
    const export_ctx *c = vctx;
    hid_t d = H5Dopen2(c->file, c->src[i].path, H5P_DEFAULT);
    TESS_REQUIRE(d >= 0, TESS_ERR_DATA, "cannot open dataset %s", c->src[i].path);
    hid_t space = H5Dget_space(d);
    const hid_t mtype = c->e[i].dtype == TESS_F32   ? H5T_NATIVE_FLOAT
                        : c->e[i].dtype == TESS_F64 ? H5T_NATIVE_DOUBLE
                                                    : H5T_NATIVE_INT64;
    const herr_t r = read_rows(d, space, c->src[i].row0, c->src[i].nrows, mtype, buf);
    H5Sclose(space);
    H5Dclose(d);
    TESS_REQUIRE(r >= 0, TESS_ERR_DATA, "cannot read dataset %s", c->src[i].path);
    return TESS_OK;
}

/* The PyTorch name of a Tessera tensor name: a last component w -> weight, b -> bias,
 * w_X -> X.weight, b_X -> X.bias; any other name gets ".weight" (tok_emb, lm_head). */
static void torch_name(const char *name, char *out, size_t n) {
    const char *dot = strrchr(name, '.');
    const char *leaf = dot ? dot + 1 : name;
    const int stem = (int)(leaf - name); /* bytes before the leaf, with the dot */
    if (strcmp(leaf, "w") == 0 || strcmp(leaf, "b") == 0)
        snprintf(out, n, "%.*s%s", stem, name, leaf[0] == 'w' ? "weight" : "bias");
    else if ((leaf[0] == 'w' || leaf[0] == 'b') && leaf[1] == '_' && leaf[2])
        snprintf(out, n, "%.*s%s.%s", stem, name, leaf + 2, leaf[0] == 'w' ? "weight" : "bias");
    else
        snprintf(out, n, "%s.weight", name);
}

/* Entry k of the export: its name (tessera or torch style, part q/k/v of a split), type, shape
 * and source rows. */
static tess_status export_entry(hid_t f, const char *path, const char *name, bool torch,
                                int part, tess_safetensors_entry *e, export_src *src) {
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    TESS_REQUIRE(d >= 0, TESS_ERR_DATA, "cannot open dataset %s", path);
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    const H5T_class_t cls = H5Tget_class(t);
    const size_t size = H5Tget_size(t);
    hsize_t dims[MAX_DIMS];
    const int nd = H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    H5Tclose(t);
    H5Dclose(d);
    TESS_REQUIRE((cls == H5T_FLOAT && (size == 4 || size == 8)) || (cls == H5T_INTEGER && size == 8),
                 TESS_ERR_DATA, "dataset %s is neither float32, float64 nor int64", path);
    TESS_REQUIRE(nd >= 0 && nd <= TESS_SAFETENSORS_MAX_DIMS, TESS_ERR_DATA,
                 "dataset %s has %d dimensions", path, nd);
    memset(e, 0, sizeof *e);
    e->dtype = cls == H5T_INTEGER ? TESS_I64 : size == 4 ? TESS_F32 : TESS_F64;
    e->ndim = nd;
    for (int i = 0; i < nd; i++) e->shape[i] = (int64_t)dims[i];
    snprintf(src->path, sizeof src->path, "%s", path);
    src->row0 = 0;
    src->nrows = nd > 0 ? e->shape[0] : 1;
    char base[TESS_SAFETENSORS_NAME_MAX];
    if (torch)
        torch_name(name, base, sizeof base);
    else
        snprintf(base, sizeof base, "%s", name);
    if (part < 0) {
        snprintf(e->name, sizeof e->name, "%s", base);
        return TESS_OK;
    }
    /* Part q, k or v of a fused [q|k|v] projection (3C, C): rows [part C, (part + 1) C). */
    const int64_t C = e->shape[0] / 3;
    e->shape[0] = C;
    src->row0 = part * C;
    src->nrows = C;
    const char *qkv = strstr(base, "qkv");
    snprintf(e->name, sizeof e->name, "%.*s%c%s", (int)(qkv - base), base, "qkv"[part], qkv + 3);
    return TESS_OK;
}

/* Whether dataset name is a fused [q|k|v] projection that --split-qkv splits: leaf w_qkv, 2-D,
 * rows divisible by 3. */
static bool is_fused_qkv(hid_t f, const char *path) {
    const char *leaf = strrchr(path, '.');
    if (!leaf || strcmp(leaf, ".w_qkv") != 0) return false;
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) return false;
    hid_t space = H5Dget_space(d);
    hsize_t dims[MAX_DIMS];
    const int nd = H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    H5Dclose(d);
    return nd == 2 && dims[0] % 3 == 0;
}

static tess_status cmd_export(const char *arg, const char *out, bool torch, bool split,
                              const char *group) {
    char path[TESS_CKPT_PATH_MAX];
    TESS_CHECK(resolve(arg, path, sizeof path));
    hid_t f;
    tess_ckpt_info in;
    TESS_CHECK(tess_ckpt_open(path, &f, &in));
    char *man = manifest_of(f);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "/%s/", group);
    int64_t cap = 0, n = 0;
    for (char *p = man; p && *p; p++) cap += *p == '\n';
    cap = 3 * cap + 1;
    tess_safetensors_entry *e = calloc((size_t)cap, sizeof *e);
    export_src *src = calloc((size_t)cap, sizeof *src);
    tess_status s = man && e && src ? TESS_OK
                                    : tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                                      "cannot read the manifest of '%s'", path);
    for (char *line = man ? strtok(man, "\n") : NULL; s == TESS_OK && line;
         line = strtok(NULL, "\n")) {
        if (strncmp(line, prefix, strlen(prefix)) != 0) continue;
        const char *name = line + strlen(prefix);
        const bool fused = split && is_fused_qkv(f, line);
        for (int part = fused ? 0 : -1; s == TESS_OK && part < (fused ? 3 : 0); part++, n++)
            s = export_entry(f, line, name, torch, part, &e[n], &src[n]);
    }
    if (s == TESS_OK && n == 0)
        s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                            "'%s' has no tensors under %s (see tess-ckpt ls)", path, prefix);
    if (s == TESS_OK) {
        char step[32], world[32];
        snprintf(step, sizeof step, "%lld", (long long)in.step);
        snprintf(world, sizeof world, "%lld", (long long)in.world_size);
        const char *meta[] = {"format", "pt", "source", "tessera-checkpoint", "app", in.app,
                              "step", step, "tessera_version", in.tessera_version,
                              "names", torch ? "torch" : "tessera", "written_by_ranks", world};
        export_ctx ctx = {f, src, e};
        s = tess_safetensors_write(out, e, n, meta, 7, export_read, &ctx);
    }
    if (s == TESS_OK)
        printf("%s: %lld tensors of %s (step %lld) as %s names%s\n", out, (long long)n, path,
               (long long)in.step, torch ? "PyTorch" : "Tessera", split ? ", q|k|v split" : "");
    free(man);
    free(e);
    free(src);
    H5Fclose(f);
    return s;
}

/* export's options after CKPT OUT: --names tessera|torch, --split-qkv, --group G. */
static tess_status export_args(int argc, char **argv) {
    bool torch = false, split = false;
    const char *group = "params";
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--split-qkv") == 0) {
            split = true;
        } else if (strcmp(argv[i], "--names") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "torch") == 0 || strcmp(argv[i + 1], "tessera") == 0)) {
            torch = strcmp(argv[++i], "torch") == 0;
        } else if (strcmp(argv[i], "--group") == 0 && i + 1 < argc) {
            group = argv[++i];
        } else {
            TESS_REQUIRE(false, TESS_ERR_ARG,
                         "export: unexpected '%s' (expected --names tessera|torch, --split-qkv "
                         "or --group G)\n%s", argv[i], usage);
        }
    }
    return cmd_export(argv[2], argv[3], torch, split, group);
}

static tess_status run(const tess_runtime *rt, int argc, char **argv, bool *differ) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        if (rt->rank == 0) fputs(usage, stdout);
        return TESS_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        char line[512];
        if (rt->rank == 0) printf("%s\n", tess_version_line(line, sizeof line, argv[0]));
        return TESS_OK;
    }
    if (strcmp(cmd, "verify") == 0 && argc >= 3) return cmd_verify(rt, argc - 2, argv + 2);
    tess_status s = TESS_OK;
    if (rt->rank == 0) {
        tess_h5_quiet q; /* failures are reported in one line each, never as HDF5's stack */
        tess_h5_quiet_begin(&q);
        if (strcmp(cmd, "ls") == 0 && argc == 3) {
            s = cmd_ls(argv[2]);
        } else if (strcmp(cmd, "show") == 0 && (argc == 4 || argc == 6)) {
            int64_t nfirst = 8;
            if (argc == 6) {
                char *end;
                nfirst = strtoll(argv[5], &end, 10);
                if (strcmp(argv[4], "--first") != 0 || *end || nfirst < 0)
                    s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                        "show: expected --first N, got '%s %s'\n%s", argv[4],
                                        argv[5], usage);
            }
            if (s == TESS_OK) s = cmd_show(argv[2], argv[3], nfirst);
        } else if (strcmp(cmd, "meta") == 0 && argc == 3) {
            s = cmd_meta(argv[2]);
        } else if (strcmp(cmd, "diff") == 0 && argc == 4) {
            s = cmd_diff(argv[2], argv[3], differ);
        } else if (strcmp(cmd, "export") == 0 && argc >= 4) {
            s = export_args(argc, argv);
        } else {
            s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                "bad command line%s%s\n%s", cmd[0] ? " for " : "", cmd, usage);
        }
        tess_h5_quiet_end(&q);
        fflush(stdout);
    }
    int v[2] = {(int)s, (int)*differ};
    TESS_MPI_CHECK(MPI_Bcast(v, 2, MPI_INT, 0, rt->comm));
    *differ = v[1];
    if (rt->rank != 0 && v[0] != TESS_OK)
        return tess_error_push((tess_status)v[0], __FILE__, __LINE__, __func__, "failed on rank 0");
    return (tess_status)v[0];
}

int main(int argc, char **argv) {
    int thread_level; /* FUNNELED: tess_ckpt_load hashes on a worker thread (io/ckpt.h) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &thread_level);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    bool differ = false;
    if (s == TESS_OK) s = run(&rt, argc, argv, &differ);
    int code = tess_runtime_finish(&rt, s, true);
    return code == 0 && differ ? 1 : code;
}
