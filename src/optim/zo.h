/* zo.h - the zero-order optimizer for Markovian noise (RB-ZO-SGD; docs/zo.md has the equations).
 *
 * Minimises f(x) = E_{Z~pi} F(x, Z) from function values F(x, Z_t) seen along a Markov chain
 * {Z_t}, with the randomised multilevel (MLMC) batching of Beznosikov et al. (arXiv:2305.15938)
 * and unit-sphere (or Gaussian / Rademacher) random directions. One iteration k:
 *
 *   J ~ Geom(1/2) (J = 1 + trailing zero bits of a Philox word), K = 2^J B if 2^J <= M else B
 *   sample i = 0..K-1 sees chain time t = T_k + i (one-point symmetric: T_k + 2i and T_k + 2i + 1)
 *   c_i = coefficient of the estimator at x^k in direction e_i (see tess_zo_estimator)
 *   g   = sum_i w_i c_i e_i   with the MLMC weights w_i of tess_zo_plan (sum w_i = 1)
 *   x^{k+1} = Proj_{||x|| <= R}(x^k - eta_k g),   T_{k+1} = T_k + (chain steps of the K samples)
 *
 * Zero-weight samples advance the chain but are never evaluated. The first-order baseline uses
 * the same batching with exact gradients. All constants are fields of tess_zo_config.
 *
 * Determinism. Direction e_i of step k is drawn from Philox with key cfg.key, counter
 * tess_rng_ctr(TESS_RNG_PURPOSE_ZO, k) and element index (i << 40) + j for global coordinate j
 * (tess_zo_direction); the MLMC level from the same counter at index TESS_ZO_LEVEL_INDEX. Nothing
 * depends on which rank draws, so a restart that restores the state continues the exact run.
 *
 * Parallelism ("evaluation parallel"). Two groups, either may be NULL (size 1):
 *   eval   ranks split the active samples of an iteration (contiguous blocks in sample order) and
 *          exchange ONLY the function values (2 doubles per sample, 3 when sharded sphere
 *          directions add their squared norm; one all-reduce in which each entry has exactly one
 *          non-zero contributor, hence exact). Every rank then regenerates
 *          all directions and forms g in sample order: the iterates are bitwise identical for any
 *          eval group size. Rank 0 of eval accumulates its own samples while evaluating, so one
 *          rank never generates a direction twice.
 *   shard  ranks split the coordinates of x (contiguous blocks, tess_par_block_range). The
 *          objective returns per-rank partial sums; per evaluated sample one all-reduce of its
 *          partial sums (2 npartials doubles) and, for sphere directions, one of its squared
 *          norm (1 double); projection adds one of a scalar. Each rank draws only its own
 *          coordinates of each direction, so the work per rank is O(d / shards). Deterministic
 *          for a fixed shard count, equal to the replicated run up to rounding.
 * A run on an eval x shard mesh passes both groups; every function below that takes the
 * optimizer is collective on both (all ranks, same order) unless it says "Not collective".
 * Memory per rank is O(d_local): x, the direction, the evaluation point, g (and x-bar if
 * averaging) - never a d x batch buffer.
 */
#ifndef TESS_OPTIM_ZO_H
#define TESS_OPTIM_ZO_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rng.h"    /* tess_rng_key */
#include "core/status.h" /* tess_status */
#include "par/mesh.h"   /* tess_group */
#include "nn/registry.h" /* tess_registry */
#include "nn/state.h"    /* tess_state */

typedef enum {
    TESS_ZO_EST_TWO_POINT = 0, /* c = (s/2gamma)[F(x+gamma e, Z_t) - F(x-gamma e, Z_t)], 1 step */
    TESS_ZO_EST_ONE_POINT_SYM, /* c = (s/2gamma)[F(x+gamma e, Z_t) - F(x-gamma e, Z_t+1)], 2 steps */
    TESS_ZO_EST_ONE_POINT,     /* c = (s/gamma)[F(x+gamma e, Z_t) - b], 1 step; b: baseline */
    TESS_ZO_EST_FIRST_ORDER,   /* g_i = grad F(x, Z_t) (baseline method), 1 step */
} tess_zo_estimator;

