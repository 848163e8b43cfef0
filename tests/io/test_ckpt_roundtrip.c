/* test_ckpt_roundtrip - checkpoints are bitwise round trips at any rank count and reshard on load.
 *   test_ckpt_roundtrip              write rt.h5 at P ranks, verify it, load it back, compare
 *   test_ckpt_roundtrip write PATH   write PATH (the fixture for the re-shard tests)
 *   test_ckpt_roundtrip read PATH [V] verify and load PATH written at another rank count, whose
 *                                    format_version must be V (default: the current one)
 * With TESS_CKPT_TEST_FORMAT_VERSION=1 or 2 (io/ckpt.h's test hook) it writes format 1 or 2
 * files (the step counter as an attribute; format 1 hashed with tess-poshash64-v1) and expects
 * that format_version when it reads its own file: old checkpoints stay loadable.
 * Every entry of ckpt_model.h (replicated, uneven shards, repeated shards, block-cyclic, a rank
 * holding nothing) and both optimizer sets are compared bit for bit; so are step, data cursor,
 * seed and the step-count counter. Also checks that the writes really were collective-capable
 * (a rank with nothing to write still joins) by running at 1..4 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_model.h"
#include "core/runtime.h" /* tess_runtime_* */
#include "tess_test.h"

static void write_file(const tess_group *g, int rank, int size, const char *path) {
    ckpt_model cm;
    TESS_TEST_CHECK(ckpt_model_build(&cm, rank, size, false) == TESS_OK, "build: %s",
                    tess_error_text());
    ckpt_model_fill(&cm, 42);
    tess_status s = tess_ckpt_write(g, path, &cm.st);
    TESS_TEST_CHECK(s == TESS_OK, "write %s: %s", path, tess_error_text());
    ckpt_model_free(&cm);
}

static void read_file(const tess_group *g, int rank, int size, const char *path, int64_t version) {
    tess_ckpt_info info;
    tess_status s = tess_ckpt_verify(g, path, &info);
    TESS_TEST_CHECK(s == TESS_OK, "verify %s: %s", path, tess_error_text());
    TESS_TEST_CHECK(info.step == 42 && info.format_version == version,
                    "info: step %lld, format_version %lld, expected %lld", (long long)info.step,
                    (long long)info.format_version, (long long)version);
    TESS_TEST_CHECK(strcmp(info.app, "test_ckpt") == 0, "app '%s'", info.app);
    if (rank == 0) { /* tess_ckpt_read_config: the config text, whole */
        hid_t f;
        char *config = NULL;
        TESS_TEST_CHECK(tess_ckpt_open(path, &f, NULL) == TESS_OK, "open %s: %s", path,
                        tess_error_text());
        s = tess_ckpt_read_config(f, path, &config);
        TESS_TEST_CHECK(s == TESS_OK && strcmp(config, "[run]\nseed = 7\n") == 0,
                        "config of %s: '%s' (%s)", path, config ? config : "(none)",
                        tess_error_text());
        free(config);
        H5Fclose(f);
        /* a file without /config: TESS_ERR_DATA naming the file */
        hid_t other = H5Fcreate("noconfig.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        s = tess_ckpt_read_config(other, "noconfig.h5", &config);
        TESS_TEST_CHECK(s == TESS_ERR_DATA && config == NULL &&
                            strstr(tess_error_text(), "/config") &&
                            strstr(tess_error_text(), "'noconfig.h5'"),
                        "read_config without /config: status %d, '%s'", (int)s, tess_error_text());
        tess_error_clear();
        H5Fclose(other);
        remove("noconfig.h5");
    }

    ckpt_model cm;
    TESS_TEST_CHECK(ckpt_model_build(&cm, rank, size, false) == TESS_OK, "build: %s",
                    tess_error_text());
    ckpt_model_clear(&cm);
    s = tess_ckpt_load(g, path, &cm.st);
    TESS_TEST_CHECK(s == TESS_OK, "load %s: %s", path, tess_error_text());
    int64_t bad = ckpt_model_mismatches(&cm);
    TESS_TEST_CHECK(bad == 0, "%lld elements differ after loading %s on %d ranks", (long long)bad,
                    path, size);
    TESS_TEST_CHECK(cm.st.step == 42 && cm.st.data_cursor == 42 * 32 &&
                        cm.st.seed == 0xfeedbeefcafeull && cm.step_count == 47,
                    "scalars: step %lld cursor %lld seed %llx step_count %lld",
                    (long long)cm.st.step, (long long)cm.st.data_cursor,
                    (unsigned long long)cm.st.seed, (long long)cm.step_count);
    ckpt_model_free(&cm);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL; /* the checkpoint functions' group */
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;
    const char *hook = getenv("TESS_CKPT_TEST_FORMAT_VERSION");
    const int64_t own = hook && (strcmp(hook, "1") == 0 || strcmp(hook, "2") == 0)
                            ? hook[0] - '0'
                            : TESS_CKPT_FORMAT_VERSION;
    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        write_file(g, rt.rank, rt.size, argv[2]);
    } else if ((argc == 3 || argc == 4) && strcmp(argv[1], "read") == 0) {
        read_file(g, rt.rank, rt.size, argv[2],
                  argc == 4 ? strtoll(argv[3], NULL, 10) : TESS_CKPT_FORMAT_VERSION);
    } else {
        write_file(g, rt.rank, rt.size, "rt.h5");
        read_file(g, rt.rank, rt.size, "rt.h5", own);
        /* writing over an existing checkpoint replaces it atomically */
        write_file(g, rt.rank, rt.size, "rt.h5");
        read_file(g, rt.rank, rt.size, "rt.h5", own);
        TESS_TEST_CHECK(access("rt.h5.tmp", F_OK) != 0, "rt.h5.tmp left behind");
    }
    int rc = tess_test_finish_mpi("test_ckpt_roundtrip", rt.comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
