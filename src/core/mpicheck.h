/* mpicheck.h - TESS_MPI_CHECK: turn an MPI error code into a tess_status with MPI's own text.
 * Only meaningful on communicators with MPI_ERRORS_RETURN (the runtime and the mesh set it). */
#ifndef TESS_CORE_MPICHECK_H
#define TESS_CORE_MPICHECK_H

#include <mpi.h>

#include "core/status.h" /* tess_error_push, TESS_ERR_MPI */

#define TESS_MPI_CHECK(call)                                                               \
    do {                                                                                   \
        int e_ = (call);                                                                   \
        if (e_ != MPI_SUCCESS) {                                                           \
            char m_[MPI_MAX_ERROR_STRING];                                                 \
            int l_ = 0;                                                                    \
            if (MPI_Error_string(e_, m_, &l_) != MPI_SUCCESS) l_ = 0;                      \
            m_[l_] = '\0';                                                                 \
            return tess_error_push(TESS_ERR_MPI, __FILE__, __LINE__, __func__, "%s: %s",   \
                                   #call, m_);                                             \
        }                                                                                  \
    } while (0)

#endif