/* Directions; s above is d for the sphere and 1 for the others (E[e e^T] = I/d resp. I). */
typedef enum {
    TESS_ZO_DIR_SPHERE = 0,  /* e = u / ||u||, u ~ N(0, I_d) */
    TESS_ZO_DIR_GAUSS,       /* e = u ~ N(0, I_d) (MeZO / SPSA style) */
    TESS_ZO_DIR_RADEMACHER,  /* e_j = +-1 */
} tess_zo_dir;

typedef enum {
    TESS_ZO_BATCH_MLMC = 0, /* randomised multilevel batching (file header) */
    TESS_ZO_BATCH_FIXED,    /* K = B consecutive samples, w_i = 1/B ("without MLMC") */
} tess_zo_batching;

/* One-point baseline b: NONE b = 0; RESIDUAL b = the previous evaluated value (residual feedback,
 * unbiased because e_i is independent of it; the first sample of a run uses b = 0). */
typedef enum { TESS_ZO_BASELINE_NONE = 0, TESS_ZO_BASELINE_RESIDUAL } tess_zo_baseline;

/* Step sizes eta_k (k = 0-based iteration), all capped at eta:
 *   CONSTANT  eta
 *   SWITCH    eta for k < k_switch, then 2 / (mu (k - k_switch + k0)), k0 = ceil(2 / (mu eta))
 *             (Stich: linear phase to the noise floor, then the O(1/k) phase; continuous)
 *   DECAY     min(eta, 2 / (mu (k + 1)))  (non-smooth, Lacoste-Julien et al. 2012) */
typedef enum { TESS_ZO_RULE_CONSTANT = 0, TESS_ZO_RULE_SWITCH, TESS_ZO_RULE_DECAY } tess_zo_rule;

typedef struct {
    tess_zo_estimator estimator;
    tess_zo_dir dir;
    tess_zo_batching batching;
    tess_zo_baseline baseline; /* ONE_POINT only */
    double gamma;              /* smoothing radius, > 0 */
    int64_t batch;             /* B >= 1 */
    int64_t cap;               /* M >= 1 (MLMC); B * 2^floor(log2 M) < 2^22 */
    tess_zo_rule rule;
    double eta;                /* > 0: constant step, and the cap of every rule */
    double mu;                 /* > 0 for SWITCH and DECAY: strong convexity */
    int64_t k_switch;          /* SWITCH: iterations at constant eta, >= 0 */
    double radius;             /* > 0: project onto the ball ||x|| <= radius; 0: no projection */
    bool average;              /* keep x-bar = sum_k k x^k / sum_k k (k = 1, 2, ...) */
    tess_rng_key key;          /* Philox key of directions and MLMC levels */
} tess_zo_config;

/* TESS_ERR_CONFIG naming the field and value if c is not usable (gamma <= 0, batch < 1, cap < 1,
 * eta <= 0, mu <= 0 for SWITCH/DECAY, radius < 0, a too large batch, an enum out of range). */
tess_status tess_zo_config_check(const tess_zo_config *c);

/* Index of the MLMC level word under the step's counter: above every direction index. */
#define TESS_ZO_LEVEL_INDEX ((uint64_t)1 << 62)
enum { TESS_ZO_SAMPLE_SHIFT = 40 }; /* direction index = (sample << 40) + coordinate */
#define TESS_ZO_MAX_DIM ((int64_t)1 << TESS_ZO_SAMPLE_SHIFT)

/* The samples of one iteration: K samples, 0-based; w_i = 0 for i < first_active,
 * -1/B for first_active <= i < first_plus, +1/B for first_plus <= i < K. */
typedef struct {
    int64_t J;            /* MLMC level drawn (>= 1), 0 for FIXED */
    int64_t K;            /* samples, each consuming 1 (2 for ONE_POINT_SYM) chain steps */
    int64_t first_active; /* B when 2^J <= M, else 0 */
    int64_t first_plus;   /* 2^(J-1) B when 2^J <= M, else 0 */
    double inv_batch;     /* 1 / B */
} tess_zo_plan;

