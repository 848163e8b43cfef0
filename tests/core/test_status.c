/* test_status.c - error records form a rank-tagged traceback; exit codes follow the table. */
#include <string.h>

#include "core/status.h" /* tess_error_*, TESS_CHECK, TESS_REQUIRE */
#include "tess_test.h"

static tess_status inner(int n) {
    TESS_REQUIRE(n > 0, TESS_ERR_CONFIG, "n must be > 0, got %d", n);
    return TESS_OK;
}

static tess_status outer(int n) {
    TESS_CHECK(inner(n));
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_error_set_rank(3);
    TESS_TEST_CHECK(outer(1) == TESS_OK, "valid input passes");
    TESS_TEST_CHECK(tess_error_text()[0] == '\0', "no record after success");
    tess_status s = outer(-2);
    TESS_TEST_CHECK(s == TESS_ERR_CONFIG, "status propagates, got %s", tess_status_name(s));
    const char *rec = tess_error_text();
    const char *first = strstr(rec, "inner(): n must be > 0, got -2");
    const char *second = strstr(rec, "outer(): inner(n)");
    TESS_TEST_CHECK(first && second && first < second, "record is a traceback:\n%s", rec);
    TESS_TEST_CHECK(strncmp(rec, "[rank 3] ", 9) == 0, "lines carry the rank: %s", rec);
    TESS_TEST_CHECK(tess_status_exit_code(TESS_ERR_CONFIG) == 78, "config exit code");
    TESS_TEST_CHECK(tess_status_exit_code(TESS_ERR_DATA) == 65, "data exit code");
    TESS_TEST_CHECK(tess_status_exit_code(TESS_ERR_DIVERGED) == 3, "diverged exit code");
    tess_error_clear();
    TESS_TEST_CHECK(tess_error_text()[0] == '\0', "clear empties the record");
    int rc = tess_test_finish("status");
    MPI_Finalize();
    return rc;
}
