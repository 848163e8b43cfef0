/* graphs_tu.c - the TU graph-dataset text format to a tess_graphs collection (see graphs.h).
 *
 * Files of dataset NAME (one value or comma-separated values per line):
 *   NAME_A.txt                 "u, v": a directed pair of 1-based global node ids
 *   NAME_graph_indicator.txt   line i: the 1-based graph of node i (non-decreasing)
 *   NAME_graph_labels.txt      line g: the label of graph g (any integers, e.g. -1/1 or 1..6)
 *   NAME_node_labels.txt       optional, line i: an integer label of node i
 *   NAME_node_attributes.txt   optional, line i: k real attributes of node i
 * Edge labels and README files are ignored. Whole files are read into memory (the largest TU
 * file shipped is 4.6 MB); a line is addressed as file:line in every error.
 */
#include "io/graphs.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { TU_PATH_MAX = 1200, TU_MAX_ONEHOT = 65536 };

typedef struct {
    char path[TU_PATH_MAX];
    char *text; /* NUL-terminated file contents */
    size_t len;
    char *cur;    /* next line */
    int64_t line; /* number of the line last returned (1-based) */
} tu_file;

static void tu_close(tu_file *f) {
    free(f->text);
    f->text = NULL;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* An snprintf return value: did the text fit n bytes? */
static bool fits(int k, size_t n) { return k >= 0 && (size_t)k < n; }

static tess_status tu_open(tu_file *f, const char *prefix, const char *suffix) {
    *f = (tu_file){0};
    TESS_REQUIRE(fits(snprintf(f->path, sizeof f->path, "%s_%s.txt", prefix, suffix),
                      sizeof f->path),
                 TESS_ERR_ARG, "TU path too long: '%s'", prefix);
    FILE *fp = fopen(f->path, "rb");
    TESS_REQUIRE(fp != NULL, TESS_ERR_NOINPUT, "cannot open '%s': %s", f->path, strerror(errno));
    bool ok = fseek(fp, 0, SEEK_END) == 0;
    long size = ok ? ftell(fp) : -1;
    ok = ok && size >= 0 && fseek(fp, 0, SEEK_SET) == 0;
    f->text = ok ? malloc((size_t)size + 1) : NULL;
    ok = f->text != NULL && fread(f->text, 1, (size_t)size, fp) == (size_t)size;
    fclose(fp);
    if (!ok) {
        tu_close(f);
        TESS_REQUIRE(false, TESS_ERR_NOINPUT, "cannot read '%s'", f->path);
    }
    f->len = (size_t)size;
    f->text[f->len] = '\0';
    TESS_REQUIRE(strlen(f->text) == f->len, TESS_ERR_DATA,
                 "'%s' contains a NUL byte: not a text file", f->path);
    f->cur = f->text;
    return TESS_OK;
}

/* Only spaces, tabs and line ends (a line, or the rest of a file). */
static bool is_blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return false;
    return true;
}

/* Whether the rest of the file holds only blank lines. */
static bool rest_blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return false;
    return true;
}

/* The next line (without its newline, modified in place), or NULL at the end. Blank lines at the
 * end of the file are ignored; a blank line before the end is an error (line numbers count). */
static tess_status tu_next(tu_file *f, char **line) {
    *line = NULL;
    if (f->cur == NULL || rest_blank(f->cur)) return TESS_OK;
    char *s = f->cur, *nl = strchr(s, '\n');
    if (nl) {
        *nl = '\0';
        f->cur = nl + 1;
    } else {
        f->cur = NULL;
    }
    size_t n = strlen(s);
    if (n > 0 && s[n - 1] == '\r') s[n - 1] = '\0';
    f->line++;
    TESS_REQUIRE(!is_blank(s), TESS_ERR_DATA, "%s:%lld: empty line (one record per line expected)",
                 f->path, (long long)f->line);
    *line = s;
    return TESS_OK;
}

/* The next comma-separated field of *s, trimmed; NULL if none left. */
static char *next_field(char **s) {
    if (*s == NULL) return NULL;
    char *start = *s, *comma = strchr(start, ',');
    if (comma) {
        *comma = '\0';
        *s = comma + 1;
    } else {
        *s = NULL;
    }
    while (*start == ' ' || *start == '\t') start++;
    char *end = start + strlen(start);
    while (end > start && (end[-1] == ' ' || end[-1] == '\t')) *--end = '\0';
    return start;
}

