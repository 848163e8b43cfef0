/* test_traces_real - a trace file made by tess-convert calcium from the shared Flavell-lab
 * recordings, read at any rank count, against the original files (imported here with the
 * library) and the shapes and frame intervals listed with the public recordings.
 *   test_traces_real <nprocs> <traces.h5> <session.h5>...
 * Every rank imports the originals (serial reads); the trace file is read collectively, by
 * sessions and by blocks of frames. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par/layout.h" /* tess_par_block_range */
#include "ds_test.h"     /* ds_test_init, DS_TEST_* */
#include "io/traces.h"   /* tess_traces_* */

typedef struct {
    const char *name;
    int64_t neurons, frames;
    double interval_s;
} calcium_row;

static const calcium_row ROWS[] = {
    {"2022-01-16-01", 130, 799, 0.737}, {"2022-05-02-01", 136, 1137, 0.600},
    {"2022-07-26-31", 146, 800, 0.600}, {"2022-07-26-38", 141, 800, 0.600},
    {"2022-07-27-31", 145, 800, 0.600}, {"2022-07-27-38", 135, 800, 0.600},
    {"2022-07-27-45", 140, 800, 0.600},
};

static const char *const BEHAVIOR = "velocity,head_angle,reversal_vec";
enum { K = 3, OVERLAP = 63 };

/* The held frames of s equal the imported session. */
static void compare(const tess_traces_session *s, const tess_traces_session *orig) {
    int64_t bad = s->neurons != orig->neurons || s->frames != orig->frames ||
                  fabs(s->rate_hz - orig->rate_hz) > 1e-12;
    for (int64_t t = 0; t < s->t && !bad; t++) {
        bad += memcmp(s->traces + t * s->neurons, orig->traces + (s->t0 + t) * s->neurons,
                      (size_t)s->neurons * sizeof(float)) != 0;
        bad +=
            memcmp(s->behavior + t * K, orig->behavior + (s->t0 + t) * K, K * sizeof(float)) != 0;
    }
    TESS_TEST_CHECK(bad == 0, "session %s frames [%lld, +%lld) differ from the original", s->name,
                    (long long)s->t0, (long long)s->t);
}

int main(int argc, char **argv) {
    int rank, size;
    ds_test_init(&argc, &argv, &rank, &size);
    TESS_TEST_CHECK(argc >= 4, "usage: test_traces_real <nprocs> <traces.h5> <session.h5>...");
    int n = argc - 3;
    tess_traces_session *orig = calloc((size_t)(n > 0 ? n : 1), sizeof *orig);
    for (int i = 0; i < n; i++) {
        DS_TEST_OK(tess_traces_import_flavell(&orig[i], argv[3 + i], "trace_array", BEHAVIOR));
        const calcium_row *row = NULL;
        for (size_t r = 0; r < sizeof ROWS / sizeof ROWS[0]; r++)
            if (strcmp(ROWS[r].name, orig[i].name) == 0) row = &ROWS[r];
        TESS_TEST_CHECK(row != NULL, "unknown session '%s'", orig[i].name);
        if (row)
            TESS_TEST_CHECK(orig[i].neurons == row->neurons && orig[i].frames == row->frames &&
                                fabs(1.0 / orig[i].rate_hz - row->interval_s) < 0.001,
                            "%s: %lld neurons, %lld frames, interval %.4f s", row->name,
                            (long long)orig[i].neurons, (long long)orig[i].frames,
                            1.0 / orig[i].rate_hz);
    }
    /* Sessions are stored by name; the originals were given in any order. */
    for (int split = 0; split < 2 && argc >= 4; split++) {
        tess_traces tr;
        DS_TEST_OK(tess_traces_read(&tr, ds_world, argv[2], (tess_traces_split)split,
                                    split ? OVERLAP : 0));
        TESS_TEST_CHECK(tr.total_sessions == n && tr.behavior_dim == K &&
                            strcmp(tr.behavior_names, BEHAVIOR) == 0,
                        "S %lld K %lld '%s'", (long long)tr.total_sessions,
                        (long long)tr.behavior_dim, tr.behavior_names);
        int64_t frames = 0;
        for (int64_t i = 0; i < tr.num_sessions; i++) {
            const tess_traces_session *s = &tr.sessions[i];
            for (int j = 0; j < n; j++)
                if (strcmp(orig[j].name, s->name) == 0) compare(s, &orig[j]);
            int64_t lo = 0, hi = s->frames;
            if (split) tess_par_block_range(s->frames, size, rank, &lo, &hi);
            frames += hi - lo;
        }
        MPI_Allreduce(MPI_IN_PLACE, &frames, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        int64_t want = 0;
        for (int j = 0; j < n; j++) want += orig[j].frames;
        TESS_TEST_CHECK(frames == want, "split %d: shares hold %lld of %lld frames", split,
                        (long long)frames, (long long)want);
        tess_traces_free(&tr);
    }
    for (int i = 0; i < n; i++) {
        free(orig[i].traces);
        free(orig[i].behavior);
    }
    free(orig);
    int rc = tess_test_finish_mpi("test_traces_real", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
