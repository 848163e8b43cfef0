/* test_timer.c - timers accumulate start/stop pairs; the report is collective and tolerates
 * ranks that created timers in another order or have extra ones. Run at 2 ranks. */
#include <string.h>
#include <time.h>

#include "core/timer.h" /* tess_timer_* */
#include "par/mesh.h"   /* tess_group_* */
#include "tess_test.h"

static void sleep_ms(long ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tess_timers t;
    tess_timer_init(&t);
    tess_timer_id a, b;
    if (rank == 0) {
        a = tess_timer_get(&t, "fwd");
        b = tess_timer_get(&t, "comm.allreduce");
    } else {
        (void)tess_timer_get(&t, "only.on.rank1");
        b = tess_timer_get(&t, "comm.allreduce");
        a = tess_timer_get(&t, "fwd");
    }
    TESS_TEST_CHECK(tess_timer_get(&t, "fwd") == a, "same name, same id");
    for (int i = 0; i < 3; i++) {
        tess_timer_start(&t, a);
        sleep_ms(5);
        tess_timer_stop(&t, a);
    }
    tess_timer_start(&t, b);
    tess_timer_stop(&t, b);
    TESS_TEST_CHECK(tess_timer_calls(&t, a) == 3, "calls counted");
    TESS_TEST_CHECK(tess_timer_elapsed(&t, a) >= 0.015 && tess_timer_elapsed(&t, a) < 2.0,
                    "elapsed %.4f s for 3 x 5 ms", tess_timer_elapsed(&t, a));
    TESS_TEST_CHECK(tess_timer_elapsed(&t, b) >= 0.0 && tess_timer_elapsed(&t, b) < 0.5,
                    "empty interval");
    double t0 = tess_timer_now();
    sleep_ms(2);
    TESS_TEST_CHECK(tess_timer_now() - t0 >= 0.002, "monotonic clock advances");
    tess_group *world = NULL;
    TESS_TEST_CHECK(tess_group_create(MPI_COMM_WORLD, "world", &world) == TESS_OK, "group");
    tess_status s = tess_timer_report(&t, world);
    tess_group_destroy(&world);
    TESS_TEST_CHECK(s == TESS_OK, "report: %s", tess_error_text());
    int rc = tess_test_finish_mpi("timer", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
