/* test_data.c - fedkalter's dataset rules (apps/fedkalter/data.h):
 *   generated clients: split sizes 80/10/10 (ceil rules), stratified, disjoint and complete;
 *   with the TU files (argv[1], the directory holding them; exit 77 = skipped when absent): the
 *   SM clients' graph counts, one-hot widths (MUTAG 7, BZR 53, COX2 35, DHFR 53, PTC_MR 18,
 *   AIDS 38, NCI1 37), split sizes of the method's table, isolated nodes (AIDS 210, NCI1 428)
 *   whose RWSE rows are 0 and whose DSE is the degree-1 code, labels remapped to 0..C-1.
 *   GCFL's oneDS split: the chunk sizes (min(50, G/N) consecutive graphs per client, the rest
 *   spread, every graph once), the same for the same seed and different for another, the
 *   errors for a client count the data cannot fill; a client's subset of a generated dataset
 *   holds exactly its graphs (labels, nodes, features, edges) and splits 80/10/10. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"
#include "tess_test.h"

/* Split checks: sizes, every graph exactly once, each part's class share within one graph of
 * the whole set's share. */
static void check_split(const fk_dataset *ds, int64_t want_tr, int64_t want_va, int64_t want_te) {
    const tess_graphs *gs = &ds->gs;
    const int64_t G = gs->num_graphs;
    TESS_TEST_CHECK(ds->n_train == want_tr && ds->n_val == want_va && ds->n_test == want_te,
                    "%s: split %lld/%lld/%lld, want %lld/%lld/%lld", gs->name,
                    (long long)ds->n_train, (long long)ds->n_val, (long long)ds->n_test,
                    (long long)want_tr, (long long)want_va, (long long)want_te);
    char *seen = calloc((size_t)G, 1);
    int bad = 0;
    for (int64_t i = 0; i < G; i++) bad += seen[ds->split[i]]++ != 0;
    TESS_TEST_CHECK(bad == 0, "%s: %d graphs twice in the split", gs->name, bad);
    free(seen);
    const int64_t start[3] = {0, ds->n_train, ds->n_train + ds->n_val};
    const int64_t count[3] = {ds->n_train, ds->n_val, ds->n_test};
    for (int64_t c = 0; c < gs->num_classes; c++) {
        int64_t all = 0;
        for (int64_t g = 0; g < G; g++) all += gs->y[g] == c;
        for (int part = 0; part < 3; part++) {
            int64_t in = 0;
            for (int64_t i = 0; i < count[part]; i++) in += gs->y[ds->split[start[part] + i]] == c;
            const double want = (double)all * (double)count[part] / (double)G;
            TESS_TEST_CHECK(in >= want - 1.0 && in <= want + 1.0,
                            "%s class %lld part %d: %lld graphs, stratified share %.2f", gs->name,
                            (long long)c, part, (long long)in, want);
        }
    }
}

static void test_synthetic(void) {
    for (int64_t k = 0; k < 3; k++) {
        fk_dataset ds;
        TESS_TEST_CHECK(fk_dataset_synthetic(&ds, k, 57, 9) == TESS_OK, "generate");
        TESS_TEST_CHECK(fk_dataset_prepare(&ds, k, 123) == TESS_OK, "prepare");
        check_split(&ds, 45, 6, 6); /* held out ceil(11.4) = 12 */
        TESS_TEST_CHECK(ds.gs.num_features == 3 + k % 4, "width");
        fk_dataset_free(&ds);
    }
}

/* The settings' clients (DD and COLLAB absent: the BIO settings that list them are partial). */
static void test_settings(void) {
    static const struct {
        const char *name;
        int n;
        const char *first, *last, *missing;
    } want[] = {{"SM", 7, "MUTAG", "NCI1", NULL},
                {"SM-CV", 10, "MUTAG", "Letter-high", NULL},
                {"BIO-SM", 9, "MUTAG", "PROTEINS", "DD"},
                {"BIO-SM-SN", 11, "MUTAG", "IMDB-MULTI", "DD, COLLAB"},
                {"BIO-SN-CV", 7, "ENZYMES", "Letter-high", "DD, COLLAB"},
                {"SM-SN-CV", 12, "MUTAG", "Letter-high", NULL},
                {"BIO-XX", 0, NULL, NULL, NULL}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *names[FK_MAX_CLIENTS];
        const int n = fk_setting_datasets(want[i].name, names);
        const char *miss = fk_setting_missing(want[i].name);
        TESS_TEST_CHECK(n == want[i].n, "%s: %d clients, want %d", want[i].name, n, want[i].n);
        if (n > 0 && n == want[i].n)
            TESS_TEST_CHECK(strcmp(names[0], want[i].first) == 0 &&
                                strcmp(names[n - 1], want[i].last) == 0,
                            "%s: %s .. %s", want[i].name, names[0], names[n - 1]);
        TESS_TEST_CHECK(want[i].missing ? miss && strcmp(miss, want[i].missing) == 0 : !miss,
                        "%s: missing '%s'", want[i].name, miss ? miss : "(none)");
    }
}

