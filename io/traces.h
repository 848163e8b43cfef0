/* traces.h - multi-session recordings in HDF5 (neural traces, time x neurons, with behaviour on
 * the same frames), read so that each rank holds only its sessions or its block of frames; the
 * writer; and the importer of the public Flavell-lab calcium recordings (tess-convert calcium
 * wraps it).
 *
 * File layout, format "tessera.traces" version 1 (docs/datasets.md has the h5ls listing):
 *   /                          attributes format, format_version
 *   /sessions                  attribute behavior_names: K comma-separated names ("" for K = 0)
 *   /sessions/<id>             one group per session; attribute sampling_rate_hz (float64 > 0)
 *   /sessions/<id>/traces      float32 (T, N)   frame-major: row t holds the N neurons at frame t
 *   /sessions/<id>/behavior    float32 (T, K)   absent when K = 0
 * T and N differ between sessions; K and the behaviour names are shared. Sessions are ordered by
 * name: the session index is the position in that order, the same for every reader.
 *
 * Letters: S sessions, T frames, N neurons, K behaviour variables.
 */
#ifndef TESS_IO_TRACES_H
#define TESS_IO_TRACES_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

enum { TESS_TRACES_NAME_MAX = 64, TESS_TRACES_NAMES_MAX = 512 };

/* One session, or a block of its frames. Arrays owned by the enclosing tess_traces. */
typedef struct {
    char name[TESS_TRACES_NAME_MAX];
    int64_t index;   /* position in name order */
    int64_t frames;  /* T of the whole session */
    int64_t t0, t;   /* frames [t0, t0 + t) are held here */
    int64_t neurons; /* N */
    double rate_hz;  /* sampling rate */
    float *traces;   /* (t, N) */
    float *behavior; /* (t, K), NULL when K = 0 */
} tess_traces_session;

typedef struct {
    int64_t total_sessions;                     /* S in the file */
    int64_t behavior_dim;                       /* K */
    char behavior_names[TESS_TRACES_NAMES_MAX]; /* comma-separated */
    int64_t num_sessions;                       /* held by this rank */
    tess_traces_session *sessions;              /* (num_sessions), increasing index */
} tess_traces;

/* How a file is shared among the ranks of a group. */
typedef enum {
    TESS_TRACES_SPLIT_SESSIONS = 0, /* whole sessions, tess_par_block_range(S, size, rank) */
    TESS_TRACES_SPLIT_TIME,         /* every session; frames block_range(T, size, rank) */
} tess_traces_split;

/* Read this rank's share of path. SPLIT_TIME with overlap >= 0 also reads up to `overlap` frames
 * past the end of the rank's block (window length - 1), so every window that starts in the block
 * is complete; ranks with an empty block hold t = 0 frames. Validates layout and values (traces
 * and behaviour finite); TESS_ERR_NOINPUT missing file, TESS_ERR_DATA naming file, dataset,
 * expected and found. Every rank returns the same status; on failure tr holds nothing.
 * Collective on g. */
tess_status tess_traces_read(tess_traces *tr, const tess_group *g, const char *path,
                             tess_traces_split split, int64_t overlap);

/* Free the arrays and zero tr. Safe on a zeroed struct. Not collective. */
void tess_traces_free(tess_traces *tr);

/* Write whole sessions (num_sessions == total_sessions, each with t0 = 0, t = frames; names
 * unique, without '/') to path through path.tmp and a rename. Not collective: one process. */
tess_status tess_traces_write(const char *path, const tess_traces *tr);

/* Import one Flavell-lab file (the Flavell-lab HDF5 layout) as a whole session s: traces from
 * /gcamp/<trace_name> (T, N) float64 -> float32; behaviour columns /behavior/<name> (T) for each
 * name of the comma-separated behavior_names (any numeric type; an empty name, as in "a,,b" or
 * "a,", is TESS_ERR_ARG); the sampling rate from the median frame interval of the first T values
 * of /timing/timestamp_confocal; the name from the file name without "-data.h5". Non-finite
 * values, timestamps included, are errors (e.g. /behavior/pumping is NaN in some files). s->traces and s->behavior are malloc'ed: free them, or hand s to a tess_traces.
 * Not collective. */
tess_status tess_traces_import_flavell(tess_traces_session *s, const char *path,
                                       const char *trace_name, const char *behavior_names);

#endif
