/* data.c - fedkalter's datasets: generator, TU loader, encodings, splits (data.h). */
#include "data.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h" /* tess_rng_* */
#include "nn/graph.h" /* tess_graph_structure_enc */

/* The settings as domains in client order (FedStar / FedSSP names; DD and COLLAB are not
 * available, so the settings that list them run without them and are partial). */
static const struct {
    const char *name, *domains, *missing;
} settings[] = {{"SM", "S", NULL},           {"SM-CV", "SC", NULL},
                {"BIO-SM", "SB", "DD"},      {"BIO-SM-SN", "SBN", "DD, COLLAB"},
                {"BIO-SN-CV", "BNC", "DD, COLLAB"}, {"SM-SN-CV", "SNC", NULL}};

static const struct setting_domain {
    char code;
    int n;
    const char *names[7];
} domains[] = {{'S', 7, {"MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1"}},
               {'B', 2, {"ENZYMES", "PROTEINS"}},
               {'N', 2, {"IMDB-BINARY", "IMDB-MULTI"}},
               {'C', 3, {"Letter-low", "Letter-med", "Letter-high"}}};

int fk_setting_datasets(const char *setting, const char **names) {
    int n = 0;
    for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
        if (strcmp(setting, settings[s].name) != 0) continue;
        for (const char *c = settings[s].domains; *c; c++) {
            for (size_t d = 0; d < sizeof domains / sizeof domains[0]; d++) {
                if (domains[d].code != *c) continue;
                for (int i = 0; i < domains[d].n; i++) names[n++] = domains[d].names[i];
            }
        }
    }
    return n;
}

const char *fk_setting_missing(const char *setting) {
    for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
        if (strcmp(setting, settings[s].name) == 0) return settings[s].missing;
    }
    return NULL;
}

void fk_dataset_free(fk_dataset *ds) {
    tess_graphs_free(&ds->gs);
    free(ds->se);
    free(ds->split);
    memset(ds, 0, sizeof *ds);
}

tess_status fk_dataset_synthetic(fk_dataset *ds, int64_t k, int64_t G, uint64_t seed) {
    memset(ds, 0, sizeof *ds);
    const tess_rng_key key = {(uint32_t)seed, (uint32_t)(1000 + k)};
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 0);
    const int64_t F = 3 + k % 4, nmax = 24;
    tess_graphs *gs = &ds->gs;
    /* upper bounds: nmax nodes, ring + chords < nmax * 4 directed entries per graph */
    gs->node_ptr = malloc((size_t)(G + 1) * sizeof(int64_t));
    gs->edge_ptr = malloc((size_t)(G + 1) * sizeof(int64_t));
    gs->indptr = malloc((size_t)(G * nmax + 1) * sizeof(int64_t));
    gs->indices = malloc((size_t)(G * nmax * 6) * sizeof(int32_t));
    gs->x = calloc((size_t)(G * nmax * F), sizeof(float));
    gs->y = malloc((size_t)G * sizeof(int32_t));
    gs->graph_ids = malloc((size_t)G * sizeof(int64_t));
    gs->label_values = malloc(2 * sizeof(int64_t));
    if (!gs->node_ptr || !gs->edge_ptr || !gs->indptr || !gs->indices || !gs->x || !gs->y ||
        !gs->graph_ids || !gs->label_values) {
        fk_dataset_free(ds);
        TESS_REQUIRE(0, TESS_ERR_MEM, "synthetic client %lld of %lld graphs", (long long)k,
                     (long long)G);
    }
    snprintf(gs->name, sizeof gs->name, "synthetic-%lld", (long long)k);
    snprintf(gs->feature_kind, sizeof gs->feature_kind, "node_labels_onehot[0..%lld]",
             (long long)(F - 1));
    gs->num_classes = 2, gs->num_features = F, gs->num_graphs = G;
    gs->label_values[0] = 0, gs->label_values[1] = 1;
    int64_t node = 0, e = 0;
    uint64_t draw = 0;
    gs->node_ptr[0] = gs->edge_ptr[0] = gs->indptr[0] = 0;
    for (int64_t g = 0; g < G; g++) {
        const int32_t cls = (int32_t)(g % 2);
        const int64_t n = 8 + (int64_t)tess_rng_uniform(key, ctr, draw++, 0, 17);
        /* adjacency: a ring (an isolated last node for every fifth graph), plus chords i -- i+2
         * with probability 0.1 (class 0) or 0.5 (class 1) */
        uint8_t adj[24][24];
        memset(adj, 0, sizeof adj);
        const int64_t ring = g % 5 == 4 ? n - 1 : n;
        for (int64_t i = 0; i < ring; i++) adj[i][(i + 1) % ring] = adj[(i + 1) % ring][i] = 1;
        for (int64_t i = 0; i + 2 < ring; i++) {
            if (tess_rng_uniform(key, ctr, draw++, 0, 1) < (cls ? 0.5 : 0.1))
                adj[i][i + 2] = adj[i + 2][i] = 1;
        }
        for (int64_t i = 0; i < n; i++, node++) {
            for (int64_t j = 0; j < n; j++) {
                if (adj[i][j] && i != j) gs->indices[e++] = (int32_t)j;
            }
            gs->indptr[node + 1] = e;
            /* node label: class 1 favours the last label */
            int64_t lab = (int64_t)tess_rng_uniform(key, ctr, draw++, 0, (double)F);
            if (cls && tess_rng_uniform(key, ctr, draw++, 0, 1) < 0.3) lab = F - 1;
            gs->x[node * F + (lab < F ? lab : F - 1)] = 1.0f;
        }
        gs->node_ptr[g + 1] = node;
        gs->edge_ptr[g + 1] = e;
        gs->y[g] = cls;
        gs->graph_ids[g] = g;
    }
    gs->num_nodes = gs->total_nodes = node;
    gs->nnz = gs->total_nnz = e;
    gs->total_graphs = G;
    TESS_CHECK(tess_graphs_check(gs, gs->name));
    return TESS_OK;
}

