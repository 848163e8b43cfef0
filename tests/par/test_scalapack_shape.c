/* test_scalapack_shape.c - tess_scal_grid_shape, the pure grid-shape rule of the ScaLAPACK
 * bridge: the most square nprow x npcol using all p ranks, nprow <= npcol. No grid is built. */
#include "par/scalapack.h" /* tess_scal_grid_shape */
#include "tess_test.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    static const int want[][3] = {{1, 1, 1},  {2, 1, 2}, {3, 1, 3}, {4, 2, 2},  {5, 1, 5},
                                  {6, 2, 3},  {7, 1, 7}, {8, 2, 4}, {9, 3, 3},  {12, 3, 4},
                                  {16, 4, 4}, {18, 3, 6}, {64, 8, 8}, {97, 1, 97}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int r = 0, c = 0;
        tess_scal_grid_shape(want[i][0], &r, &c);
        TESS_TEST_CHECK(r == want[i][1] && c == want[i][2], "shape(%d) = %d x %d, want %d x %d",
                        want[i][0], r, c, want[i][1], want[i][2]);
    }
    for (int p = 1; p <= 200; p++) {
        int r = 0, c = 0;
        tess_scal_grid_shape(p, &r, &c);
        TESS_TEST_CHECK(r * c == p && r <= c, "shape(%d) = %d x %d uses all ranks, rows <= cols",
                        p, r, c);
    }
    int rc = tess_test_finish("scalapack_shape");
    MPI_Finalize();
    return rc;
}
