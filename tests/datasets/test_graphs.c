/* test_graphs - graph collections: rank 0 writes a random collection (Philox, so every rank can
 * rebuild it in memory), then every rank reads its block and then an id list, collectively.
 * Each rank must hold exactly its share (tess_par_block_range, or its ids), the shares must add
 * up to the whole, and every graph must equal the in-memory one: so the data do not depend on
 * the number of ranks. Run at 1, 2, 3 and 4 ranks. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"       /* tess_rng_* */
#include "par/layout.h"    /* tess_par_block_range */
#include "ds_test.h"        /* ds_test_init, DS_TEST_* */
#include "graphs_compare.h" /* graphs_compare */
#include "io/graphs.h"      /* tess_graphs_* */

enum { G = 23, F = 3, C = 4 };
static const tess_rng_key KEY = {2024, 7};

/* A deterministic collection: graph g has g % 7 nodes (graph 0 and 7 are empty), random
 * symmetric edges without self loops (some nodes isolated), random features, labels 10*(c+1). */
static void make_collection(tess_graphs *gs) {
    *gs = (tess_graphs){.num_features = F, .num_classes = C};
    snprintf(gs->name, sizeof gs->name, "random");
    snprintf(gs->feature_kind, sizeof gs->feature_kind, "uniform");
    gs->node_ptr = calloc(G + 1, sizeof(int64_t));
    gs->edge_ptr = calloc(G + 1, sizeof(int64_t));
    gs->graph_ids = calloc(G, sizeof(int64_t));
    gs->y = calloc(G, sizeof(int32_t));
    gs->label_values = calloc(C, sizeof(int64_t));
    for (int c = 0; c < C; c++) gs->label_values[c] = 10 * (c + 1);
    for (int g = 0; g < G; g++) gs->node_ptr[g + 1] = gs->node_ptr[g] + g % 7;
    int64_t N = gs->node_ptr[G];
    gs->indptr = calloc((size_t)N + 1, sizeof(int64_t));
    gs->indices = calloc((size_t)(N * 7), sizeof(int32_t));
    gs->x = calloc((size_t)(N * F), sizeof(float));
    uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 1);
    int64_t e = 0;
    for (int g = 0; g < G; g++) {
        int64_t n0 = gs->node_ptr[g], n = gs->node_ptr[g + 1] - n0;
        gs->graph_ids[g] = g;
        gs->y[g] = (int32_t)(tess_rng_u64(KEY, ctr, (uint64_t)(1000000 + g)) % C);
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < n; j++) {
                int64_t a = i < j ? i : j, b = i < j ? j : i;
                uint64_t r = tess_rng_u64(KEY, ctr, (uint64_t)((n0 + a) * 64 + b));
                if (i != j && r % 3 == 0) gs->indices[e++] = (int32_t)j;
            }
            gs->indptr[n0 + i + 1] = e;
        }
        gs->edge_ptr[g + 1] = e;
    }
    tess_rng_fill_uniform(KEY, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, 2), 0, N * F, gs->x, -1.0f,
                          1.0f);
    gs->num_graphs = gs->total_graphs = G;
    gs->num_nodes = gs->total_nodes = N;
    gs->nnz = gs->total_nnz = e;
}

int main(int argc, char **argv) {
    int rank, size;
    ds_test_init(&argc, &argv, &rank, &size);
    const char *path = "graphs.h5";
    tess_graphs whole;
    make_collection(&whole);
    DS_TEST_OK(tess_graphs_check(&whole, "generated"));
    if (rank == 0) DS_TEST_OK(tess_graphs_write(path, &whole));
    MPI_Barrier(MPI_COMM_WORLD);

    /* 1. The rank's block. */
    tess_graphs part;
    DS_TEST_OK(tess_graphs_read(&part, ds_world, path));
    int64_t lo, hi;
    tess_par_block_range(G, size, rank, &lo, &hi);
    TESS_TEST_CHECK(part.num_graphs == hi - lo, "rank %d holds %lld graphs, expected %lld", rank,
                    (long long)part.num_graphs, (long long)(hi - lo));
    for (int64_t g = 0; g < part.num_graphs; g++)
        TESS_TEST_CHECK(part.graph_ids[g] == lo + g, "graph id %lld", (long long)part.graph_ids[g]);
    graphs_compare(&part, &whole);
    int64_t sums[3] = {part.num_graphs, part.num_nodes, part.nnz};
    MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    TESS_TEST_CHECK(sums[0] == G && sums[1] == whole.num_nodes && sums[2] == whole.nnz,
                    "shares add up to %lld graphs, %lld nodes, %lld entries", (long long)sums[0],
                    (long long)sums[1], (long long)sums[2]);
    tess_graphs_free(&part);

    /* 2. Round-robin id lists (non-contiguous runs); odd ranks of a 4-rank run ask for nothing
     *    in the second pass, so empty selections take part in the collectives. */
    for (int pass = 0; pass < 2; pass++) {
        int64_t ids[G], n = 0;
        for (int64_t g = 0; g < G; g++) {
            int owner = pass == 0 ? (int)(g % size) : (int)((g % 2) * (size / 2));
            if (owner == rank) ids[n++] = g;
        }
        DS_TEST_OK(tess_graphs_read_ids(&part, ds_world, path, ids, n));
        TESS_TEST_CHECK(part.num_graphs == n, "pass %d: %lld graphs, expected %lld", pass,
                        (long long)part.num_graphs, (long long)n);
        for (int64_t g = 0; g < part.num_graphs && g < n; g++)
            TESS_TEST_CHECK(part.graph_ids[g] == ids[g], "pass %d: id %lld", pass,
                            (long long)part.graph_ids[g]);
        graphs_compare(&part, &whole);
        int64_t total = part.num_graphs;
        MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        TESS_TEST_CHECK(total == G, "pass %d: %lld graphs over all ranks", pass, (long long)total);
        tess_graphs_free(&part);
    }

    /* 3. A bad id list on one rank: every rank gets the error, nobody hangs. */
    int64_t bad[2] = {3, 3};
    DS_TEST_FAILS(tess_graphs_read_ids(&part, ds_world, path, bad, rank == size - 1 ? 2 : 0),
                  TESS_ERR_ARG, "strictly increasing");
    TESS_TEST_CHECK(part.graph_ids == NULL && part.num_graphs == 0, "failed read left data");

    tess_graphs_free(&whole);
    int rc = tess_test_finish_mpi("test_graphs", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
