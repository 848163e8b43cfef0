/* test_ds_bad - bad dataset files are refused with the right status and a message naming the
 * file, the object, what was expected and what was found, on every rank alike (no hang, even
 * when only one rank's share holds the problem). Rank 0 crafts each file with the writer API.
 * Run at 1 and 2 ranks (and 3). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds_test.h"    /* ds_test_init, DS_TEST_* */
#include "io/dataset.h" /* tess_ds_writer_* */
#include "io/graphs.h"  /* tess_graphs_* */
#include "io/tokens.h"  /* tess_tokens_* */
#include "io/traces.h"  /* tess_traces_* */

enum { G = 5, NPG = 3, EPG = 4, F = 3 };

typedef enum {
    GOOD,
    Y_SHORT,       /* /graphs/y has G - 1 entries */
    X_INT,         /* /graphs/x stored as int32 */
    NO_CLASSES,    /* attribute num_classes missing */
    BAD_INDEX,     /* the last graph has a neighbour id outside the graph */
    VERSION2,      /* format_version 2 */
    FEAT_MISMATCH, /* num_node_features 5, x has 3 columns */
    PTR_DECREASE,  /* edge_ptr decreases at graph 2 */
} variant;

/* G paths of 3 nodes; each variant breaks one thing. */
static void write_graphs(const char *path, variant v) {
    int64_t node_ptr[G + 1], edge_ptr[G + 1], indptr[G * NPG + 1], y32[G], lv[2] = {-1, 1};
    int32_t indices[G * EPG], xi[G * NPG * F];
    float x[G * NPG * F];
    static const int32_t path_rows[EPG] = {1, 0, 2, 1};
    static const int64_t path_ptr[NPG] = {0, 1, 3};
    for (int g = 0; g <= G; g++) {
        node_ptr[g] = g * NPG;
        edge_ptr[g] = g * EPG;
    }
    for (int g = 0; g < G; g++) {
        for (int i = 0; i < NPG; i++) indptr[g * NPG + i] = g * EPG + path_ptr[i];
        for (int e = 0; e < EPG; e++) indices[g * EPG + e] = path_rows[e];
        y32[g] = g % 2;
    }
    indptr[G * NPG] = G * EPG;
    for (int i = 0; i < G * NPG * F; i++) {
        x[i] = 0.5f * (float)i;
        xi[i] = i;
    }
    if (v == BAD_INDEX) indices[G * EPG - 1] = 9;
    if (v == PTR_DECREASE) edge_ptr[2] = 1;
    tess_ds_writer w;
    DS_TEST_OK(tess_ds_writer_create(&w, path, "tessera.graphs", v == VERSION2 ? 2 : 1));
    DS_TEST_OK(tess_ds_write_group(&w, "/graphs"));
    DS_TEST_OK(tess_ds_write_attr_string(&w, "/graphs", "name", "paths"));
    if (v != NO_CLASSES) DS_TEST_OK(tess_ds_write_attr_int(&w, "/graphs", "num_classes", 2));
    DS_TEST_OK(
        tess_ds_write_attr_int(&w, "/graphs", "num_node_features", v == FEAT_MISMATCH ? 5 : F));
    int64_t d[2] = {G + 1, 0};
    DS_TEST_OK(tess_ds_write_array(&w, "/graphs/node_ptr", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d,
                                   node_ptr));
    DS_TEST_OK(tess_ds_write_array(&w, "/graphs/edge_ptr", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d,
                                   edge_ptr));
    d[0] = G * NPG + 1;
    DS_TEST_OK(
        tess_ds_write_array(&w, "/graphs/indptr", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d, indptr));
    d[0] = G * EPG;
    DS_TEST_OK(
        tess_ds_write_array(&w, "/graphs/indices", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, d, indices));
    d[0] = G * NPG;
    d[1] = F;
    if (v == X_INT)
        DS_TEST_OK(tess_ds_write_array(&w, "/graphs/x", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, d, xi));
    else
        DS_TEST_OK(tess_ds_write_array(&w, "/graphs/x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d, x));
    d[0] = v == Y_SHORT ? G - 1 : G;
    DS_TEST_OK(tess_ds_write_array(&w, "/graphs/y", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d, y32));
    d[0] = 2;
    DS_TEST_OK(
        tess_ds_write_array(&w, "/graphs/label_values", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d, lv));
    DS_TEST_OK(tess_ds_writer_commit(&w));
}

/* Token 777 is outside the vocabulary; or (domain) the tokens are good and /domain[777] is
 * outside the 2 domains. */
static void write_bad_tokens(const char *path, bool domain) {
    enum { N = 1000 };
    static int32_t tok[N], dom[N];
    for (int i = 0; i < N; i++) tok[i] = i % 50, dom[i] = i % 2;
    if (domain)
        dom[777] = 5;
    else
        tok[777] = 60;
    tess_ds_writer w;
    int64_t n = N;
    DS_TEST_OK(tess_ds_writer_create(&w, path, "tessera.tokens", 1));
    DS_TEST_OK(tess_ds_write_array(&w, "/tokens", H5T_STD_U16LE, H5T_NATIVE_INT32, 1, &n, tok));
    DS_TEST_OK(tess_ds_write_attr_int(&w, "/tokens", "vocab_size", 50));
    if (domain) {
        DS_TEST_OK(tess_ds_write_array(&w, "/domain", H5T_STD_U8LE, H5T_NATIVE_INT32, 1, &n, dom));
        DS_TEST_OK(tess_ds_write_attr_int(&w, "/domain", "n_domains", 2));
        DS_TEST_OK(tess_ds_write_attr_string(&w, "/domain", "names", "a,b"));
    }
    DS_TEST_OK(tess_ds_writer_commit(&w));
}

/* Two sessions; the last frame of session "b" holds a NaN, or the behaviour has a wrong length. */
static void write_bad_traces(const char *path, bool nan) {
    enum { T = 10, N = 2 };
    float tr[T * N], bh[T];
    for (int i = 0; i < T * N; i++) tr[i] = (float)i;
    for (int t = 0; t < T; t++) bh[t] = (float)t;
    tess_ds_writer w;
    DS_TEST_OK(tess_ds_writer_create(&w, path, "tessera.traces", 1));
    DS_TEST_OK(tess_ds_write_group(&w, "/sessions"));
    DS_TEST_OK(tess_ds_write_attr_string(&w, "/sessions", "behavior_names", "v"));
    const char *names[2] = {"a", "b"};
    for (int s = 0; s < 2; s++) {
        char obj[32], ds[48];
        snprintf(obj, sizeof obj, "/sessions/%s", names[s]);
        DS_TEST_OK(tess_ds_write_group(&w, obj));
        DS_TEST_OK(tess_ds_write_attr_double(&w, obj, "sampling_rate_hz", 2.0));
        if (s == 1 && nan) tr[T * N - 1] = NAN;
        int64_t d[2] = {T, N};
        snprintf(ds, sizeof ds, "%s/traces", obj);
        DS_TEST_OK(tess_ds_write_array(&w, ds, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d, tr));
        d[0] = s == 1 && !nan ? T - 1 : T;
        d[1] = 1;
        snprintf(ds, sizeof ds, "%s/behavior", obj);
        DS_TEST_OK(tess_ds_write_array(&w, ds, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d, bh));
    }
    DS_TEST_OK(tess_ds_writer_commit(&w));
}

static void write_truncated(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[1024];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (out) fwrite(buf, 1, n, out);
    if (in) fclose(in);
    if (out) fclose(out);
}

int main(int argc, char **argv) {
    int rank, size;
    ds_test_init(&argc, &argv, &rank, &size);
    if (rank == 0) {
        write_graphs("good.h5", GOOD);
        write_graphs("y_short.h5", Y_SHORT);
        write_graphs("x_int.h5", X_INT);
        write_graphs("no_classes.h5", NO_CLASSES);
        write_graphs("bad_index.h5", BAD_INDEX);
        write_graphs("version2.h5", VERSION2);
        write_graphs("feat.h5", FEAT_MISMATCH);
        write_graphs("ptr.h5", PTR_DECREASE);
        write_truncated("good.h5", "truncated.h5");
        FILE *t = fopen("notes.txt", "w");
        if (t) {
            fputs("not an HDF5 file\n", t);
            fclose(t);
        }
        write_bad_tokens("tokens.h5", false);
        write_bad_tokens("domain.h5", true);
        write_bad_traces("nan.h5", true);
        write_bad_traces("short.h5", false);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    tess_graphs gs;

    DS_TEST_OK(tess_graphs_read(&gs, ds_world, "good.h5"));
    tess_graphs_free(&gs);
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "absent.h5"), TESS_ERR_NOINPUT,
                  "cannot open dataset file 'absent.h5': No such file or directory");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "notes.txt"), TESS_ERR_DATA,
                  "'notes.txt' is not a readable HDF5 file");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "truncated.h5"), TESS_ERR_DATA,
                  "'truncated.h5' is not a readable HDF5 file");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "y_short.h5"), TESS_ERR_DATA,
                  "'y_short.h5': dataset /graphs/y has shape [4], expected [5]");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "x_int.h5"), TESS_ERR_DATA,
                  "'x_int.h5': dataset /graphs/x has type int32, expected a float type");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "no_classes.h5"), TESS_ERR_DATA,
                  "'no_classes.h5': attribute 'num_classes' of /graphs is missing");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "version2.h5"), TESS_ERR_DATA,
                  "format_version 2 of 'tessera.graphs' is not supported");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "feat.h5"), TESS_ERR_DATA,
                  "'feat.h5': dataset /graphs/x has shape [15, 3], expected [15, 5]");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "ptr.h5"), TESS_ERR_DATA, "decreases");
    /* Only the rank holding graph 4 sees this one; every rank reports it. */
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "bad_index.h5"), TESS_ERR_DATA,
                  "'bad_index.h5': graph 4, row 2: neighbour 9 is outside the graph's 3 nodes");
    DS_TEST_FAILS(tess_graphs_read(&gs, ds_world, "tokens.h5"), TESS_ERR_DATA,
                  "'tokens.h5' has format 'tessera.tokens', expected 'tessera.graphs'");
    TESS_TEST_CHECK(gs.graph_ids == NULL && gs.x == NULL, "failed reads hold nothing");

    tess_tokens *r = NULL;
    tess_tokens_opts o = {.seq_len = 8, .begin_frac = 0.0, .end_frac = 1.0};
    DS_TEST_FAILS(tess_tokens_create(&r, ds_world, "tokens.h5", &o), TESS_ERR_DATA,
                  "'tokens.h5': /tokens[777] = 60 is outside [0, vocab_size = 50)");
    DS_TEST_FAILS(tess_tokens_create(&r, ds_world, "domain.h5", &o), TESS_ERR_DATA,
                  "'domain.h5': /domain[777] = 5 is outside [0, n_domains = 2)");
    DS_TEST_FAILS(tess_tokens_create(&r, ds_world, "good.h5", &o), TESS_ERR_DATA,
                  "has format 'tessera.graphs', expected 'tessera.tokens'");
    TESS_TEST_CHECK(r == NULL, "no reader after failures");

    tess_traces tr;
    DS_TEST_FAILS(tess_traces_read(&tr, ds_world, "nan.h5", TESS_TRACES_SPLIT_TIME, 0), TESS_ERR_DATA,
                  "'nan.h5': /sessions/b/traces[9, 1] is not finite");
    DS_TEST_FAILS(tess_traces_read(&tr, ds_world, "short.h5", TESS_TRACES_SPLIT_SESSIONS, 0),
                  TESS_ERR_DATA,
                  "'short.h5': dataset /sessions/b/behavior has shape [9, 1], expected [10, 1]");
    DS_TEST_FAILS(tess_traces_read(&tr, ds_world, "absent.h5", TESS_TRACES_SPLIT_TIME, 0),
                  TESS_ERR_NOINPUT, "absent.h5");
    TESS_TEST_CHECK(tr.sessions == NULL, "failed reads hold nothing");

    int rc = tess_test_finish_mpi("test_ds_bad", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
