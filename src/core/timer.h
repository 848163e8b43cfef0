/* timer.h - named wall-clock timers, reduced over ranks at the end of a run.
 *
 * A fixed table (TESS_TIMER_MAX names, no allocation): look a name up once at setup, then
 * start/stop by id in the step loop. Time communication under its own names ("comm.allreduce")
 * so the report shows it apart from compute.
 *
 *   tess_timers timers;
 *   tess_timer_init(&timers);
 *   tess_timer_id fwd = tess_timer_get(&timers, "fwd");
 *   tess_timer_start(&timers, fwd); ... tess_timer_stop(&timers, fwd);
 *   TESS_CHECK(tess_timer_report(&timers, group));
 *
 * Misuse (table full, name too long, stop without start, bad id) is a bug: one line and an abort
 * through the abort hook, always on.
 */
#ifndef TESS_CORE_TIMER_H
#define TESS_CORE_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

enum { TESS_TIMER_MAX = 64, TESS_TIMER_NAME_MAX = 32 /* terminator included */ };

typedef int tess_timer_id;

typedef struct {
    int n;
    char name[TESS_TIMER_MAX][TESS_TIMER_NAME_MAX];
    double total[TESS_TIMER_MAX];   /* seconds over completed start/stop pairs */
    double started[TESS_TIMER_MAX]; /* tess_timer_now() at the open start */
    int64_t calls[TESS_TIMER_MAX];  /* completed start/stop pairs */
    bool running[TESS_TIMER_MAX];
} tess_timers;

/* Seconds on a monotonic clock (CLOCK_MONOTONIC); only differences mean anything. */
double tess_timer_now(void);

void tess_timer_init(tess_timers *t);
/* The id of `name`, adding it if new. Linear search: call at setup, not per step. */
tess_timer_id tess_timer_get(tess_timers *t, const char *name);
void tess_timer_start(tess_timers *t, tess_timer_id id);
void tess_timer_stop(tess_timers *t, tess_timer_id id);
/* Seconds accumulated by completed start/stop pairs. */
double tess_timer_elapsed(const tess_timers *t, tess_timer_id id);
int64_t tess_timer_calls(const tess_timers *t, tess_timer_id id);

/* Collective on comm. Rank 0's timer names define the report; a rank without one of them counts
 * 0 s for it (ranks may create timers in different orders; names only other ranks have are left
 * out). Rank 0 logs (tess_log_info), for each name, the calls on rank 0 and min/mean/max seconds over ranks. */
tess_status tess_timer_report(const tess_timers *t, const tess_group *g);

#endif
