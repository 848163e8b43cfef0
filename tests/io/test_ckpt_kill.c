/* test_ckpt_kill - a writer killed in the middle of a checkpoint leaves the previous one valid and
 * `latest` pointing at it; the next start deletes the leftovers and resumes. Driven by
 * kill_test.sh in three runs:
 *   test_ckpt_kill prepare DIR      save steps 1 and 2
 *   test_ckpt_kill kill DIR         save step 3 under TESS_CKPT_TEST_KILL_AT (must not return)
 *   test_ckpt_kill check DIR STEP   latest names step 2, step 2 still loads, resume auto loads
 *                                   STEP, and no *.tmp is left in DIR */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_model.h"
#include "core/runtime.h" /* tess_runtime_* */
#include "tess_test.h"

static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        n += len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL; /* the checkpoint functions' group */
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;
    if (argc < 3) {
        fprintf(stderr, "usage: test_ckpt_kill prepare|kill|check DIR [STEP]\n");
        tess_group_destroy(&g);
        return tess_runtime_finish(&rt, TESS_ERR_ARG, true);
    }
    const char *mode = argv[1], *dir = argv[2];
    ckpt_model cm;
    TESS_TEST_CHECK(ckpt_model_build(&cm, rt.rank, rt.size, false) == TESS_OK, "build");
    if (strcmp(mode, "prepare") == 0) {
        for (int64_t step = 1; step <= 2; step++) {
            ckpt_model_fill(&cm, step);
            TESS_TEST_CHECK(tess_ckpt_save(g, dir, &cm.st, 5, NULL, 0) == TESS_OK,
                            "save %lld: %s", (long long)step, tess_error_text());
        }
    } else if (strcmp(mode, "kill") == 0) {
        ckpt_model_fill(&cm, 3);
        tess_status s = tess_ckpt_save(g, dir, &cm.st, 5, NULL, 0);
        TESS_TEST_CHECK(false, "the writer was not killed (TESS_CKPT_TEST_KILL_AT=%s, status %s)",
                        getenv("TESS_CKPT_TEST_KILL_AT") ? getenv("TESS_CKPT_TEST_KILL_AT") : "",
                        tess_status_name(s));
    } else if (strcmp(mode, "check") == 0 && argc == 4) {
        const int64_t want = strtoll(argv[3], NULL, 10);
        char path[512], latest[64] = "";
        snprintf(path, sizeof path, "%s/latest", dir);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(latest, sizeof latest, f)) latest[0] = '\0';
            fclose(f);
        }
        TESS_TEST_CHECK(strcmp(latest, "ckpt_00000002.h5\n") == 0, "latest = '%s'", latest);
        snprintf(path, sizeof path, "%s/ckpt_00000002.h5", dir);
        ckpt_model_clear(&cm);
        TESS_TEST_CHECK(tess_ckpt_load(g, path, &cm.st) == TESS_OK &&
                            ckpt_model_mismatches(&cm) == 0,
                        "the previous checkpoint does not load: %s", tess_error_text());
        bool resumed = false;
        ckpt_model_clear(&cm);
        tess_status s = tess_ckpt_resume(g, dir, "auto", &cm.st, &resumed, NULL, 0);
        TESS_TEST_CHECK(s == TESS_OK && resumed && cm.st.step == want &&
                            ckpt_model_mismatches(&cm) == 0,
                        "resume auto: %s, step %lld (want %lld): %s", tess_status_name(s),
                        (long long)cm.st.step, (long long)want, tess_error_text());
        MPI_Barrier(rt.comm);
        TESS_TEST_CHECK(count_tmp(dir) == 0, "%d tmp files left in %s", count_tmp(dir), dir);
    } else {
        TESS_TEST_CHECK(false, "unknown mode '%s'", mode);
    }
    ckpt_model_free(&cm);
    int rc = tess_test_finish_mpi("test_ckpt_kill", rt.comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
