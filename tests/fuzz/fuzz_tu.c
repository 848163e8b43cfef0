/* fuzz_tu.c - the TU text reader (tess_graphs_from_tu, io/graphs.h).
 *
 * Input: one byte choosing the node features (tess_tu_features, modulo 5), then the texts of
 * up to five files separated by NUL bytes, in this order: FZ_A.txt, FZ_graph_indicator.txt,
 * FZ_graph_labels.txt, FZ_node_labels.txt, FZ_node_attributes.txt. A file whose part is absent
 * (fewer NULs) does not exist. The files are written to the scratch directory and read through
 * the prefix "<scratch>/FZ".
 * Properties checked (fuzz_fail otherwise), besides no crash under ASan/UBSan:
 *   - a failure leaves an error record and an empty collection;
 *   - an accepted dataset passes tess_graphs_check, is one whole collection, and its CSR is what
 *     graphs.h promises: every row sorted, without duplicates or self loops, every edge stored in
 *     both directions; the report's edge count is nnz / 2; node features are one-hot rows where
 *     the choice makes them one-hot (labels, degree);
 *   - blank lines appended to every file (docs/datasets.md: accepted) change nothing.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "io/graphs.h" /* tess_graphs_from_tu */

static const char *const fz_files[] = {"A", "graph_indicator", "graph_labels", "node_labels",
                                       "node_attributes"};
enum { FZ_NFILES = 5 };

int LLVMFuzzerInitialize(int *argc, char ***argv) { return fuzz_start(argc, argv); }

/* Whether row i of graph-local CSR holds j (rows sorted: binary search). */
static bool fz_has(const tess_graphs *gs, int64_t i, int32_t j) {
    int64_t lo = gs->indptr[i], hi = gs->indptr[i + 1];
    while (lo < hi) {
        int64_t m = lo + (hi - lo) / 2;
        if (gs->indices[m] == j) return true;
        if (gs->indices[m] < j) lo = m + 1;
        else hi = m;
    }
    return false;
}

static void fz_check(const tess_graphs *gs, const tess_tu_report *rep, tess_tu_features feat) {
    if (tess_graphs_check(gs, "fuzz") != TESS_OK) fuzz_fail("accepted graphs fail the check");
    if (gs->num_graphs != gs->total_graphs || gs->num_nodes != gs->total_nodes ||
        gs->nnz != gs->total_nnz)
        fuzz_fail("not one whole collection");
    if (rep->edges * 2 != gs->nnz)
        fuzz_fail("report: %lld edges, CSR %lld entries", (long long)rep->edges,
                  (long long)gs->nnz);
    for (int64_t g = 0; g < gs->num_graphs; g++) {
        int64_t n0 = gs->node_ptr[g];
        for (int64_t i = n0; i < gs->node_ptr[g + 1]; i++) {
            for (int64_t e = gs->indptr[i]; e < gs->indptr[i + 1]; e++) {
                int32_t j = gs->indices[e];
                if (e > gs->indptr[i] && gs->indices[e - 1] >= j)
                    fuzz_fail("row %lld not sorted or has a duplicate", (long long)i);
                if (j == i - n0) fuzz_fail("self loop at node %lld", (long long)i);
                if (!fz_has(gs, n0 + j, (int32_t)(i - n0)))
                    fuzz_fail("edge %lld -> %lld has no reverse", (long long)i, (long long)(n0 + j));
            }
        }
    }
    bool onehot = feat == TESS_TU_FEATURES_DEGREE || feat == TESS_TU_FEATURES_LABELS;
    for (int64_t i = 0; onehot && i < gs->num_nodes; i++) {
        double sum = 0.0;
        for (int64_t f = 0; f < gs->num_features; f++) sum += gs->x[i * gs->num_features + f];
        if (sum != 1.0) fuzz_fail("node %lld: one-hot row sums to %g", (long long)i, sum);
    }
}

/* Write the files of the input (after its first byte) to <scratch>/FZ_*.txt, each followed by
 * `tail` (a NUL-terminated suffix); absent parts remove their file. */
static void fz_write_files(const uint8_t *data, size_t size, const char *tail) {
    size_t at = 1, nt = strlen(tail);
    for (int k = 0; k < FZ_NFILES; k++) {
        char name[64], path[300];
        snprintf(name, sizeof name, "FZ_%s.txt", fz_files[k]);
        fuzz_path(path, sizeof path, name);
        if (at > size) {
            unlink(path);
            continue;
        }
        const uint8_t *end = memchr(data + at, 0, size - at);
        size_t len = end ? (size_t)(end - (data + at)) : size - at;
        uint8_t *text = malloc(len + nt + 1);
        if (!text) fuzz_fail("out of memory");
        memcpy(text, data + at, len);
        memcpy(text + len, tail, nt);
        fuzz_write_file(path, text, len + nt);
        free(text);
        at += len + 1;
    }
}

/* docs/datasets.md: blank lines at the end of a file are accepted. So a dataset that converts
 * converts to the same collection with blank lines appended to every file. */
static void fz_check_blank_tail(const uint8_t *data, size_t size, const char *prefix,
                                tess_tu_features feat, const tess_graphs *gs) {
    fz_write_files(data, size, "\n\n \r\n");
    tess_graphs again;
    tess_status s = tess_graphs_from_tu(&again, prefix, feat, NULL);
    fuzz_verdict("from_tu with blank lines appended", s);
    if (s != TESS_OK) fuzz_fail("refused once blank lines are appended to the files");
    if (again.num_graphs != gs->num_graphs || again.num_nodes != gs->num_nodes ||
        again.nnz != gs->nnz || again.num_features != gs->num_features)
        fuzz_fail("blank lines at the end change the collection");
    tess_graphs_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    tess_tu_features feat = (tess_tu_features)(data[0] % 5);
    char prefix[300];
    fuzz_path(prefix, sizeof prefix, "FZ");
    fz_write_files(data, size, "");
    tess_graphs gs;
    tess_tu_report rep;
    tess_status s = tess_graphs_from_tu(&gs, prefix, feat, &rep);
    fuzz_verdict("from_tu", s);
    if (s == TESS_OK) {
        fz_check(&gs, &rep, feat);
        fz_check_blank_tail(data, size, prefix, feat, &gs);
    } else {
        if (tess_error_text()[0] == '\0') fuzz_fail("failed without an error record");
        if (gs.x || gs.indptr || gs.indices || gs.node_ptr || gs.num_graphs)
            fuzz_fail("a failed conversion left data in the collection");
    }
    tess_error_clear();
    tess_graphs_free(&gs);
    return 0;
}
