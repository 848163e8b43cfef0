/* test_log.c - who prints what at which level (captured through a file), the number and
 * duration formats, the progress line, its styles and rate limits, the rule of progress = auto,
 * messages never landing mid-line, and the log file (early lines, every rank's info, progress). */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
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

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
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
    tess_progress_init(&p, 3, NULL, "tok", TESS_PROGRESS_LINES, 1000.0);
    bool first = tess_progress_update(&p, 1, 2.5, 100);
    bool second = tess_progress_update(&p, 2, 2.4, 100);
    bool last = tess_progress_update(&p, 3, 2.3, 100);
    printf("printed %d%d%d\n", first, second, last);
}

/* TTY style: a line on the screen, a message while it is there, then the last step. */
static void progress_tty(void) {
    tess_log_init(0, TESS_LOG_INFO);
    tess_progress p;
    tess_progress_init(&p, 3, NULL, "tok", TESS_PROGRESS_TTY, 10.0);
    sleep_s(1.1); /* past the one-second limit of the TTY line */
    tess_progress_update(&p, 1, 2.5, 100);
    tess_log_info("checkpoint written");
    tess_progress_update(&p, 3, 2.3, 100);
}

/* LINES style with a short interval, steps without a loss; OFF prints nothing. */
static void progress_lines_no_loss(void) {
    tess_log_init(0, TESS_LOG_INFO);
    tess_progress p;
    tess_progress_init(&p, 2, NULL, "samples", TESS_PROGRESS_LINES, 0.1);
    sleep_s(0.15);
    tess_progress_update(&p, 1, NAN, 10);
    tess_progress_update(&p, 2, NAN, 10);
    tess_progress_init(&p, 2, NULL, "samples", TESS_PROGRESS_OFF, 0.1);
    tess_progress_update(&p, 2, 1.0, 10);
}

/* A position in samples that jumps by hundreds per update: the ETA follows the samples' rate
 * (0.15 s for 200 samples, 700 to go: about 0.5 s), not the count of updates (which gives 52 s). */
static void progress_samples(void) {
    tess_log_init(0, TESS_LOG_INFO);
    tess_progress p;
    tess_progress_init(&p, 1000, "samples", "samples", TESS_PROGRESS_LINES, 0.1);
    tess_progress_update(&p, 100, NAN, 100);
    sleep_s(0.15);
    tess_progress_update(&p, 300, NAN, 200);
}

/* A record as TESS_REQUIRE and two TESS_CHECKs leave it, written brief. */
static tess_status inner(void) {
    TESS_REQUIRE(false, TESS_ERR_CONFIG, "unknown key 'a.b' (did you mean 'a.c'?)");
    return TESS_OK;
}
static tess_status outer(void) {
    TESS_CHECK(inner());
    return TESS_OK;
}
static void record_brief(void) {
    tess_error_clear();
    (void)outer();
    tess_error_push(TESS_ERR_CONFIG, "x.c", 1, "f", "%s", "app->setup(run, run->ctx)");
    tess_log_error_record(true);
    tess_error_clear();
}

