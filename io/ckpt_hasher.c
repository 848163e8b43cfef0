/* ckpt_hasher.c - the load's background hash worker (see ckpt_hasher.h): a fixed ring of jobs
 * guarded by one mutex, the caller producing, the worker consuming. */
#include "io/ckpt_hasher.h"

#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

/* jobs in flight: ckpt_hasher_add waits when the worker is this far behind */
enum { HASHER_RING = 64 };

typedef struct {
    tess_ckpt_hash_scheme h;
    const tess_state_entry *e;
    ckpt_region r;
    const void *local;
    uint64_t *acc;
} hasher_job;

struct ckpt_hasher {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job was queued or taken, or stop was set */
    hasher_job ring[HASHER_RING];
    int64_t queued, taken; /* jobs ever queued / ever taken; ring slot = count % HASHER_RING */
    bool stop;
};

static void *hasher_main(void *arg) {
    ckpt_hasher *hq = arg;
    pthread_mutex_lock(&hq->lock);
    for (;;) {
        while (hq->taken == hq->queued && !hq->stop) pthread_cond_wait(&hq->changed, &hq->lock);
        if (hq->taken == hq->queued) break; /* stop, and nothing left */
        hasher_job job = hq->ring[hq->taken % HASHER_RING];
        pthread_mutex_unlock(&hq->lock);
        *job.acc = ckpt_hash_region(job.h, *job.acc, job.e, &job.r, job.local);
        pthread_mutex_lock(&hq->lock);
        hq->taken++; /* only now: the slot's acc is written and the slot may be reused */
        pthread_cond_broadcast(&hq->changed);
    }
    pthread_mutex_unlock(&hq->lock);
    return NULL;
}

ckpt_hasher *ckpt_hasher_start(void) {
    int level, is_main;
    if (MPI_Query_thread(&level) != MPI_SUCCESS || level < MPI_THREAD_FUNNELED) return NULL;
    if (MPI_Is_thread_main(&is_main) != MPI_SUCCESS || !is_main) return NULL;
    ckpt_hasher *hq = calloc(1, sizeof *hq);
    if (!hq) return NULL;
    if (pthread_mutex_init(&hq->lock, NULL) != 0) {
        free(hq);
        return NULL;
    }
    if (pthread_cond_init(&hq->changed, NULL) != 0) {
        pthread_mutex_destroy(&hq->lock);
        free(hq);
        return NULL;
    }
    /* the worker inherits a mask that blocks every signal, so that signals (the stop signals of
     * core/signals.h among them) keep being delivered to the application's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int created = pthread_create(&hq->thread, NULL, hasher_main, hq);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (created != 0) {
        pthread_cond_destroy(&hq->changed);
        pthread_mutex_destroy(&hq->lock);
        free(hq);
        return NULL;
    }
    return hq;
}

void ckpt_hasher_add(ckpt_hasher *hq, tess_ckpt_hash_scheme h, const tess_state_entry *e,
                     const ckpt_region *r, const void *local, uint64_t *acc) {
    if (!hq) {
        *acc = ckpt_hash_region(h, *acc, e, r, local);
        return;
    }
    pthread_mutex_lock(&hq->lock);
    while (hq->queued - hq->taken == HASHER_RING) pthread_cond_wait(&hq->changed, &hq->lock);
    hq->ring[hq->queued % HASHER_RING] = (hasher_job){h, e, *r, local, acc};
    hq->queued++;
    pthread_cond_broadcast(&hq->changed);
    pthread_mutex_unlock(&hq->lock);
}

void ckpt_hasher_finish(ckpt_hasher *hq) {
    if (!hq) return;
    pthread_mutex_lock(&hq->lock);
    hq->stop = true;
    pthread_cond_broadcast(&hq->changed);
    pthread_mutex_unlock(&hq->lock);
    pthread_join(hq->thread, NULL); /* the worker drains the ring before it exits */
    pthread_cond_destroy(&hq->changed);
    pthread_mutex_destroy(&hq->lock);
    free(hq);
}
