/* runtime.c - start and finish of a run (see runtime.h). */
#include "core/runtime.h"

#include <stdio.h>

#include "core/log.h"      /* tess_log_init, tess_log_error_record */
#include "core/mpicheck.h" /* TESS_MPI_CHECK */

static void runtime_abort(int exit_code, void *ctx) {
    const tess_runtime *rt = ctx;
    fflush(NULL);
    MPI_Abort(rt->comm != MPI_COMM_NULL ? rt->comm : rt->launch, exit_code);
}

tess_status tess_runtime_start(tess_runtime *rt, MPI_Comm world) {
    TESS_REQUIRE(rt != NULL, TESS_ERR_ARG, "NULL runtime");
    *rt = (tess_runtime){.comm = MPI_COMM_NULL, .world = NULL, .launch = world};
    int initialized = 0;
    TESS_MPI_CHECK(MPI_Initialized(&initialized));
    TESS_REQUIRE(initialized, TESS_ERR_ARG, "call MPI_Init before tess_runtime_start");
    TESS_MPI_CHECK(MPI_Comm_rank(world, &rt->rank));
    TESS_MPI_CHECK(MPI_Comm_size(world, &rt->size));
    tess_error_set_rank(rt->rank);
    tess_log_init(rt->rank, TESS_LOG_INFO);
    tess_set_abort_hook(runtime_abort, rt);
    TESS_MPI_CHECK(MPI_Comm_dup(world, &rt->comm));
    TESS_MPI_CHECK(MPI_Comm_set_errhandler(rt->comm, MPI_ERRORS_RETURN));
    TESS_CHECK(tess_group_create(rt->comm, "world", &rt->world));
    return TESS_OK;
}

int tess_runtime_finish(tess_runtime *rt, tess_status s, bool collective) {
    int code = tess_status_exit_code(s);
    bool local_failure = s != TESS_OK && !collective;
    if (s != TESS_OK && (local_failure || rt->rank == 0)) {
        /* A failure every rank agrees on (bad options, a refused checkpoint) is the user's to
         * fix: the messages alone, the traceback at log level debug (-v). */
        const bool brief = !local_failure && tess_log_get_level() < TESS_LOG_DEBUG;
        if (!brief)
            tess_error_push(s, __FILE__, __LINE__, __func__, "run failed: %s error (exit code %d)%s",
                            tess_status_name(s), code, local_failure ? ", aborting all ranks" : "");
        fflush(NULL);
        tess_log_error_record(brief);
    }
    int initialized = 0;
    if (MPI_Initialized(&initialized) != MPI_SUCCESS || !initialized) return code;
    if (local_failure) {
        MPI_Abort(rt->comm != MPI_COMM_NULL ? rt->comm : rt->launch, code);
        return code;
    }
    fflush(NULL);
    tess_set_abort_hook(NULL, NULL);
    tess_group_destroy(&rt->world);
    if (rt->comm != MPI_COMM_NULL) MPI_Comm_free(&rt->comm);
    MPI_Finalize();
    return code;
}
