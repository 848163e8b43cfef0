/* test_log.c - who prints what at which level (captured through a file), the number and
 * duration formats, the progress line and its rate limit. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h" /* tess_log_*, tess_progress_* */
#include "tess_test.h"

/* Run fn with stdout and stderr sent to a file; return what was written (both streams). */
static const char *captured(void (*fn)(void)) {
    static char buf[4096];
    fflush(NULL);
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    int fd = open("capture.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    fn();
    fflush(NULL);
    dup2(saved_out, STDOUT_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_out);
    close(saved_err);
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void all_levels(void) {
    tess_log_error("E%d", 1);
    tess_log_warn("W%d", 2);
    tess_log_info("I%d", 3);
    tess_log_debug("D%d", 4);
}

static void rank0_info(void) {
    tess_log_init(0, TESS_LOG_INFO);
    all_levels();
}
static void rank1_debug(void) {
    tess_log_init(1, TESS_LOG_DEBUG);
    all_levels();
}
static void rank0_error_only(void) {
    tess_log_init(0, TESS_LOG_ERROR);
    all_levels();
}

static void progress_run(void) {
    tess_log_init(0, TESS_LOG_INFO);
    tess_progress p;
    tess_progress_init(&p, 3, "tok");
    bool first = tess_progress_update(&p, 1, 2.5, 100);
    bool second = tess_progress_update(&p, 2, 2.4, 100);
    bool last = tess_progress_update(&p, 3, 2.3, 100);
    printf("printed %d%d%d\n", first, second, last);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const char *out = captured(rank0_info);
    TESS_TEST_CHECK(strcmp(out, "[rank 0] error: E1\nwarning: W2\nI3\n") == 0,
                    "rank 0 at INFO:\n%s", out);
    out = captured(rank1_debug);
    TESS_TEST_CHECK(strcmp(out, "[rank 1] error: E1\n[rank 1] D4\n") == 0,
                    "rank 1 at DEBUG: errors and debug only:\n%s", out);
    out = captured(rank0_error_only);
    TESS_TEST_CHECK(strcmp(out, "[rank 0] error: E1\n") == 0, "level ERROR:\n%s", out);

    char b[64];
    static const struct {
        double x;
        const char *s;
    } si[] = {{950, "950"}, {999.4, "999"}, {999.6, "1.00k"}, {12345, "12.3k"},
              {4.56e6, "4.56M"}, {123.4e9, "123G"}, {0, "0"}};
    for (size_t i = 0; i < sizeof si / sizeof si[0]; i++) {
        tess_log_format_si(b, sizeof b, si[i].x);
        TESS_TEST_CHECK(strcmp(b, si[i].s) == 0, "si(%g) = '%s', expected '%s'", si[i].x, b,
                        si[i].s);
    }
    static const struct {
        double t;
        const char *s;
    } dur[] = {{0, "0s"}, {45.2, "45s"}, {83, "1m23s"}, {7380, "2h03m"}, {90000, "1d01h"},
               {-1, "?"}};
    for (size_t i = 0; i < sizeof dur / sizeof dur[0]; i++) {
        tess_log_format_duration(b, sizeof b, dur[i].t);
        TESS_TEST_CHECK(strcmp(b, dur[i].s) == 0, "duration(%g) = '%s', expected '%s'", dur[i].t,
                        b, dur[i].s);
    }
    char line[128];
    tess_progress_format(line, sizeof line, 120, 1000, 2.34561, 12345.0, "tok", 83.0);
    TESS_TEST_CHECK(strcmp(line, "step 120/1000  loss 2.3456  12.3k tok/s  ETA 1m23s") == 0,
                    "progress line: '%s'", line);

    out = captured(progress_run);
    TESS_TEST_CHECK(strstr(out, "printed 001\n") != NULL,
                    "within a second only the last step prints:\n%s", out);
    TESS_TEST_CHECK(strncmp(out, "step 3/3  loss 2.3000  ", 23) == 0 && strstr(out, "ETA 0s\n"),
                    "last line, not a terminal, so a full line:\n%s", out);
    tess_log_init(0, TESS_LOG_INFO);
    int rc = tess_test_finish("log");
    MPI_Finalize();
    return rc;
}
