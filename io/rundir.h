/* rundir.h - the run directory every app writes: runs/<name>/ with config.ini, metrics.csv,
 * plots/ and the app's own outputs. Rank 0 touches the file system; the verdict is shared. */
#ifndef TESS_IO_RUNDIR_H
#define TESS_IO_RUNDIR_H

#include <mpi.h>

#include "core/status.h" /* tess_status */

/* Create dir and dir/plots (mkdir -p) on rank 0 of comm and, if config_text is not NULL, write it
 * to dir/config.ini. Collective on comm: every rank returns the same status (TESS_ERR_IO naming
 * the path and errno text on failure). */
tess_status tess_rundir_prepare(MPI_Comm comm, const char *dir, const char *config_text);

/* mkdir -p path (mode 0755). Not collective. TESS_ERR_IO naming the component that failed. */
tess_status tess_rundir_mkdirs(const char *path);

#endif
