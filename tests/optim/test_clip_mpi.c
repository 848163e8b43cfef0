/* test_clip_mpi.c - distributed gradient norm. On 2 ranks: a sharded entry's squares are summed
 * over the group, a replicated entry is counted once; clipping scales every rank's part; a
 * layout that does not match the group is rejected on every rank; the NaN scan is collective.
 * On a dp x ep mesh of 4 ranks (2 x 2): dense entries replicated everywhere, expert entries
 * sharded over "ep" and replicated over "dp" (their reduction group); the norm over all ranks
 * counts every element once, against a hand computation. argv[1]: the registered world size. */
#include <stdlib.h>
#include <string.h>

#include "nn/registry.h"  /* tess_registry_* */
#include "optim/clip.h"   /* tess_clip_grad_norm */
#include "optim/guard.h"  /* tess_guard_grads_finite */
#include "par/mesh.h"     /* tess_mesh_*, tess_group_* */
#include "tess_test.h"

enum { ROWS = 5, COLS = 3, NB = 4 };

static float w_full(int64_t k) { return 0.1f * (float)(k + 1); } /* (ROWS, COLS) row-major */
static float b_full(int64_t k) { return -0.3f * (float)(k + 2); } /* (NB) */

static void test_two(const tess_group *world) {
    const int rank = world->rank, size = world->size;

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
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, world, &norm) == TESS_OK, "global norm");
    TESS_TEST_CLOSE(norm, want, 0.0, 1e-13, "norm of the full model on every rank");
    double local_sq = 0.0;
    for (int64_t k = 0; k < tess_registry_local_total(reg); k++)
        local_sq += (double)tess_registry_grads(reg)[k] * tess_registry_grads(reg)[k];
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, NULL, &norm) == TESS_OK, "local norm");
    TESS_TEST_CLOSE(norm, sqrt(local_sq), 0.0, 1e-13, "NULL group: this rank's grads only");

    const double max_norm = 1.0;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, max_norm, world, &norm) == TESS_OK, "clip");
    TESS_TEST_CLOSE(norm, want, 0.0, 1e-13, "pre-clip norm returned");
    const float coef = (float)(max_norm / (want + 1e-6));
    for (int64_t k = 0; k < ew->local_count; k++)
        TESS_TEST_CHECK(gw[k] == w_full(row0 * COLS + k) * coef, "w[%lld] scaled", (long long)k);
    for (int64_t k = 0; k < NB; k++) TESS_TEST_CHECK(gb[k] == b_full(k) * coef, "b[%lld] scaled",
                                                     (long long)k);
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, world, &norm) == TESS_OK, "re-norm");
    TESS_TEST_CLOSE(norm, max_norm, 1e-9, 1e-6, "clipped global norm = max_norm");

    bool finite = false;
    TESS_TEST_CHECK(tess_guard_grads_finite(reg, world, &finite) == TESS_OK && finite,
                    "all finite");
    if (rank == 1) gw[0] = NAN;
    TESS_TEST_CHECK(tess_guard_grads_finite(reg, world, &finite) == TESS_OK && !finite,
                    "a NaN on rank 1 is seen by every rank");
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, max_norm, world, &norm) == TESS_OK && isnan(norm),
                    "a NaN on rank 1 makes every rank's norm NaN");
    tess_registry_destroy(&reg);

    /* a tensor sharded over 4 parts cannot be normed over a group of 2 */
    const tess_layout wrong = tess_layout_sharded(0, 4, rank);
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "x", 2, sw, &wrong, NULL) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "setup 2");
    tess_error_clear();
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 1.0, world, &norm) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "'x': partitioned over 4 ranks") != NULL,
                    "mismatched group rejected: %s", tess_error_text());
    tess_error_clear();
    tess_registry_destroy(&reg);
}

/* The dp x ep model: gradients as after the sync (replicas identical). Dense "d0" (DE) and
 * "d1" (DB) replicated; experts "e0" (EX rows of EC) and "e1" (EB) sharded over ep, reduced
 * over dp. */
enum { DE = 9, DB = 5, EX = 5, EC = 3, EB = 7 };
static float dense_grad(int e, int64_t j) { return 0.25f * (float)(e + 1) - 0.125f * (float)j; }
static float expert_grad(int e, int64_t j) { return 0.5f * (float)(j % 7) - 0.75f * (float)e; }

