/* mpi_count.h - counts a test program's all-to-all calls through the MPI profiling interface:
 * the library's MPI_Alltoall / MPI_Alltoallv land here, are counted, then go to PMPI_.
 * Defines the two MPI functions: include it in exactly one file of a test program. */
#ifndef TESS_TEST_MPI_COUNT_H
#define TESS_TEST_MPI_COUNT_H
#include <mpi.h>

static int n_alltoall, n_alltoallv; /* calls so far (reset by the test) */
int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
                 MPI_Comm comm) {
    n_alltoall++;
    return PMPI_Alltoall(sb, sc, st, rb, rc, rt, comm);
}
int MPI_Alltoallv(const void *sb, const int *sc, const int *sd, MPI_Datatype st, void *rb,
                  const int *rc, const int *rd, MPI_Datatype rt, MPI_Comm comm) {
    n_alltoallv++;
    return PMPI_Alltoallv(sb, sc, sd, st, rb, rc, rd, rt, comm);
}
#endif
