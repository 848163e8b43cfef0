/* test_runtime.c - start dups the communicator with MPI_ERRORS_RETURN and sets the ranks;
 * signals set the stop flag; a successful finish returns 0. Run at 2 ranks. (Failure paths of
 * finish end the process: they are tested through test_config_cli in CMakeLists.txt.) */
#include <signal.h>
#include <string.h>

#include "core/runtime.h" /* tess_runtime_* */
#include "core/signals.h" /* tess_signals_* */
#include "tess_test.h"

int main(int argc, char **argv) {
    tess_signals_install();
    TESS_TEST_CHECK(!tess_signals_stop_requested(), "no stop before a signal");
    raise(SIGUSR1);
    TESS_TEST_CHECK(tess_signals_stop_requested(), "SIGUSR1 requests a stop");
    TESS_TEST_CHECK(tess_signals_last() == SIGUSR1, "last signal %d", tess_signals_last());
    raise(SIGTERM);
    TESS_TEST_CHECK(tess_signals_last() == SIGTERM, "SIGTERM caught, not fatal");

    MPI_Init(&argc, &argv);
    tess_runtime rt;
    TESS_TEST_CHECK(tess_runtime_start(&rt, MPI_COMM_WORLD) == TESS_OK, "start: %s",
                    tess_error_text());
    int cmp, wrank, wsize;
    MPI_Comm_compare(rt.comm, MPI_COMM_WORLD, &cmp);
    TESS_TEST_CHECK(cmp == MPI_CONGRUENT, "a duplicate of world (compare %d)", cmp);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    TESS_TEST_CHECK(rt.rank == wrank && rt.size == wsize && wsize == 2, "rank %d/%d", rt.rank,
                    rt.size);
    TESS_TEST_CHECK(rt.world != NULL && rt.world->rank == wrank && rt.world->size == wsize &&
                        strcmp(rt.world->name, "world") == 0,
                    "the run's group 'world' has every rank");
    MPI_Comm_compare(rt.world->comm, rt.comm, &cmp);
    TESS_TEST_CHECK(cmp == MPI_CONGRUENT, "world is a duplicate of the run communicator (%d)", cmp);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(rt.comm, &eh);
    TESS_TEST_CHECK(eh == MPI_ERRORS_RETURN, "errors return on the run communicator");
    MPI_Errhandler_free(&eh);
    int bad = MPI_Send(NULL, -1, MPI_INT, 0, 0, rt.comm);
    TESS_TEST_CHECK(bad != MPI_SUCCESS, "a local MPI error comes back as a code");
    tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__, "probe");
    TESS_TEST_CHECK(strstr(tess_error_text(), rt.rank ? "[rank 1]" : "[rank 0]") != NULL,
                    "error records carry the rank: %s", tess_error_text());
    tess_error_clear();
    int rc = tess_test_finish_mpi("runtime", rt.comm);
    int code = tess_runtime_finish(&rt, TESS_OK, true);
    return rc != 0 ? rc : code;
}
