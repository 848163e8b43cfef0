/* sched.h - learning-rate schedules: linear warm-up, then constant, linear or cosine decay.
 *
 * tess_sched_lr(s, step) is a pure function of the 0-based index of the update (the first
 * optimizer step uses step 0). With W = warmup_steps, N = total_steps, lr, min_lr:
 *   step < W:        lr * (step + 1) / W                      (never 0; reaches lr at step W-1)
 *   otherwise, with  q = clamp((step - W) / (N - W), 0, 1)    (q = 1 when N <= W)
 *     CONSTANT       lr
 *     LINEAR         lr - (lr - min_lr) * q
 *     COSINE         min_lr + (lr - min_lr) * (1 + cos(pi * q)) / 2
 * so a decaying schedule reaches min_lr at step N and stays there.
 */
#ifndef TESS_OPTIM_SCHED_H
#define TESS_OPTIM_SCHED_H

#include <stdint.h>

#include "core/config.h" /* tess_opt_enum */
#include "core/status.h" /* tess_status */

typedef enum {
    TESS_SCHED_CONSTANT = 0,
    TESS_SCHED_LINEAR,
    TESS_SCHED_COSINE, /* the last kind: the table below names all TESS_SCHED_COSINE + 1 */
} tess_sched_kind;

/* The names of a schedule option: TESS_OPT_ENUM("schedule", "cosine", tess_sched_kind_names, ...). */
static const tess_opt_enum tess_sched_kind_names[] = {
    {"cosine", TESS_SCHED_COSINE}, {"linear", TESS_SCHED_LINEAR}, {"constant", TESS_SCHED_CONSTANT}};
TESS_OPT_ENUM_TABLE_CHECK(tess_sched_kind_names, TESS_SCHED_COSINE + 1);

typedef struct {
    tess_sched_kind kind;
    double lr;             /* peak rate, > 0 */
    double min_lr;         /* final rate of LINEAR/COSINE, in [0, lr] */
    int64_t warmup_steps;  /* >= 0 */
    int64_t total_steps;   /* LINEAR/COSINE: > warmup_steps; unused by CONSTANT */
} tess_sched;

/* TESS_ERR_CONFIG with the offending values if s is not a valid schedule. */
tess_status tess_sched_check(const tess_sched *s);

/* Learning rate of update number step (0-based). s must pass tess_sched_check. */
double tess_sched_lr(const tess_sched *s, int64_t step);

/* "constant", "linear" or "cosine". */
const char *tess_sched_kind_name(tess_sched_kind k);

#endif
