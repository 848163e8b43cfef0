/* task.c - synthetic task generation (see task.h). */
#include "task.h"

static void sort_small(int32_t *y, int64_t n) { /* insertion sort: n is a few dozen at most */
    for (int64_t i = 1; i < n; i++) {
        int32_t v = y[i];
        int64_t j = i - 1;
        for (; j >= 0 && y[j] > v; j--) y[j + 1] = y[j];
        y[j + 1] = v;
    }
}

void tinylm_task_batch(const tinylm_task *t, int split, int64_t first, int64_t B, int32_t *ids,
                       int32_t *targets) {
    const int64_t n = t->n, T = 2 * n;
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)split);
    for (int64_t b = 0; b < B; b++) {
        const uint64_t g = (uint64_t)(first + b);
        int32_t seq[2 * 64 + 1]; /* n <= 64, checked by the app's option range */
        for (int64_t i = 0; i < n; i++)
            seq[i] = (int32_t)(tess_rng_u64(t->key, ctr, g * (uint64_t)n + (uint64_t)i) %
                               (uint64_t)t->nsym);
        seq[n] = (int32_t)t->nsym;
        int32_t *y = seq + n + 1;
        for (int64_t i = 0; i < n; i++)
            y[i] = t->kind == TINYLM_TASK_REVERSE ? seq[n - 1 - i] : seq[i];
        if (t->kind == TINYLM_TASK_SORT) sort_small(y, n);
        for (int64_t i = 0; i < T; i++) {
            ids[b * T + i] = seq[i];
            targets[b * T + i] = i >= n - 1 ? seq[i + 1] : -1;
        }
    }
}