tess_status fk_dataset_tu(fk_dataset *ds, const char *dir, const char *name) {
    memset(ds, 0, sizeof *ds);
    char path[4096];
    const int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    TESS_REQUIRE(n > 0 && n < (int)sizeof path, TESS_ERR_CONFIG, "data.dir '%s' too long", dir);
    const tess_tu_features f = strncmp(name, "Letter", 6) == 0 ? TESS_TU_FEATURES_ATTRIBUTES
                               : strncmp(name, "IMDB", 4) == 0 ? TESS_TU_FEATURES_DEGREE
                                                               : TESS_TU_FEATURES_LABELS;
    TESS_CHECK(tess_graphs_from_tu(&ds->gs, path, f, NULL));
    return TESS_OK;
}

tess_status fk_dataset_tu_count(const char *dir, const char *name, int64_t *G) {
    char path[4096];
    const int n = snprintf(path, sizeof path, "%s/%s/%s_graph_labels.txt", dir, name, name);
    TESS_REQUIRE(n > 0 && n < (int)sizeof path, TESS_ERR_CONFIG, "data.dir '%s' too long", dir);
    FILE *f = fopen(path, "r");
    TESS_REQUIRE(f, TESS_ERR_NOINPUT, "cannot open '%s' (TU dataset %s under data.dir)", path,
                 name);
    int64_t lines = 0;
    bool blank = true; /* the current line has no non-space character yet */
    for (int c; (c = fgetc(f)) != EOF;) {
        if (c == '\n') {
            lines += !blank;
            blank = true;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            blank = false;
        }
    }
    lines += !blank; /* a last line without its newline */
    const bool err = ferror(f) != 0;
    fclose(f);
    TESS_REQUIRE(!err, TESS_ERR_IO, "reading '%s'", path);
    *G = lines;
    return TESS_OK;
}

tess_status fk_split_sizes(const char *name, int64_t G, int64_t *n_train, int64_t *n_val,
                           int64_t *n_test) {
    const int64_t held = (G * 2 + 9) / 10; /* ceil(0.2 G) */
    *n_test = (held + 1) / 2;
    *n_val = held - *n_test;
    *n_train = G - held;
    TESS_REQUIRE(*n_train > 0 && *n_val > 0 && *n_test > 0, TESS_ERR_DATA,
                 "'%s': %lld graphs give an empty split (train %lld, val %lld, test %lld)", name,
                 (long long)G, (long long)*n_train, (long long)*n_val, (long long)*n_test);
    return TESS_OK;
}