/* Exactly n integers on this line. */
static tess_status parse_ints(const tu_file *f, char *line, int n, int64_t *out) {
    char *rest = line, *tok;
    int k = 0;
    while ((tok = next_field(&rest)) != NULL) {
        TESS_REQUIRE(k < n, TESS_ERR_DATA,
                     "%s:%lld: expected %d comma-separated integer%s, found more", f->path,
                     (long long)f->line, n, n == 1 ? "" : "s");
        char *end = NULL;
        errno = 0;
        long long v = strtoll(tok, &end, 10);
        TESS_REQUIRE(*tok != '\0' && *end == '\0' && errno == 0, TESS_ERR_DATA,
                     "%s:%lld: expected an integer, found '%s'", f->path, (long long)f->line, tok);
        out[k++] = v;
    }
    TESS_REQUIRE(k == n, TESS_ERR_DATA, "%s:%lld: expected %d comma-separated integer%s, found %d",
                 f->path, (long long)f->line, n, n == 1 ? "" : "s", k);
    return TESS_OK;
}

/* One integer per line for the whole file: out (*n), allocated here. */
static tess_status read_int_column(const char *prefix, const char *suffix, int64_t **out,
                                   int64_t *n, char *path, size_t path_n) {
    tu_file f;
    TESS_CHECK(tu_open(&f, prefix, suffix));
    snprintf(path, path_n, "%s", f.path);
    int64_t cap = 1024, cnt = 0;
    int64_t *v = malloc((size_t)cap * sizeof *v);
    tess_status s = v ? TESS_OK : TESS_ERR_MEM;
    char *line;
    while (s == TESS_OK && (s = tu_next(&f, &line)) == TESS_OK && line != NULL) {
        if (cnt == cap) {
            int64_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) {
                s = TESS_ERR_MEM;
                break;
            }
            v = nv;
        }
        s = parse_ints(&f, line, 1, v + cnt);
        cnt++;
    }
    tu_close(&f);
    if (s != TESS_OK) {
        free(v);
        TESS_REQUIRE(false, s, "reading '%s'", path);
    }
    *out = v;
    *n = cnt;
    return TESS_OK;
}

/* node_attributes: N rows of k reals (k from the first line). attrs (N, k) allocated here. */
static tess_status read_attributes(const char *prefix, int64_t N, float **attrs, int64_t *k) {
    tu_file f;
    TESS_CHECK(tu_open(&f, prefix, "node_attributes"));
    tess_status s = TESS_OK;
    float *a = NULL;
    int64_t cols = 0, rows = 0;
    char *line;
    while ((s = tu_next(&f, &line)) == TESS_OK && line != NULL) {
        if (rows == 0) {
            cols = 1;
            for (const char *c = line; *c; c++) cols += *c == ',';
            a = malloc((size_t)(N > 0 ? N : 1) * (size_t)cols * sizeof *a);
            if (!a) {
                s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                    "cannot allocate %lld x %lld attributes", (long long)N,
                                    (long long)cols);
                break;
            }
        }
        if (rows >= N) {
            rows++;
            continue;
        }
        char *rest = line, *tok;
        int64_t c = 0;
        while (s == TESS_OK && (tok = next_field(&rest)) != NULL) {
            char *end = NULL;
            double v = c < cols ? strtod(tok, &end) : 0.0;
            if (c < cols && (*tok == '\0' || *end != '\0' || !isfinite(v)))
                s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                    "%s:%lld: expected a finite number, found '%s'", f.path,
                                    (long long)f.line, tok);
            else if (c < cols)
                a[rows * cols + c] = (float)v;
            c++;
        }
        if (s == TESS_OK && c != cols)
            s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                "%s:%lld: %lld values, expected %lld (as on line 1)", f.path,
                                (long long)f.line, (long long)c, (long long)cols);
        if (s != TESS_OK) break;
        rows++;
    }
    if (s == TESS_OK && rows != N)
        s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                            "%s: %lld lines, expected %lld (one per node, as in "
                            "graph_indicator)",
                            f.path, (long long)rows, (long long)N);
    tu_close(&f);
    if (s != TESS_OK) {
        free(a);
        return s;
    }
    *attrs = a;
    *k = cols;
    return TESS_OK;
}

