/* adamw_opts.c - AdamW and schedule options (see adamw_opts.h). */
#include "optim/adamw_opts.h"

#include <stdio.h>

enum { KEY_MAX = 128 };

/* "<section>.<key>" into buf. */
static const char *key_of(char buf[KEY_MAX], const char *section, const char *key) {
    snprintf(buf, KEY_MAX, "%s.%s", section, key);
    return buf;
}

tess_status tess_adamw_sched_read(const tess_config *cfg, const char *section, int64_t total_steps,
                                  const char *steps_key, tess_adamw_config *ac, tess_sched *sched) {
    TESS_REQUIRE(cfg && section && steps_key && ac && sched, TESS_ERR_ARG, "NULL argument");
    char k[KEY_MAX], k2[KEY_MAX];
    *ac = (tess_adamw_config){
        .beta1 = (float)tess_config_real(cfg, key_of(k, section, "beta1")),
        .beta2 = (float)tess_config_real(cfg, key_of(k, section, "beta2")),
        .eps = (float)tess_config_real(cfg, key_of(k, section, "eps")),
        .weight_decay = (float)tess_config_real(cfg, key_of(k, section, "weight_decay"))};
    *sched = (tess_sched){
        .kind = (tess_sched_kind)tess_config_enum(cfg, key_of(k, section, "schedule")),
        .lr = tess_config_real(cfg, key_of(k, section, "lr")),
        .min_lr = tess_config_real(cfg, key_of(k, section, "min_lr")),
        .warmup_steps = tess_config_int(cfg, key_of(k, section, "warmup_steps")),
        .total_steps = total_steps};
    if (sched->kind == TESS_SCHED_CONSTANT) return tess_sched_check(sched);
    TESS_REQUIRE(sched->min_lr <= sched->lr, TESS_ERR_CONFIG,
                 "%s = %g must not exceed %s = %g (a %s schedule decays from lr to min_lr)",
                 key_of(k, section, "min_lr"), sched->min_lr, key_of(k2, section, "lr"),
                 sched->lr, tess_sched_kind_name(sched->kind));
    TESS_REQUIRE(sched->warmup_steps < total_steps, TESS_ERR_CONFIG,
                 "%s = %lld must be below %s = %lld for a %s schedule (or set %s = constant)",
                 key_of(k, section, "warmup_steps"), (long long)sched->warmup_steps, steps_key,
                 (long long)total_steps, tess_sched_kind_name(sched->kind),
                 key_of(k2, section, "schedule"));
    return tess_sched_check(sched);
}
