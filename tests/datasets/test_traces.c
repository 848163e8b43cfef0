/* test_traces - multi-session traces: rank 0 writes sessions of different lengths and widths,
 * every rank reads its sessions (block of sessions) and then its block of frames of every
 * session (with an overlap), and every value is compared with the formula that made it; the
 * shares must add up to the whole. Rank 0 also imports a small file in the Flavell-lab layout.
 * Run at 1, 2, 3 and 4 ranks. */
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par/layout.h" /* tess_par_block_range */
#include "ds_test.h"     /* ds_test_init, DS_TEST_* */
#include "io/traces.h"   /* tess_traces_* */

enum { S = 5, K = 2, OVERLAP = 3 };

static int64_t frames_of(int64_t s) { return 7 + 3 * s; }
static int64_t neurons_of(int64_t s) { return 2 + s; }
static float trace_value(int64_t s, int64_t t, int64_t n) {
    return (float)(s * 1000 + t * 10) + 0.5f * (float)n;
}
static float behavior_value(int64_t s, int64_t t, int64_t k) {
    return (float)(-s * 100 - t) - 0.25f * (float)k;
}

static void write_sessions(const char *path) {
    tess_traces tr = {.total_sessions = S, .num_sessions = S, .behavior_dim = K};
    snprintf(tr.behavior_names, sizeof tr.behavior_names, "speed,angle");
    tr.sessions = calloc(S, sizeof *tr.sessions);
    for (int64_t s = 0; s < S; s++) {
        tess_traces_session *ss = &tr.sessions[s];
        snprintf(ss->name, sizeof ss->name, "s%lld", (long long)s);
        ss->frames = ss->t = frames_of(s);
        ss->neurons = neurons_of(s);
        ss->rate_hz = 1.5 + (double)s;
        ss->traces = malloc((size_t)(ss->t * ss->neurons) * sizeof(float));
        ss->behavior = malloc((size_t)(ss->t * K) * sizeof(float));
        for (int64_t t = 0; t < ss->t; t++) {
            for (int64_t n = 0; n < ss->neurons; n++)
                ss->traces[t * ss->neurons + n] = trace_value(s, t, n);
            for (int64_t k = 0; k < K; k++) ss->behavior[t * K + k] = behavior_value(s, t, k);
        }
    }
    DS_TEST_OK(tess_traces_write(path, &tr));
    tess_traces_free(&tr);
}

/* Every held frame equals the formula; returns the frames held without the overlap. */
static int64_t check_held(const tess_traces_session *ss) {
    int64_t s = ss->index, bad = 0;
    bad += ss->frames != frames_of(s) || ss->neurons != neurons_of(s) ||
           ss->rate_hz != 1.5 + (double)s;
    for (int64_t t = 0; t < ss->t; t++) {
        for (int64_t n = 0; n < ss->neurons; n++)
            bad += ss->traces[t * ss->neurons + n] != trace_value(s, ss->t0 + t, n);
        for (int64_t k = 0; k < K; k++)
            bad += ss->behavior[t * K + k] != behavior_value(s, ss->t0 + t, k);
    }
    TESS_TEST_CHECK(bad == 0, "session %lld: %lld values differ", (long long)s, (long long)bad);
    return ss->t;
}

/* A small file in the Flavell-lab layout: traces (T, N) float64, three behaviour variables
 * (one int64), pumping all NaN, 8 timestamps with intervals 0.5 except one of 0.7. */
