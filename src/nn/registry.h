/* registry.h - the parameter registry: every persistent array of a model, registered once by
 * hierarchical name, global shape and layout, and stored flat (one buffer per kind).
 *
 * Lifecycle: create, add every tensor (setup phase), finalize, use, destroy. finalize allocates
 * ONE zeroed, 64-byte-aligned buffer for the parameters and one for the gradients; entry i is the
 * view [flat_offset, flat_offset + local_count) of each. Views are packed in registration order
 * with no gaps, so the flat buffer has exactly tess_registry_local_total() elements and whole-model
 * loops (optimizers, gradient all-reduce, clipping, NaN scans) are loops over (ptr, n).
 * Optimizer state (momentum, Adam moments) uses the same flat layout (tess_registry_alloc_state).
 *
 * The registration order defines the flat layout and the checkpoint's entry order: every rank
 * must register the same names in the same order (local counts may differ with the layout).
 *
 * Names: 1 to TESS_REGISTRY_NAME_MAX-1 characters from [A-Za-z0-9_], components separated by
 * single dots ("layers.3.attn.w_qkv"); no leading, trailing or doubled dot.
 *
 * Flags, fixed per entry and used by every optimizer:
 *   trainable  updated by optimizers and counted by clipping (default true). A non-trainable entry
 *              (a running statistic, a fixed embedding) is stored and checkpointed, not optimised.
 *   decay      receives weight decay (default: ndim >= 2, i.e. matrices and embeddings decay,
 *              biases, norm gains and other vectors do not). Meaningful only when trainable.
 *   zero_deferred  (default false) tess_registry_zero_grads does not write this entry's zeros
 *              but marks them pending; the first access writes them, unless the owner takes
 *              the gradient with tess_registry_grad_overwrite and writes all of it itself (e.g.
 *              a product with beta = 0: one pass over the gradient instead of two). Readers never
 *              see the difference: every other accessor writes a pending zero first.
 *
 * Declared per entry, read by whoever selects entries (none changes storage):
 *   tags       a set of tess_tag bits (default none): what the entry is for reduction and
 *              aggregation, e.g. SHARED entries take part in the federated average, LOCAL ones
 *              never leave their client, EXPERT/DENSE say which group reduces the gradient.
 *   group      the group of the entry's replicas, over which gradient sync averages its
 *              gradient (default NULL: the data-parallel group the sync is given), e.g. the
 *              expert-data-parallel group for an expert's weights. Borrowed. (Clipping sums
 *              norms by the layouts, not by this group: optim/clip.h.)
 *   init       how tess_registry_init_params fills it (default zeros).
 *
 * Not collective: a registry is local to its rank; layouts only say which part this rank holds.
 * Not thread-safe. The gradient accessors may write an entry's pending zeros (zero_deferred), so
 * a gradient shared by several threads is taken on one thread before they start; reading the
 * views of entries taken since the last zero_grads writes nothing.
 */
#ifndef TESS_NN_REGISTRY_H
#define TESS_NN_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h" /* tess_status */
#include "core/dtype.h" /* tess_dtype */
#include "par/layout.h" /* tess_layout, TESS_MAX_DIMS */

struct tess_group; /* par/mesh.h */

enum { TESS_REGISTRY_NAME_MAX = 128, TESS_REGISTRY_ALIGN = 64 };

/* What an entry is, for gradient sync, clipping and federated aggregation: bits, any mix. */
typedef enum {
    TESS_TAG_SHARED = 1u << 0, /* averaged across federated clients (the structural parameters) */
    TESS_TAG_LOCAL = 1u << 1,  /* stays with its client: never aggregated, never sent */
    TESS_TAG_EXPERT = 1u << 2, /* an expert's weights (reduced over the expert-data-parallel group) */
    TESS_TAG_DENSE = 1u << 3,  /* weights every rank holds (reduced over all data-parallel ranks) */
    TESS_TAG_USER = 1u << 8,   /* first bit left to apps; TESS_TAG_USER << k for k in 0..23 */
} tess_tag;

/* How tess_registry_init_params fills an entry. */
typedef enum {
    TESS_INIT_ZEROS = 0, /* 0 */
    TESS_INIT_CONST,     /* a */
    TESS_INIT_NORMAL,    /* N(a, b^2): mean a, standard deviation b */
    TESS_INIT_UNIFORM,   /* U[a, b) */
} tess_init_kind;

typedef struct {
    tess_init_kind kind;
    double a, b;
} tess_init;

/* Shorthands for declarations: tess_init_normal(0.0, 0.02), tess_init_const(1.0). */
static inline tess_init tess_init_zeros(void) { return (tess_init){TESS_INIT_ZEROS, 0.0, 0.0}; }
static inline tess_init tess_init_const(double a) { return (tess_init){TESS_INIT_CONST, a, 0.0}; }
static inline tess_init tess_init_normal(double mean, double std) {
    return (tess_init){TESS_INIT_NORMAL, mean, std};
}
static inline tess_init tess_init_uniform(double lo, double hi) {
    return (tess_init){TESS_INIT_UNIFORM, lo, hi};
}

/* One registered tensor. Shapes are row-major; a BLOCK_CYCLIC local block is column-major. */
typedef struct {
    char name[TESS_REGISTRY_NAME_MAX];
    int ndim;                              /* 1..TESS_MAX_DIMS */
    int64_t shape[TESS_MAX_DIMS];          /* global shape */
    int64_t local_shape[TESS_MAX_DIMS];    /* this rank's block */
    int64_t global_offset[TESS_MAX_DIMS];  /* start of the local block in the global tensor
                                              (zeros for REPLICATED and BLOCK_CYCLIC) */
    int64_t global_count;                  /* product of shape */
    int64_t local_count;                   /* product of local_shape; may be 0 */
    int64_t flat_offset;                   /* element offset of the view in the flat buffers */
    tess_layout layout;
    tess_dtype dtype;                      /* TESS_F32: parameters and gradients are float */
    bool trainable;
    bool decay;
    bool zero_deferred;
    uint32_t tags;                         /* tess_tag bits */
    const struct tess_group *group;        /* the replicas' group (gradient sync); NULL: the caller's */
    tess_init init;
} tess_registry_entry;

