/* mpi_count.h - counts a test program's all-to-all calls and nonblocking sends through the MPI
 * profiling interface: the library's MPI_Alltoall / MPI_Alltoallv / MPI_Isend land here, are
 * counted, then go to PMPI_. Defines the three MPI functions: include it in exactly one file of
 * a test program. */
#ifndef TESS_TEST_MPI_COUNT_H
#define TESS_TEST_MPI_COUNT_H
#include <mpi.h>

static int n_alltoall, n_alltoallv, n_isend; /* calls so far (reset by the test) */
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
int MPI_Isend(const void *b, int c, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
              MPI_Request *r) {
    n_isend++;
    return PMPI_Isend(b, c, t, dest, tag, comm, r);
}
#endif
