/* test_metrics.c - metrics.csv and metrics.jsonl: header and rows, one JSON object per row
 * (integers, reals, null for NaN; every line parses back with jansson); a resumed run keeps the
 * rows up to its step in both files (the JSON file rebuilt from the CSV even when it was lost)
 * and drops the ones a killed run wrote after its checkpoint; a foreign header is refused. */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include <jansson.h>

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

/* Every line of a JSON Lines file is an object with the keys step and loss; their count. */
static int jsonl_objects(const char *path) {
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        TESS_TEST_CHECK(o && json_is_object(o) && json_object_size(o) == 2 &&
                            json_is_integer(json_object_get(o, "step")),
                        "%s line %d is not a row object: %s (%s)", path, n + 1, line, err.text);
        json_decref(o);
        n++;
    }
    if (f) fclose(f);
    return n;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    char buf[4096];
    char jp[64];
    static const struct {
        const char *csv, *jsonl;
    } paths[] = {{"run/metrics.csv", "run/metrics.jsonl"}, {"eval.csv", "eval.jsonl"},
                 {"noext", "noext.jsonl"}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        TESS_TEST_CHECK(tess_metrics_jsonl_path(jp, sizeof jp, paths[i].csv) == TESS_OK &&
                            strcmp(jp, paths[i].jsonl) == 0,
                        "jsonl path of %s: %s", paths[i].csv, jp);
    TESS_TEST_CHECK(tess_metrics_jsonl_path(jp, 8, "run/metrics.csv") == TESS_ERR_ARG,
                    "a path that does not fit is refused");
    tess_error_clear();

    write_rows("m.csv", 10, 50);
    read_all("m.csv", buf, sizeof buf);
    TESS_TEST_CHECK(strncmp(buf, "step,loss\n10,0.1\n20,0.05\n", 25) == 0, "content:\n%s", buf);
    read_all("m.jsonl", buf, sizeof buf);
    TESS_TEST_CHECK(strncmp(buf, "{\"step\":10,\"loss\":0.1}\n{\"step\":20,\"loss\":0.05}\n", 42) == 0,
                    "jsonl content:\n%s", buf);
    TESS_TEST_CHECK(jsonl_objects("m.jsonl") == 5, "5 objects in m.jsonl");

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
    read_all("m.jsonl", buf, sizeof buf);
    TESS_TEST_CHECK(jsonl_objects("m.jsonl") == 4 &&
                        strstr(buf, "{\"step\":30,\"loss\":0.0333333333}\n{\"step\":40,\"loss\":0.25}\n"),
                    "the JSON file follows the CSV across the resume:\n%s", buf);
    remove("m.jsonl");
    TESS_TEST_CHECK(tess_metrics_open_resume(&m, "m.csv", cols, 2, 20, NULL) == TESS_OK,
                    "resume without the JSON file");
    double nan_row[2] = {50, NAN};
    TESS_TEST_CHECK(tess_metrics_row(&m, nan_row) == TESS_OK, "append a NaN");
    tess_metrics_close(&m);
    read_all("m.jsonl", buf, sizeof buf);
    TESS_TEST_CHECK(strcmp(buf, "{\"step\":10,\"loss\":0.1}\n{\"step\":20,\"loss\":0.05}\n"
                                "{\"step\":50,\"loss\":null}\n") == 0,
                    "a lost JSON file is rebuilt from the CSV; NaN is null:\n%s", buf);

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
    TESS_TEST_CHECK(strstr(buf, "50,nan") != NULL, "a refused resume leaves the file alone");
    int rc = tess_test_finish("metrics");
    MPI_Finalize();
    return rc;
}
