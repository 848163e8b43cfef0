/* data.h - the moe app's synthetic multi-domain token source: runs need no data files, and the
 * true domain of every token is known, so the mutual information between expert choice and
 * domain can be measured.
 *
 * D domains share a vocabulary of V tokens. Domain d is a sparse Markov chain: from token a the
 * next token is one of `branch` successors succ(d, a, j) = hash(seed, d, a, j) mod V, j < branch,
 * chosen with Zipf weights w_j ~ 1/(j+1). A sample (one sequence) has one domain, drawn
 * uniformly; its first token is uniform over V and the next T are drawn from the chain. The
 * model reads tokens 0..T-1 and predicts 1..T; every target is scored. With branch << V the
 * domains have nearly disjoint transitions, so a model must infer the domain from the context.
 *
 * Sample g of a split is drawn from Philox counter (DATA, split) with element index
 * g * (T + 2) + i: a rank generating samples [first, first + B) gets exactly what one rank
 * would, so the data order depends on the seed only, never on the rank count. */
#ifndef MOE_DATA_H
#define MOE_DATA_H

#include <stdint.h>

#include "core/rng.h" /* tess_rng_key */

typedef struct {
    int64_t V, D, T, branch;
    tess_rng_key key;
} moe_data;

enum { MOE_SPLIT_TRAIN = 0, MOE_SPLIT_EVAL = 1 };

/* Samples [first, first + B) of a split: ids, targets (B,T) and the domain of every token,
 * domain (B,T); domain may be NULL. */
void moe_data_batch(const moe_data *d, int split, int64_t first, int64_t B, int32_t *ids,
                    int32_t *targets, int32_t *domain);

/* Entropy (nats) of one chain step given the domain and the current token: -sum w_j log w_j,
 * exact when the successors of a token are distinct (a floor of the achievable loss otherwise
 * lowered only by successor collisions). */
double moe_data_step_entropy(const moe_data *d);

#endif
