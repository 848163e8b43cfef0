/* test_plot.c - io/plot.h renders each kind of plot from a small CSV: one linear axis, one log
 * axis, a left log axis with a right linear axis, a series against another x column, and a CSV
 * with an all-NaN column (left out, with a debug message naming it). Each PNG must exist, be a
 * PNG and be non-trivial (> 8 KiB). Refused: a spec without axis labels, a column the CSV lacks,
 * a CSV where no column has a value. Exit 77 (skipped) after the refusals when gnuplot is not
 * installed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h" /* tess_log_open_file */
#include "io/plot.h"  /* tess_plot_csv */
#include "tess_test.h"

static void write_csv(const char *path, bool all_nan) {
    FILE *f = fopen(path, "w");
    fprintf(f, "step,loss,acc,empty,tokens\n");
    for (int s = 10; s <= 200; s += 10) {
        const double loss = all_nan ? NAN : 2.5 * exp(-0.05 * s) + 1e-8;
        const double acc = all_nan ? NAN : 1.0 - exp(-0.02 * s);
        fprintf(f, "%d,%.9g,%.9g,nan,%s\n", s, loss, acc, all_nan ? "nan" : "1e3");
    }
    fclose(f);
}

/* The file exists, starts with the PNG signature and has more than 8 KiB. */
static bool png_ok(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    unsigned char sig[8] = {0};
    *size = 0;
    if (!f) return false;
    const size_t n = fread(sig, 1, 8, f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fclose(f);
    return n == 8 && memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0 && *size > 8192;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    write_csv("m.csv", false);
    write_csv("nan.csv", true);
    static const char *const loss[] = {"loss"}, *const acc[] = {"acc"},
                             *const loss_empty[] = {"loss", "empty"}, *const none[] = {"nope"};
    const tess_plot_spec unlabelled = {.title = "t", .ycols = loss, .ny = 1, .xlabel = "step"};
    TESS_TEST_CHECK(tess_plot_csv("m.csv", "x.png", &unlabelled) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "label with its unit"),
                    "a missing y label is refused: %s", tess_error_text());
    tess_error_clear();
    const tess_plot_spec missing = {.title = "t", .ycols = none, .ny = 1, .xlabel = "step (1)",
                                    .ylabel = "y (1)"};
    TESS_TEST_CHECK(tess_plot_csv("m.csv", "x.png", &missing) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "'m.csv' has no column 'nope'"),
                    "a missing column is refused: %s", tess_error_text());
    tess_error_clear();
    const tess_plot_spec empty = {.title = "t", .ycols = loss, .ny = 1, .xlabel = "step (1)",
                                  .ylabel = "loss (nats)", .y2cols = acc, .ny2 = 1,
                                  .y2label = "accuracy (fraction)"};
    TESS_TEST_CHECK(tess_plot_csv("nan.csv", "x.png", &empty) == TESS_ERR_DATA &&
                        strstr(tess_error_text(), "no column to plot has a value"),
                    "a CSV without values is refused: %s", tess_error_text());
    tess_error_clear();
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("test_plot: SKIPPED (gnuplot is not installed: apt-get install gnuplot-nox)\n");
        MPI_Finalize();
        return 77;
    }

    tess_log_init(0, TESS_LOG_DEBUG);
    remove("plot.log");
    TESS_TEST_CHECK(tess_log_open_file("plot.log") == TESS_OK, "open plot.log");
    static const char *const loss_title[] = {"training loss"}, *const acc_title[] = {"accuracy"};
    static const struct {
        const char *png;
        tess_plot_spec spec;
    } kinds[] = {
        {"linear.png", {.title = "accuracy", .subtitle = "d=8, tau=0.1", .ycols = acc, .ny = 1,
                        .xlabel = "step (updates)", .ylabel = "accuracy (fraction)"}},
        {"log.png", {.title = "loss", .subtitle = "d=8, tau=0.1", .ycols = loss_empty, .ny = 2,
                     .xlabel = "step (updates)", .ylabel = "loss (nats/token)", .logy = true}},
        {"two_axes.png", {.title = "loss and accuracy", .subtitle = "model 'tiny'", .ycols = loss,
                          .ny = 1, .xlabel = "step (updates)", .ylabel = "loss (nats/token)",
                          .logy = true, .y2cols = acc, .ny2 = 1,
                          .y2label = "accuracy (fraction)", .ytitles = loss_title,
                          .y2titles = acc_title}},
        {"other_x.png", {.title = "loss against tokens", .xcol = "tokens", .ycols = loss,
                         .ny = 1, .xlabel = "tokens (count)", .ylabel = "loss (nats/token)"}},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        remove(kinds[i].png);
        const tess_status s = tess_plot_csv("m.csv", kinds[i].png, &kinds[i].spec);
        long size = 0;
        TESS_TEST_CHECK(s == TESS_OK && png_ok(kinds[i].png, &size),
                        "%s: status %d, %ld bytes: %s", kinds[i].png, (int)s, size,
                        tess_error_text());
        tess_error_clear();
    }
    tess_log_close_file();
    FILE *f = fopen("plot.log", "r");
    char buf[4096] = "";
    const size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    TESS_TEST_CHECK(strstr(buf, "plot 'log.png': column 'empty' of 'm.csv' has no value: left out"),
                    "the empty column is left out of log.png:\n%s", buf);
    tess_log_init(0, TESS_LOG_INFO);
    const int rc = tess_test_finish("plot");
    MPI_Finalize();
    return rc;
}
