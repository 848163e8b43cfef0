/* graphs.h - graph-classification collections in HDF5 (CSR per graph, node features, graph
 * labels), read so that each rank of a group holds only its graphs; and the converter
 * from the TU text format (tess-convert tu is a thin command around tess_graphs_from_tu and
 * tess_graphs_write).
 *
 * File layout, format "tessera.graphs" version 1 (G graphs, N nodes, nnz CSR entries, F node
 * features, C classes; docs/datasets.md has the h5ls listing):
 *   /                     attributes format, format_version
 *   /graphs               attributes name, num_classes (C), num_node_features (F), feature_kind
 *   /graphs/node_ptr      int64 (G+1)   nodes of graph g are [node_ptr[g], node_ptr[g+1])
 *   /graphs/edge_ptr      int64 (G+1)   CSR entries of graph g are [edge_ptr[g], edge_ptr[g+1])
 *   /graphs/indptr        int64 (N+1)   row i is indices[indptr[i] : indptr[i+1]]
 *   /graphs/indices       int32 (nnz)   neighbour ids LOCAL to the graph, 0 <= j < n_g
 *   /graphs/x             float32 (N, F)
 *   /graphs/y             int32 (G)     class in [0, C)
 *   /graphs/label_values  int64 (C)     the original label of class c (e.g. -1, 1)
 * An undirected edge is stored in both rows. The TU converter also sorts each row and removes
 * duplicates and self loops; the reader accepts any CSR that satisfies tess_graphs_check.
 *
 * Letters: G graphs, N nodes, nnz CSR entries, F features, C classes; a `_local` count is this
 * rank's part.
 */
#ifndef TESS_IO_GRAPHS_H
#define TESS_IO_GRAPHS_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

enum { TESS_GRAPHS_NAME_MAX = 64 };

/* A set of graphs held by one rank (or, for the writer and the converter, a whole collection).
 * Arrays are owned by the struct (tess_graphs_free). Offsets start at 0 in every set. */
typedef struct {
    /* the whole collection in the file (equal to the counts below for a whole collection) */
    int64_t total_graphs, total_nodes, total_nnz;
    int64_t num_features; /* F */
    int64_t num_classes;  /* C */
    char name[TESS_GRAPHS_NAME_MAX];
    char feature_kind[TESS_GRAPHS_NAME_MAX]; /* e.g. "node_labels_onehot[1..53]" */
    /* the graphs held here, in increasing global id */
    int64_t num_graphs;    /* G_local */
    int64_t num_nodes;     /* N_local */
    int64_t nnz;           /* nnz_local */
    int64_t *graph_ids;    /* (G_local) global id of each graph */
    int64_t *node_ptr;     /* (G_local + 1) */
    int64_t *edge_ptr;     /* (G_local + 1) */
    int64_t *indptr;       /* (N_local + 1) */
    int32_t *indices;      /* (nnz_local) graph-local neighbour ids */
    float *x;              /* (N_local, F) */
    int32_t *y;            /* (G_local) */
    int64_t *label_values; /* (C) */
} tess_graphs;

/* Read this rank's block of graphs, tess_par_block_range(G, size, rank) over g (a rank may
 * get none). Validates the layout (TESS_ERR_DATA naming file, dataset, expected and found) and
 * the content of the part read; every rank returns the same status. On failure gs holds nothing.
 * Collective on g. */
tess_status tess_graphs_read(tess_graphs *gs, const tess_group *g, const char *path);

/* Read graphs ids[0..n) of the file: strictly increasing, each in [0, G); each rank passes its
 * own list, n may be 0. Otherwise as tess_graphs_read. Collective on g. */
tess_status tess_graphs_read_ids(tess_graphs *gs, const tess_group *g, const char *path,
                                 const int64_t *ids, int64_t n);

/* Free the arrays and zero gs. Safe on a zeroed struct. Not collective. */
void tess_graphs_free(tess_graphs *gs);

/* Check the invariants of gs: pointer arrays start at 0, are non-decreasing and end at the
 * counts; each graph's rows start at its edge_ptr; indices in [0, n_g); y in [0, C); x finite.
 * TESS_ERR_DATA naming `what` (a file name) and the first violation. Not collective. */
tess_status tess_graphs_check(const tess_graphs *gs, const char *what);

/* Write a whole collection (num_graphs == total_graphs) to path, through path.tmp and a rename.
 * Not collective: call on one process. TESS_ERR_IO on write errors. */
tess_status tess_graphs_write(const char *path, const tess_graphs *gs);

/* --- the TU text format ---------------------------------------------------------------------- */

/* Node features of a converted TU dataset. */
typedef enum {
    TESS_TU_FEATURES_AUTO = 0,   /* labels if present, else attributes, else degree */
    TESS_TU_FEATURES_LABELS,     /* one-hot node label: column label - min, width max - min + 1 */
    TESS_TU_FEATURES_ATTRIBUTES, /* the node_attributes columns */
    TESS_TU_FEATURES_BOTH,       /* [one-hot label | attributes] */
    TESS_TU_FEATURES_DEGREE,     /* one-hot degree (after deduplication), width max degree + 1 */
} tess_tu_features;

/* What the conversion found and repaired. */
typedef struct {
    int64_t edge_lines;     /* lines of <NAME>_A.txt */
    int64_t self_loops;     /* lines u, u (dropped) */
    int64_t duplicates;     /* directed pairs listed again (dropped) */
    int64_t reverse_added;  /* directed pairs whose reverse was missing (added) */
    int64_t edges;          /* undirected edges kept (nnz / 2) */
    int64_t isolated_nodes; /* nodes without neighbours */
    int64_t max_degree;
    int64_t node_label_min, node_label_max; /* when <NAME>_node_labels.txt exists */
    int64_t num_attributes;                 /* columns of <NAME>_node_attributes.txt, 0 if absent */
} tess_tu_report;

/* Read a TU dataset into a whole collection gs (free with tess_graphs_free). source is the
 * dataset's directory (files <dir>/<basename>_*.txt, or the one *_A.txt in it) or a path prefix
 * (<prefix>_A.txt). Node ids are 1-based; graph labels are remapped to 0..C-1 in increasing value
 * order (label_values keeps the originals); each edge is stored in both directions, once.
 * Errors: TESS_ERR_NOINPUT for a missing file; TESS_ERR_DATA with file:line and what was
 * expected for malformed content (non-integer token, node id out of range, edge across two
 * graphs, graph_indicator not non-decreasing or skipping a graph, line counts that disagree).
 * rep may be NULL. Not collective. */
tess_status tess_graphs_from_tu(tess_graphs *gs, const char *source, tess_tu_features features,
                                tess_tu_report *rep);

#endif