/* Read a whole small file into a static buffer. */
static const char *slurp(const char *path) {
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
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
    static const struct {
        int64_t step, total;
        double loss;
        const char *s;
    } fmt[] = {{120, 1000, 2.34561, "step 120/1000  loss 2.346  12.3k tok/s  ETA 1m23s"},
               {450, 1000, 3.2e-5, "step 450/1000  loss 3.2e-05  12.3k tok/s  ETA 1m23s"},
               {5, 10, NAN, "step 5/10  12.3k tok/s  ETA 1m23s"},
               {5, 0, 0.5, "step 5  loss 0.5  12.3k tok/s"}};
    tess_progress_format(line, sizeof line, NULL, 3, 10, NAN, 0.0, "samples", 7.0);
    TESS_TEST_CHECK(strcmp(line, "step 3/10  ETA 7s") == 0, "no items, no rate: '%s'", line);
    tess_progress_format(line, sizeof line, "samples", 2400, 6000, NAN, 1200.0, "samples", -1.0);
    TESS_TEST_CHECK(strcmp(line, "samples 2400/6000  1.20k samples/s  ETA ?") == 0,
                    "position in samples, no ETA yet: '%s'", line);
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        tess_progress_format(line, sizeof line, NULL, fmt[i].step, fmt[i].total, fmt[i].loss,
                             12345.0, "tok", 83.0);
        TESS_TEST_CHECK(strcmp(line, fmt[i].s) == 0, "progress line: '%s', expected '%s'", line,
                        fmt[i].s);
    }
    /* progress = auto: a terminal only when stdout is one, TERM is usable and no launcher. */
    static const struct {
        bool tty;
        const char *term;
        bool launched;
        tess_progress_style want;
    } rule[] = {{true, "xterm-256color", false, TESS_PROGRESS_TTY},
                {true, "xterm", true, TESS_PROGRESS_LINES}, /* mpiexec's pty, maybe > out.log */
                {true, "dumb", false, TESS_PROGRESS_LINES},
                {true, NULL, false, TESS_PROGRESS_LINES},
                {true, "", false, TESS_PROGRESS_LINES},
                {false, "xterm", false, TESS_PROGRESS_LINES}};
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++)
        TESS_TEST_CHECK(tess_progress_decide(rule[i].tty, rule[i].term, rule[i].launched) ==
                            rule[i].want,
                        "auto rule row %zu", i);
    TESS_TEST_CHECK(tess_progress_resolve(TESS_PROGRESS_OFF) == TESS_PROGRESS_OFF &&
                        tess_progress_resolve(TESS_PROGRESS_AUTO) != TESS_PROGRESS_AUTO,
                    "resolve keeps explicit styles and decides auto");

    out = captured(progress_run);
    TESS_TEST_CHECK(strstr(out, "printed 001\n") != NULL,
                    "within the interval only the last step prints:\n%s", out);
    TESS_TEST_CHECK(strncmp(out, "step 3/3  loss 2.3  ", 20) == 0 && strstr(out, "ETA 0s\n"),
                    "last line, lines style, so a full line:\n%s", out);
    out = captured(progress_tty);
    TESS_TEST_CHECK(strncmp(out, "\rstep 1/3  loss 2.5  ", 21) == 0, "TTY line:\n%s", out);
    const char *msg = strstr(out, "checkpoint written\n");
    TESS_TEST_CHECK(msg && strncmp(msg - 4, "\r\033[K", 4) == 0 &&
                        strncmp(msg + 19, "\rstep 1/3 ", 10) == 0,
                    "the message clears the line, stands on its own and the line comes back:\n%s",
                    out);
    TESS_TEST_CHECK(strstr(out, "\rstep 3/3  loss 2.3  ") && out[strlen(out) - 1] == '\n',
                    "the last step ends the TTY line:\n%s", out);
    out = captured(progress_samples);
    TESS_TEST_CHECK(strncmp(out, "samples 300/1000  ", 18) == 0 &&
                        (strstr(out, "ETA 0s\n") || strstr(out, "ETA 1s\n")),
                    "a position in samples with the ETA of its rate:\n%s", out);
    out = captured(progress_lines_no_loss);
    TESS_TEST_CHECK(strncmp(out, "step 1/2  ", 10) == 0 && strstr(out, "\nstep 2/2  ") &&
                        !strstr(out, "loss") && !strchr(out, '\r') && !strstr(out, "\033"),
                    "lines without a loss, plain text, nothing under off:\n%s", out);

    out = captured(record_brief);
    TESS_TEST_CHECK(strcmp(out, "error: unknown key 'a.b' (did you mean 'a.c'?)\n") == 0,
                    "a brief record is the message alone, no traceback lines:\n%s", out);

    /* The log file: lines logged before it was opened, info of any rank, progress lines,
     * a UTC stamp on each line; at least INFO even when the terminal is quiet. */
    remove("run.log");
    tess_log_init(1, TESS_LOG_WARN);
    tess_log_info("early line %d", 7);
    TESS_TEST_CHECK(tess_log_open_file("run.log") == TESS_OK, "open run.log");
    tess_log_warn("late warning");
    tess_log_debug("not at warn");
    tess_log_init(0, TESS_LOG_WARN);
    tess_progress p;
    tess_progress_init(&p, 2, NULL, "tok", TESS_PROGRESS_OFF, 1000.0);
    tess_progress_update(&p, 1, 1.0, 1);
    tess_progress_update(&p, 2, 0.25, 1);
    tess_log_close_file();
    const char *log = slurp("run.log");
    TESS_TEST_CHECK(strstr(log, " early line 7\n") && strstr(log, " warning: late warning\n") &&
                        !strstr(log, "not at warn") && strstr(log, " step 2/2  loss 0.25  ") &&
                        !strstr(log, "step 1/2") && strncmp(log, "20", 2) == 0 && log[10] == ' ',
                    "log file:\n%s", log);
    TESS_TEST_CHECK(tess_log_open_file("no_such_dir/run.log") == TESS_ERR_IO &&
                        strstr(tess_error_text(), "no_such_dir/run.log"),
                    "an unwritable log file is an error naming it");
    tess_error_clear();
    tess_log_init(0, TESS_LOG_INFO);
    int rc = tess_test_finish("log");
    MPI_Finalize();
    return rc;
}