/* source -> path prefix "<dir>/<NAME>" and NAME. */
static tess_status resolve(const char *source, char *prefix, size_t n, char *name, size_t nn) {
    char dir[TU_PATH_MAX], probe[TU_PATH_MAX + 64], stem[256] = "";
    struct stat st;
    TESS_REQUIRE(fits(snprintf(dir, sizeof dir, "%s", source), sizeof dir), TESS_ERR_ARG,
                 "TU path too long: '%s'", source);
    bool ok;
    if (stat(source, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t len = strlen(dir);
        while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
        const char *slash = strrchr(dir, '/');
        const char *base = slash ? slash + 1 : dir;
        ok = fits(snprintf(probe, sizeof probe, "%s/%s_A.txt", dir, base), sizeof probe);
        if (ok && file_exists(probe)) {
            ok = fits(snprintf(prefix, n, "%s/%s", dir, base), n);
        } else {
            /* A directory named differently from its files: take its one *_A.txt. */
            DIR *dp = opendir(dir);
            TESS_REQUIRE(dp != NULL, TESS_ERR_NOINPUT, "cannot list '%s': %s", dir,
                         strerror(errno));
            int found = 0;
            struct dirent *e;
            while ((e = readdir(dp)) != NULL) {
                size_t l = strlen(e->d_name);
                if (l > 6 && strcmp(e->d_name + l - 6, "_A.txt") == 0 && l - 6 < sizeof stem &&
                    found++ == 0) {
                    memcpy(stem, e->d_name, l - 6);
                    stem[l - 6] = '\0';
                }
            }
            closedir(dp);
            TESS_REQUIRE(found == 1, TESS_ERR_NOINPUT,
                         "no TU dataset in directory '%s': expected '%s' or exactly one *_A.txt "
                         "(found %d)",
                         dir, probe, found);
            ok = fits(snprintf(prefix, n, "%s/%s", dir, stem), n);
        }
    } else {
        ok = fits(snprintf(probe, sizeof probe, "%s_A.txt", source), sizeof probe);
        TESS_REQUIRE(ok && file_exists(probe), TESS_ERR_NOINPUT,
                     "no TU dataset at '%s': not a directory, and '%s' does not exist", source,
                     probe);
        ok = fits(snprintf(prefix, n, "%s", source), n);
    }
    TESS_REQUIRE(ok, TESS_ERR_ARG, "TU path too long: '%s'", source);
    const char *slash = strrchr(prefix, '/');
    const char *base = slash ? slash + 1 : prefix;
    size_t len = strnlen(base, nn - 1);
    memcpy(name, base, len);
    name[len] = '\0';
    return TESS_OK;
}

typedef struct {
    int64_t u, v;
} pair;

static int pair_cmp(const void *a, const void *b) {
    const pair *p = a, *q = b;
    if (p->u != q->u) return p->u < q->u ? -1 : 1;
    if (p->v != q->v) return p->v < q->v ? -1 : 1;
    return 0;
}

static int64_t sort_unique(pair *p, int64_t n) {
    if (n == 0) return 0;
    qsort(p, (size_t)n, sizeof *p, pair_cmp);
    int64_t m = 1;
    for (int64_t i = 1; i < n; i++)
        if (pair_cmp(&p[i], &p[m - 1]) != 0) p[m++] = p[i];
    return m;
}

static int int64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Everything the conversion holds before it becomes a tess_graphs. */
typedef struct {
    int64_t N, G;
    int64_t *gi;      /* (N) 1-based graph of each node */
    int64_t *glabels; /* (G) raw graph labels */
    int64_t *nlabels; /* (N) raw node labels or NULL */
    float *attrs;     /* (N, k) or NULL */
    int64_t k;
    pair *pairs; /* directed pairs, 0-based */
} tu_raw;

static void raw_free(tu_raw *r) {
    free(r->gi);
    free(r->glabels);
    free(r->nlabels);
    free(r->attrs);
    free(r->pairs);
    *r = (tu_raw){0};
}

static tess_status check_indicator(const int64_t *gi, int64_t N, const char *path, int64_t *G) {
    TESS_REQUIRE(N >= 1, TESS_ERR_DATA, "%s: no nodes (the file is empty)", path);
    TESS_REQUIRE(gi[0] == 1, TESS_ERR_DATA,
                 "%s:1: graph id %lld, expected 1 (graph ids are "
                 "1-based and start at 1)",
                 path, (long long)gi[0]);
    for (int64_t i = 1; i < N; i++) {
        TESS_REQUIRE(gi[i] >= gi[i - 1], TESS_ERR_DATA,
                     "%s:%lld: graph id %lld after %lld (graph_indicator must be non-decreasing: "
                     "the nodes of a graph are consecutive)",
                     path, (long long)(i + 1), (long long)gi[i], (long long)gi[i - 1]);
        TESS_REQUIRE(gi[i] <= gi[i - 1] + 1, TESS_ERR_DATA,
                     "%s:%lld: graph id %lld after %lld: graph %lld has no nodes", path,
                     (long long)(i + 1), (long long)gi[i], (long long)gi[i - 1],
                     (long long)(gi[i - 1] + 1));
    }
    *G = gi[N - 1];
    return TESS_OK;
}

/* A.txt: pairs (0-based), self loops counted and dropped; ids and graphs checked. */
static tess_status read_edges(const char *prefix, tu_raw *r, tess_tu_report *rep) {
    tu_file f;
    TESS_CHECK(tu_open(&f, prefix, "A"));
    int64_t cap = 1024, n = 0;
    r->pairs = malloc((size_t)cap * sizeof *r->pairs);
    tess_status s = r->pairs ? TESS_OK : TESS_ERR_MEM;
    char *line;
    while (s == TESS_OK && (s = tu_next(&f, &line)) == TESS_OK && line != NULL) {
        int64_t uv[2];
        if ((s = parse_ints(&f, line, 2, uv)) != TESS_OK) break;
        rep->edge_lines++;
        for (int j = 0; j < 2 && s == TESS_OK; j++)
            if (uv[j] < 1 || uv[j] > r->N)
                s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                    "%s:%lld: node id %lld out of range 1..%lld (node ids are "
                                    "1-based lines of graph_indicator)",
                                    f.path, (long long)f.line, (long long)uv[j], (long long)r->N);
        if (s != TESS_OK) break;
        int64_t gu = r->gi[uv[0] - 1], gv = r->gi[uv[1] - 1];
        if (gu != gv) {
            s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                "%s:%lld: edge (%lld, %lld) joins graph %lld and graph %lld",
                                f.path, (long long)f.line, (long long)uv[0], (long long)uv[1],
                                (long long)gu, (long long)gv);
            break;
        }
        if (uv[0] == uv[1]) {
            rep->self_loops++;
            continue;
        }
        if (n == cap) {
            pair *np = realloc(r->pairs, (size_t)(cap *= 2) * sizeof *np);
            if (!np) {
                s = TESS_ERR_MEM;
                break;
            }
            r->pairs = np;
        }
        r->pairs[n++] = (pair){uv[0] - 1, uv[1] - 1};
    }
    tu_close(&f);
    TESS_REQUIRE(s == TESS_OK, s, "reading edges of '%s'", prefix);
    /* Unique directed pairs as listed, then both directions of each. */
    int64_t listed = sort_unique(r->pairs, n);
    rep->duplicates = n - listed;
    pair *both = realloc(r->pairs, (size_t)(2 * listed > 0 ? 2 * listed : 1) * sizeof *both);
    TESS_REQUIRE(both != NULL, TESS_ERR_MEM, "cannot allocate %lld edge pairs",
                 (long long)(2 * listed));
    r->pairs = both;
    for (int64_t i = 0; i < listed; i++) both[listed + i] = (pair){both[i].v, both[i].u};
    int64_t nnz = sort_unique(both, 2 * listed);
    rep->reverse_added = nnz - listed;
    rep->edges = nnz / 2;
    return TESS_OK;
}

