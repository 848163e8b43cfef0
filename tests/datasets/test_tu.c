/* test_tu - the TU converter on tests/data/tu_tiny (its README.txt lists the pitfalls it holds):
 * exact CSR, labels, features for every feature mode, the repair counts; then a write and a
 * collective read back.
 *   test_tu <nprocs> <tu_tiny dir>              library conversion (every rank) + round trip
 *   test_tu <nprocs> <tu_tiny dir> <file.h5>    a file made by tess-convert tu (collective read)
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ds_test.h"        /* ds_test_init, DS_TEST_* */
#include "graphs_compare.h" /* graphs_compare */
#include "io/graphs.h"      /* tess_graphs_*, tess_tu_* */

/* The expected conversion, worked out by hand from the text files. */
static int64_t node_ptr[] = {0, 3, 7, 8}, edge_ptr[] = {0, 4, 10, 10},
               indptr[] = {0, 1, 3, 4, 6, 8, 10, 10, 10}, label_values[] = {-1, 1};
static int32_t indices[] = {1, 0, 2, 1, 1, 2, 0, 2, 0, 1}, y[] = {1, 0, 1};
static const int label_col[8] = {0, 3, 0, 1, 1, 3, 0, 1}; /* node label - 1 */
static const int degree[8] = {1, 2, 1, 2, 2, 2, 0, 0};
static const float attrs[8][2] = {{0.5f, -1}, {1.5f, 2}, {2.5f, 0}, {-3, 4.25f},
                                  {4, 5},     {5, 6},    {6, 7},    {7.75f, 8}};

/* x of a feature mode: one-hot label (4), attributes (2), both (6) or one-hot degree (3). */
static int64_t expected_x(tess_tu_features mode, float *x) {
    int64_t F = mode == TESS_TU_FEATURES_ATTRIBUTES ? 2
                : mode == TESS_TU_FEATURES_BOTH     ? 6
                : mode == TESS_TU_FEATURES_DEGREE   ? 3
                                                    : 4;
    memset(x, 0, 8 * 6 * sizeof *x);
    for (int i = 0; i < 8; i++) {
        float *row = x + i * F;
        if (mode == TESS_TU_FEATURES_DEGREE) {
            row[degree[i]] = 1.0f;
            continue;
        }
        bool onehot = mode != TESS_TU_FEATURES_ATTRIBUTES;
        if (onehot) row[label_col[i]] = 1.0f;
        if (mode == TESS_TU_FEATURES_ATTRIBUTES || mode == TESS_TU_FEATURES_BOTH)
            memcpy(row + (onehot ? 4 : 0), attrs[i], sizeof attrs[i]);
    }
    return F;
}

static tess_graphs expected(tess_tu_features mode, float *x) {
    static int64_t ids[3] = {0, 1, 2};
    static const char *const kinds[] = {
        "node_labels_onehot[1..4]", "node_labels_onehot[1..4]", "node_attributes[2]",
        "node_labels_onehot[1..4]+node_attributes[2]", "degree_onehot[0..2]"};
    tess_graphs g = {.total_graphs = 3,
                     .total_nodes = 8,
                     .total_nnz = 10,
                     .num_classes = 2,
                     .num_graphs = 3,
                     .num_nodes = 8,
                     .nnz = 10,
                     .graph_ids = ids,
                     .node_ptr = node_ptr,
                     .edge_ptr = edge_ptr,
                     .indptr = indptr,
                     .indices = indices,
                     .x = x,
                     .y = y,
                     .label_values = label_values};
    g.num_features = expected_x(mode, x);
    snprintf(g.name, sizeof g.name, "TINY");
    snprintf(g.feature_kind, sizeof g.feature_kind, "%s", kinds[mode]);
    return g;
}

