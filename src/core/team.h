/* team.h - a fixed team of threads that run one function together (fork-join), for work that
 * splits into independent parts larger than a thread's wake-up (tens of microseconds): e.g. the
 * experts of an MoE layer, each with its own rows and weight gradients (nn/moe.h).
 *
 *   tess_team *t;
 *   TESS_CHECK(tess_team_create(&t, 2));
 *   tess_team_run(t, fn, ctx);      // fn(ctx, 0, 2) on the caller, fn(ctx, 1, 2) on the helper
 *   tess_team_destroy(&t);
 *
 * A team of n members is the calling thread (member 0) and n - 1 helper threads created once,
 * blocked on a condition variable between runs. tess_team_run returns when every member's call
 * has returned; everything a member wrote is then visible to the caller (the hand-over goes
 * through the team's mutex). Members must not call tess_team_run of the same team (no nesting).
 * One caller at a time per team. Not collective; local to the process. */
#ifndef TESS_CORE_TEAM_H
#define TESS_CORE_TEAM_H

#include "core/status.h" /* tess_status */

typedef struct tess_team tess_team;

/* fn(ctx, member, n): member in [0, n). */
typedef void (*tess_team_fn)(void *ctx, int member, int n);

/* A team of n >= 1 members in *t (n = 1: no helper thread, tess_team_run calls fn inline).
 * TESS_ERR_ARG for n < 1 or n > 64; TESS_ERR_MEM if memory or a thread cannot be had (the
 * helpers already started are stopped, *t = NULL). */
tess_status tess_team_create(tess_team **t, int n);
/* Stop and join the helpers, free the team; *t = NULL. NULL or *t == NULL is a no-op. */
void tess_team_destroy(tess_team **t);
/* Members of the team. */
int tess_team_size(const tess_team *t);
/* Run fn(ctx, m, n) on every member m (m = 0 on the calling thread) and wait for all of them. */
void tess_team_run(tess_team *t, tess_team_fn fn, void *ctx);

#endif