/* Graph labels -> classes 0..C-1 in increasing value order. */
static tess_status map_labels(const tu_raw *r, tess_graphs *gs) {
    int64_t *sorted = malloc((size_t)r->G * sizeof *sorted);
    TESS_REQUIRE(sorted != NULL, TESS_ERR_MEM, "out of memory");
    memcpy(sorted, r->glabels, (size_t)r->G * sizeof *sorted);
    qsort(sorted, (size_t)r->G, sizeof *sorted, int64_cmp);
    int64_t C = 1;
    for (int64_t i = 1; i < r->G; i++)
        if (sorted[i] != sorted[C - 1]) sorted[C++] = sorted[i];
    gs->num_classes = C;
    gs->label_values = sorted;
    for (int64_t g = 0; g < r->G; g++) {
        const int64_t *hit = bsearch(&r->glabels[g], sorted, (size_t)C, sizeof *sorted, int64_cmp);
        gs->y[g] = (int32_t)(hit - sorted);
    }
    return TESS_OK;
}

static tess_status build_features(const tu_raw *r, tess_graphs *gs, tess_tu_features feat,
                                  const char *prefix, tess_tu_report *rep) {
    const int64_t N = r->N;
    bool labels = feat == TESS_TU_FEATURES_LABELS || feat == TESS_TU_FEATURES_BOTH ||
                  (feat == TESS_TU_FEATURES_AUTO && r->nlabels);
    bool attrs = feat == TESS_TU_FEATURES_ATTRIBUTES || feat == TESS_TU_FEATURES_BOTH ||
                 (feat == TESS_TU_FEATURES_AUTO && !r->nlabels && r->attrs);
    bool degree = feat == TESS_TU_FEATURES_DEGREE ||
                  (feat == TESS_TU_FEATURES_AUTO && !r->nlabels && !r->attrs);
    TESS_REQUIRE(!labels || r->nlabels, TESS_ERR_NOINPUT,
                 "node-label features asked for, but '%s_node_labels.txt' does not exist", prefix);
    TESS_REQUIRE(!attrs || r->attrs, TESS_ERR_NOINPUT,
                 "node-attribute features asked for, but '%s_node_attributes.txt' does not exist",
                 prefix);
    int64_t lmin = 0, width = 0, F = 0;
    char kind[TESS_GRAPHS_NAME_MAX] = "";
    if (labels) {
        lmin = rep->node_label_min;
        width = rep->node_label_max - lmin + 1;
        TESS_REQUIRE(width <= TU_MAX_ONEHOT, TESS_ERR_DATA,
                     "%s_node_labels.txt: labels span %lld..%lld, a one-hot width of %lld (more "
                     "than %d); use attributes or degree features",
                     prefix, (long long)rep->node_label_min, (long long)rep->node_label_max,
                     (long long)width, TU_MAX_ONEHOT);
        F += width;
        snprintf(kind, sizeof kind, "node_labels_onehot[%lld..%lld]",
                 (long long)rep->node_label_min, (long long)rep->node_label_max);
    }
    if (attrs) {
        size_t l = strlen(kind);
        snprintf(kind + l, sizeof kind - l, "%snode_attributes[%lld]", l ? "+" : "",
                 (long long)r->k);
        F += r->k;
    }
    if (degree) {
        width = rep->max_degree + 1;
        F = width;
        snprintf(kind, sizeof kind, "degree_onehot[0..%lld]", (long long)rep->max_degree);
    }
    gs->num_features = F;
    snprintf(gs->feature_kind, sizeof gs->feature_kind, "%s", kind);
    gs->x = calloc((size_t)(N * F > 0 ? N * F : 1), sizeof(float));
    TESS_REQUIRE(gs->x != NULL, TESS_ERR_MEM, "cannot allocate %lld x %lld features", (long long)N,
                 (long long)F);
    for (int64_t i = 0; i < N; i++) {
        float *row = gs->x + i * F;
        if (degree) {
            row[gs->indptr[i + 1] - gs->indptr[i]] = 1.0f;
            continue;
        }
        if (labels) row[r->nlabels[i] - lmin] = 1.0f;
        if (attrs)
            memcpy(row + (labels ? width : 0), r->attrs + i * r->k, (size_t)r->k * sizeof(float));
    }
    return TESS_OK;
}

