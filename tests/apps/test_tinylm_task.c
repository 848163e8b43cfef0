/* test_tinylm_task.c - tinylm's synthetic tasks against an independent reference: for each name
 * of option task.kind (set through the config, as the app reads it), held-out samples must be
 * x SEP y with y the copy, the reversal or the sorted x, computed here from the ids alone.
 * Guards the bug where `reverse` trained copy and `copy` trained reverse (the option list and the
 * enum were ordered differently). */
#include <stdint.h>
#include <string.h>

#include "core/config.h" /* tess_config_* */
#include "task.h"        /* tinylm_task_* */
#include "tess_test.h"

enum { N = 8, NSYM = 10, B = 64 };

/* The answer to x (n symbols in [0, nsym)) for the task called name, into y (n). */
static void reference(const char *name, const int32_t *x, int32_t *y) {
    if (strcmp(name, "copy") == 0) {
        for (int i = 0; i < N; i++) y[i] = x[i];
    } else if (strcmp(name, "reverse") == 0) {
        for (int i = 0; i < N; i++) y[i] = x[N - 1 - i];
    } else { /* sort: counting sort, a different algorithm than the app's */
        int count[NSYM] = {0}, k = 0;
        for (int i = 0; i < N; i++) count[x[i]]++;
        for (int s = 0; s < NSYM; s++)
            for (int c = 0; c < count[s]; c++) y[k++] = s;
    }
}

int main(void) {
    static const tess_opt task_opts[] = {
        TESS_OPT_ENUM("kind", "reverse", tinylm_task_kind_names, "what the model must output")};
    const tess_config_section secs[] = {TESS_CONFIG_SECTION("task", task_opts)};
    tess_config *cfg = NULL;
    TESS_TEST_CHECK(tess_config_create(&cfg, secs, 1) == TESS_OK, "config: %s", tess_error_text());
    const char *names[] = {"copy", "reverse", "sort"};
    static int32_t ids[B * 2 * N], targets[B * 2 * N];
    for (int k = 0; k < 3; k++) {
        TESS_TEST_CHECK(tess_config_set(cfg, "task.kind", names[k]) == TESS_OK, "set %s", names[k]);
        const tinylm_task task = {.kind = (tinylm_task_kind)tess_config_enum(cfg, "task.kind"),
                                  .n = N, .nsym = NSYM, .key = {.seed = 1234, .stream = 1}};
        tinylm_task_batch(&task, TINYLM_SPLIT_EVAL, 1000, B, ids, targets);
        int64_t bad = 0, differs = 0;
        for (int b = 0; b < B; b++) {
            const int32_t *id = ids + b * 2 * N, *tg = targets + b * 2 * N;
            int32_t x[N], y[N], want[N];
            int64_t range = 0;
            for (int i = 0; i < N; i++) {
                x[i] = id[i];
                range += x[i] < 0 || x[i] >= NSYM;
            }
            bad += range;
            if (range) continue; /* the reference indexes by symbol */
            bad += id[N] != NSYM; /* SEP */
            for (int i = 0; i < N - 1; i++) bad += tg[i] != -1; /* x is random: not scored */
            bad += tg[N - 1] != NSYM;                          /* predict SEP */
            /* position N + i predicts y_{i+1}; y_1..y_{N-1} are also inputs */
            for (int i = 0; i < N; i++) y[i] = tg[N + i];
            for (int i = 0; i + 1 < N; i++) bad += id[N + 1 + i] != y[i];
            reference(names[k], x, want);
            for (int i = 0; i < N; i++) bad += y[i] != want[i];
            differs += memcmp(x, want, sizeof x) != 0;
        }
        TESS_TEST_CHECK(bad == 0, "task %s: %lld mismatches against the reference", names[k],
                        (long long)bad);
        /* copy's answer is x itself; reverse and sort must differ from x on most samples, or the
         * check above could not tell the tasks apart */
        TESS_TEST_CHECK(k == 0 ? differs == 0 : differs > B / 2, "task %s: %lld of %d answers differ from x",
                        names[k], (long long)differs, B);
    }
    tess_config_destroy(&cfg);
    return tess_test_finish("tinylm_task");
}
