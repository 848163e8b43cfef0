/* state.h - a run's checkpointable state, described by the objects that own it.
 *
 * A tess_state is a list of named, typed arrays: the parameters of one or several registries,
 * optimizer moments, step counters, RNG and data cursors, an app's progress records, per-client
 * models. Every stateful object adds its own entries (tess_adamw_describe, tess_zo_describe,
 * tess_state_add_registry, ...), under a prefix the caller chooses, and the checkpoint writes and
 * loads whatever the state lists (io/ckpt.h). The state only points at memory its owners keep;
 * it copies nothing, and an entry's data must stay valid while the state is used.
 *
 * Names: components separated by '/' (checkpoint groups), each of [A-Za-z0-9_.] characters, no
 * leading, trailing or doubled '/', 1..TESS_STATE_NAME_MAX-1 bytes in all, e.g.
 * "params/layers.0.attn.w_qkv", "optim/m/tok_emb", "optim/step_count", "clients/3/params/w".
 * Names are unique within a state; no name is a group of another ("a/b" and "a/b/c").
 *
 * Where the data lives:
 *   an entry's layout says which block of the global tensor this rank holds, as for registry
 *   entries (par/layout.h): REPLICATED (every rank of the checkpoint's group holds it all),
 *   SHARDED along one dimension, or BLOCK_CYCLIC. Ranks holding the same block (replicas) are
 *   allowed; each element is written once.
 *   A PRIVATE entry exists on this rank only (a federated client's model, held by the rank that
 *   runs that client): other ranks do not list it at all, its shape may differ from other
 *   private entries of the same kind, and a checkpoint loads it on whichever rank lists it then,
 *   so clients may move between ranks across a restart.
 *
 * Not collective: a state is local to its rank. The checkpoint functions that take one are
 * collective and check that the non-private entries agree across ranks.
 */
#ifndef TESS_NN_STATE_H
#define TESS_NN_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"  /* tess_dtype */
#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */
#include "par/layout.h"  /* tess_layout, TESS_MAX_DIMS */

enum { TESS_STATE_NAME_MAX = 192 };

typedef struct {
    char name[TESS_STATE_NAME_MAX];
    tess_dtype dtype;
    int ndim;                             /* 1..TESS_MAX_DIMS */
    int64_t shape[TESS_MAX_DIMS];         /* global shape */
    int64_t local_shape[TESS_MAX_DIMS];   /* this rank's block */
    int64_t global_offset[TESS_MAX_DIMS]; /* start of the block (zeros: REPLICATED, BLOCK_CYCLIC) */
    int64_t global_count, local_count;    /* products of shape and local_shape */
    tess_layout layout;
    bool private_to_rank; /* held by this rank alone (see the header comment) */
    uint32_t tags;        /* tess_tag bits, copied from the registry entry when there is one */
    void *data;           /* local_count elements of dtype, row-major (BLOCK_CYCLIC: column-major
                             local block); borrowed */
} tess_state_entry;

typedef struct tess_state tess_state;

tess_status tess_state_create(tess_state **st);
/* Free the list (never the data it points at); *st = NULL. NULL-safe. */
void tess_state_destroy(tess_state **st);

/* Add an array of global shape (shape[0..ndim-1]) under layout l; data points at this rank's
 * block. TESS_ERR_ARG naming the entry for a bad or duplicate name, a bad shape or layout.
 * TESS_ERR_MEM. */
tess_status tess_state_add(tess_state *st, const char *name, tess_dtype dtype, int ndim,
                           const int64_t *shape, const tess_layout *l, void *data);
/* The same for an entry only this rank holds (layout: the whole tensor, here). */
tess_status tess_state_add_private(tess_state *st, const char *name, tess_dtype dtype, int ndim,
                                   const int64_t *shape, void *data);
/* A replicated scalar: one element. */
tess_status tess_state_add_i64(tess_state *st, const char *name, int64_t *value);
tess_status tess_state_add_f64(tess_state *st, const char *name, double *value);

/* The parameters of a finalized registry: entry e becomes "<prefix>/<e.name>" with e's shape,
 * layout and tags, data in tess_registry_params. private_to_rank marks every entry private (a
 * client's registry). */
tess_status tess_state_add_registry(tess_state *st, const char *prefix, const tess_registry *reg,
                                    bool private_to_rank);
/* A buffer laid out like reg's flat params (optimizer moments): "<prefix>/<e.name>" per entry
 * e, at buf + e.flat_offset. */
tess_status tess_state_add_like(tess_state *st, const char *prefix, const tess_registry *reg,
                                float *buf, bool private_to_rank);

/* Number of entries; entry i (0 <= i < count) in the order they were added; index of the entry
 * called name, or -1. */
int64_t tess_state_count(const tess_state *st);
const tess_state_entry *tess_state_get(const tess_state *st, int64_t i);
int64_t tess_state_find(const tess_state *st, const char *name);

#endif
