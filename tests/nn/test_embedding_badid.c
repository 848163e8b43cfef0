/* test_embedding_badid.c - an id outside [0, V) stops the embedding with a TESS_ASSERT record
 * (registered only in TESS_ASSERTS builds; expected: exit code 1 and the failed condition). */
#include <stdint.h>

#include "core/status.h"  /* tess_set_abort_hook */
#include "nn/embedding.h" /* tess_nn_embedding_forward */
#include "tess_test.h"

static void abort_world(int exit_code, void *ctx) {
    (void)ctx;
    MPI_Abort(MPI_COMM_WORLD, exit_code);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_set_abort_hook(abort_world, NULL);
    const float table[3 * 2] = {0, 1, 2, 3, 4, 5};
    const int32_t ids[2] = {1, 3}; /* V = 3: id 3 is out of range */
    float out[2 * 2];
    tess_nn_embedding_forward(out, ids, table, 2, 3, 2);
    TESS_TEST_CHECK(0, "embedding accepted id 3 with V = 3");
    int rc = tess_test_finish("embedding_badid");
    MPI_Finalize();
    return rc;
}
