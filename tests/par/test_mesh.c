/* test_mesh.c - meshes and groups at 1, 2 and 4 ranks: axis groups hold the ranks row-major
 * coordinates say they hold, every communicator returns errors, bad shapes are rejected by all
 * ranks with the numbers in the message, and standalone groups split and free cleanly. */
#include "par/coll.h" /* tess_par_allreduce_i64 */
#include "par/mesh.h" /* tess_mesh_*, tess_group_* */
#include "par_test.h"

static int has_errors_return(MPI_Comm comm) {
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(comm, &eh);
    int same = eh == MPI_ERRORS_RETURN;
    MPI_Errhandler_free(&eh);
    return same;
}

/* World ranks of the members of g, in g's rank order, must be first + k * step. */
static void check_members(const tess_group *g, int world_rank, int first, int step) {
    int64_t ranks[8] = {0};
    ranks[g->rank] = world_rank;
    DIST_TEST_OK(tess_par_allreduce_i64(g, ranks, g->size, TESS_PAR_SUM));
    for (int k = 0; k < g->size; k++)
        TESS_TEST_CHECK(ranks[k] == first + k * step, "group '%s' member %d is world rank %lld, "
                        "expected %d", g->name, k, (long long)ranks[k], first + k * step);
}

static tess_group *world_g, *self_g; /* parents of the meshes: every rank, this rank alone */

static void check_dp_ep(MPI_Comm world, int rank, int size) {
    int ep_size = size >= 2 ? 2 : 1;
    tess_mesh_axis axes[] = {{"dp", TESS_MESH_REST}, {"ep", ep_size}};
    tess_mesh *mesh = NULL;
    DIST_TEST_OK(tess_mesh_create(world_g, 2, axes, &mesh));
    if (!mesh) return;
    TESS_TEST_CHECK(tess_mesh_naxes(mesh) == 2, "two axes");
    const tess_group *all = tess_mesh_all(mesh), *dp = tess_mesh_axis_group(mesh, 0),
                     *ep = tess_mesh_axis_group(mesh, 1), *found = NULL;
    TESS_TEST_CHECK(all->rank == rank && all->size == size, "'all' keeps the ranks: %d of %d",
                    all->rank, all->size);
    TESS_TEST_CHECK(strcmp(dp->name, "dp") == 0 && strcmp(ep->name, "ep") == 0 &&
                        strcmp(all->name, "all") == 0, "names %s %s %s", all->name, dp->name,
                    ep->name);
    TESS_TEST_CHECK(dp->size == size / ep_size && ep->size == ep_size, "dp %d x ep %d of %d",
                    dp->size, ep->size, size);
    /* Row-major, last axis fastest: world rank = dp coordinate * ep size + ep coordinate. */
    TESS_TEST_CHECK(ep->rank == rank % ep_size && dp->rank == rank / ep_size,
                    "rank %d has coordinates (dp %d, ep %d)", rank, dp->rank, ep->rank);
    check_members(ep, rank, (rank / ep_size) * ep_size, 1);
    check_members(dp, rank, rank % ep_size, ep_size);
    TESS_TEST_CHECK(has_errors_return(all->comm) && has_errors_return(dp->comm) &&
                        has_errors_return(ep->comm), "every mesh communicator returns errors");
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Comm_get_name(ep->comm, name, &len);
    TESS_TEST_CHECK(strcmp(name, "ep") == 0, "communicator is named '%s'", name);
    DIST_TEST_OK(tess_mesh_group(mesh, "ep", &found));
    TESS_TEST_CHECK(found == ep, "lookup by name finds the ep group");
    DIST_TEST_FAILS(tess_mesh_group(mesh, "tp", &found), TESS_ERR_ARG, "no axis 'tp' (axes: dp, ep)");
    TESS_TEST_CHECK(found == NULL, "failed lookup leaves NULL");
    tess_mesh_destroy(&mesh);
    TESS_TEST_CHECK(mesh == NULL, "destroy sets the handle to NULL");
    tess_mesh_destroy(&mesh);
}

static void check_fixed_2x2(MPI_Comm world, int size) {
    tess_mesh_axis axes[] = {{"dp", 2}, {"ep", 2}};
    tess_mesh *mesh = NULL;
    tess_status s = tess_mesh_create(world_g, 2, axes, &mesh);
    if (size == 4) {
        DIST_TEST_OK(s);
        if (!mesh) return;
        const tess_group *dp = NULL, *ep = NULL;
        DIST_TEST_OK(tess_mesh_group(mesh, "dp", &dp));
        DIST_TEST_OK(tess_mesh_group(mesh, "ep", &ep));
        TESS_TEST_CHECK(dp && ep && dp->size == 2 && ep->size == 2, "2 x 2 mesh");
        tess_mesh_destroy(&mesh);
    } else {
        char want[96];
        snprintf(want, sizeof want, "mesh dp=2 x ep=2 needs 4 ranks, the communicator has %d",
                 size);
        DIST_TEST_FAILS(s, TESS_ERR_CONFIG, want);
        TESS_TEST_CHECK(mesh == NULL, "no mesh after an error");
    }
}

