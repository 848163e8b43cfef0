/* test_sched.c - learning-rate schedules at key steps: warm-up ramp, decay midpoints, the floor,
 * monotone decay, and rejected configurations. */
#include <string.h>

#include "optim/sched.h" /* tess_sched_* */
#include "tess_test.h"

#define CLOSE(a, b, what) TESS_TEST_CLOSE((a), (b), 1e-15, 1e-12, (what))

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_sched cos_s = {.kind = TESS_SCHED_COSINE, .lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 10,
                        .total_steps = 110};
    TESS_TEST_CHECK(tess_sched_check(&cos_s) == TESS_OK, "cosine valid");
    CLOSE(tess_sched_lr(&cos_s, 0), 1e-4, "warm-up step 0 = lr/W");
    CLOSE(tess_sched_lr(&cos_s, 4), 5e-4, "warm-up step 4 = lr*5/W");
    CLOSE(tess_sched_lr(&cos_s, 9), 1e-3, "warm-up ends at lr");
    CLOSE(tess_sched_lr(&cos_s, 10), 1e-3, "decay starts at lr");
    CLOSE(tess_sched_lr(&cos_s, 35), 1e-4 + 9e-4 * 0.5 * (1.0 + sqrt(0.5)), "cosine quarter");
    CLOSE(tess_sched_lr(&cos_s, 60), 5.5e-4, "cosine midpoint");
    CLOSE(tess_sched_lr(&cos_s, 110), 1e-4, "cosine reaches min_lr at total_steps");
    CLOSE(tess_sched_lr(&cos_s, 100000), 1e-4, "stays at min_lr");
    int monotone = 1;
    for (int64_t s = 10; s < 200; s++)
        monotone &= tess_sched_lr(&cos_s, s + 1) <= tess_sched_lr(&cos_s, s);
    TESS_TEST_CHECK(monotone, "cosine non-increasing after warm-up");

    tess_sched lin = {.kind = TESS_SCHED_LINEAR, .lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 10,
                      .total_steps = 110};
    TESS_TEST_CHECK(tess_sched_check(&lin) == TESS_OK, "linear valid");
    CLOSE(tess_sched_lr(&lin, 10), 1e-3, "linear start");
    CLOSE(tess_sched_lr(&lin, 35), 7.75e-4, "linear quarter");
    CLOSE(tess_sched_lr(&lin, 60), 5.5e-4, "linear midpoint");
    CLOSE(tess_sched_lr(&lin, 110), 1e-4, "linear end");
    CLOSE(tess_sched_lr(&lin, 500), 1e-4, "linear floor");

    tess_sched nowarm = {.kind = TESS_SCHED_COSINE, .lr = 0.5, .min_lr = 0.0, .total_steps = 4};
    TESS_TEST_CHECK(tess_sched_check(&nowarm) == TESS_OK, "no warm-up valid");
    CLOSE(tess_sched_lr(&nowarm, 0), 0.5, "no warm-up: step 0 at lr");
    CLOSE(tess_sched_lr(&nowarm, 2), 0.25, "no warm-up: midpoint");
    CLOSE(tess_sched_lr(&nowarm, 4), 0.0, "no warm-up: end");

    tess_sched cst = {.kind = TESS_SCHED_CONSTANT, .lr = 3e-4, .warmup_steps = 3};
    TESS_TEST_CHECK(tess_sched_check(&cst) == TESS_OK, "constant valid without total_steps");
    CLOSE(tess_sched_lr(&cst, 0), 1e-4, "constant warm-up");
    CLOSE(tess_sched_lr(&cst, 3), 3e-4, "constant after warm-up");
    CLOSE(tess_sched_lr(&cst, 1000000), 3e-4, "constant forever");

    tess_sched bad = cos_s;
    bad.total_steps = 10;
    TESS_TEST_CHECK(tess_sched_check(&bad) == TESS_ERR_CONFIG, "total_steps <= warmup rejected");
    bad = cos_s;
    bad.min_lr = 2e-3;
    TESS_TEST_CHECK(tess_sched_check(&bad) == TESS_ERR_CONFIG, "min_lr > lr rejected");
    bad = cos_s;
    bad.lr = 0.0;
    TESS_TEST_CHECK(tess_sched_check(&bad) == TESS_ERR_CONFIG, "lr 0 rejected");
    bad = cos_s;
    bad.warmup_steps = -1;
    TESS_TEST_CHECK(tess_sched_check(&bad) == TESS_ERR_CONFIG, "negative warm-up rejected");
    tess_error_clear();
    TESS_TEST_CHECK(tess_sched_check(&bad) == TESS_ERR_CONFIG &&
                        strstr(tess_error_text(), "warmup_steps -1") != NULL,
                    "message carries the value: %s", tess_error_text());
    tess_error_clear();
    int rc = tess_test_finish("sched");
    MPI_Finalize();
    return rc;
}
