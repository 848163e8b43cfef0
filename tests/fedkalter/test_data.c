/* test_data.c - fedkalter's dataset rules (apps/fedkalter/data.h):
 *   generated clients: split sizes 80/10/10 (ceil rules), stratified, disjoint and complete;
 *   with the TU files (argv[1], the directory holding them; exit 77 = skipped when absent): the
 *   SM clients' graph counts, one-hot widths (MUTAG 7, BZR 53, COX2 35, DHFR 53, PTC_MR 18,
 *   AIDS 38, NCI1 37), split sizes of the method's table, isolated nodes (AIDS 210, NCI1 428)
 *   whose RWSE rows are 0 and whose DSE is the degree-1 code, labels remapped to 0..C-1. */
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

static void test_tu(const char *dir) {
    static const struct {
        const char *name;
        int64_t graphs, width, tr, va, te, isolated;
    } want[] = {{"MUTAG", 188, 7, 150, 19, 19, 0},      {"BZR", 405, 53, 324, 40, 41, -1},
                {"COX2", 467, 35, 373, 47, 47, -1},     {"DHFR", 756, 53, 604, 76, 76, -1},
                {"PTC_MR", 344, 18, 275, 34, 35, -1},   {"AIDS", 2000, 38, 1600, 200, 200, 210},
                {"NCI1", 4110, 37, 3288, 411, 411, 428}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        fk_dataset ds;
        TESS_TEST_CHECK(fk_dataset_tu(&ds, dir, want[i].name) == TESS_OK, "%s: %s", want[i].name,
                        tess_error_text());
        TESS_TEST_CHECK(fk_dataset_prepare(&ds, (int64_t)i, 123) == TESS_OK, "%s", want[i].name);
        const tess_graphs *gs = &ds.gs;
        TESS_TEST_CHECK(gs->num_graphs == want[i].graphs && gs->num_features == want[i].width &&
                            gs->num_classes == 2,
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

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_synthetic();
    struct stat sb;
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/MUTAG/MUTAG_A.txt", argc > 1 ? argv[1] : "");
    const bool have = argc > 1 && stat(probe, &sb) == 0;
    if (have) test_tu(argv[1]);
    int rc = tess_test_finish("fedkalter_data");
    MPI_Finalize();
    return rc != 0 ? rc : have ? 0 : 77;
}
