/* timer.c - named timers (see timer.h). */
#include "core/timer.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h" /* tess_log_info */
#include "par/coll.h" /* tess_par_bcast_bytes, tess_par_allreduce_f64 */

double tess_timer_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tess_timer_init(tess_timers *t) { memset(t, 0, sizeof *t); }

static void timer_misuse(const char *what, const char *name, const char *func) {
    char msg[160];
    snprintf(msg, sizeof msg, "timer '%s': %s", name, what);
    tess_assert_fail(msg, __FILE__, __LINE__, func);
}

static void check_id(const tess_timers *t, tess_timer_id id, const char *func) {
    if (id < 0 || id >= t->n) timer_misuse("invalid timer id", "?", func);
}

tess_timer_id tess_timer_get(tess_timers *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0) return i;
    if (strlen(name) >= TESS_TIMER_NAME_MAX) timer_misuse("name too long", name, __func__);
    if (t->n >= TESS_TIMER_MAX) timer_misuse("too many timers", name, __func__);
    int id = t->n++;
    snprintf(t->name[id], TESS_TIMER_NAME_MAX, "%s", name);
    t->total[id] = 0.0;
    t->calls[id] = 0;
    t->running[id] = false;
    return id;
}

void tess_timer_start(tess_timers *t, tess_timer_id id) {
    check_id(t, id, __func__);
    if (t->running[id]) timer_misuse("started twice", t->name[id], __func__);
    t->running[id] = true;
    t->started[id] = tess_timer_now();
}

void tess_timer_stop(tess_timers *t, tess_timer_id id) {
    double now = tess_timer_now();
    check_id(t, id, __func__);
    if (!t->running[id]) timer_misuse("stopped without start", t->name[id], __func__);
    t->running[id] = false;
    t->total[id] += now - t->started[id];
    t->calls[id]++;
}

double tess_timer_elapsed(const tess_timers *t, tess_timer_id id) {
    check_id(t, id, __func__);
    return t->total[id];
}

int64_t tess_timer_calls(const tess_timers *t, tess_timer_id id) {
    check_id(t, id, __func__);
    return t->calls[id];
}

tess_status tess_timer_report(const tess_timers *t, const tess_group *g) {
    const int rank = g->rank, size = g->size;
    int n = t->n;
    char names[TESS_TIMER_MAX][TESS_TIMER_NAME_MAX];
    memcpy(names, t->name, sizeof names);
    TESS_CHECK(tess_par_bcast_bytes(g, &n, sizeof n, 0));
    TESS_CHECK(tess_par_bcast_bytes(g, names, (size_t)n * TESS_TIMER_NAME_MAX, 0));
    double mine[TESS_TIMER_MAX], lo[TESS_TIMER_MAX], sum[TESS_TIMER_MAX], hi[TESS_TIMER_MAX];
    for (int i = 0; i < n; i++) {
        mine[i] = 0.0;
        for (int j = 0; j < t->n; j++)
            if (strcmp(names[i], t->name[j]) == 0) mine[i] = t->total[j];
    }
    memcpy(lo, mine, (size_t)n * sizeof *lo);
    memcpy(sum, mine, (size_t)n * sizeof *sum);
    memcpy(hi, mine, (size_t)n * sizeof *hi);
    TESS_CHECK(tess_par_allreduce_f64(g, lo, n, TESS_PAR_MIN));
    TESS_CHECK(tess_par_allreduce_f64(g, sum, n, TESS_PAR_SUM));
    TESS_CHECK(tess_par_allreduce_f64(g, hi, n, TESS_PAR_MAX));
    if (rank != 0) return TESS_OK;
    /* Through the log (rank 0's info): quiet runs skip it, the run's log file keeps it. */
    tess_log_info("%-32s %10s %11s %11s %11s   (%d ranks)", "timer", "calls", "min s", "mean s",
                  "max s", size);
    for (int i = 0; i < n; i++)
        tess_log_info("%-32s %10lld %11.4f %11.4f %11.4f", names[i], (long long)t->calls[i], lo[i],
                      sum[i] / size, hi[i]);
    return TESS_OK;
}
