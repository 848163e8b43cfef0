/* sched.c - learning-rate schedules (see sched.h). */
#include "optim/sched.h"

#include <math.h>

static const double pi = 3.14159265358979323846; /* M_PI is not C11 */

tess_status tess_sched_check(const tess_sched *s) {
    TESS_REQUIRE(s, TESS_ERR_ARG, "NULL schedule");
    TESS_REQUIRE(s->kind == TESS_SCHED_CONSTANT || s->kind == TESS_SCHED_LINEAR ||
                     s->kind == TESS_SCHED_COSINE,
                 TESS_ERR_CONFIG, "unknown schedule kind %d", (int)s->kind);
    TESS_REQUIRE(isfinite(s->lr) && s->lr > 0.0, TESS_ERR_CONFIG, "lr %g must be > 0", s->lr);
    TESS_REQUIRE(s->warmup_steps >= 0, TESS_ERR_CONFIG, "warmup_steps %lld must be >= 0",
                 (long long)s->warmup_steps);
    if (s->kind == TESS_SCHED_CONSTANT) return TESS_OK;
    TESS_REQUIRE(isfinite(s->min_lr) && s->min_lr >= 0.0 && s->min_lr <= s->lr, TESS_ERR_CONFIG,
                 "min_lr %g must be in [0, lr = %g]", s->min_lr, s->lr);
    TESS_REQUIRE(s->total_steps > s->warmup_steps, TESS_ERR_CONFIG,
                 "%s schedule: total_steps %lld must exceed warmup_steps %lld",
                 tess_sched_kind_name(s->kind), (long long)s->total_steps,
                 (long long)s->warmup_steps);
    return TESS_OK;
}

double tess_sched_lr(const tess_sched *s, int64_t step) {
    if (step < s->warmup_steps) return s->lr * (double)(step + 1) / (double)s->warmup_steps;
    if (s->kind == TESS_SCHED_CONSTANT) return s->lr;
    int64_t decay_steps = s->total_steps - s->warmup_steps;
    double q = decay_steps > 0 ? (double)(step - s->warmup_steps) / (double)decay_steps : 1.0;
    if (q > 1.0) q = 1.0;
    if (s->kind == TESS_SCHED_LINEAR) return s->lr - (s->lr - s->min_lr) * q;
    return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1.0 + cos(pi * q));
}

const char *tess_sched_kind_name(tess_sched_kind k) {
    switch (k) {
    case TESS_SCHED_CONSTANT: return "constant";
    case TESS_SCHED_LINEAR: return "linear";
    case TESS_SCHED_COSINE: return "cosine";
    }
    return "unknown";
}
