/* ds_test.h - start-up and checks shared by the dataset tests: the world size the test was
 * registered with (argv[1]) is checked, error records carry the rank, and failures are checked
 * for their status, their message, and for being the same on every rank. Header-only. */
#ifndef TESS_DS_TEST_H
#define TESS_DS_TEST_H

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h" /* tess_error_* */
#include "par/mesh.h"    /* tess_group_create */
#include "tess_test.h"

/* All ranks as a group, for the readers; made by ds_test_init, freed by MPI_Finalize. */
static tess_group *ds_world;

/* MPI_Init, then rank and size of MPI_COMM_WORLD (the one place tests may name it) and
 * ds_world over it. */
static inline void ds_test_init(int *argc, char ***argv, int *rank, int *size) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    tess_error_set_rank(*rank);
    if (tess_group_create(MPI_COMM_WORLD, "world", &ds_world) != TESS_OK) {
        tess_error_write();
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char *end = NULL;
    long want = *argc > 1 ? strtol((*argv)[1], &end, 10) : -1;
    TESS_TEST_CHECK(end && *end == '\0' && want == *size, "registered for %s ranks, running on %d",
                    *argc > 1 ? (*argv)[1] : "?", *size);
}

/* Every rank of comm holds the same status s. Collective. */
static inline int ds_test_same_status(tess_status s, MPI_Comm comm) {
    int v[2] = {(int)s, -(int)s};
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MIN, comm);
    return v[0] == -v[1];
}

/* s is `want` on every rank of MPI_COMM_WORLD and this rank's record mentions `text`; then the
 * record is cleared. Collective. */
#define DS_TEST_FAILS(s, want, text)                                                               \
    do {                                                                                           \
        tess_status s2_ = (s);                                                                     \
        TESS_TEST_CHECK(s2_ == (want), "%s: got %s, expected %s\n%s", #s, tess_status_name(s2_),   \
                        tess_status_name(want), tess_error_text());                                \
        TESS_TEST_CHECK(ds_test_same_status(s2_, MPI_COMM_WORLD), "%s: ranks disagree", #s);       \
        TESS_TEST_CHECK(strstr(tess_error_text(), (text)) != NULL,                                 \
                        "record of %s mentions '%s':\n%s", #s, (text), tess_error_text());         \
        tess_error_clear();                                                                        \
    } while (0)

/* s is TESS_OK; print the record otherwise. */
#define DS_TEST_OK(s)                                                                              \
    do {                                                                                           \
        tess_status s3_ = (s);                                                                     \
        TESS_TEST_CHECK(s3_ == TESS_OK, "%s: %s\n%s", #s, tess_status_name(s3_),                   \
                        tess_error_text());                                                        \
        tess_error_clear();                                                                        \
    } while (0)

#endif