typedef struct tess_registry tess_registry;

/* A new, empty registry in *reg. */
tess_status tess_registry_create(tess_registry **reg);
/* Free the registry and its buffers; sets *reg = NULL. NULL or *reg == NULL is a no-op. */
void tess_registry_destroy(tess_registry **reg);

/* Register a tensor of global shape (shape[0], ..., shape[ndim-1]) under layout l; its index
 * (registration order, from 0) goes to *index (may be NULL). Flags get their defaults.
 * TESS_ERR_ARG, naming the tensor, for: a bad or duplicate name, ndim outside 1..TESS_MAX_DIMS,
 * a non-positive dimension, a layout inconsistent with the shape, or a call after finalize. */
tess_status tess_registry_add(tess_registry *reg, const char *name, int ndim, const int64_t *shape,
                              const tess_layout *l, int64_t *index);

/* Override entry i's flags (see the header comment for the defaults). Allowed before and after
 * finalize; they change no storage. TESS_ERR_ARG if i is out of range. */
tess_status tess_registry_set_trainable(tess_registry *reg, int64_t i, bool trainable);
tess_status tess_registry_set_decay(tess_registry *reg, int64_t i, bool decay);
tess_status tess_registry_set_zero_deferred(tess_registry *reg, int64_t i, bool deferred);
tess_status tess_registry_set_tags(tess_registry *reg, int64_t i, uint32_t tags);
tess_status tess_registry_set_group(tess_registry *reg, int64_t i, const struct tess_group *g);
/* TESS_ERR_ARG also for a NORMAL std < 0 or a UNIFORM with b < a. */
tess_status tess_registry_set_init(tess_registry *reg, int64_t i, tess_init init);

/* Entries whose tags include every bit of `all` (0: every entry), counted and listed in
 * registration order into idx (capacity n; may be NULL to count only). Returns the count. */
int64_t tess_registry_select(const tess_registry *reg, uint32_t all, int64_t *idx, int64_t n);

/* Allocate the params and grads buffers (zeroed) and freeze the entry list.
 * TESS_ERR_ARG if already finalized, TESS_ERR_MEM if the allocation fails. */
tess_status tess_registry_finalize(tess_registry *reg);
bool tess_registry_is_final(const tess_registry *reg);

/* Number of entries. */
int64_t tess_registry_count(const tess_registry *reg);
/* Entry i, 0 <= i < count. The pointer is valid until the next add (stable after finalize). */
const tess_registry_entry *tess_registry_get(const tess_registry *reg, int64_t i);
/* Index of the entry called name, or -1. */
int64_t tess_registry_find(const tess_registry *reg, const char *name);

/* Total local elements over all entries: the length of every flat buffer. */
int64_t tess_registry_local_total(const tess_registry *reg);
/* Total global elements over all entries (the model size). */
int64_t tess_registry_global_total(const tess_registry *reg);

/* Flat buffers (local_total elements each) and entry views into them; NULL before finalize.
 * The gradient accessors first write the pending zeros (zero_deferred) of what they return: all
 * entries, entry i, or the entries overlapping [lo, hi) (0 <= lo <= hi <= local_total; returns
 * the element lo of the flat gradient). So a pointer kept across a zero_grads may show stale
 * values in a deferred entry: take the view again after zeroing. */
float *tess_registry_params(const tess_registry *reg);
float *tess_registry_grads(const tess_registry *reg);
float *tess_registry_grads_range(const tess_registry *reg, int64_t lo, int64_t hi);
float *tess_registry_param(const tess_registry *reg, int64_t i); /* (local_shape of entry i) */
float *tess_registry_grad(const tess_registry *reg, int64_t i);  /* (local_shape of entry i) */

/* Entry i's gradient view for its owner, who will write all of it or add to all of it: *beta =
 * 0 if its zeros are pending (then no longer: the caller must write every element, as a product
 * with beta = 0 does), else 1 (add to the values there). Requires finalize. */
float *tess_registry_grad_overwrite(tess_registry *reg, int64_t i, float *beta);

/* Fill every parameter by its declared init from Philox keyed by seed: entry i, element with
 * global row-major index j is draw j of counter (TESS_RNG_PURPOSE_INIT, i), so every rank's shard
 * holds exactly what a 1-rank run holds (any layout but BLOCK_CYCLIC, which is refused:
 * TESS_ERR_ARG). Requires finalize. Not collective. */
tess_status tess_registry_init_params(tess_registry *reg, uint64_t seed);

/* Set every gradient to zero: written now, or pending for zero_deferred entries (header).
 * Requires finalize. */
void tess_registry_zero_grads(tess_registry *reg);

/* A new zeroed, 64-byte-aligned buffer of local_total floats laid out like the params (optimizer
 * state); the caller frees it with free(). Requires finalize; TESS_ERR_MEM on failure. */
tess_status tess_registry_alloc_state(const tess_registry *reg, float **buf);

/* Write a table of entries (index, name, global shape, layout, local and global counts, flags)
 * and the totals to f. Call on the rank that should talk (rank 0). TESS_ERR_IO on a write error. */
tess_status tess_registry_print(const tess_registry *reg, FILE *f);

#endif
