/* gradsync.c - bucketed, overlapped gradient all-reduce (see gradsync.h). */
#include "par/gradsync.h"

#include <stdbool.h>
#include <stdlib.h>

#include "core/timer.h" /* tess_timer_now */

struct tess_gradsync {
    const tess_group *g;
    float *grads;
    int64_t n, bucket, nbuckets;
    int64_t frontier;          /* gradients [frontier, n) are final this step */
    int64_t launched;          /* buckets 0..launched-1 (from the end) have been started */
    tess_par_request *reqs;   /* (nbuckets) */
    tess_status hook_status;   /* first failure seen by tess_gradsync_hook this step */
};

static int64_t bucket_lo(const tess_gradsync *gs, int64_t k) {
    int64_t lo = gs->n - (k + 1) * gs->bucket;
    return lo > 0 ? lo : 0;
}

tess_status tess_gradsync_create(tess_gradsync **gs, const tess_group *g, float *grads, int64_t n,
                                 int64_t bucket) {
    *gs = NULL;
    TESS_REQUIRE(n >= 0, TESS_ERR_ARG, "gradient count must be >= 0, got %lld", (long long)n);
    TESS_REQUIRE(bucket >= 1 && bucket <= TESS_PAR_REQUEST_CHUNKS * g->max_count, TESS_ERR_ARG,
                 "bucket must hold 1..%lld floats, got %lld",
                 (long long)(TESS_PAR_REQUEST_CHUNKS * g->max_count), (long long)bucket);
    tess_gradsync *s = calloc(1, sizeof *s);
    TESS_REQUIRE(s, TESS_ERR_MEM, "cannot allocate gradient sync state");
    s->g = g;
    s->grads = grads;
    s->n = n;
    s->bucket = bucket;
    s->nbuckets = (n + bucket - 1) / bucket;
    s->frontier = n;
    s->reqs = calloc((size_t)(s->nbuckets > 0 ? s->nbuckets : 1), sizeof *s->reqs);
    if (!s->reqs) {
        int64_t nbuckets = s->nbuckets;
        free(s);
        TESS_REQUIRE(false, TESS_ERR_MEM, "cannot allocate %lld bucket requests", (long long)nbuckets);
    }
    *gs = s;
    return TESS_OK;
}

void tess_gradsync_destroy(tess_gradsync **gs) {
    if (!gs || !*gs) return;
    free((*gs)->reqs);
    free(*gs);
    *gs = NULL;
}

/* Start every bucket whose start is at or above the frontier, then poke the ones in flight. */
static tess_status launch_ready(tess_gradsync *gs) {
    while (gs->launched < gs->nbuckets && bucket_lo(gs, gs->launched) >= gs->frontier) {
        int64_t k = gs->launched, lo = bucket_lo(gs, k), hi = gs->n - k * gs->bucket;
        TESS_CHECK(tess_par_iallreduce(gs->g, gs->grads + lo, hi - lo, TESS_PAR_SUM, &gs->reqs[k]));
        gs->launched++;
    }
    for (int64_t k = 0; k < gs->launched; k++) {
        bool done;
        TESS_CHECK(tess_par_test(&gs->reqs[k], &done));
    }
    return TESS_OK;
}

tess_status tess_gradsync_ready(tess_gradsync *gs, int64_t lo, int64_t hi) {
    TESS_REQUIRE(hi == gs->frontier && lo >= 0 && lo < hi, TESS_ERR_ARG,
                 "gradient range [%lld, %lld) does not continue the step: expected a range ending at %lld",
                 (long long)lo, (long long)hi, (long long)gs->frontier);
    gs->frontier = lo;
    TESS_CHECK(launch_ready(gs));
    return TESS_OK;
}

void tess_gradsync_hook(void *ctx, int64_t lo, int64_t hi) {
    tess_gradsync *gs = ctx;
    if (gs->hook_status == TESS_OK) gs->hook_status = tess_gradsync_ready(gs, lo, hi);
}

tess_status tess_gradsync_finish(tess_gradsync *gs, double *exposed_seconds) {
    double t0 = tess_timer_now();
    tess_status hs = gs->hook_status;
    gs->hook_status = TESS_OK;
    TESS_REQUIRE(hs == TESS_OK, hs, "a gradient range reported during backward failed");
    gs->frontier = 0;
    TESS_CHECK(launch_ready(gs));
    for (int64_t k = 0; k < gs->nbuckets; k++) TESS_CHECK(tess_par_wait(&gs->reqs[k]));
    const float inv = 1.0f / (float)gs->g->size;
    if (gs->g->size > 1)
        for (int64_t i = 0; i < gs->n; i++) gs->grads[i] *= inv;
    gs->frontier = gs->n;
    gs->launched = 0;
    if (exposed_seconds) *exposed_seconds = tess_timer_now() - t0;
    return TESS_OK;
}