static void write_flavell(const char *path) {
    enum { TT = 6, NN = 3 };
    double tr[TT * NN], vel[TT], head[TT], pump[TT], ts[8];
    long long rev[TT];
    for (int i = 0; i < TT * NN; i++) tr[i] = 0.25 * i - 1.0;
    for (int t = 0; t < TT; t++) {
        vel[t] = 0.01 * t;
        head[t] = -0.5 * t;
        rev[t] = t % 2;
        pump[t] = NAN;
    }
    for (int i = 0; i < 8; i++) ts[i] = 100.0 + 0.5 * i + (i >= 4 ? 0.2 : 0.0);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    struct {
        const char *name;
        int nd;
        hsize_t d[2];
        hid_t t;
        const void *buf;
    } ds[] = {
        {"/gcamp/trace_array", 2, {TT, NN}, H5T_NATIVE_DOUBLE, tr},
        {"/behavior/velocity", 1, {TT, 0}, H5T_NATIVE_DOUBLE, vel},
        {"/behavior/head_angle", 1, {TT, 0}, H5T_NATIVE_DOUBLE, head},
        {"/behavior/reversal_vec", 1, {TT, 0}, H5T_NATIVE_LLONG, rev},
        {"/behavior/pumping", 1, {TT, 0}, H5T_NATIVE_DOUBLE, pump},
        {"/timing/timestamp_confocal", 1, {8, 0}, H5T_NATIVE_DOUBLE, ts},
    };
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        hid_t sp = H5Screate_simple(ds[i].nd, ds[i].d, NULL);
        hid_t d =
            H5Dcreate2(f, ds[i].name, ds[i].t == H5T_NATIVE_LLONG ? H5T_STD_I64LE : H5T_IEEE_F64LE,
                       sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, ds[i].t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ds[i].buf);
        H5Dclose(d);
        H5Sclose(sp);
    }
    H5Pclose(lcpl);
    H5Fclose(f);
}

static void check_flavell(void) {
    write_flavell("2022-01-01-01-data.h5");
    tess_traces_session s;
    DS_TEST_OK(tess_traces_import_flavell(&s, "2022-01-01-01-data.h5", "trace_array",
                                          "velocity,head_angle,reversal_vec"));
    TESS_TEST_CHECK(strcmp(s.name, "2022-01-01-01") == 0, "name '%s'", s.name);
    TESS_TEST_CHECK(s.frames == 6 && s.t == 6 && s.t0 == 0 && s.neurons == 3, "shape %lld x %lld",
                    (long long)s.frames, (long long)s.neurons);
    TESS_TEST_CLOSE(s.rate_hz, 2.0, 1e-12, 0.0, "rate from the median interval");
    int64_t bad = 0;
    for (int i = 0; i < 18 && s.traces; i++) bad += s.traces[i] != (float)(0.25 * i - 1.0);
    for (int t = 0; t < 6 && s.behavior; t++)
        bad += s.behavior[t * 3] != (float)(0.01 * t) ||
               s.behavior[t * 3 + 1] != (float)(-0.5 * t) ||
               s.behavior[t * 3 + 2] != (float)(t % 2);
    TESS_TEST_CHECK(bad == 0, "imported values: %lld differ", (long long)bad);
    free(s.traces);
    free(s.behavior);
    tess_status st =
        tess_traces_import_flavell(&s, "2022-01-01-01-data.h5", "trace_array", "velocity,pumping");
    TESS_TEST_CHECK(st == TESS_ERR_DATA &&
                        strstr(tess_error_text(), "/behavior/pumping[0] is not finite"),
                    "NaN behaviour: %s\n%s", tess_status_name(st), tess_error_text());
    tess_error_clear();
    st = tess_traces_import_flavell(&s, "2022-01-01-01-data.h5", "trace_array", "speed");
    TESS_TEST_CHECK(st == TESS_ERR_DATA && strstr(tess_error_text(), "/behavior/speed is missing"),
                    "missing behaviour: %s\n%s", tess_status_name(st), tess_error_text());
    tess_error_clear();
    st = tess_traces_import_flavell(&s, "absent-data.h5", "trace_array", "velocity");
    TESS_TEST_CHECK(st == TESS_ERR_NOINPUT, "missing file: %s", tess_status_name(st));
    tess_error_clear();
}

