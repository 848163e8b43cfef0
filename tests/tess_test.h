/* tess_test.h - the checks every Tessera test uses. A test counts failures with TESS_TEST_CHECK /
 * TESS_TEST_CLOSE, then returns tess_test_finish(): it prints "<name>: N passed, M failed" and
 * is non-zero on any failure, so CTest sees every regression through the exit code.
 * Header-only; MPI tests call tess_test_finish_mpi() to combine the counts over their communicator. */
#ifndef TESS_TEST_H
#define TESS_TEST_H

#include <math.h>
#include <mpi.h>
#include <stdio.h>

static int tess_test_passed, tess_test_failed;

#define TESS_TEST_CHECK(cond, ...)                                                          \
    do {                                                                                    \
        if (cond) {                                                                         \
            tess_test_passed++;                                                             \
        } else {                                                                            \
            tess_test_failed++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                 \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
        }                                                                                   \
    } while (0)

/* |a - b| <= atol + rtol*|b| */
#define TESS_TEST_CLOSE(a, b, atol, rtol, what)                                             \
    do {                                                                                    \
        double a_ = (double)(a), b_ = (double)(b);                                          \
        TESS_TEST_CHECK(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_),                        \
                        "%s: got %.9g, expected %.9g", (what), a_, b_);                    \
    } while (0)

static inline int tess_test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, tess_test_passed, tess_test_failed);
    return tess_test_failed == 0 && tess_test_passed > 0 ? 0 : 1;
}

/* Collective on comm: sums the counts over ranks; rank 0 prints; every rank returns the verdict. */
static inline int tess_test_finish_mpi(const char *name, MPI_Comm comm) {
    int counts[2] = {tess_test_passed, tess_test_failed}, rank;
    MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, comm);
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) printf("%s: %d passed, %d failed\n", name, counts[0], counts[1]);
    return counts[1] == 0 && counts[0] > 0 ? 0 : 1;
}

#endif
