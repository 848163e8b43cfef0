/* tess-tu2h5 - convert a TU graph dataset (text files) to a Tessera graph collection in HDF5.
 *
 *   tess-tu2h5 [--features auto|labels|attributes|both|degree] <TU dir or prefix> <out.h5>
 *
 * The conversion is io/graphs.h's tess_graphs_from_tu (pitfalls handled there: 1-based ids,
 * graph labels remapped to 0..C-1, duplicate and one-way edges, self loops, isolated nodes,
 * features); this main parses the command line, prints what was found and repaired, and writes
 * the file through <out.h5>.tmp and a rename. A serial tool: run it as one process.
 * Exit codes (OPERATIONS.md 2.3): 0, 64 bad command line, 65 malformed input (file:line in the
 * message), 66 missing input, 74 cannot write.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"     /* tess_log_info */
#include "core/runtime.h" /* tess_runtime_* */
#include "io/graphs.h"    /* tess_graphs_*, tess_tu_* */

static const char *const USAGE =
    "usage: tess-tu2h5 [--features auto|labels|attributes|both|degree] <TU dir or prefix> "
    "<out.h5>";

static tess_status parse_features(const char *s, tess_tu_features *f) {
    static const char *const names[] = {"auto", "labels", "attributes", "both", "degree"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *f = (tess_tu_features)i;
            return TESS_OK;
        }
    return tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                           "unknown --features '%s'\n%s", s, USAGE);
}

static void report(const tess_graphs *gs, const tess_tu_report *r, const char *out) {
    char labels[512];
    size_t off = 0;
    for (int64_t c = 0; c < gs->num_classes && off < sizeof labels; c++)
        off += (size_t)snprintf(labels + off, sizeof labels - off, "%s%lld->%lld", c ? ", " : "",
                                (long long)gs->label_values[c], (long long)c);
    tess_log_info("%s: %lld graphs, %lld nodes, %lld undirected edges (%lld CSR entries); "
                  "%lld classes (graph labels %s); %lld node features (%s)",
                  gs->name, (long long)gs->num_graphs, (long long)gs->num_nodes,
                  (long long)r->edges, (long long)gs->nnz, (long long)gs->num_classes, labels,
                  (long long)gs->num_features, gs->feature_kind);
    tess_log_info("%s: %lld edge lines: %lld duplicate pairs dropped, %lld missing reverse pairs "
                  "added, %lld self loops dropped; %lld isolated nodes; max degree %lld",
                  gs->name, (long long)r->edge_lines, (long long)r->duplicates,
                  (long long)r->reverse_added, (long long)r->self_loops,
                  (long long)r->isolated_nodes, (long long)r->max_degree);
    tess_log_info("wrote %s", out);
}

static tess_status run(const tess_runtime *rt, int argc, char **argv) {
    TESS_REQUIRE(rt->size == 1, TESS_ERR_ARG,
                 "tess-tu2h5 is a serial tool: run it as one "
                 "process, not %d",
                 rt->size);
    tess_tu_features feat = TESS_TU_FEATURES_AUTO;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--features") == 0) {
            TESS_REQUIRE(i + 1 < argc, TESS_ERR_ARG, "--features needs a value\n%s", USAGE);
            TESS_CHECK(parse_features(argv[++i], &feat));
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s\n", USAGE);
            return TESS_OK;
        } else {
            TESS_REQUIRE(argv[i][0] != '-' && npos < 2, TESS_ERR_ARG,
                         "unexpected argument "
                         "'%s'\n%s",
                         argv[i], USAGE);
            pos[npos++] = argv[i];
        }
    }
    TESS_REQUIRE(npos == 2, TESS_ERR_ARG, "expected a TU dataset and an output file\n%s", USAGE);
    tess_graphs gs;
    tess_tu_report rep;
    TESS_CHECK(tess_graphs_from_tu(&gs, pos[0], feat, &rep));
    tess_status s = tess_graphs_write(pos[1], &gs);
    if (s == TESS_OK) report(&gs, &rep, pos[1]);
    tess_graphs_free(&gs);
    TESS_REQUIRE(s == TESS_OK, s, "writing '%s'", pos[1]);
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    if (s == TESS_OK) s = run(&rt, argc, argv);
    return tess_runtime_finish(&rt, s, true);
}
