/* tess-convert tu - a TU graph dataset (text files) to a Tessera graph collection in HDF5.
 *
 * The conversion is io/graphs.h's tess_graphs_from_tu (pitfalls handled there: 1-based ids,
 * graph labels remapped to 0..C-1, duplicate and one-way edges, self loops, isolated nodes,
 * features); this subcommand prints what was found and repaired and writes the file through
 * <out.h5>.tmp and a rename. Malformed input fails with exit code 65 and file:line.
 */
#include <stdio.h>

#include "convert.h"   /* convert_cmd */
#include "core/log.h"   /* tess_log_info */
#include "io/graphs.h" /* tess_graphs_*, tess_tu_* */

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

/* vals[0]: --features (its choices are in tess_tu_features order); args: TU dataset, out.h5. */
static tess_status run(const char *const *vals, int nargs, char **args) {
    tess_tu_features feat =
        (tess_tu_features)convert_choice_index(convert_tu.opts[0].choices, vals[0]);
    tess_graphs gs;
    tess_tu_report rep;
    TESS_CHECK(tess_graphs_from_tu(&gs, args[0], feat, &rep));
    tess_status s = tess_graphs_write(args[1], &gs);
    if (s == TESS_OK) report(&gs, &rep, args[1]);
    tess_graphs_free(&gs);
    TESS_REQUIRE(s == TESS_OK, s, "writing '%s'", args[1]);
    return TESS_OK;
}

const convert_cmd convert_tu = {
    .name = "tu",
    .summary = "a TU graph dataset (text files) -> graph collection (io/graphs.h)",
    .args = "<TU dir or prefix> <out.h5>",
    .out_arg = 1,
    .min_args = 2,
    .max_args = 2,
    .opts = {{.name = "--features",
              .choices = "auto|labels|attributes|both|degree",
              .def = "auto",
              .help = "node features: one-hot node labels, the attribute columns, both, or the "
                      "one-hot degree; auto takes labels, else attributes, else degree"}},
    .nopts = 1,
    .details = "The dataset is its directory (files <dir>/<basename>_*.txt, or the one *_A.txt\n"
               "in it) or a path prefix (<prefix>_A.txt). Edges are stored in both directions\n"
               "once (duplicates and self loops dropped), graph labels remapped to 0..C-1; the\n"
               "output is written through <out.h5>.tmp and a rename (docs/datasets.md).",
    .run = run,
};
