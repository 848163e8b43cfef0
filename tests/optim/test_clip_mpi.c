/* test_clip_mpi.c - distributed gradient norm on 2 ranks: a sharded entry's squares are summed
 * over the group, a replicated entry is counted once; clipping scales every rank's part; a
 * layout that does not match the group is rejected on every rank; the NaN scan is collective. */
#include <string.h>

#include "nn/registry.h"  /* tess_registry_* */
#include "optim/clip.h"   /* tess_clip_grad_norm */
#include "optim/guard.h"  /* tess_guard_grads_finite */
#include "tess_test.h"

enum { ROWS = 5, COLS = 3, NB = 4 };

static float w_full(int64_t k) { return 0.1f * (float)(k + 1); } /* (ROWS, COLS) row-major */
static float b_full(int64_t k) { return -0.3f * (float)(k + 2); } /* (NB) */

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    TESS_TEST_CHECK(size == 2, "run on 2 ranks, got %d", size);

    tess_registry *reg = NULL;
    const int64_t sw[2] = {ROWS, COLS}, sb[1] = {NB};
    const tess_layout shard = tess_layout_sharded(0, size, rank), rep = tess_layout_replicated();
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "w", 2, sw, &shard, NULL) == TESS_OK &&
                        tess_registry_add(reg, "b", 1, sb, &rep, NULL) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "setup: %s", tess_error_text());
    const tess_registry_entry *ew = tess_registry_get(reg, 0);
    float *gw = tess_registry_grad(reg, 0), *gb = tess_registry_grad(reg, 1);
    const int64_t row0 = ew->global_offset[0];
    for (int64_t k = 0; k < ew->local_count; k++) gw[k] = w_full(row0 * COLS + k);
    for (int64_t k = 0; k < NB; k++) gb[k] = b_full(k);
    double sq = 0.0;
    for (int64_t k = 0; k < ROWS * COLS; k++) sq += (double)w_full(k) * w_full(k);
    for (int64_t k = 0; k < NB; k++) sq += (double)b_full(k) * b_full(k);
    const double want = sqrt(sq);

    double norm = 0.0;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, comm, &norm) == TESS_OK, "global norm");
    TESS_TEST_CLOSE(norm, want, 0.0, 1e-13, "norm of the full model on every rank");
    double local_sq = 0.0;
    for (int64_t k = 0; k < tess_registry_local_total(reg); k++)
        local_sq += (double)tess_registry_grads(reg)[k] * tess_registry_grads(reg)[k];
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, MPI_COMM_NULL, &norm) == TESS_OK, "local norm");
    TESS_TEST_CLOSE(norm, sqrt(local_sq), 0.0, 1e-13, "MPI_COMM_NULL: this rank's grads only");

    const double max_norm = 1.0;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, max_norm, comm, &norm) == TESS_OK, "clip");
    TESS_TEST_CLOSE(norm, want, 0.0, 1e-13, "pre-clip norm returned");
    const float coef = (float)(max_norm / (want + 1e-6));
    for (int64_t k = 0; k < ew->local_count; k++)
        TESS_TEST_CHECK(gw[k] == w_full(row0 * COLS + k) * coef, "w[%lld] scaled", (long long)k);
    for (int64_t k = 0; k < NB; k++) TESS_TEST_CHECK(gb[k] == b_full(k) * coef, "b[%lld] scaled",
                                                     (long long)k);
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, comm, &norm) == TESS_OK, "re-norm");
    TESS_TEST_CLOSE(norm, max_norm, 1e-9, 1e-6, "clipped global norm = max_norm");

    bool finite = false;
    TESS_TEST_CHECK(tess_guard_grads_finite(reg, comm, &finite) == TESS_OK && finite,
                    "all finite");
    if (rank == 1) gw[0] = NAN;
    TESS_TEST_CHECK(tess_guard_grads_finite(reg, comm, &finite) == TESS_OK && !finite,
                    "a NaN on rank 1 is seen by every rank");
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, max_norm, comm, &norm) == TESS_OK && isnan(norm),
                    "a NaN on rank 1 makes every rank's norm NaN");
    tess_registry_destroy(&reg);

    /* a tensor sharded over 4 parts cannot be normed over a group of 2 */
    const tess_layout wrong = tess_layout_sharded(0, 4, rank);
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "x", 2, sw, &wrong, NULL) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "setup 2");
    tess_error_clear();
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 1.0, comm, &norm) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "'x': partitioned over 4 ranks") != NULL,
                    "mismatched group rejected: %s", tess_error_text());
    tess_error_clear();
    tess_registry_destroy(&reg);
    int rc = tess_test_finish_mpi("clip_mpi", comm);
    MPI_Finalize();
    return rc;
}
