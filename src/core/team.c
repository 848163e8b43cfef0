/* team.c - fork-join thread team over pthreads (see team.h). One mutex guards the run's
 * generation, function and the count of members still working; helpers wait on `go` for a new
 * generation, the caller waits on `done` until the count reaches zero. */
#include "core/team.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

enum { TEAM_MAX = 64 };

typedef struct {
    tess_team *team;
    int member;
} team_slot;

struct tess_team {
    int n;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;      /* run generation; a helper runs once per increment */
    int busy;          /* helpers still in the current run's fn */
    bool quit;
    tess_team_fn fn;
    void *ctx;
    int started;       /* helpers created */
    pthread_t th[TEAM_MAX];
    team_slot slot[TEAM_MAX];
};

static void *helper(void *arg) {
    team_slot *s = arg;
    tess_team *t = s->team;
    uint64_t seen = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (t->gen == seen && !t->quit) pthread_cond_wait(&t->go, &t->mu);
        if (t->quit) break;
        seen = t->gen;
        tess_team_fn fn = t->fn;
        void *ctx = t->ctx;
        pthread_mutex_unlock(&t->mu);
        fn(ctx, s->member, t->n);
        pthread_mutex_lock(&t->mu);
        if (--t->busy == 0) pthread_cond_signal(&t->done);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

tess_status tess_team_create(tess_team **t, int n) {
    *t = NULL;
    TESS_REQUIRE(n >= 1 && n <= TEAM_MAX, TESS_ERR_ARG,
                 "a thread team needs 1 to %d members, got %d", TEAM_MAX, n);
    tess_team *m = calloc(1, sizeof *m);
    TESS_REQUIRE(m, TESS_ERR_MEM, "cannot allocate a thread team");
    m->n = n;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->go, NULL);
    pthread_cond_init(&m->done, NULL);
    for (int i = 1; i < n; i++) {
        m->slot[i] = (team_slot){.team = m, .member = i};
        if (pthread_create(&m->th[i], NULL, helper, &m->slot[i]) != 0) {
            tess_team_destroy(&m);
            TESS_REQUIRE(false, TESS_ERR_MEM, "cannot start helper thread %d of a team of %d", i,
                         n);
        }
        m->started = i;
    }
    *t = m;
    return TESS_OK;
}

void tess_team_destroy(tess_team **t) {
    if (!t || !*t) return;
    tess_team *m = *t;
    pthread_mutex_lock(&m->mu);
    m->quit = true;
    pthread_cond_broadcast(&m->go);
    pthread_mutex_unlock(&m->mu);
    for (int i = 1; i <= m->started; i++) pthread_join(m->th[i], NULL);
    pthread_cond_destroy(&m->done);
    pthread_cond_destroy(&m->go);
    pthread_mutex_destroy(&m->mu);
    free(m);
    *t = NULL;
}

int tess_team_size(const tess_team *t) { return t->n; }

void tess_team_run(tess_team *t, tess_team_fn fn, void *ctx) {
    if (t->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&t->mu);
    t->fn = fn;
    t->ctx = ctx;
    t->busy = t->n - 1;
    t->gen++;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    fn(ctx, 0, t->n);
    pthread_mutex_lock(&t->mu);
    while (t->busy > 0) pthread_cond_wait(&t->done, &t->mu);
    pthread_mutex_unlock(&t->mu);
}
