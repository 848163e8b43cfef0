/* runtime.h - what every app's main does at start and end: the run communicator, error ranks,
 * the abort hook, and the one place a run turns a status into an exit code.
 *
 *   int main(int argc, char **argv) {
 *       tess_signals_install();                       (core/signals.h, before MPI_Init)
 *       MPI_Init(&argc, &argv);
 *       tess_runtime rt;
 *       tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
 *       bool collective = true;
 *       if (s == TESS_OK) s = run(&rt, argc, argv, &collective);
 *       return tess_runtime_finish(&rt, s, collective);
 *   }
 *
 * MPI_COMM_WORLD appears only in main; everything else takes the run's group rt.world (or a
 * group made from it: a mesh over rt.world->comm, a split). rt.comm stays for the few calls that
 * still take a raw communicator (checkpoints, the run directory, timers).
 */
#ifndef TESS_CORE_RUNTIME_H
#define TESS_CORE_RUNTIME_H

#include <mpi.h>
#include <stdbool.h>

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

/* Exit code of a run that stopped early on SIGUSR1/SIGTERM/SIGINT after committing a
 * checkpoint (EX_TEMPFAIL): job scripts requeue it and the next start resumes. Apps return it
 * from main themselves, after a successful tess_runtime_finish. */
enum { TESS_EXIT_STOPPED = 75 };

typedef struct {
    MPI_Comm comm;      /* duplicate of the launch communicator, MPI_ERRORS_RETURN */
    tess_group *world;  /* the run's group: every rank, over a duplicate of comm; owned */
    MPI_Comm launch;    /* the communicator main passed in, for aborting if the dup failed */
    int rank, size;     /* in comm (and world) */
} tess_runtime;

/* Collective on world (after MPI_Init). Duplicates world into rt->comm, sets MPI_ERRORS_RETURN
 * on it, makes the group rt->world (named "world") over it, sets the rank shown in error records
 * and log lines (log level INFO), and registers an abort hook that calls MPI_Abort(rt->comm,
 * code) for failed assertions. rt must stay valid until tess_runtime_finish. */
tess_status tess_runtime_start(tess_runtime *rt, MPI_Comm world);

/* End the run and return the process exit code (return it from main).
 *   s == TESS_OK: free rt->world and rt->comm, MPI_Finalize, return 0.
 *   collective (every rank reached this point with the same failure, e.g. config errors): rank 0
 *     writes its error record once, every rank calls MPI_Finalize and returns
 *     tess_status_exit_code(s).
 *   local (this rank failed alone): this rank writes its record and calls
 *     MPI_Abort(rt->comm, code), which ends every rank; the launcher exits with code.
 * Collective in the first two cases. */
int tess_runtime_finish(tess_runtime *rt, tess_status s, bool collective);

#endif
