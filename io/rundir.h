/* rundir.h - the run directory every app writes: runs/<name>/ with config.ini, metrics.csv,
 * plots/ and the app's own outputs. Rank 0 touches the file system; the verdict is shared. */
#ifndef TESS_IO_RUNDIR_H
#define TESS_IO_RUNDIR_H

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

/* Create dir and dir/plots (mkdir -p) on rank 0 of g and, if config_text is not NULL, write
 * dir/config.ini: provenance comment lines, then config_text. The comments (INI ';' lines, so
 * `--config dir/config.ini` reads the file back to the same options) are
 *   ; tessera_version = 0.1.0
 *   ; git_commit = ff38adf1c2d3          (core/version.h: configure-time commit or "unknown")
 *   ; ranks = 4                          (size of g)
 *   ; host = node017                     (rank 0's host name)
 *   ; started_utc = 2026-12-01T13:46:25Z (time of this call, i.e. of this run or attempt)
 *   ; blas_kernels = Haswell             (OpenBLAS's kernel family, tensor/blasinfo.h)
 * Collective on g: every rank returns the same status and rank 0's record (TESS_ERR_IO naming
 * the path and errno text on failure). */
tess_status tess_rundir_prepare(const tess_group *g, const char *dir, const char *config_text);

/* mkdir -p path (mode 0755). Not collective. TESS_ERR_IO naming the component that failed. */
tess_status tess_rundir_mkdirs(const char *path);

#endif
