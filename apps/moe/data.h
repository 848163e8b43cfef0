/* data.h - the moe app's token sources, both with the domain of every token so the mutual
 * information between expert choice and domain can be measured: a synthetic multi-domain source
 * (runs need no data files), and real multi-domain text (token streams with /domain written by
 * jobs/moe-text.sh, io/tokens.h).
 *
 * Synthetic.
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

#include "core/rng.h"    /* tess_rng_key */
#include "core/status.h" /* tess_status */
#include "io/tokens.h"   /* tess_tokens */
#include "par/mesh.h"    /* tess_group */

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

/* Where the tokens come from (data.source). */
typedef enum { MOE_SOURCE_SYNTHETIC = 0, MOE_SOURCE_TEXT, MOE_SOURCE_COUNT } moe_source_kind;

/* Text: train and eval token streams, both read as shuffled windows of T + 1 tokens (the eval
 * order from a fixed key, so every evaluation sees the same sequences, spread over every domain
 * although the file holds the domains one after the other). Sample g of a split is the same on
 * any number of ranks (io/tokens.h). */
typedef struct {
    moe_source_kind kind;
    moe_data syn;          /* synthetic: the chains */
    tess_tokens *file[2];  /* text: MOE_SPLIT_TRAIN, MOE_SPLIT_EVAL */
    int32_t *win, *dwin;   /* text: (rows, T+1) token and domain windows */
    int64_t rows;          /* the most sequences one moe_source_batch call reads */
    int64_t D;             /* domains */
    const char *names;     /* text: comma-separated domain names (the train file's) */
} moe_source;

/* Open the text source on g (collective): train_path and eval_path must be token streams with
 * /domain, the vocabulary the model's V, the same domains in both, and at least batch windows
 * of T + 1 tokens in the train file and eval_batch in the eval file. TESS_ERR_NOINPUT /
 * TESS_ERR_DATA for a missing or malformed file, TESS_ERR_CONFIG naming the file and the option
 * it contradicts (data.vocab, train.batch, train.eval_batch), the same status on every rank.
 * rows: the most sequences a batch call will ask for. */
tess_status moe_source_open_text(moe_source *s, const tess_group *g, const char *train_path,
                                 const char *eval_path, int64_t V, int64_t T, int64_t rows,
                                 int64_t batch, int64_t eval_batch, tess_rng_key key);
/* Samples [first, first + B) of a split (B <= rows for text): ids, targets (B,T) and the
 * domain of every input token (B,T; may be NULL). Not collective; a text read failure is this
 * rank's. */
tess_status moe_source_batch(moe_source *s, int split, int64_t first, int64_t B, int32_t *ids,
                             int32_t *targets, int32_t *domain);
/* Close the files (collective for text) and free the buffers; a synthetic source holds none. */
tess_status moe_source_close(moe_source *s);

#endif