int main(int argc, char **argv) {
    int rank, size;
    ds_test_init(&argc, &argv, &rank, &size);
    if (rank == 0) {
        write_sessions("traces.h5");
        check_flavell();
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 1. Whole sessions: this rank's block of the 5. */
    tess_traces tr;
    DS_TEST_OK(tess_traces_read(&tr, ds_world, "traces.h5", TESS_TRACES_SPLIT_SESSIONS, 0));
    int64_t lo, hi;
    tess_par_block_range(S, size, rank, &lo, &hi);
    TESS_TEST_CHECK(tr.total_sessions == S && tr.behavior_dim == K &&
                        strcmp(tr.behavior_names, "speed,angle") == 0,
                    "S %lld K %lld names '%s'", (long long)tr.total_sessions,
                    (long long)tr.behavior_dim, tr.behavior_names);
    TESS_TEST_CHECK(tr.num_sessions == hi - lo, "rank %d holds %lld sessions, expected %lld", rank,
                    (long long)tr.num_sessions, (long long)(hi - lo));
    int64_t held = 0;
    for (int64_t i = 0; i < tr.num_sessions; i++) {
        const tess_traces_session *ss = &tr.sessions[i];
        TESS_TEST_CHECK(ss->index == lo + i && ss->t0 == 0 && ss->t == ss->frames,
                        "session %lld: index %lld, frames [%lld, +%lld)", (long long)i,
                        (long long)ss->index, (long long)ss->t0, (long long)ss->t);
        held += check_held(ss);
    }
    int64_t sum[2] = {tr.num_sessions, held};
    MPI_Allreduce(MPI_IN_PLACE, sum, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    int64_t all_frames = 0;
    for (int64_t s = 0; s < S; s++) all_frames += frames_of(s);
    TESS_TEST_CHECK(sum[0] == S && sum[1] == all_frames,
                    "shares add up to %lld sessions, %lld frames", (long long)sum[0],
                    (long long)sum[1]);
    tess_traces_free(&tr);

    /* 2. Blocks of frames of every session, with OVERLAP frames past each block. */
    DS_TEST_OK(tess_traces_read(&tr, ds_world, "traces.h5", TESS_TRACES_SPLIT_TIME, OVERLAP));
    TESS_TEST_CHECK(tr.num_sessions == S, "time split: %lld sessions", (long long)tr.num_sessions);
    int64_t own[S] = {0};
    for (int64_t i = 0; i < tr.num_sessions && i < S; i++) {
        const tess_traces_session *ss = &tr.sessions[i];
        int64_t T = frames_of(i), a, b;
        tess_par_block_range(T, size, rank, &a, &b);
        int64_t end = b > a ? (b + OVERLAP < T ? b + OVERLAP : T) : a;
        TESS_TEST_CHECK(ss->index == i && ss->t0 == a && ss->t == end - a,
                        "session %lld: frames [%lld, +%lld), expected [%lld, %lld)", (long long)i,
                        (long long)ss->t0, (long long)ss->t, (long long)a, (long long)end);
        check_held(ss);
        own[i] = b - a;
    }
    MPI_Allreduce(MPI_IN_PLACE, own, S, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int64_t s = 0; s < S; s++)
        TESS_TEST_CHECK(own[s] == frames_of(s), "session %lld: blocks cover %lld of %lld frames",
                        (long long)s, (long long)own[s], (long long)frames_of(s));
    tess_traces_free(&tr);

    /* 3. The imported Flavell-layout session round-trips through a traces file. */
    if (rank == 0) {
        tess_traces one = {.total_sessions = 1, .num_sessions = 1, .behavior_dim = 1};
        snprintf(one.behavior_names, sizeof one.behavior_names, "velocity");
        one.sessions = calloc(1, sizeof *one.sessions);
        DS_TEST_OK(tess_traces_import_flavell(&one.sessions[0], "2022-01-01-01-data.h5",
                                              "trace_array", "velocity"));
        DS_TEST_OK(tess_traces_write("flavell.h5", &one));
        tess_traces_free(&one);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    DS_TEST_OK(tess_traces_read(&tr, ds_world, "flavell.h5", TESS_TRACES_SPLIT_TIME, 0));
    int64_t frames = tr.num_sessions == 1 ? tr.sessions[0].t : -1;
    MPI_Allreduce(MPI_IN_PLACE, &frames, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    TESS_TEST_CHECK(frames == 6, "imported session: %lld frames over all ranks", (long long)frames);
    if (tr.num_sessions == 1 && tr.sessions[0].t > 0) {
        const tess_traces_session *ss = &tr.sessions[0];
        TESS_TEST_CHECK(ss->traces[0] == (float)(0.25 * (double)(ss->t0 * 3) - 1.0) &&
                            ss->behavior[0] == (float)(0.01 * (double)ss->t0),
                        "imported values at frame %lld", (long long)ss->t0);
    }
    tess_traces_free(&tr);

    int rc = tess_test_finish_mpi("test_traces", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