static void test_tu(const char *dir) {
    static const struct {
        const char *name;
        int64_t graphs, width, tr, va, te, isolated, classes;
    } want[] = {{"MUTAG", 188, 7, 150, 19, 19, 0, 2},     {"BZR", 405, 53, 324, 40, 41, -1, 2},
                {"COX2", 467, 35, 373, 47, 47, -1, 2},    {"DHFR", 756, 53, 604, 76, 76, -1, 2},
                {"PTC_MR", 344, 18, 275, 34, 35, -1, 2},  {"AIDS", 2000, 38, 1600, 200, 200, 210, 2},
                {"NCI1", 4110, 37, 3288, 411, 411, 428, 2},
                {"ENZYMES", 600, 3, 480, 60, 60, 106, 6}, {"PROTEINS", 1113, 3, 890, 111, 112, 5, 2},
                {"IMDB-BINARY", 1000, 136, 800, 100, 100, -1, 2}, /* one-hot degree, max 135 */
                {"IMDB-MULTI", 1500, 89, 1200, 150, 150, -1, 3},  /* max degree 88 */
                {"Letter-low", 2250, 2, 1800, 225, 225, 62, 15},
                {"Letter-med", 2250, 2, 1800, 225, 225, 58, 15},
                {"Letter-high", 2250, 2, 1800, 225, 225, 25, 15}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        fk_dataset ds;
        TESS_TEST_CHECK(fk_dataset_tu(&ds, dir, want[i].name) == TESS_OK, "%s: %s", want[i].name,
                        tess_error_text());
        TESS_TEST_CHECK(fk_dataset_prepare(&ds, (int64_t)i, 123) == TESS_OK, "%s", want[i].name);
        const tess_graphs *gs = &ds.gs;
        int64_t counted = -1;
        TESS_TEST_CHECK(fk_dataset_tu_count(dir, want[i].name, &counted) == TESS_OK &&
                            counted == want[i].graphs,
                        "%s: %lld graph-label lines", want[i].name, (long long)counted);
        TESS_TEST_CHECK(gs->num_graphs == want[i].graphs && gs->num_features == want[i].width &&
                            gs->num_classes == want[i].classes,
                        "%s: %lld graphs, width %lld, %lld classes", want[i].name,
                        (long long)gs->num_graphs, (long long)gs->num_features,
                        (long long)gs->num_classes);
        check_split(&ds, want[i].tr, want[i].va, want[i].te);
        int64_t iso = 0, bad_enc = 0;
        for (int64_t n = 0; n < gs->num_nodes; n++) {
            if (gs->indptr[n + 1] != gs->indptr[n]) continue;
            iso++;
            for (int k = 0; k < FK_SE_DIM; k++)
                bad_enc += ds.se[n * FK_SE_DIM + k] != (k == FK_SE_K ? 1.0f : 0.0f);
        }
        if (want[i].isolated >= 0)
            TESS_TEST_CHECK(iso == want[i].isolated, "%s: %lld isolated nodes, want %lld",
                            want[i].name, (long long)iso, (long long)want[i].isolated);
        TESS_TEST_CHECK(bad_enc == 0, "%s: %lld bad encoding values of isolated nodes",
                        want[i].name, (long long)bad_enc);
        fk_dataset_free(&ds);
    }
}

