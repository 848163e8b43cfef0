/* task.h - synthetic sequence tasks generated in-process from Philox counters: copy, reverse and
 * sort of n random symbols. The first end-to-end proof of the core: a small transformer must
 * learn them to near-zero loss.
 *
 * A sample is the sequence  x_1 .. x_n  SEP  y_1 .. y_n  (2n+1 tokens), x_i uniform in
 * [0, nsym), SEP = nsym, y = x (copy), reverse(x) or sorted(x). The model reads the first 2n
 * tokens (T = 2n) and predicts the next token; only predictions of SEP and y are scored
 * (target -1 elsewhere), since x is random. Vocabulary V = nsym + 1.
 *
 * Sample g (a global index) is drawn from counter (DATA, split) with element index g*n + i, so
 * a rank that generates samples [first, first + B) of a step gets exactly the samples a single
 * rank would: data order depends on the seed only, never on the rank count.
 */
#ifndef TINYLM_TASK_H
#define TINYLM_TASK_H

#include <stdint.h>

#include "core/config.h" /* tess_opt_enum, TESS_OPT_ENUM_TABLE_CHECK */
#include "core/rng.h"    /* tess_rng_key */

typedef enum {
    TINYLM_TASK_COPY = 0,
    TINYLM_TASK_REVERSE,
    TINYLM_TASK_SORT,
    TINYLM_TASK_COUNT
} tinylm_task_kind;

/* The names of option task.kind (TESS_OPT_ENUM), in --help order. */
static const tess_opt_enum tinylm_task_kind_names[] = {
    {"reverse", TINYLM_TASK_REVERSE}, {"copy", TINYLM_TASK_COPY}, {"sort", TINYLM_TASK_SORT}};
TESS_OPT_ENUM_TABLE_CHECK(tinylm_task_kind_names, TINYLM_TASK_COUNT);

typedef struct {
    tinylm_task_kind kind;
    int64_t n;    /* symbols per sample */
    int64_t nsym; /* alphabet size */
    tess_rng_key key;
} tinylm_task;

/* Splits of the sample space: training samples and a disjoint held-out set. */
enum { TINYLM_SPLIT_TRAIN = 0, TINYLM_SPLIT_EVAL = 1 };

/* Samples [first, first + B) of a split: ids (B, 2n) and targets (B, 2n). */
void tinylm_task_batch(const tinylm_task *t, int split, int64_t first, int64_t B, int32_t *ids,
                       int32_t *targets);

#endif
