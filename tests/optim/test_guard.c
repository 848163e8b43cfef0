/* test_guard.c - the non-finite guard: skip with a warning, reset on a good step, and
 * TESS_ERR_DIVERGED naming step and count on the K-th bad step in a row; the local NaN scan. */
#include <stdlib.h>
#include <string.h>

#include "nn/registry.h" /* tess_registry_* */
#include "optim/guard.h" /* tess_guard_* */
#include "tess_test.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    char *log = NULL;
    size_t log_len = 0;
    FILE *warn = open_memstream(&log, &log_len);
    tess_guard g;
    bool skip = false;
    TESS_TEST_CHECK(tess_guard_init(&g, 3, warn) == TESS_OK, "init K=3");

    TESS_TEST_CHECK(tess_guard_check(&g, 0, 2.5, 1.0, &skip) == TESS_OK && !skip, "good step");
    TESS_TEST_CHECK(tess_guard_check(&g, 1, NAN, 1.0, &skip) == TESS_OK && skip &&
                        g.consecutive == 1,
                    "NaN loss skipped");
    TESS_TEST_CHECK(tess_guard_check(&g, 2, 2.0, INFINITY, &skip) == TESS_OK && skip &&
                        g.consecutive == 2,
                    "Inf grad norm skipped");
    TESS_TEST_CHECK(tess_guard_check(&g, 3, 2.0, 0.5, &skip) == TESS_OK && !skip &&
                        g.consecutive == 0 && g.skipped == 2,
                    "a good step resets the run, keeps the total");
    TESS_TEST_CHECK(tess_guard_check(&g, 4, -INFINITY, 0.5, &skip) == TESS_OK && skip, "bad 1");
    TESS_TEST_CHECK(tess_guard_check(&g, 5, 1.0, NAN, &skip) == TESS_OK && skip, "bad 2");
    tess_error_clear();
    tess_status s = tess_guard_check(&g, 6, NAN, NAN, &skip);
    TESS_TEST_CHECK(s == TESS_ERR_DIVERGED && skip, "third bad step in a row diverges, got %s",
                    tess_status_name(s));
    TESS_TEST_CHECK(strstr(tess_error_text(), "step 6:") &&
                        strstr(tess_error_text(), "3 non-finite steps in a row"),
                    "message names step and count: %s", tess_error_text());
    tess_error_clear();
    fclose(warn);
    TESS_TEST_CHECK(log && strstr(log, "step 1: loss nan") && strstr(log, "step 5:") &&
                        strstr(log, "update skipped (2 non-finite in a row, fatal at 3)") &&
                        !strstr(log, "step 6"),
                    "one warning per skipped step:\n%s", log ? log : "(null)");
    free(log);

    TESS_TEST_CHECK(tess_guard_init(&g, 1, NULL) == TESS_OK, "K=1, silent");
    TESS_TEST_CHECK(tess_guard_check(&g, 9, NAN, 1.0, &skip) == TESS_ERR_DIVERGED,
                    "K=1: the first bad step is fatal");
    tess_error_clear();
    TESS_TEST_CHECK(tess_guard_init(&g, 0, NULL) == TESS_ERR_ARG, "K=0 rejected");
    tess_error_clear();

    tess_registry *reg = NULL;
    const int64_t sw[2] = {2, 3}, sf[1] = {4};
    const tess_layout rep = tess_layout_replicated();
    int64_t frozen = -1;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "w", 2, sw, &rep, NULL) == TESS_OK &&
                        tess_registry_add(reg, "stat", 1, sf, &rep, &frozen) == TESS_OK &&
                        tess_registry_set_trainable(reg, frozen, false) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "setup");
    bool finite = false;
    TESS_TEST_CHECK(tess_guard_grads_finite(reg, NULL, &finite) == TESS_OK && finite,
                    "zero grads are finite");
    tess_registry_grad(reg, frozen)[1] = NAN;
    TESS_TEST_CHECK(tess_guard_grads_finite(reg, NULL, &finite) == TESS_OK && finite,
                    "frozen grads are not scanned");
    tess_registry_grad(reg, 0)[5] = -INFINITY;
    TESS_TEST_CHECK(tess_guard_grads_finite(reg, NULL, &finite) == TESS_OK && !finite,
                    "an Inf in a trainable grad is found");
    tess_registry_destroy(&reg);
    int rc = tess_test_finish("guard");
    MPI_Finalize();
    return rc;
}