static void test_oneds(void) {
    enum { G = 4110, N = 30 };
    int32_t *cl = malloc(G * sizeof(int32_t)), *cl2 = malloc(G * sizeof(int32_t));
    int64_t size[N], size2[N], total = 0;
    TESS_TEST_CHECK(fk_oneds_assign("NCI1", G, N, 123, cl, size) == TESS_OK, "oneDS 4110 / 30");
    int bad = 0, spread = 0;
    for (int64_t g = 0; g < G; g++) {
        bad += cl[g] < 0 || cl[g] >= N || (g < N * 50 && cl[g] != g / 50);
        spread += g >= N * 50;
    }
    for (int k = 0; k < N; k++) total += size[k];
    TESS_TEST_CHECK(bad == 0 && total == G, "chunks of 50 in file order: %d bad, %lld graphs",
                    bad, (long long)total);
    int64_t smin = G, smax = 0;
    for (int k = 0; k < N; k++) smin = size[k] < smin ? size[k] : smin, smax = size[k] > smax ? size[k] : smax;
    /* 2610 spread graphs: 87 per client on average */
    TESS_TEST_CHECK(spread == G - N * 50 && smin >= 50 + 40 && smax <= 50 + 140,
                    "spread graphs: sizes %lld..%lld", (long long)smin, (long long)smax);
    TESS_TEST_CHECK(fk_oneds_assign("NCI1", G, N, 123, cl2, size2) == TESS_OK &&
                    memcmp(cl, cl2, G * sizeof(int32_t)) == 0, "the same seed, the same split");
    TESS_TEST_CHECK(fk_oneds_assign("NCI1", G, N, 124, cl2, size2) == TESS_OK &&
                    memcmp(cl, cl2, G * sizeof(int32_t)) != 0, "another seed, another split");
    /* 100 graphs, 7 clients: 14 consecutive each, 2 spread */
    TESS_TEST_CHECK(fk_oneds_assign("MUTAG", 100, 7, 1, cl, size) == TESS_OK && cl[13] == 0 &&
                    cl[14] == 1 && cl[97] == 6 && size[0] + size[6] >= 28, "100 / 7");
    /* 100 graphs over 30 clients: 3 each, a split of 3 graphs has no validation graph */
    TESS_TEST_CHECK(fk_oneds_assign("MUTAG", 100, 30, 1, cl, size) == TESS_ERR_DATA,
                    "100 graphs, 30 clients: TESS_ERR_DATA");
    TESS_TEST_CHECK(strstr(tess_error_text(), "oneDS client") &&
                    strstr(tess_error_text(), "MUTAG") && strstr(tess_error_text(), "empty split"),
                    "message: %s", tess_error_text());
    tess_error_clear();
    TESS_TEST_CHECK(fk_oneds_assign("MUTAG", 20, 30, 1, cl, size) == TESS_ERR_DATA &&
                    strstr(tess_error_text(), "20 graphs cannot fill 30 oneDS clients"),
                    "fewer graphs than clients: %s", tess_error_text());
    tess_error_clear();
    /* a generated dataset of 97 graphs over 4 clients; client 2's subset */
    fk_dataset src, sub;
    TESS_TEST_CHECK(fk_dataset_synthetic(&src, 1, 97, 5) == TESS_OK, "generate 97");
    const tess_graphs *a = &src.gs;
    TESS_TEST_CHECK(fk_oneds_assign("synthetic-1", 97, 4, 5, cl, size) == TESS_OK, "97 / 4");
    TESS_TEST_CHECK(fk_dataset_subset(&sub, a, cl, 2, "2-synthetic") == TESS_OK, "subset");
    const tess_graphs *b = &sub.gs;
    TESS_TEST_CHECK(b->num_graphs == size[2] && strcmp(b->name, "2-synthetic") == 0 &&
                    b->num_features == a->num_features, "subset of %lld graphs", (long long)size[2]);
    bad = 0;
    for (int64_t g = 0, j = 0; g < 97 && j < b->num_graphs; g++) {
        if (cl[g] != 2) continue;
        const int64_t n0 = a->node_ptr[g], n = a->node_ptr[g + 1] - n0, m0 = b->node_ptr[j];
        const int64_t e0 = a->edge_ptr[g], ne = a->edge_ptr[g + 1] - e0, f0 = b->edge_ptr[j];
        bad += b->y[j] != a->y[g] || b->graph_ids[j] != a->graph_ids[g] ||
               b->node_ptr[j + 1] - m0 != n || b->edge_ptr[j + 1] - f0 != ne;
        bad += memcmp(b->x + m0 * a->num_features, a->x + n0 * a->num_features,
                      (size_t)(n * a->num_features) * sizeof(float)) != 0;
        bad += memcmp(b->indices + f0, a->indices + e0, (size_t)ne * sizeof(int32_t)) != 0;
        for (int64_t i = 0; i <= n; i++) bad += b->indptr[m0 + i] - f0 != a->indptr[n0 + i] - e0;
        j++;
    }
    TESS_TEST_CHECK(bad == 0, "subset: %d graphs differ from the source's", bad);
    const int64_t held = (size[2] * 2 + 9) / 10;
    TESS_TEST_CHECK(fk_dataset_prepare(&sub, 2, 123) == TESS_OK, "prepare the subset");
    check_split(&sub, size[2] - held, held / 2, held - held / 2);
    fk_dataset_free(&sub);
    fk_dataset_free(&src);
    free(cl);
    free(cl2);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_synthetic();
    test_oneds();
    test_settings();
    struct stat sb;
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/MUTAG/MUTAG_A.txt", argc > 1 ? argv[1] : "");
    const bool have = argc > 1 && stat(probe, &sb) == 0;
    if (have) test_tu(argv[1]);
    int rc = tess_test_finish("fedkalter_data");
    MPI_Finalize();
    return rc != 0 ? rc : have ? 0 : 77;
}
