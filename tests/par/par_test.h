/* par_test.h - start-up shared by the MPI tests of tests/par: the world size the test was
 * registered with (argv[1]) is checked, and error records carry the rank. Header-only. */
#ifndef TESS_PAR_TEST_H
#define TESS_PAR_TEST_H

#include <stdlib.h>
#include <string.h>

#include "core/status.h" /* tess_error_set_rank, tess_error_text, tess_error_clear */
#include "tess_test.h"

/* MPI_Init, then rank and size of MPI_COMM_WORLD (the one place tests may name it). */
static inline void par_test_init(int *argc, char ***argv, int *rank, int *size) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    tess_error_set_rank(*rank);
    char *end = NULL;
    long want = *argc > 1 ? strtol((*argv)[1], &end, 10) : -1;
    TESS_TEST_CHECK(end && *end == '\0' && want == *size,
                    "registered for %s ranks, running on %d", *argc > 1 ? (*argv)[1] : "?", *size);
}

/* Check that status s is `want` and that the record mentions `text`; then clear the record. */
#define DIST_TEST_FAILS(s, want, text)                                                      \
    do {                                                                                    \
        tess_status s2_ = (s);                                                              \
        TESS_TEST_CHECK(s2_ == (want), "%s: got %s, expected %s", #s, tess_status_name(s2_), \
                        tess_status_name(want));                                            \
        TESS_TEST_CHECK(strstr(tess_error_text(), (text)) != NULL,                          \
                        "record of %s mentions '%s':\n%s", #s, (text), tess_error_text());  \
        tess_error_clear();                                                                 \
    } while (0)

/* Check that s is TESS_OK; print the record otherwise. */
#define DIST_TEST_OK(s)                                                                     \
    do {                                                                                    \
        tess_status s3_ = (s);                                                              \
        TESS_TEST_CHECK(s3_ == TESS_OK, "%s: %s\n%s", #s, tess_status_name(s3_),            \
                        tess_error_text());                                                 \
        tess_error_clear();                                                                 \
    } while (0)

#endif