static void check_bad_shapes(MPI_Comm world, int size) {
    tess_mesh *mesh = NULL;
    char want[128];
    tess_mesh_axis nine[] = {{"dp", 3}, {"ep", 3}};
    snprintf(want, sizeof want, "mesh dp=3 x ep=3 needs 9 ranks, the communicator has %d", size);
    DIST_TEST_FAILS(tess_mesh_create(world_g, 2, nine, &mesh), TESS_ERR_CONFIG, want);
    tess_mesh_axis negative[] = {{"dp", -1}};
    DIST_TEST_FAILS(tess_mesh_create(world_g, 1, negative, &mesh), TESS_ERR_CONFIG,
                    "axis 'dp' has size -1");
    tess_mesh_axis two_rests[] = {{"dp", TESS_MESH_REST}, {"ep", TESS_MESH_REST}};
    DIST_TEST_FAILS(tess_mesh_create(world_g, 2, two_rests, &mesh), TESS_ERR_CONFIG,
                    "only one axis may take the rest");
    tess_mesh_axis indivisible[] = {{"dp", TESS_MESH_REST}, {"ep", 3}};
    snprintf(want, sizeof want, "mesh dp=rest x ep=3: the communicator's %d ranks are not a "
             "multiple of 3", size);
    DIST_TEST_FAILS(tess_mesh_create(world_g, 2, indivisible, &mesh), TESS_ERR_CONFIG, want);
    tess_mesh_axis twice[] = {{"dp", 1}, {"dp", size}};
    DIST_TEST_FAILS(tess_mesh_create(world_g, 2, twice, &mesh), TESS_ERR_CONFIG,
                    "name 'dp' is used twice");
    tess_mesh_axis unnamed[] = {{"", size}};
    DIST_TEST_FAILS(tess_mesh_create(world_g, 1, unnamed, &mesh), TESS_ERR_ARG, "name is empty");
    tess_mesh_axis long_name[] = {{"a_name_that_is_much_longer_than_31_bytes", size}};
    DIST_TEST_FAILS(tess_mesh_create(world_g, 1, long_name, &mesh), TESS_ERR_ARG,
                    "is longer than 31 bytes");
    tess_mesh_axis five[] = {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", size}};
    DIST_TEST_FAILS(tess_mesh_create(world_g, 5, five, &mesh), TESS_ERR_ARG, "1..4 axes, got 5");
    DIST_TEST_FAILS(tess_mesh_create(world_g, 0, five, &mesh), TESS_ERR_ARG, "1..4 axes, got 0");
    TESS_TEST_CHECK(mesh == NULL, "no mesh after errors");
}

static void check_other_meshes(MPI_Comm world, int size) {
    /* Three axes with the rest in the middle; and a serial mesh on MPI_COMM_SELF. */
    tess_mesh_axis three[] = {{"a", 1}, {"b", TESS_MESH_REST}, {"c", 1}};
    tess_mesh *mesh = NULL;
    DIST_TEST_OK(tess_mesh_create(world_g, 3, three, &mesh));
    if (mesh) {
        TESS_TEST_CHECK(tess_mesh_axis_group(mesh, 0)->size == 1 &&
                            tess_mesh_axis_group(mesh, 1)->size == size &&
                            tess_mesh_axis_group(mesh, 2)->size == 1, "1 x rest x 1");
        tess_mesh_destroy(&mesh);
    }
    tess_mesh_axis serial[] = {{"dp", TESS_MESH_REST}};
    DIST_TEST_OK(tess_mesh_create(self_g, 1, serial, &mesh));
    if (mesh) {
        const tess_group *dp = tess_mesh_axis_group(mesh, 0);
        TESS_TEST_CHECK(dp->size == 1 && dp->rank == 0, "serial mesh is one rank");
        tess_mesh_destroy(&mesh);
    }
}

static void check_groups(MPI_Comm world, int rank, int size) {
    tess_group *g = NULL, *half = NULL, *none = NULL;
    DIST_TEST_OK(tess_group_create(world, "world_dup", &g));
    if (!g) return;
    TESS_TEST_CHECK(g->rank == rank && g->size == size && has_errors_return(g->comm),
                    "duplicate keeps ranks and returns errors");
    TESS_TEST_CHECK(g->max_count == TESS_PAR_MAX_COUNT, "default max count");
    /* Even and odd ranks, reversed order by key. */
    DIST_TEST_OK(tess_group_split(g, rank % 2, -rank, "parity", &half));
    if (half) {
        int expect = (size - rank % 2 + 1) / 2;
        TESS_TEST_CHECK(half->size == expect, "parity group of %d ranks, expected %d", half->size,
                        expect);
        TESS_TEST_CHECK(half->rank == half->size - 1 - rank / 2, "reversed by key: rank %d",
                        half->rank);
        TESS_TEST_CHECK(has_errors_return(half->comm), "split returns errors");
    }
    DIST_TEST_FAILS(tess_group_split(g, -1, 0, "bad", &none), TESS_ERR_ARG, "color -1 < 0");
    DIST_TEST_FAILS(tess_group_set_max_count(g, 0), TESS_ERR_ARG, "max count 0 is outside");
    DIST_TEST_OK(tess_group_set_max_count(g, 7));
    TESS_TEST_CHECK(g->max_count == 7, "max count hook");
    tess_group_destroy(&half);
    tess_group_destroy(&g);
    TESS_TEST_CHECK(g == NULL && half == NULL && none == NULL, "destroy sets NULL");
    tess_group_destroy(&g);
}

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    MPI_Comm world = MPI_COMM_WORLD;
    DIST_TEST_OK(tess_group_create(world, "world", &world_g));
    DIST_TEST_OK(tess_group_create(MPI_COMM_SELF, "self", &self_g));
    check_dp_ep(world, rank, size);
    check_fixed_2x2(world, size);
    check_bad_shapes(world, size);
    check_other_meshes(world, size);
    check_groups(world, rank, size);
    tess_group_destroy(&self_g);
    tess_group_destroy(&world_g);
    int rc = tess_test_finish_mpi("par_mesh", world);
    MPI_Finalize();
    return rc;
}