tess_status fk_oneds_assign(const char *name, int64_t G, int64_t N, uint64_t seed,
                            int32_t *client, int64_t *size) {
    const int64_t m = N > 0 && G / N < 50 ? G / N : 50;
    TESS_REQUIRE(N > 0 && m > 0, TESS_ERR_DATA,
                 "'%s': %lld graphs cannot fill %lld oneDS clients (data.clients)", name,
                 (long long)G, (long long)N);
    const tess_rng_key key = {(uint32_t)seed, 0x6f6e6544u}; /* "oneD" */
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 1);
    for (int64_t k = 0; k < N; k++) size[k] = 0;
    for (int64_t g = 0; g < G; g++) {
        int64_t k = g < N * m ? g / m : (int64_t)tess_rng_uniform(key, ctr, (uint64_t)g, 0,
                                                                   (double)N);
        if (k >= N) k = N - 1;
        client[g] = (int32_t)k;
        size[k]++;
    }
    for (int64_t k = 0; k < N; k++) {
        char part[TESS_GRAPHS_NAME_MAX + 32];
        snprintf(part, sizeof part, "%s, oneDS client %lld of %lld", name, (long long)k,
                 (long long)N);
        int64_t tr, va, te;
        TESS_CHECK(fk_split_sizes(part, size[k], &tr, &va, &te));
    }
    return TESS_OK;
}

tess_status fk_dataset_subset(fk_dataset *ds, const tess_graphs *src, const int32_t *client,
                              int64_t k, const char *name) {
    memset(ds, 0, sizeof *ds);
    tess_graphs *gs = &ds->gs;
    const int64_t F = src->num_features;
    int64_t G = 0, N = 0, E = 0;
    for (int64_t g = 0; g < src->num_graphs; g++) {
        if (client[g] != k) continue;
        G++;
        N += src->node_ptr[g + 1] - src->node_ptr[g];
        E += src->edge_ptr[g + 1] - src->edge_ptr[g];
    }
    gs->node_ptr = malloc((size_t)(G + 1) * sizeof(int64_t));
    gs->edge_ptr = malloc((size_t)(G + 1) * sizeof(int64_t));
    gs->indptr = malloc((size_t)(N + 1) * sizeof(int64_t));
    gs->indices = malloc((size_t)(E > 0 ? E : 1) * sizeof(int32_t));
    gs->x = malloc((size_t)(N * F > 0 ? N * F : 1) * sizeof(float));
    gs->y = malloc((size_t)(G > 0 ? G : 1) * sizeof(int32_t));
    gs->graph_ids = malloc((size_t)(G > 0 ? G : 1) * sizeof(int64_t));
    gs->label_values = malloc((size_t)src->num_classes * sizeof(int64_t));
    if (!gs->node_ptr || !gs->edge_ptr || !gs->indptr || !gs->indices || !gs->x || !gs->y ||
        !gs->graph_ids || !gs->label_values) {
        fk_dataset_free(ds);
        TESS_REQUIRE(0, TESS_ERR_MEM, "'%s': %lld graphs", name, (long long)G);
    }
    snprintf(gs->name, sizeof gs->name, "%s", name);
    memcpy(gs->feature_kind, src->feature_kind, sizeof gs->feature_kind);
    memcpy(gs->label_values, src->label_values, (size_t)src->num_classes * sizeof(int64_t));
    gs->total_graphs = src->total_graphs, gs->total_nodes = src->total_nodes;
    gs->total_nnz = src->total_nnz, gs->num_features = F, gs->num_classes = src->num_classes;
    gs->num_graphs = G, gs->num_nodes = N, gs->nnz = E;
    gs->node_ptr[0] = gs->edge_ptr[0] = gs->indptr[0] = 0;
    int64_t j = 0, node = 0, e = 0;
    for (int64_t g = 0; g < src->num_graphs; g++) {
        if (client[g] != k) continue;
        const int64_t n0 = src->node_ptr[g], n1 = src->node_ptr[g + 1];
        const int64_t e0 = src->edge_ptr[g], e1 = src->edge_ptr[g + 1];
        memcpy(gs->indices + e, src->indices + e0, (size_t)(e1 - e0) * sizeof(int32_t));
        memcpy(gs->x + node * F, src->x + n0 * F, (size_t)((n1 - n0) * F) * sizeof(float));
        for (int64_t i = n0; i < n1; i++, node++)
            gs->indptr[node + 1] = e + src->indptr[i + 1] - e0;
        e += e1 - e0;
        gs->y[j] = src->y[g];
        gs->graph_ids[j] = src->graph_ids[g];
        gs->node_ptr[++j] = node;
        gs->edge_ptr[j] = e;
    }
    TESS_CHECK(tess_graphs_check(gs, name));
    return TESS_OK;
}

/* Split count of n graphs over classes in proportion to cnt (C classes): floor shares, then the
 * remainder to the largest fractional parts (lowest class first on ties). */
