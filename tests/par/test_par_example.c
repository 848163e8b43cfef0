/* test_par_example.c - the example of docs/par.md, compiled and checked. The function
 * moe_exchange below is the documentation's code block, byte for byte (ctest par_doc_example
 * fails if they differ). */
#include "par/coll.h"   /* tess_par_allreduce_f64, tess_par_alltoallv */
#include "par/gather.h" /* tess_par_gather_global */
#include "par/mesh.h"   /* tess_mesh_* */
#include "par_test.h"

/* Average `loss` over the data-parallel ranks, send token rows to the expert-parallel ranks and
 * collect an expert-sharded weight on rank 0 of "ep". Collective on world (size divisible by ep).
 * tokens (sum send_rows, D): the rows for ep rank j come j-th, send_rows[j] of them;
 * recv (recv_cap, D) <- the rows sent to this rank, recv_rows[i] from ep rank i;
 * w_local: this rank's block of experts of w (E, D) sharded over "ep"; w_global (E, D) on ep
 * rank 0, may be NULL elsewhere. */
static tess_status moe_exchange(const tess_group *world, int ep, double *loss, const float *tokens,
                                const int64_t *send_rows, int64_t D, float *recv,
                                int64_t recv_cap, int64_t *recv_rows, const float *w_local,
                                int64_t E, float *w_global) {
    const tess_mesh_axis axes[] = {{"dp", TESS_MESH_REST}, {"ep", ep}};
    tess_mesh *mesh = NULL;
    TESS_CHECK(tess_mesh_create(world, 2, axes, &mesh));
    const tess_group *dp = tess_mesh_axis_group(mesh, 0), *eg = tess_mesh_axis_group(mesh, 1);
    const int64_t shape[2] = {E, D};
    tess_layout experts = tess_layout_sharded(0, eg->size, eg->rank);
    tess_status st = tess_par_allreduce_f64(dp, loss, 1, TESS_PAR_MEAN);
    if (st == TESS_OK)
        st = tess_par_alltoallv(eg, tokens, send_rows, D, recv, recv_cap, recv_rows);
    if (st == TESS_OK) st = tess_par_gather_global(eg, &experts, 2, shape, w_local, w_global);
    tess_mesh_destroy(&mesh);
    TESS_REQUIRE(st == TESS_OK, st, "MoE exchange on a mesh of ep = %d failed", ep);
    return TESS_OK;
}

enum { D = 3, E = 5 };

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    int ep = size >= 2 ? 2 : 1, dp = size / ep, my_ep = rank % ep, my_dp = rank / ep;
    /* Rank r sends j + 1 rows to ep rank j; row k for j holds 100 r + 10 j + k. */
    float tokens[16 * D], recv[16 * D], w_global[E * D];
    int64_t send_rows[2], recv_rows[2], at = 0;
    for (int j = 0; j < ep; j++) {
        send_rows[j] = j + 1;
        for (int k = 0; k <= j; k++)
            for (int c = 0; c < D; c++) tokens[at++] = (float)(100 * rank + 10 * j + k);
    }
    int64_t lo, hi;
    tess_par_block_range(E, ep, my_ep, &lo, &hi);
    float w_local[E * D];
    for (int64_t i = 0; i < (hi - lo) * D; i++) w_local[i] = (float)(lo * D + i);
    double loss = my_dp + 1.0;

    tess_group *world = NULL;
    DIST_TEST_OK(tess_group_create(MPI_COMM_WORLD, "world", &world));
    DIST_TEST_OK(moe_exchange(world, ep, &loss, tokens, send_rows, D, recv, 16, recv_rows,
                              w_local, E, w_global));
    tess_group_destroy(&world);

    TESS_TEST_CLOSE(loss, (dp + 1) / 2.0, 1e-12, 0, "loss averaged over dp");
    int bad = 0;
    at = 0;
    for (int i = 0; i < ep; i++) {
        int src = my_dp * ep + i; /* world rank of ep rank i in my ep group */
        bad += recv_rows[i] != my_ep + 1;
        for (int k = 0; k <= my_ep; k++)
            for (int c = 0; c < D; c++) bad += recv[at++] != (float)(100 * src + 10 * my_ep + k);
    }
    TESS_TEST_CHECK(bad == 0, "token rows arrive from every ep rank: %d wrong", bad);
    if (my_ep == 0) {
        bad = 0;
        for (int i = 0; i < E * D; i++) bad += w_global[i] != (float)i;
        TESS_TEST_CHECK(bad == 0, "expert weight gathered on ep rank 0: %d wrong", bad);
    }
    int rc = tess_test_finish_mpi("par_example", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