/* CSR from the sorted unique pairs: rows are global nodes, indices local to the graph. */
static tess_status build_csr(const tu_raw *r, tess_graphs *gs, tess_tu_report *rep) {
    const int64_t N = r->N, G = r->G, nnz = 2 * rep->edges;
    gs->graph_ids = malloc((size_t)G * sizeof(int64_t));
    gs->node_ptr = calloc((size_t)G + 1, sizeof(int64_t));
    gs->edge_ptr = calloc((size_t)G + 1, sizeof(int64_t));
    gs->indptr = calloc((size_t)N + 1, sizeof(int64_t));
    gs->indices = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof(int32_t));
    gs->y = malloc((size_t)G * sizeof(int32_t));
    TESS_REQUIRE(gs->graph_ids && gs->node_ptr && gs->edge_ptr && gs->indptr && gs->indices &&
                     gs->y,
                 TESS_ERR_MEM, "cannot allocate the CSR of %lld nodes, %lld entries", (long long)N,
                 (long long)nnz);
    for (int64_t g = 0; g < G; g++) gs->graph_ids[g] = g;
    for (int64_t i = 0; i < N; i++) gs->node_ptr[r->gi[i]]++; /* gi is 1-based: counts at g+1 */
    for (int64_t g = 0; g < G; g++) {
        TESS_REQUIRE(gs->node_ptr[g + 1] <= INT32_MAX, TESS_ERR_DATA,
                     "graph %lld has %lld nodes, more than int32 local ids allow",
                     (long long)(g + 1), (long long)gs->node_ptr[g + 1]);
        gs->node_ptr[g + 1] += gs->node_ptr[g];
    }
    for (int64_t e = 0; e < nnz; e++) gs->indptr[r->pairs[e].u + 1]++;
    rep->isolated_nodes = rep->max_degree = 0;
    for (int64_t i = 0; i < N; i++) {
        int64_t deg = gs->indptr[i + 1];
        rep->isolated_nodes += deg == 0;
        if (deg > rep->max_degree) rep->max_degree = deg;
        gs->indptr[i + 1] += gs->indptr[i];
    }
    for (int64_t e = 0; e < nnz; e++) {
        int64_t v = r->pairs[e].v;
        gs->indices[e] = (int32_t)(v - gs->node_ptr[r->gi[v] - 1]);
    }
    for (int64_t g = 0; g <= G; g++) gs->edge_ptr[g] = gs->indptr[gs->node_ptr[g]];
    gs->num_graphs = gs->total_graphs = G;
    gs->num_nodes = gs->total_nodes = N;
    gs->nnz = gs->total_nnz = nnz;
    return TESS_OK;
}

