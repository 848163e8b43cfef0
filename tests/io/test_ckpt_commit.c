/* test_ckpt_commit - the directory protocol: save names, the latest pointer, keep-last-N
 * retention, stale *.tmp cleaning, an abandoned later timeline, and resume "" / auto / PATH with
 * the fallback to the previous valid checkpoint when the newest is corrupt. */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_model.h"
#include "ckpt_tamper.h"
#include "core/runtime.h" /* tess_runtime_* */
#include "tess_test.h"

static bool exists(const char *path) { return access(path, F_OK) == 0; }
static int64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

/* Empty dir (left by an earlier run of this test); 0 on success or if it does not exist. */
static int empty_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int rc = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (remove(path) != 0) rc = -1;
    }
    closedir(d);
    return rc;
}

/* Contents of dir/latest without the newline ("" if missing). */
static void read_latest(const char *dir, char *buf, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/latest", dir);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (!fgets(buf, (int)n, f)) buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

static void save(const tess_group *g, ckpt_model *cm, const char *dir, int64_t step, int64_t keep) {
    ckpt_model_fill(cm, step);
    char path[256];
    tess_status s = tess_ckpt_save(g, dir, &cm->st, keep, path, sizeof path);
    TESS_TEST_CHECK(s == TESS_OK, "save step %lld: %s", (long long)step, tess_error_text());
    char want[256];
    snprintf(want, sizeof want, "%s/ckpt_%08lld.h5", dir, (long long)step);
    TESS_TEST_CHECK(strcmp(path, want) == 0, "saved as '%s', expected '%s'", path, want);
}

/* resume(spec) on every rank; check status, resumed flag, step and the loaded values. */
static void resume(const tess_group *g, ckpt_model *cm, const char *dir, const char *spec,
                   tess_status want, bool want_resumed, int64_t want_step, const char *needle) {
    ckpt_model_clear(cm);
    bool resumed = true;
    char path[256];
    tess_error_clear();
    tess_status s = tess_ckpt_resume(g, dir, spec, &cm->st, &resumed, path, sizeof path);
    TESS_TEST_CHECK(s == want, "resume '%s' in %s: %s, expected %s:\n%s", spec, dir,
                    tess_status_name(s), tess_status_name(want), tess_error_text());
    TESS_TEST_CHECK(!needle || strstr(tess_error_text(), needle), "no '%s' in:\n%s", needle,
                    tess_error_text());
    TESS_TEST_CHECK(s != TESS_OK || resumed == want_resumed, "resume '%s': resumed = %d", spec,
                    (int)resumed);
    if (s == TESS_OK && want_resumed) {
        TESS_TEST_CHECK(cm->st.step == want_step, "resume '%s': step %lld, expected %lld", spec,
                        (long long)cm->st.step, (long long)want_step);
        TESS_TEST_CHECK(cm->step_count == want_step + 5, "step_count %lld",
                        (long long)cm->step_count);
        int64_t bad = ckpt_model_mismatches(cm);
        TESS_TEST_CHECK(bad == 0, "resume '%s' from %s: %lld elements differ", spec, path,
                        (long long)bad);
    }
    tess_error_clear();
}

#define ON_ROOT(comm, rank, call)                                                           \
    do {                                                                                    \
        int ok_ = 1;                                                                        \
        if ((rank) == 0) ok_ = (call) == 0;                                                 \
        MPI_Bcast(&ok_, 1, MPI_INT, 0, (comm));                                             \
        TESS_TEST_CHECK(ok_, "%s failed", #call);                                           \
    } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL; /* the checkpoint functions' group */
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;
    MPI_Comm comm = rt.comm;
    const int rank = rt.rank;
    ckpt_model cm;
    TESS_TEST_CHECK(ckpt_model_build(&cm, rank, rt.size, false) == TESS_OK, "build");
    char latest[256];
    ON_ROOT(comm, rank, empty_dir("ck"));
    ON_ROOT(comm, rank, empty_dir("all"));

    /* retention: keep the last 2 */
    for (int64_t step = 10; step <= 50; step += 10) save(g, &cm, "ck", step, 2);
    MPI_Barrier(comm);
    TESS_TEST_CHECK(!exists("ck/ckpt_00000010.h5") && !exists("ck/ckpt_00000020.h5") &&
                        !exists("ck/ckpt_00000030.h5"),
                    "old checkpoints not pruned");
    TESS_TEST_CHECK(exists("ck/ckpt_00000040.h5") && exists("ck/ckpt_00000050.h5"),
                    "the last two checkpoints are missing");
    read_latest("ck", latest, sizeof latest);
    TESS_TEST_CHECK(strcmp(latest, "ckpt_00000050.h5") == 0, "latest = '%s'", latest);
    TESS_TEST_CHECK(!exists("ck/latest.tmp") && !exists("ck/ckpt_00000050.h5.tmp"),
                    "tmp files left by save");
    MPI_Barrier(comm); /* every rank has looked before rank 0 plants the stale files below */

    /* start-up: stale tmp files go, resume "" loads nothing, auto loads the newest */
    ON_ROOT(comm, rank, tamper_write_text("ck/ckpt_00000060.h5.tmp", "half a checkpoint"));
    ON_ROOT(comm, rank, tamper_write_text("ck/latest.tmp", "ckpt_00000060.h5\n"));
    resume(g, &cm, "ck", "", TESS_OK, false, 0, NULL);
    TESS_TEST_CHECK(!exists("ck/ckpt_00000060.h5.tmp") && !exists("ck/latest.tmp"),
                    "stale tmp files not deleted at start-up");
    resume(g, &cm, "ck", "auto", TESS_OK, true, 50, NULL);
    resume(g, &cm, "ck", "ck/ckpt_00000040.h5", TESS_OK, true, 40, NULL);

    /* fallback: the newest is corrupt -> the previous one; both corrupt -> an error */
    ON_ROOT(comm, rank, tamper_copy("ck/ckpt_00000050.h5", "good50.h5"));
    ON_ROOT(comm, rank, tamper_flip_dataset("ck/ckpt_00000050.h5", "/params/head.b", 5));
    resume(g, &cm, "ck", "auto", TESS_OK, true, 40, NULL);
    resume(g, &cm, "ck", "ck/ckpt_00000050.h5", TESS_ERR_DATA, false, 0,
           "dataset /params/head.b does not match its hash");
    ON_ROOT(comm, rank, tamper_truncate("ck/ckpt_00000040.h5", 3000));
    resume(g, &cm, "ck", "auto", TESS_ERR_DATA, false, 0,
           "none of the 2 checkpoints in 'ck' loads (the newest: corrupt checkpoint "
           "'ck/ckpt_00000050.h5' (step 50)");
    resume(g, &cm, "ck", "ck/missing.h5", TESS_ERR_NOINPUT, false, 0,
           "cannot open checkpoint 'ck/missing.h5': No such file or directory");
    resume(g, &cm, "nothing_here", "auto", TESS_OK, false, 0, NULL);

    /* an abandoned timeline: after going back to step 40, saving 45 deletes 50 */
    ON_ROOT(comm, rank, tamper_copy("good50.h5", "ck/ckpt_00000050.h5"));
    save(g, &cm, "ck", 40, 3);
    save(g, &cm, "ck", 45, 3);
    MPI_Barrier(comm);
    TESS_TEST_CHECK(!exists("ck/ckpt_00000050.h5"), "the abandoned step-50 checkpoint remains");
    TESS_TEST_CHECK(exists("ck/ckpt_00000040.h5") && exists("ck/ckpt_00000045.h5"),
                    "steps 40 and 45 should remain");
    read_latest("ck", latest, sizeof latest);
    TESS_TEST_CHECK(strcmp(latest, "ckpt_00000045.h5") == 0, "latest = '%s'", latest);
    resume(g, &cm, "ck", "auto", TESS_OK, true, 45, NULL);

    /* resume auto goes by the stored step: a file named for step 99 that holds step 40 is
     * skipped (issue: it won over the real newest and was then overwritten) */
    ON_ROOT(comm, rank, tamper_copy("ck/ckpt_00000040.h5", "ck/ckpt_00000099.h5"));
    resume(g, &cm, "ck", "auto", TESS_OK, true, 45, NULL);
    ON_ROOT(comm, rank, remove("ck/ckpt_00000099.h5"));
    /* one flipped metadata byte in the newest (the first byte of its superblock, and a byte of
     * its trailing metadata): auto falls back to step 40; the file alone is refused */
    ON_ROOT(comm, rank, tamper_copy("ck/ckpt_00000045.h5", "good45.h5"));
    ON_ROOT(comm, rank, tamper_flip("ck/ckpt_00000045.h5", tamper_userblock("good45.h5"), 0x02));
    resume(g, &cm, "ck", "auto", TESS_OK, true, 40, NULL);
    resume(g, &cm, "ck", "ck/ckpt_00000045.h5", TESS_ERR_DATA, false, 0,
           "corrupt checkpoint 'ck/ckpt_00000045.h5': its metadata changed since it was written");
    ON_ROOT(comm, rank, tamper_copy("good45.h5", "ck/ckpt_00000045.h5"));
    ON_ROOT(comm, rank, tamper_flip("ck/ckpt_00000045.h5", file_size("good45.h5") - 3, 0x40));
    resume(g, &cm, "ck", "auto", TESS_OK, true, 40, NULL);
    ON_ROOT(comm, rank, tamper_copy("good45.h5", "ck/ckpt_00000045.h5"));
    resume(g, &cm, "ck", "auto", TESS_OK, true, 45, NULL);

    /* a write that cannot create its file fails on every rank with IO, leaving nothing */
    ckpt_model_fill(&cm, 7);
    tess_error_clear();
    tess_status ws = tess_ckpt_write(g, "no/such/dir/x.h5", &cm.st);
    TESS_TEST_CHECK(ws == TESS_ERR_IO &&
                        strstr(tess_error_text(), "cannot create 'no/such/dir/x.h5.tmp'"),
                    "write into a missing directory: %s:\n%s", tess_status_name(ws),
                    tess_error_text());
    tess_error_clear();

    /* keep_last 0 keeps everything */
    for (int64_t step = 1; step <= 3; step++) save(g, &cm, "all", step, 0);
    MPI_Barrier(comm);
    TESS_TEST_CHECK(exists("all/ckpt_00000001.h5") && exists("all/ckpt_00000003.h5"),
                    "keep_last 0 pruned");

    ckpt_model_free(&cm);
    int rc = tess_test_finish_mpi("test_ckpt_commit", comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
