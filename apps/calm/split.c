/* split.c - the calm app's train/test splits (split.h). */
#include "split.h"

#include <math.h>
#include <stdlib.h>

tess_status calm_split_session(calm_session *s, calm_split split, double fraction, int64_t block,
                               int64_t animal) {
    /* tail and animal: one block, the whole session; block: T / block blocks, the last one
     * taking the remainder */
    const int64_t blocks = split == CALM_SPLIT_BLOCK && s->T >= 2 * block ? s->T / block : 1;
    free(s->spans);
    s->spans = calloc((size_t)(2 * blocks), sizeof *s->spans);
    TESS_REQUIRE(s->spans, TESS_ERR_MEM, "out of memory for the spans of '%s'", s->name);
    s->train_T = (int64_t)floor(fraction * (double)s->T);
    s->held_out = split == CALM_SPLIT_ANIMAL && s->animal == animal;
    s->nspans = 0;
    if (split == CALM_SPLIT_ANIMAL && !s->held_out) {
        s->spans[s->nspans++] = (calm_span){0, s->T, true};
        return TESS_OK;
    }
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t t0 = b * block * (blocks > 1), t1 = b + 1 < blocks ? t0 + block : s->T;
        const int64_t cut = t0 + (int64_t)floor(fraction * (double)(t1 - t0));
        s->spans[s->nspans++] = (calm_span){t0, cut, true};
        s->spans[s->nspans++] = (calm_span){cut, t1, false};
    }
    return TESS_OK;
}

int64_t calm_split_train_frames(const calm_session *s) {
    int64_t n = 0;
    for (int64_t i = 0; i < s->nspans; i++) n += s->spans[i].train ? s->spans[i].t1 - s->spans[i].t0 : 0;
    return n;
}

/* The windows of Lw frames on the patch grid inside [t0, t1) appended to out (may be NULL). */
static void grid(int64_t k, int64_t t0, int64_t t1, int64_t Lw, int64_t P, calm_window *out,
                 int64_t *n) {
    for (int64_t t = (t0 + P - 1) / P * P; t + Lw <= t1; t += P) {
        if (out) out[*n] = (calm_window){k, t};
        (*n)++;
    }
}

void calm_split_windows(const calm_session *sess, int64_t nsess, int64_t Lw, int64_t P,
                        double val_fraction, calm_window *train, int64_t *ntrain, calm_window *val,
                        int64_t *nval, calm_window *test, int64_t *ntest) {
    *ntrain = *nval = *ntest = 0;
    for (int64_t k = 0; k < nsess; k++) {
        for (int64_t i = 0; i < sess[k].nspans; i++) {
            const calm_span *sp = &sess[k].spans[i];
            if (!sp->train) {
                grid(k, sp->t0, sp->t1, Lw, P, test, ntest);
                continue;
            }
            if (sess[k].held_out) continue;
            const int64_t v0 = sp->t0 + (int64_t)floor((1.0 - val_fraction) * (double)(sp->t1 - sp->t0));
            grid(k, sp->t0, v0, Lw, P, train, ntrain);
            if (val_fraction > 0.0) grid(k, v0, sp->t1, Lw, P, val, nval);
        }
    }
}

void calm_split_held_out_windows(const calm_session *sess, int64_t nsess, int64_t Lw, int64_t P,
                                 double val_fraction, calm_window *train, int64_t *ntrain,
                                 calm_window *val, int64_t *nval) {
    *ntrain = *nval = 0;
    for (int64_t k = 0; k < nsess; k++)
        for (int64_t i = 0; sess[k].held_out && i < sess[k].nspans; i++) {
            const calm_span *sp = &sess[k].spans[i];
            if (!sp->train) continue;
            const int64_t v0 = sp->t0 + (int64_t)floor((1.0 - val_fraction) * (double)(sp->t1 - sp->t0));
            grid(k, sp->t0, v0, Lw, P, train, ntrain);
            if (val_fraction > 0.0) grid(k, v0, sp->t1, Lw, P, val, nval);
        }
}
