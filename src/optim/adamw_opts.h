/* adamw_opts.h - the options of AdamW with a learning-rate schedule (optim/adamw.h, optim/sched.h),
 * declared once for every app that trains with them, read and checked by one call.
 *
 *   static const tess_opt optim_opts[] = {TESS_ADAMW_SCHED_OPTS(40)};   (warm-up default 40)
 *   ... TESS_CONFIG_SECTION("optim", optim_opts) ...
 *   tess_adamw_config ac;
 *   tess_sched sched;
 *   TESS_CHECK(tess_adamw_sched_read(cfg, "optim", steps, "train.steps", &ac, &sched));
 *
 * Keys: lr, min_lr, warmup_steps, schedule, beta1, beta2, eps, weight_decay. Each declared range
 * is the range AdamW and the schedule accept (lr > 0, betas in [0, 1), eps > 0); what relates two
 * options (min_lr <= lr, warm-up shorter than the run for a decaying schedule) is checked by
 * tess_adamw_sched_read, whose messages name both keys.
 */
#ifndef TESS_OPTIM_ADAMW_OPTS_H
#define TESS_OPTIM_ADAMW_OPTS_H

#include <stdint.h>

#include "core/config.h"  /* tess_config, TESS_OPT_* */
#include "core/status.h"  /* tess_status */
#include "optim/adamw.h"  /* tess_adamw_config */
#include "optim/sched.h"  /* tess_sched, tess_sched_kind_names */

/* The rows of the section (an initializer list: put it inside a tess_opt table). The AdamW
 * defaults are the transformer-training ones (betas 0.9/0.98, eps 1e-8, decay 0.01); the smallest
 * lr is 1e-12 (0 would be no training and is refused by the schedule). */
#define TESS_ADAMW_SCHED_OPTS(warmup_default_)                                                  \
    TESS_OPT_REAL("lr", 3e-3, 1e-12, 10.0, "peak AdamW learning rate (> 0)"),                  \
        TESS_OPT_REAL("min_lr", 1e-4, 0.0, 10.0,                                                \
                      "final learning rate of a decaying schedule (<= lr)"),         \
        TESS_OPT_INT("warmup_steps", (warmup_default_), 0, INT64_MAX / 2,                        \
                     "linear warm-up steps (fewer than the run's steps unless constant)"),     \
        TESS_OPT_ENUM("schedule", "cosine", tess_sched_kind_names, "decay after warm-up"),      \
        TESS_OPT_REAL("beta1", 0.9, 0.0, 0.999999, "AdamW beta1"),                             \
        TESS_OPT_REAL("beta2", 0.98, 0.0, 0.999999, "AdamW beta2"),                            \
        TESS_OPT_REAL("eps", 1e-8, 1e-30, 1.0, "AdamW epsilon"),                               \
        TESS_OPT_REAL("weight_decay", 0.01, 0.0, 10.0, "decoupled weight decay (matrices only)")

/* Read section `section` (declared with TESS_ADAMW_SCHED_OPTS) into *ac and *sched for a run of
 * total_steps optimizer steps, the option that sets it named steps_key (for messages, e.g.
 * "train.steps"). TESS_ERR_CONFIG naming the keys when min_lr exceeds lr or the warm-up is not
 * shorter than the run under a decaying schedule. Not collective; the same on every rank. */
tess_status tess_adamw_sched_read(const tess_config *cfg, const char *section, int64_t total_steps,
                                  const char *steps_key, tess_adamw_config *ac, tess_sched *sched);

#endif