static tess_status convert(tess_graphs *gs, const char *prefix, tess_tu_features feat,
                           tess_tu_report *rep, tu_raw *r) {
    char path[TU_PATH_MAX];
    TESS_CHECK(read_int_column(prefix, "graph_indicator", &r->gi, &r->N, path, sizeof path));
    TESS_CHECK(check_indicator(r->gi, r->N, path, &r->G));
    int64_t nl = 0;
    TESS_CHECK(read_int_column(prefix, "graph_labels", &r->glabels, &nl, path, sizeof path));
    TESS_REQUIRE(nl == r->G, TESS_ERR_DATA,
                 "%s: %lld lines, expected %lld (one label per graph; graph_indicator names "
                 "graphs 1..%lld)",
                 path, (long long)nl, (long long)r->G, (long long)r->G);
    char probe[TU_PATH_MAX + 32];
    bool ok = fits(snprintf(probe, sizeof probe, "%s_node_labels.txt", prefix), sizeof probe);
    if (ok && file_exists(probe)) {
        TESS_CHECK(read_int_column(prefix, "node_labels", &r->nlabels, &nl, path, sizeof path));
        TESS_REQUIRE(nl == r->N, TESS_ERR_DATA,
                     "%s: %lld lines, expected %lld (one label per node, as in graph_indicator)",
                     path, (long long)nl, (long long)r->N);
        rep->node_label_min = rep->node_label_max = r->nlabels[0];
        for (int64_t i = 1; i < r->N; i++) {
            if (r->nlabels[i] < rep->node_label_min) rep->node_label_min = r->nlabels[i];
            if (r->nlabels[i] > rep->node_label_max) rep->node_label_max = r->nlabels[i];
        }
    }
    ok = fits(snprintf(probe, sizeof probe, "%s_node_attributes.txt", prefix), sizeof probe);
    if (ok && file_exists(probe)) TESS_CHECK(read_attributes(prefix, r->N, &r->attrs, &r->k));
    rep->num_attributes = r->k;
    TESS_CHECK(read_edges(prefix, r, rep));
    TESS_CHECK(build_csr(r, gs, rep));
    TESS_CHECK(map_labels(r, gs));
    TESS_CHECK(build_features(r, gs, feat, prefix, rep));
    TESS_CHECK(tess_graphs_check(gs, prefix));
    return TESS_OK;
}

tess_status tess_graphs_from_tu(tess_graphs *gs, const char *source, tess_tu_features features,
                                tess_tu_report *rep) {
    *gs = (tess_graphs){0};
    tess_tu_report local;
    if (rep == NULL) rep = &local;
    *rep = (tess_tu_report){0};
    TESS_REQUIRE(source != NULL, TESS_ERR_ARG, "no TU dataset given");
    char prefix[TU_PATH_MAX];
    TESS_CHECK(resolve(source, prefix, sizeof prefix, gs->name, sizeof gs->name));
    tu_raw r = {0};
    tess_status s = convert(gs, prefix, features, rep, &r);
    raw_free(&r);
    if (s != TESS_OK) tess_graphs_free(gs);
    TESS_REQUIRE(s == TESS_OK, s, "converting TU dataset '%s'", source);
    return TESS_OK;
}
