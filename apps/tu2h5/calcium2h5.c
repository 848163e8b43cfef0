/* tess-calcium2h5 - gather Flavell-lab calcium recordings (one HDF5 file per animal, as shipped
 * in shared/data/calcium) into one Tessera multi-session trace file (io/traces.h).
 *
 *   tess-calcium2h5 [--traces NAME] [--behavior a,b,...] <out.h5> <session.h5>...
 *
 * --traces: the dataset under /gcamp/ (default trace_array, z-scored per neuron).
 * --behavior: variables under /behavior/ (default velocity,head_angle,reversal_vec; pumping is
 * NaN in some files and is refused). Sessions are named after their files. A serial tool: run it
 * as one process. Exit codes: 0, 64 bad command line, 65 malformed input, 66 missing input,
 * 74 cannot write.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"     /* tess_log_info */
#include "core/runtime.h" /* tess_runtime_* */
#include "io/traces.h"    /* tess_traces_* */

static const char *const USAGE =
    "usage: tess-calcium2h5 [--traces NAME] [--behavior a,b,...] <out.h5> <session.h5>...";

static tess_status convert(const char *out, char **in, int n, const char *trace_name,
                           const char *behavior) {
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

static tess_status run(const tess_runtime *rt, int argc, char **argv) {
    TESS_REQUIRE(rt->size == 1, TESS_ERR_ARG,
                 "tess-calcium2h5 is a serial tool: run it as one "
                 "process, not %d",
                 rt->size);
    const char *trace_name = "trace_array", *behavior = "velocity,head_angle,reversal_vec";
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        bool has = i + 1 < argc;
        if (strcmp(argv[i], "--traces") == 0 && has)
            trace_name = argv[++i];
        else if (strcmp(argv[i], "--behavior") == 0 && has)
            behavior = argv[++i];
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s\n", USAGE);
            return TESS_OK;
        } else
            TESS_REQUIRE(false, TESS_ERR_ARG, "bad option '%s'\n%s", argv[i], USAGE);
    }
    TESS_REQUIRE(argc - i >= 2, TESS_ERR_ARG,
                 "expected an output file and at least one "
                 "session file\n%s",
                 USAGE);
    TESS_CHECK(convert(argv[i], argv + i + 1, argc - i - 1, trace_name, behavior));
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    if (s == TESS_OK) s = run(&rt, argc, argv);
    return tess_runtime_finish(&rt, s, true);
}
