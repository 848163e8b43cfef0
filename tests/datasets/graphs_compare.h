/* graphs_compare.h - test helper: does a rank's part of a graph collection equal the matching
 * graphs of a whole collection? Header-only, used by the graph and TU tests. */
#ifndef TESS_TEST_GRAPHS_COMPARE_H
#define TESS_TEST_GRAPHS_COMPARE_H

#include <string.h>

#include "io/graphs.h" /* tess_graphs */
#include "tess_test.h" /* TESS_TEST_CHECK */

/* Every graph of `part` (global id graph_ids[g]) against graph graph_ids[g] of `whole`: node and
 * entry counts, rows, indices, features, label; and the collection attributes. */
static inline void graphs_compare(const tess_graphs *part, const tess_graphs *whole) {
    TESS_TEST_CHECK(part->total_graphs == whole->num_graphs &&
                        part->total_nodes == whole->num_nodes && part->total_nnz == whole->nnz,
                    "totals %lld/%lld/%lld vs %lld/%lld/%lld", (long long)part->total_graphs,
                    (long long)part->total_nodes, (long long)part->total_nnz,
                    (long long)whole->num_graphs, (long long)whole->num_nodes,
                    (long long)whole->nnz);
    TESS_TEST_CHECK(part->num_features == whole->num_features &&
                        part->num_classes == whole->num_classes,
                    "F %lld C %lld", (long long)part->num_features, (long long)part->num_classes);
    if (part->num_classes != whole->num_classes || part->total_graphs != whole->num_graphs) return;
    TESS_TEST_CHECK(strcmp(part->name, whole->name) == 0, "name '%s' vs '%s'", part->name,
                    whole->name);
    TESS_TEST_CHECK(strcmp(part->feature_kind, whole->feature_kind) == 0, "feature_kind '%s'",
                    part->feature_kind);
    for (int64_t c = 0; c < whole->num_classes; c++)
        TESS_TEST_CHECK(part->label_values[c] == whole->label_values[c], "label_values[%lld]",
                        (long long)c);
    const int64_t F = whole->num_features;
    int bad = 0;
    for (int64_t g = 0; g < part->num_graphs; g++) {
        int64_t id = part->graph_ids[g];
        int64_t pn0 = part->node_ptr[g], wn0 = whole->node_ptr[id];
        int64_t n = part->node_ptr[g + 1] - pn0;
        bad += n != whole->node_ptr[id + 1] - wn0;
        bad += part->edge_ptr[g + 1] - part->edge_ptr[g] !=
               whole->edge_ptr[id + 1] - whole->edge_ptr[id];
        bad += part->y[g] != whole->y[id];
        if (bad) break;
        for (int64_t i = 0; i < n; i++) {
            int64_t pa = part->indptr[pn0 + i], wa = whole->indptr[wn0 + i];
            int64_t deg = part->indptr[pn0 + i + 1] - pa;
            bad += deg != whole->indptr[wn0 + i + 1] - wa;
            for (int64_t e = 0; e < deg && !bad; e++)
                bad += part->indices[pa + e] != whole->indices[wa + e];
            for (int64_t f = 0; f < F; f++)
                bad += part->x[(pn0 + i) * F + f] != whole->x[(wn0 + i) * F + f];
        }
        TESS_TEST_CHECK(bad == 0, "graph %lld differs from the whole collection", (long long)id);
        if (bad) break;
    }
    TESS_TEST_CHECK(bad == 0, "%lld graphs compared", (long long)part->num_graphs);
}

#endif