static void check_conversion(const char *source, tess_tu_features mode) {
    tess_graphs gs;
    tess_tu_report rep;
    float x[8 * 6];
    DS_TEST_OK(tess_graphs_from_tu(&gs, source, mode, &rep));
    tess_graphs want = expected(mode, x);
    TESS_TEST_CHECK(gs.num_graphs == 3 && gs.num_nodes == 8 && gs.nnz == 10,
                    "mode %d: %lld/%lld/%lld", (int)mode, (long long)gs.num_graphs,
                    (long long)gs.num_nodes, (long long)gs.nnz);
    if (gs.num_graphs == 3 && gs.num_nodes == 8 && gs.nnz == 10) {
        TESS_TEST_CHECK(memcmp(gs.node_ptr, node_ptr, sizeof node_ptr) == 0, "node_ptr");
        TESS_TEST_CHECK(memcmp(gs.edge_ptr, edge_ptr, sizeof edge_ptr) == 0, "edge_ptr");
        TESS_TEST_CHECK(memcmp(gs.indptr, indptr, sizeof indptr) == 0, "indptr");
        TESS_TEST_CHECK(memcmp(gs.indices, indices, sizeof indices) == 0, "indices");
        TESS_TEST_CHECK(memcmp(gs.y, y, sizeof y) == 0, "y");
        graphs_compare(&gs, &want);
    }
    TESS_TEST_CHECK(rep.edge_lines == 12 && rep.duplicates == 2 && rep.reverse_added == 1 &&
                        rep.self_loops == 1 && rep.edges == 5 && rep.isolated_nodes == 2 &&
                        rep.max_degree == 2 && rep.node_label_min == 1 && rep.node_label_max == 4 &&
                        rep.num_attributes == 2,
                    "report: lines %lld dup %lld rev %lld self %lld edges %lld isolated %lld "
                    "maxdeg %lld labels %lld..%lld attrs %lld",
                    (long long)rep.edge_lines, (long long)rep.duplicates,
                    (long long)rep.reverse_added, (long long)rep.self_loops, (long long)rep.edges,
                    (long long)rep.isolated_nodes, (long long)rep.max_degree,
                    (long long)rep.node_label_min, (long long)rep.node_label_max,
                    (long long)rep.num_attributes);
    tess_graphs_free(&gs);
}

int main(int argc, char **argv) {
    int rank, size;
    ds_test_init(&argc, &argv, &rank, &size);
    const char *dir = argc > 2 ? argv[2] : ".";
    float x[8 * 6];
    tess_graphs want = expected(TESS_TU_FEATURES_AUTO, x);
    const char *file = argc > 3 ? argv[3] : "tiny.h5";
    if (argc <= 3) {
        for (int mode = TESS_TU_FEATURES_AUTO; mode <= TESS_TU_FEATURES_DEGREE; mode++)
            check_conversion(dir, (tess_tu_features)mode);
        char prefix[1100];
        snprintf(prefix, sizeof prefix, "%s/TINY", dir);
        check_conversion(prefix, TESS_TU_FEATURES_AUTO);
        tess_graphs gs;
        DS_TEST_FAILS(tess_graphs_from_tu(&gs, "no/such/dataset", TESS_TU_FEATURES_AUTO, NULL),
                      TESS_ERR_NOINPUT, "no TU dataset at 'no/such/dataset'");
        if (rank == 0) {
            DS_TEST_OK(tess_graphs_from_tu(&gs, dir, TESS_TU_FEATURES_AUTO, NULL));
            DS_TEST_OK(tess_graphs_write(file, &gs));
            tess_graphs_free(&gs);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    /* The file, read collectively: each rank its block, equal to the hand-made expectation. */
    tess_graphs part;
    DS_TEST_OK(tess_graphs_read(&part, ds_world, file));
    graphs_compare(&part, &want);
    int64_t n = part.num_graphs;
    MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    TESS_TEST_CHECK(n == 3, "%lld graphs over all ranks", (long long)n);
    tess_graphs_free(&part);

    int rc = tess_test_finish_mpi("test_tu", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