static void test_mesh(const tess_group *world) {
    const tess_mesh_axis axes[2] = {{"dp", 2}, {"ep", 2}};
    tess_mesh *mesh = NULL;
    TESS_TEST_CHECK(tess_mesh_create(world, 2, axes, &mesh) == TESS_OK, "mesh: %s",
                    tess_error_text());
    const tess_group *all = tess_mesh_all(mesh), *dp = tess_mesh_axis_group(mesh, 0),
                     *ep = tess_mesh_axis_group(mesh, 1);
    const tess_layout rep = tess_layout_replicated(), sh = tess_layout_sharded(0, ep->size, ep->rank);
    const int64_t s_d0[1] = {DE}, s_e0[2] = {EX, EC}, s_d1[1] = {DB}, s_e1[1] = {EB};
    tess_registry *reg = NULL;
    int64_t ie0 = -1, ie1 = -1;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "d0", 1, s_d0, &rep, NULL) == TESS_OK &&
                        tess_registry_add(reg, "e0", 2, s_e0, &sh, &ie0) == TESS_OK &&
                        tess_registry_add(reg, "d1", 1, s_d1, &rep, NULL) == TESS_OK &&
                        tess_registry_add(reg, "e1", 1, s_e1, &sh, &ie1) == TESS_OK &&
                        tess_registry_set_group(reg, ie0, dp) == TESS_OK &&
                        tess_registry_set_group(reg, ie1, dp) == TESS_OK &&
                        tess_registry_set_tags(reg, ie0, TESS_TAG_EXPERT) == TESS_OK &&
                        tess_registry_set_tags(reg, ie1, TESS_TAG_EXPERT) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "setup: %s", tess_error_text());
    double sq = 0.0; /* by hand: every element of the global model once */
    for (int e = 0; e < 4; e++) {
        const tess_registry_entry *en = tess_registry_get(reg, e);
        const bool expert = e == ie0 || e == ie1;
        float *x = tess_registry_grad(reg, e);
        const int64_t row = en->ndim == 2 ? en->shape[1] : 1;
        for (int64_t k = 0; k < en->local_count; k++) {
            const int64_t j = en->global_offset[0] * row + k;
            x[k] = expert ? expert_grad(e, j) : dense_grad(e, j);
        }
        for (int64_t j = 0; j < en->global_count; j++) {
            const double v = expert ? expert_grad(e, j) : dense_grad(e, j);
            sq += v * v;
        }
    }
    double norm = 0.0;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, all, &norm) == TESS_OK, "mesh norm: %s",
                    tess_error_text());
    TESS_TEST_CLOSE(norm, sqrt(sq), 0.0, 1e-14, "dp x ep: every element counted once");
    double want = sqrt(sq);
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.5 * want, all, &norm) == TESS_OK, "mesh clip");
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, all, &norm) == TESS_OK, "mesh re-norm");
    TESS_TEST_CLOSE(norm, 0.5 * want, 1e-9, 1e-6, "dp x ep: clipped to half the norm");
    tess_registry_destroy(&reg);

    /* three parts cannot be spread evenly over 4 ranks */
    const tess_layout three = tess_layout_sharded(0, 3, all->rank % 3);
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "t", 2, s_e0, &three, NULL) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "setup 3");
    tess_error_clear();
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 1.0, all, &norm) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "'t': partitioned over 3 ranks") != NULL,
                    "3 parts on 4 ranks rejected: %s", tess_error_text());
    tess_error_clear();
    tess_registry_destroy(&reg);
    tess_mesh_destroy(&mesh);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tess_error_set_rank(rank);
    const int want = argc > 1 ? atoi(argv[1]) : 0;
    TESS_TEST_CHECK((want == 2 || want == 4) && size == want, "run on %d ranks (2 or 4), got %d",
                    want, size);
    tess_group *world = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "world", &world) == TESS_OK, "world");
    if (size == 2) test_two(world);
    if (size == 4) test_mesh(world);
    tess_group_destroy(&world);
    int rc = tess_test_finish_mpi("clip_mpi", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