/* Plan for the level word `bits` (J = 1 + number of trailing zero bits, 65 for bits == 0).
 * FIXED: K = batch, all weights 1/B. Pure. */
tess_zo_plan tess_zo_plan_make(tess_zo_batching b, uint64_t bits, int64_t batch, int64_t cap);
/* w_i of the plan (0 <= i < K). Pure. */
double tess_zo_plan_weight(const tess_zo_plan *p, int64_t i);
/* The level word of iteration k: tess_rng_u64(key, ctr(ZO, k), TESS_ZO_LEVEL_INDEX). Pure. */
uint64_t tess_zo_level_bits(tess_rng_key key, int64_t k);
/* eta_k of the config's rule. Pure; c must pass tess_zo_config_check. */
double tess_zo_step_size(const tess_zo_config *c, int64_t k);

/* Raw direction u of sample i of iteration k at global coordinates [first, first + n):
 * u[j] = N(0,1) draw at index (i << 40) + first + j (SPHERE and GAUSS; equal to
 * tess_rng_normal(key, ctr(ZO, k), index, 0, 1)), or +-1 from bit (index mod 128) of Philox
 * block index / 128 (RADEMACHER). The optimizer turns a SPHERE draw into e = u / ||u||, the norm
 * taken over all d coordinates (summed in coordinate order when x is replicated). Pure. */
void tess_zo_direction(tess_rng_key key, tess_zo_dir dir, int64_t k, int64_t i, int64_t first,
                       int64_t n, double *u);

/* The function being minimised. x is this rank's slice [first, first + n) of the query point
 * (the whole point when x is replicated), t the chain time. All callbacks are local numeric
 * code: they cannot fail and make no MPI calls. */
typedef struct {
    void *ctx;
    int64_t npartials; /* scalars per evaluation returned by `partial`, 1..TESS_ZO_MAX_PARTIALS */
    /* out (npartials): partial sums of F(x, Z_t) over this rank's coordinates; with a
     * replicated x simply out[0] = F(x, Z_t). Required except for FIRST_ORDER. */
    void (*partial)(void *ctx, const double *x, int64_t first, int64_t n, int64_t t, double *out);
    /* F(x, Z_t) from the partials summed over the shard group; NULL means F = sum[0]. */
    double (*finish)(void *ctx, const double *sum, int64_t t);
    /* grad (n) = grad_x F(x, Z_t) (FIRST_ORDER only; replicated x). */
    void (*grad)(void *ctx, const double *x, int64_t n, int64_t t, double *grad);
    /* Called on every rank before the evaluations of an iteration with the chain times
     * [t0, t0 + nsteps) it will use, so a chain can be advanced once; NULL if not needed. */
    void (*prepare)(void *ctx, int64_t t0, int64_t nsteps);
} tess_zo_objective;
enum { TESS_ZO_MAX_PARTIALS = 8 };

/* Registry mode (MeZO style): the loss at the registry's current parameters for chain time t.
 * Collective on the shard group if the registry is sharded (the model reduces its own loss);
 * otherwise local. */
typedef double (*tess_zo_loss_fn)(void *ctx, int64_t t);

/* What one step did. */
typedef struct {
    tess_zo_plan plan;
    int64_t samples;    /* chain steps consumed */
    int64_t evals;      /* function evaluations (all ranks together) or gradient calls (FO) */
    double eta;         /* step size used */
    double comm_bytes;  /* payload bytes this rank contributed to all-reduces */
} tess_zo_step_info;

/* The optimizer's scalar state, checkpointed with x and xbar (tess_zo_describe). */
enum {
    TESS_ZO_CNT_STEP = 0, /* iterations done = Philox counter n of the next iteration */
    TESS_ZO_CNT_T,        /* chain time of the next sample = chain steps consumed */
    TESS_ZO_CNT_EVALS,    /* function evaluations (or gradient calls) so far */
    TESS_ZO_CNT_HAS_BASE, /* 1 once the residual baseline holds a value */
    TESS_ZO_NCNT
};
enum { TESS_ZO_SCA_BASELINE = 0, TESS_ZO_SCA_AVG_WEIGHT, TESS_ZO_NSCA };

