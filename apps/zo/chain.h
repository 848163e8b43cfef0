/* chain.h - Markov noise sources with a tunable mixing time for the zo app (docs/zo.md 4).
 *
 * Every chain lives on the states {0, ..., n-1} with the uniform invariant law, so any problem
 * indexed by a state can be driven by any chain:
 *   STICKY  at each step redraw uniformly with probability p = 1 - 4^(-1/tau), else stay. Then
 *           Q^k = (1-p)^k I + (1 - (1-p)^k) Pi, the total-variation contraction is exactly
 *           (1-p)^k, and the mixing time (TV <= 1/4) is exactly tau; autocorrelation (1-p)^k,
 *           integrated time (2-p)/p ~ 1.44 tau. Random access: Z_t is the draw of the last redraw
 *           event at or before t (t = 0 always draws).
 *   AR1     y_t = rho y_{t-1} + sqrt(1 - rho^2) w_t with rho = 4^(-1/tau) (correlation 1/4 at lag
 *           tau), y_0 ~ N(0,1), Z_t = floor(n Phi(y_t)): uniform marginal, nominal mixing time tau
 *           (not uniformly ergodic; a robustness check, docs/zo.md).
 * Draws are Philox by counters (key, ctr(NOISE, 0 or 1), index from t), so a chain is a pure
 * function of (key, t) given its state at t = 0, the same on every rank.
 *
 * The optimizer asks for a segment of times [t0, t0 + m) per iteration (zoapp_chain_advance);
 * the chain keeps the state at the segment's end, so a run is one sequential pass. The chain
 * state (next time, current state, AR value) is three scalars, saved with the optimizer's. */
#ifndef ZOAPP_CHAIN_H
#define ZOAPP_CHAIN_H

#include <stdint.h>

#include "core/rng.h"    /* tess_rng_key */
#include "core/status.h" /* tess_status */
#include "nn/state.h"    /* tess_state */

typedef enum { ZOAPP_CHAIN_STICKY = 0, ZOAPP_CHAIN_AR1 } zoapp_chain_kind;

typedef struct {
    zoapp_chain_kind kind;
    int64_t nstates; /* n >= 1 */
    double tau;      /* >= 1 */
    double p;        /* STICKY redraw probability */
    double rho;      /* AR1 coefficient */
    tess_rng_key key;
    /* state */
    int64_t t;  /* time of the next state to generate */
    int64_t z;  /* state at time t - 1 */
    double y;   /* AR1 value at time t - 1 */
    /* the last segment */
    int64_t seg_t0, seg_n, cap;
    int32_t *seg; /* (cap) states at times seg_t0 .. seg_t0 + seg_n - 1 */
} zoapp_chain;

/* A chain at t = 0 able to hand out segments of up to cap states. TESS_ERR_CONFIG for tau < 1 or
 * nstates < 1 (naming the values), TESS_ERR_MEM. */
tess_status zoapp_chain_init(zoapp_chain *c, zoapp_chain_kind kind, int64_t nstates, double tau,
                             tess_rng_key key, int64_t cap);
void zoapp_chain_free(zoapp_chain *c);
/* The chain's state for checkpoints: <prefix>/t and <prefix>/z (int64), <prefix>/y (float64). */
tess_status zoapp_chain_describe(zoapp_chain *c, tess_state *st, const char *prefix);
/* Back to t = 0 (the same path again). */
void zoapp_chain_reset(zoapp_chain *c);
/* Generate the states of times [c->t, c->t + m) into the segment (m <= cap) and move on. */
void zoapp_chain_advance(zoapp_chain *c, int64_t m);
/* State at time t of the current segment (seg_t0 <= t < seg_t0 + seg_n; TESS_ASSERT). */
static inline int64_t zoapp_chain_at(const zoapp_chain *c, int64_t t) {
    TESS_ASSERT(t >= c->seg_t0 && t < c->seg_t0 + c->seg_n);
    return c->seg[t - c->seg_t0];
}
/* The next single state (NLopt's calls): advance by one, return it. */
int64_t zoapp_chain_next(zoapp_chain *c);

/* STICKY random access: Z_t from scratch, searching back to the last redraw (O(tau) draws). */
int64_t zoapp_chain_sticky_at(const zoapp_chain *c, int64_t t);

/* The exact TV mixing time of the sticky chain with redraw probability p:
 * the least k with (1-p)^k <= 1/4 (with a 1e-12 relative slack for rounding). */
int64_t zoapp_chain_sticky_tau(double p);

#endif
