/* test_adamw_opts.c - the shared AdamW + schedule section: defaults and --set values reach the
 * AdamW config and the schedule; the declared range of every key is what the optimizer and the
 * schedule accept (at both bounds); relations between keys are refused with messages naming both
 * keys; a constant schedule needs neither relation. */
#include <string.h>

#include "core/config.h"      /* tess_config_* */
#include "nn/registry.h"      /* tess_registry_* */
#include "optim/adamw_opts.h" /* tess_adamw_sched_read, TESS_ADAMW_SCHED_OPTS */
#include "tess_test.h"

static const tess_opt opts[] = {TESS_ADAMW_SCHED_OPTS(7)};

/* tess_adamw_sched_read of a fresh config with "key=value" settings (NULL-terminated). */
static tess_status read_with(const char *const *sets, int64_t steps, tess_adamw_config *ac,
                             tess_sched *sched) {
    const tess_config_section secs[] = {TESS_CONFIG_SECTION("client.optim", opts)};
    tess_config *cfg = NULL;
    TESS_TEST_CHECK(tess_config_create(&cfg, secs, 1) == TESS_OK, "config create");
    for (int i = 0; sets && sets[i]; i += 2)
        TESS_TEST_CHECK(tess_config_set(cfg, sets[i], sets[i + 1]) == TESS_OK, "%s", sets[i]);
    tess_status s = tess_adamw_sched_read(cfg, "client.optim", steps, "train.steps", ac, sched);
    tess_config_destroy(&cfg);
    return s;
}

static bool error_names(const char *a, const char *b) {
    const char *t = tess_error_text();
    bool ok = t && strstr(t, a) && strstr(t, b);
    tess_error_clear();
    return ok;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_adamw_config ac;
    tess_sched sc;
    TESS_TEST_CHECK(read_with(NULL, 100, &ac, &sc) == TESS_OK, "defaults valid");
    TESS_TEST_CHECK(sc.kind == TESS_SCHED_COSINE && sc.lr == 3e-3 && sc.min_lr == 1e-4 &&
                        sc.warmup_steps == 7 && sc.total_steps == 100,
                    "schedule from the defaults (warm-up from the macro argument)");
    TESS_TEST_CHECK(ac.beta1 == 0.9f && ac.beta2 == 0.98f && ac.eps == 1e-8f &&
                        ac.weight_decay == 0.01f, "AdamW config from the defaults");
    const char *const set[] = {"client.optim.lr", "0.5", "client.optim.schedule", "linear",
                               "client.optim.beta2", "0.95", NULL};
    TESS_TEST_CHECK(read_with(set, 100, &ac, &sc) == TESS_OK && sc.lr == 0.5 &&
                        sc.kind == TESS_SCHED_LINEAR && ac.beta2 == 0.95f, "--set values read");

    /* Every bound of every key is accepted by the reader (the others at their defaults, min_lr at
     * 0 where lr is at its smallest). */
    const char *const bounds[][4] = {
        {"client.optim.lr", "1e-12", "client.optim.min_lr", "0"},
        {"client.optim.lr", "10", NULL, NULL},
        {"client.optim.min_lr", "0", NULL, NULL},
        {"client.optim.warmup_steps", "0", NULL, NULL},
        {"client.optim.beta1", "0", "client.optim.beta2", "0"},
        {"client.optim.beta1", "0.999999", "client.optim.beta2", "0.999999"},
        {"client.optim.eps", "1e-30", "client.optim.weight_decay", "0"},
        {"client.optim.eps", "1", "client.optim.weight_decay", "10"},
    };
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        const char *const s[] = {bounds[i][0], bounds[i][1], bounds[i][2], bounds[i][3], NULL};
        TESS_TEST_CHECK(read_with(s, 100, &ac, &sc) == TESS_OK, "%s at a bound", bounds[i][0]);
        tess_adamw *opt = NULL;
        tess_registry *reg = NULL;
        TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                            tess_registry_finalize(reg) == TESS_OK &&
                            tess_adamw_create(&opt, reg, &ac) == TESS_OK,
                        "AdamW accepts %s at a bound", bounds[i][0]);
        tess_adamw_destroy(&opt);
        tess_registry_destroy(&reg);
    }

    const char *const above[] = {"client.optim.min_lr", "0.01", NULL};
    TESS_TEST_CHECK(read_with(above, 100, &ac, &sc) == TESS_ERR_CONFIG &&
                        error_names("client.optim.min_lr = 0.01", "client.optim.lr = 0.003"),
                    "min_lr above lr refused naming both keys");
    TESS_TEST_CHECK(read_with(NULL, 7, &ac, &sc) == TESS_ERR_CONFIG &&
                        error_names("client.optim.warmup_steps = 7", "train.steps = 7"),
                    "warm-up as long as the run refused naming both keys");
    const char *const cst[] = {"client.optim.schedule", "constant", "client.optim.min_lr", "1",
                               NULL};
    TESS_TEST_CHECK(read_with(cst, 3, &ac, &sc) == TESS_OK && sc.kind == TESS_SCHED_CONSTANT,
                    "constant: min_lr and the run's length do not matter");
    tess_config *cfg = NULL;
    const tess_config_section secs[] = {TESS_CONFIG_SECTION("optim", opts)};
    TESS_TEST_CHECK(tess_config_create(&cfg, secs, 1) == TESS_OK, "config create");
    TESS_TEST_CHECK(tess_config_set(cfg, "optim.lr", "0") == TESS_ERR_CONFIG,
                    "lr = 0 refused by its declared range");
    tess_error_clear();
    tess_config_destroy(&cfg);
    const int rc = tess_test_finish("adamw_opts");
    MPI_Finalize();
    return rc;
}
