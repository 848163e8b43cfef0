/* mpicheck.h - TESS_MPI_CHECK: turn an MPI error code into a tess_status with MPI's own text.
 * Only meaningful on communicators with MPI_ERRORS_RETURN (the runtime and the mesh set it).
 * Out-of-memory errors inside MPI become TESS_ERR_MEM (see tess_mpi_error). */
#ifndef TESS_CORE_MPICHECK_H
#define TESS_CORE_MPICHECK_H

#include <mpi.h>

#include "core/status.h" /* tess_error_push, TESS_ERR_MPI */

#define TESS_MPI_CHECK(call)                                                               \
    do {                                                                                   \
        int e_ = (call);                                                                   \
        if (e_ != MPI_SUCCESS) return tess_mpi_error(e_, #call, __FILE__, __LINE__, __func__); \
    } while (0)

/* The status of MPI error code e of `call`, pushed with MPI's text. An allocation failure inside
 * MPI is TESS_ERR_MEM (exit 71), like one of ours: MPI_ERR_NO_MEM, and MPI_ERR_INTERN, which is
 * how Open MPI reports a failed allocation (OMPI_ERR_OUT_OF_RESOURCE) from a collective when the
 * rank is out of memory. Every other error is TESS_ERR_MPI. */
static inline tess_status tess_mpi_error(int e, const char *call, const char *file, int line,
                                         const char *func) {
    char m[MPI_MAX_ERROR_STRING];
    int len = 0, cls = MPI_ERR_OTHER;
    if (MPI_Error_string(e, m, &len) != MPI_SUCCESS) len = 0;
    m[len] = '\0';
    if (MPI_Error_class(e, &cls) != MPI_SUCCESS) cls = MPI_ERR_OTHER;
    if (cls == MPI_ERR_NO_MEM || cls == MPI_ERR_INTERN)
        return tess_error_push(TESS_ERR_MEM, file, line, func,
                               "%s: %s (MPI could not allocate memory: this rank is out of "
                               "memory)", call, m);
    return tess_error_push(TESS_ERR_MPI, file, line, func, "%s: %s", call, m);
}

#endif