static void allot(int64_t *out, const int64_t *cnt, int64_t C, int64_t total, int64_t n) {
    double frac[256];
    int64_t given = 0;
    for (int64_t c = 0; c < C; c++) {
        const double exact = total > 0 ? (double)n * (double)cnt[c] / (double)total : 0.0;
        out[c] = (int64_t)floor(exact);
        frac[c] = exact - (double)out[c];
        given += out[c];
    }
    for (; given < n; given++) {
        int64_t best = -1;
        for (int64_t c = 0; c < C; c++) {
            if (out[c] < cnt[c] && (best < 0 || frac[c] > frac[best])) best = c;
        }
        out[best]++;
        frac[best] = -1.0;
    }
}

tess_status fk_dataset_prepare(fk_dataset *ds, int64_t client, uint64_t split_seed) {
    tess_graphs *gs = &ds->gs;
    const int64_t G = gs->num_graphs, C = gs->num_classes;
    TESS_REQUIRE(C >= 1 && C <= 256, TESS_ERR_DATA, "'%s': %lld classes (1..256 supported)",
                 gs->name, (long long)C);
    ds->se = malloc((size_t)(gs->num_nodes > 0 ? gs->num_nodes : 1) * FK_SE_DIM * sizeof(float));
    ds->split = malloc((size_t)(G > 0 ? G : 1) * sizeof(int64_t));
    int64_t *byclass = malloc((size_t)(G > 0 ? G : 1) * sizeof(int64_t));
    if (!ds->se || !ds->split || !byclass) {
        free(byclass);
        TESS_REQUIRE(0, TESS_ERR_MEM, "'%s': encodings of %lld nodes", gs->name,
                     (long long)gs->num_nodes);
    }
    /* encodings: graph-local CSR (indptr rebased to the graph's first row) */
    for (int64_t g = 0; g < G; g++) {
        const int64_t first = gs->node_ptr[g], n = gs->node_ptr[g + 1] - first;
        int64_t *ip = malloc((size_t)(n + 1) * sizeof(int64_t));
        TESS_REQUIRE(ip, TESS_ERR_MEM, "'%s': graph %lld", gs->name, (long long)g);
        for (int64_t i = 0; i <= n; i++) ip[i] = gs->indptr[first + i] - gs->indptr[first];
        tess_status s = tess_graph_structure_enc(ds->se + first * FK_SE_DIM,
                                                 ip, gs->indices + gs->indptr[first], n, FK_SE_K);
        free(ip);
        if (s != TESS_OK) free(byclass);
        TESS_CHECK(s);
    }
    /* stratified split: ids grouped by class, each group shuffled (Fisher-Yates on Philox) */
    int64_t cnt[256] = {0}, start[257] = {0}, fill[256];
    for (int64_t g = 0; g < G; g++) cnt[gs->y[g]]++;
    for (int64_t c = 0; c < C; c++) start[c + 1] = start[c] + cnt[c];
    memcpy(fill, start, sizeof fill);
    for (int64_t g = 0; g < G; g++) byclass[fill[gs->y[g]]++] = g;
    const tess_rng_key key = {(uint32_t)split_seed, (uint32_t)client};
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 0);
    for (int64_t c = 0; c < C; c++) {
        int64_t *v = byclass + start[c];
        for (int64_t i = cnt[c] - 1; i > 0; i--) {
            int64_t j = (int64_t)tess_rng_uniform(key, ctr, (uint64_t)(start[c] + i), 0,
                                                  (double)(i + 1));
            if (j > i) j = i;
            int64_t t = v[i];
            v[i] = v[j];
            v[j] = t;
        }
    }
    tess_status s = fk_split_sizes(gs->name, G, &ds->n_train, &ds->n_val, &ds->n_test);
    if (s != TESS_OK) free(byclass);
    TESS_CHECK(s);
    const int64_t held = ds->n_val + ds->n_test;
    int64_t hold_c[256], test_c[256];
    allot(hold_c, cnt, C, G, held);
    allot(test_c, hold_c, C, held, ds->n_test);
    int64_t tr = 0, va = ds->n_train, te = ds->n_train + ds->n_val;
    for (int64_t c = 0; c < C; c++) {
        const int64_t *v = byclass + start[c], ntrain = cnt[c] - hold_c[c];
        for (int64_t i = 0; i < cnt[c]; i++) {
            if (i < ntrain) ds->split[tr++] = v[i];
            else if (i < ntrain + hold_c[c] - test_c[c]) ds->split[va++] = v[i];
            else ds->split[te++] = v[i];
        }
    }
    free(byclass);
    return TESS_OK;
}
