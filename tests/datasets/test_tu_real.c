/* test_tu_real - the TU converter on every dataset of the shared data present
 * (<root>/<NAME>/), checked against the statistics the TU collection publishes and
 * docs/methods/fedkalter.md (graphs, classes, label values, feature width, mean nodes and
 * undirected edges per graph, max degree, isolated nodes); each is then written by rank 0 and
 * read back collectively, each rank its block. Exits 77 (skip) when no dataset is present.
 *   test_tu_real <nprocs> <tu root>
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>

#include "ds_test.h"        /* ds_test_init, DS_TEST_* */
#include "graphs_compare.h" /* graphs_compare */
#include "io/graphs.h"      /* tess_graphs_*, tess_tu_* */

typedef struct {
    const char *name;
    int64_t graphs, classes, label_first, label_last, features;
    double mean_nodes, mean_edges;
    int64_t max_degree, isolated;
} tu_row;

static const tu_row ROWS[] = {
    {"MUTAG", 188, 2, -1, 1, 7, 17.93, 19.79, 4, 0},
    {"PTC_MR", 344, 2, -1, 1, 18, 14.29, 14.69, 4, 0},
    {"BZR", 405, 2, -1, 1, 53, 35.75, 38.36, 4, 0},
    {"COX2", 467, 2, -1, 1, 35, 41.22, 43.45, 4, 0},
    {"DHFR", 756, 2, -1, 1, 53, 42.43, 44.54, 4, 0},
    {"AIDS", 2000, 2, 0, 1, 38, 15.69, 16.20, 6, 210},
    {"NCI1", 4110, 2, 0, 1, 37, 29.87, 32.30, 4, 428},
    {"ENZYMES", 600, 6, 1, 6, 3, 32.63, 62.14, 9, 106},
    {"PROTEINS", 1113, 2, 1, 2, 3, 39.06, 72.82, 25, 5},
    {"IMDB-BINARY", 1000, 2, 0, 1, 136, 19.77, 96.53, 135, 0},
    {"IMDB-MULTI", 1500, 3, 1, 3, 89, 13.00, 65.94, 88, 0},
    {"Letter-low", 2250, 15, 0, 14, 2, 4.68, 3.13, 4, 62},
    {"Letter-med", 2250, 15, 0, 14, 2, 4.67, 3.21, 4, 58},
    {"Letter-high", 2250, 15, 0, 14, 2, 4.67, 4.50, 5, 25},
};

static void check_row(const tu_row *r, const char *dir, int rank) {
    tess_graphs gs;
    tess_tu_report rep;
    DS_TEST_OK(tess_graphs_from_tu(&gs, dir, TESS_TU_FEATURES_AUTO, &rep));
    if (gs.num_graphs == 0) return;
    double mn = (double)gs.num_nodes / (double)gs.num_graphs;
    double me = (double)rep.edges / (double)gs.num_graphs;
    TESS_TEST_CHECK(gs.num_graphs == r->graphs && gs.num_classes == r->classes &&
                        gs.label_values[0] == r->label_first &&
                        gs.label_values[gs.num_classes - 1] == r->label_last &&
                        gs.num_features == r->features && fabs(mn - r->mean_nodes) < 0.006 &&
                        fabs(me - r->mean_edges) < 0.006 && rep.max_degree == r->max_degree &&
                        rep.isolated_nodes == r->isolated && gs.nnz == 2 * rep.edges,
                    "%s: G %lld C %lld labels %lld..%lld F %lld nodes/G %.3f edges/G %.3f maxdeg "
                    "%lld isolated %lld",
                    r->name, (long long)gs.num_graphs, (long long)gs.num_classes,
                    (long long)gs.label_values[0], (long long)gs.label_values[gs.num_classes - 1],
                    (long long)gs.num_features, mn, me, (long long)rep.max_degree,
                    (long long)rep.isolated_nodes);
    char file[128];
    snprintf(file, sizeof file, "%s.h5", r->name);
    if (rank == 0) DS_TEST_OK(tess_graphs_write(file, &gs));
    MPI_Barrier(MPI_COMM_WORLD);
    tess_graphs part;
    DS_TEST_OK(tess_graphs_read(&part, ds_world, file));
    graphs_compare(&part, &gs);
    tess_graphs_free(&part);
    tess_graphs_free(&gs);
}

int main(int argc, char **argv) {
    int rank, size;
    ds_test_init(&argc, &argv, &rank, &size);
    const char *root = argc > 2 ? argv[2] : ""; /* none given: no dataset present, skipped */
    int present = 0;
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++) {
        char dir[1100];
        struct stat st;
        snprintf(dir, sizeof dir, "%s/%s", root, ROWS[i].name);
        if (stat(dir, &st) != 0) continue; /* the same answer on every rank: a shared folder */
        present++;
        check_row(&ROWS[i], dir, rank);
    }
    if (present == 0) {
        if (rank == 0) printf("test_tu_real: no TU dataset under '%s': skipped\n", root);
        MPI_Finalize();
        return 77;
    }
    if (rank == 0) printf("test_tu_real: %d datasets checked\n", present);
    int rc = tess_test_finish_mpi("test_tu_real", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
