/* test_metrics.c - metrics.csv: header and rows; a resumed run keeps the rows up to its step and
 * drops the ones a killed run wrote after its checkpoint; a foreign header is refused. */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "io/metrics.h" /* tess_metrics_* */
#include "tess_test.h"

static const char *const cols[] = {"step", "loss"};

static void write_rows(const char *path, int first, int last) {
    tess_metrics m;
    TESS_TEST_CHECK(tess_metrics_open(&m, path, cols, 2, false) == TESS_OK, "open %s", path);
    for (int s = first; s <= last; s += 10) {
        double row[2] = {s, 1.0 / s};
        TESS_TEST_CHECK(tess_metrics_row(&m, row) == TESS_OK, "row %d", s);
    }
    tess_metrics_close(&m);
}

static void read_all(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    char buf[4096];
    write_rows("m.csv", 10, 50);
    read_all("m.csv", buf, sizeof buf);
    TESS_TEST_CHECK(strncmp(buf, "step,loss\n10,0.1\n20,0.05\n", 25) == 0, "content:\n%s", buf);

    tess_metrics m;
    double last[2];
    TESS_TEST_CHECK(tess_metrics_open_resume(&m, "m.csv", cols, 2, 30, last) == TESS_OK, "resume");
    TESS_TEST_CHECK(last[0] == 30.0 && fabs(last[1] - 0.0333333333) < 1e-12,
                    "the last kept row comes back: %g, %g", last[0], last[1]);
    double row[2] = {40, 0.25};
    TESS_TEST_CHECK(tess_metrics_row(&m, row) == TESS_OK, "append");
    tess_metrics_close(&m);
    read_all("m.csv", buf, sizeof buf);
    TESS_TEST_CHECK(strcmp(buf, "step,loss\n10,0.1\n20,0.05\n30,0.0333333333\n40,0.25\n") == 0,
                    "rows after the resume step are dropped, then appended:\n%s", buf);

    TESS_TEST_CHECK(tess_metrics_open_resume(&m, "fresh.csv", cols, 2, 30, last) == TESS_OK &&
                        isnan(last[0]) && isnan(last[1]),
                    "missing file: no last row");
    tess_metrics_close(&m);
    read_all("fresh.csv", buf, sizeof buf);
    TESS_TEST_CHECK(strcmp(buf, "step,loss\n") == 0, "a missing file starts with the header: %s", buf);

    static const char *const other[] = {"step", "accuracy"};
    TESS_TEST_CHECK(tess_metrics_open_resume(&m, "m.csv", other, 2, 30, NULL) == TESS_ERR_DATA &&
                        strstr(tess_error_text(), "another header"),
                    "foreign header refused: %s", tess_error_text());
    tess_error_clear();
    read_all("m.csv", buf, sizeof buf);
    TESS_TEST_CHECK(strstr(buf, "40,0.25") != NULL, "a refused resume leaves the file alone");
    int rc = tess_test_finish("metrics");
    MPI_Finalize();
    return rc;
}
