/* tess-convert calcium - Flavell-lab calcium recordings (one HDF5 file per animal, as the public
 * recordings ship) into one Tessera multi-session trace file (io/traces.h).
 *
 * --traces: the dataset under /gcamp/ (default trace_array, z-scored per neuron).
 * --behavior: variables under /behavior/ (default velocity,head_angle,reversal_vec; pumping is
 * NaN in some files and is refused). Sessions are named after their files.
 */
#include <stdio.h>
#include <stdlib.h>

#include "convert.h"   /* convert_cmd */
#include "core/log.h"  /* tess_log_info */
#include "io/traces.h" /* tess_traces_* */

/* vals[0]: --traces, vals[1]: --behavior; args: out.h5, then n = nargs - 1 session files. */
static tess_status run(const char *const *vals, int nargs, char **args) {
    const char *out = args[0], *trace_name = vals[0], *behavior = vals[1];
    char **in = args + 1;
    int n = nargs - 1;
    /* names separated by single commas: an empty one would become a column of nothing */
    for (const char *c = behavior; *c; c++)
        TESS_REQUIRE(*c != ',' || (c > behavior && c[1] != '\0' && c[1] != ','), TESS_ERR_ARG,
                     "--behavior '%s': an empty variable name (expected names under /behavior/ "
                     "separated by single commas, e.g. velocity,head_angle)",
                     behavior);
    tess_traces tr = {.total_sessions = n, .behavior_dim = 0};
    snprintf(tr.behavior_names, sizeof tr.behavior_names, "%s", behavior);
    tr.behavior_dim = behavior[0] ? 1 : 0;
    for (const char *c = behavior; *c; c++) tr.behavior_dim += *c == ',';
    tr.sessions = calloc((size_t)n, sizeof *tr.sessions);
    TESS_REQUIRE(tr.sessions != NULL, TESS_ERR_MEM, "out of memory");
    tess_status s = TESS_OK;
    for (int i = 0; i < n && s == TESS_OK; i++) {
        s = tess_traces_import_flavell(&tr.sessions[i], in[i], trace_name, behavior);
        if (s != TESS_OK) break;
        tr.num_sessions++;
        const tess_traces_session *ss = &tr.sessions[i];
        tess_log_info("%s: %lld frames x %lld neurons at %.3f Hz", ss->name, (long long)ss->frames,
                      (long long)ss->neurons, ss->rate_hz);
    }
    if (s == TESS_OK) s = tess_traces_write(out, &tr);
    if (s == TESS_OK)
        tess_log_info("wrote %s: %d sessions, behaviour %s", out, n, behavior[0] ? behavior : "-");
    tess_traces_free(&tr);
    TESS_REQUIRE(s == TESS_OK, s, "building '%s'", out);
    return TESS_OK;
}

const convert_cmd convert_calcium = {
    .name = "calcium",
    .summary = "Flavell-lab calcium recordings -> multi-session traces (io/traces.h)",
    .args = "<out.h5> <session.h5>...",
    .out_arg = 0,
    .min_args = 2,
    .max_args = 0,
    .opts = {{.name = "--traces",
              .metavar = "NAME",
              .def = "trace_array",
              .help = "the traces under /gcamp/ (trace_array is z-scored per neuron; "
                      "trace_array_original is not)"},
             {.name = "--behavior",
              .metavar = "a,b,...",
              .def = "velocity,head_angle,reversal_vec",
              .help = "behaviour variables under /behavior/ (pumping is NaN in some files and "
                      "refused)"}},
    .nopts = 2,
    .details = "The output comes first, then one file per animal; each becomes a session named\n"
               "after its file, its rate from /timing/timestamp_confocal (docs/datasets.md).",
    .run = run,
};