typedef struct tess_zo tess_zo;

/* An optimizer over a d-dimensional x, split over shard (NULL: replicated) and evaluating over
 * eval (NULL: alone); x starts at 0 (write tess_zo_x to change it). Collective on both groups
 * (no communication, but every rank must agree on the arguments). Groups are borrowed.
 * TESS_ERR_CONFIG from tess_zo_config_check; TESS_ERR_ARG for d outside 1..2^40 or FIRST_ORDER
 * with a shard group of size > 1; TESS_ERR_MEM. */
tess_status tess_zo_create(tess_zo **zo, const tess_zo_config *cfg, int64_t d,
                           const tess_group *eval, const tess_group *shard);

/* An optimizer over the trainable entries of the finalized registry reg (borrowed), x = their
 * values in registration order; entries must be REPLICATED or SHARDED along dimension 0 (then
 * shard is the group they are sharded over). Direction coordinates are global parameter indices
 * (trainable entries concatenated), so any shard count draws the same directions.
 * Collective as tess_zo_create. TESS_ERR_ARG for other layouts, no trainable entry or
 * FIRST_ORDER. */
tess_status tess_zo_create_registry(tess_zo **zo, const tess_zo_config *cfg, tess_registry *reg,
                                    const tess_group *eval, const tess_group *shard);

/* Free; *zo = NULL. NULL-safe. Not collective. */
void tess_zo_destroy(tess_zo **zo);

/* Global dimension, and this rank's coordinates [*first, *first + *n). Not collective. */
int64_t tess_zo_dim(const tess_zo *zo);
void tess_zo_local_range(const tess_zo *zo, int64_t *first, int64_t *n);
/* The iterate (n local), writable (set x^0 before the first step); the average (or NULL when
 * cfg.average is off). Registry mode: the iterate is copied from the registry at every step.
 * Not collective. */
double *tess_zo_x(tess_zo *zo);
const double *tess_zo_xbar(const tess_zo *zo);
/* Counters (TESS_ZO_NCNT) and scalars (TESS_ZO_NSCA), writable for a checkpoint reader. */
int64_t *tess_zo_counters(tess_zo *zo);
double *tess_zo_scalars(tess_zo *zo);
/* Add the optimizer's state to st (nn/state.h) under prefix: "<prefix>/x" (float64 [d], sharded
 * along dimension 0 over the shard group, replicated without one), "<prefix>/xbar" (the same, when
 * averaging), "<prefix>/counters" (int64 [TESS_ZO_NCNT]) and "<prefix>/scalars" (float64
 * [TESS_ZO_NSCA]), replicated. With prefix "zo" these are the datasets zo checkpoints always had.
 * The entries point at the optimizer's own memory, so a checkpoint load restores it in place; zo
 * must outlive st's use. TESS_ERR_ARG for registry mode over a shard group of size > 1 (x is then
 * not one block of a global vector: checkpoint the registry instead); errors of tess_state_add.
 * Not collective. */
tess_status tess_zo_describe(tess_zo *zo, tess_state *st, const char *prefix);

/* One iteration on the objective obj (see the file header). Collective on eval and shard.
 * TESS_ERR_ARG for a missing callback; TESS_ERR_MPI. info may be NULL. */
tess_status tess_zo_step(tess_zo *zo, const tess_zo_objective *obj, tess_zo_step_info *info);

/* One iteration in registry mode: the query points are written into the registry's params
 * (rounded to float), loss(ctx, t) is called, and at the end the params hold the new iterate.
 * Collective on eval and shard. TESS_ERR_ARG if zo was not made by tess_zo_create_registry. */
tess_status tess_zo_step_registry(tess_zo *zo, tess_zo_loss_fn loss, void *ctx,
                                  tess_zo_step_info *info);

#endif
