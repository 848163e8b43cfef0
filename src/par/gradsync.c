/* gradsync.c - bucketed, overlapped gradient all-reduce, each entry over its group (see
 * gradsync.h). */
#include "par/gradsync.h"

#include <stdbool.h>
#include <stdlib.h>

#include "core/timer.h" /* tess_timer_now */

typedef struct {
    int64_t lo, hi;     /* [lo, hi) of the flat gradient buffer */
    const tess_group *g; /* the group it is reduced over */
} bucket_span;

struct tess_gradsync {
    const tess_registry *reg; /* borrowed */
    float *grads;            /* the flat gradient; a bucket's pending zeros are written at launch */
    int64_t n, nbuckets;
    int64_t frontier;        /* gradients [frontier, n) are final this step */
    int64_t launched;        /* buckets 0..launched-1 (from the end) have been started */
    bucket_span *buckets;    /* (nbuckets), bucket 0 ends at n, lo decreasing */
    tess_par_request *reqs;  /* (nbuckets) */
    tess_status hook_status; /* first failure seen by tess_gradsync_hook this step */
};

static const tess_group *entry_group(const tess_registry_entry *e, const tess_group *dflt) {
    return e->group ? e->group : dflt;
}

/* Walk the segments (maximal runs of consecutive entries with one group) from the end of the
 * buffer and cut each into buckets from its end; store them in out (may be NULL to count).
 * Returns the number of buckets. */
static int64_t cut_buckets(const tess_registry *reg, const tess_group *dflt, int64_t bucket,
                           bucket_span *out) {
    int64_t nb = 0, i = tess_registry_count(reg) - 1;
    while (i >= 0) {
        const tess_registry_entry *last = tess_registry_get(reg, i);
        const tess_group *g = entry_group(last, dflt);
        const int64_t shi = last->flat_offset + last->local_count;
        while (i >= 0 && entry_group(tess_registry_get(reg, i), dflt) == g) i--;
        const int64_t slo = tess_registry_get(reg, i + 1)->flat_offset;
        for (int64_t hi = shi; hi > slo; hi -= bucket) {
            if (out) out[nb] = (bucket_span){hi - bucket > slo ? hi - bucket : slo, hi, g};
            nb++;
        }
    }
    return nb;
}

tess_status tess_gradsync_create(tess_gradsync **gs, const tess_registry *reg,
                                 const tess_group *dflt, int64_t bucket) {
    *gs = NULL;
    TESS_REQUIRE(reg && tess_registry_is_final(reg), TESS_ERR_ARG,
                 "gradient sync needs a finalized registry");
    TESS_REQUIRE(bucket >= 1, TESS_ERR_ARG, "bucket must hold >= 1 floats, got %lld",
                 (long long)bucket);
    for (int64_t i = 0; i < tess_registry_count(reg); i++) {
        const tess_registry_entry *e = tess_registry_get(reg, i);
        const tess_group *g = entry_group(e, dflt);
        TESS_REQUIRE(g != NULL, TESS_ERR_ARG,
                     "'%s' has no reduction group and no default group was given", e->name);
        TESS_REQUIRE(bucket <= TESS_PAR_REQUEST_CHUNKS * g->max_count, TESS_ERR_ARG,
                     "bucket must hold 1..%lld floats for group '%s' of '%s', got %lld",
                     (long long)(TESS_PAR_REQUEST_CHUNKS * g->max_count), g->name, e->name,
                     (long long)bucket);
    }
    tess_gradsync *s = calloc(1, sizeof *s);
    TESS_REQUIRE(s, TESS_ERR_MEM, "cannot allocate gradient sync state");
    s->reg = reg;
    s->grads = tess_registry_grads(reg);
    s->n = tess_registry_local_total(reg);
    s->frontier = s->n;
    s->nbuckets = cut_buckets(reg, dflt, bucket, NULL);
    const size_t nb = (size_t)(s->nbuckets > 0 ? s->nbuckets : 1);
    s->buckets = calloc(nb, sizeof *s->buckets);
    s->reqs = calloc(nb, sizeof *s->reqs);
    if (!s->buckets || !s->reqs) {
        int64_t nbuckets = s->nbuckets;
        tess_gradsync_destroy(&s);
        TESS_REQUIRE(false, TESS_ERR_MEM, "cannot allocate %lld bucket requests",
                     (long long)nbuckets);
    }
    cut_buckets(reg, dflt, bucket, s->buckets);
    *gs = s;
    return TESS_OK;
}

void tess_gradsync_destroy(tess_gradsync **gs) {
    if (!gs || !*gs) return;
    free((*gs)->buckets);
    free((*gs)->reqs);
    free(*gs);
    *gs = NULL;
}

int64_t tess_gradsync_bucket_count(const tess_gradsync *gs) { return gs->nbuckets; }

void tess_gradsync_bucket(const tess_gradsync *gs, int64_t k, int64_t *lo, int64_t *hi,
                          const tess_group **g) {
    *lo = gs->buckets[k].lo;
    *hi = gs->buckets[k].hi;
    *g = gs->buckets[k].g;
}

/* Start every bucket whose start is at or above the frontier, then poke the ones in flight. */
static tess_status launch_ready(tess_gradsync *gs) {
    while (gs->launched < gs->nbuckets && gs->buckets[gs->launched].lo >= gs->frontier) {
        const bucket_span *b = &gs->buckets[gs->launched];
        float *g = tess_registry_grads_range(gs->reg, b->lo, b->hi);
        TESS_CHECK(tess_par_iallreduce(b->g, g, b->hi - b->lo, TESS_PAR_SUM,
                                       &gs->reqs[gs->launched]));
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
    for (int64_t k = 0; k < gs->nbuckets; k++) {
        const bucket_span *b = &gs->buckets[k];
        if (b->g->size == 1) continue;
        const float inv = 1.0f / (float)b->g->size;
        for (int64_t i = b->lo; i < b->hi; i++) gs->grads[i] *= inv;
    }
    gs->frontier = gs->n;
    gs->launched = 0;
    if (exposed_seconds) *exposed_seconds = tess_timer_now() - t0;
    return TESS_OK;
}
