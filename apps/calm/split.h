/* split.h - the calm app's train/test splits of its sessions (docs/calm.md, "Splits"):
 *
 *   tail    the first `fraction` of every session trains, the rest is test;
 *   block   the session cut into blocks of `block` frames (a remainder shorter than one block
 *           joins the last block); the first `fraction` of every block trains, the rest is test;
 *   animal  leave one animal out: every session of `animal` is held out - its first `fraction`
 *           is its own training part (for per-session fits: the z-scoring, the per-neuron AR
 *           and the population VAR), the rest is test - and every session of the other animals
 *           trains on all its frames (models pooled over sessions train on these only).
 *
 * A session's frames are a list of spans, each training or test; windows never straddle a
 * span. Pure functions, not collective. */
#ifndef CALM_SPLIT_H
#define CALM_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h" /* tess_opt_enum */
#include "core/status.h" /* tess_status */

typedef enum { CALM_SPLIT_TAIL = 0, CALM_SPLIT_BLOCK, CALM_SPLIT_ANIMAL, CALM_SPLIT_COUNT } calm_split;

static const tess_opt_enum calm_split_names[] = {
    {"tail", CALM_SPLIT_TAIL}, {"block", CALM_SPLIT_BLOCK}, {"animal", CALM_SPLIT_ANIMAL}};
TESS_OPT_ENUM_TABLE_CHECK(calm_split_names, CALM_SPLIT_COUNT);

typedef struct {
    int64_t t0, t1; /* frames [t0, t1) */
    bool train;     /* a training span, else a test span */
} calm_span;

/* One session held in memory: z-scored traces (T, N) frame-major and its split. */
typedef struct {
    char name[256];        /* file or simulated session, for messages */
    int64_t T, N, train_T; /* frames, neurons, frames of the tail split's training head */
    int64_t unit0;         /* global unit id of neuron 0 */
    int64_t animal;        /* animal index (a recording file is one animal) */
    bool held_out;         /* animal split: the held-out animal (pooled models never train on it) */
    int64_t nspans;        /* spans in order, covering [0, T) */
    calm_span *spans;      /* owned */
    float *x;              /* (T, N) */
    float *beh;            /* (T, D) behaviour targets (decode mode; binary ones 0/1), or NULL */
} calm_session;

typedef struct {
    int64_t session, t0; /* a window of M P frames starting at frame t0 */
} calm_window;

/* Split session s (T set) by `split`: fills spans, nspans, held_out (s->animal == animal for
 * CALM_SPLIT_ANIMAL) and train_T (floor(fraction T), as in tail). fraction in (0, 1); block >= 2
 * for CALM_SPLIT_BLOCK. Errors: TESS_ERR_MEM. */
tess_status calm_split_session(calm_session *s, calm_split split, double fraction, int64_t block,
                               int64_t animal);

/* Frames of s's training spans (z-scoring statistics come from these). */
int64_t calm_split_train_frames(const calm_session *s);

/* Windows of Lw frames starting on the patch grid (t0 a multiple of P) inside one span:
 * training windows from the training spans of sessions that are not held out, test windows
 * from every test span. With val_fraction > 0 the last val_fraction of each such training span
 * is a validation slice: its windows go to val, and training windows end before it (val_fraction
 * 0: no validation windows). train / val / test (may be NULL to count only) receive them in
 * session then frame order; *ntrain, *nval, *ntest their counts. */
void calm_split_windows(const calm_session *sess, int64_t nsess, int64_t Lw, int64_t P,
                        double val_fraction, calm_window *train, int64_t *ntrain, calm_window *val,
                        int64_t *nval, calm_window *test, int64_t *ntest);

/* The windows of the held-out sessions' training spans (the animal split's adaptation data:
 * the held-out animal's own training part, which calm_split_windows leaves out), with the same
 * validation slices: the last val_fraction of each such span gives val windows, train windows
 * end before it. train / val may be NULL to count only; *ntrain, *nval their counts. */
void calm_split_held_out_windows(const calm_session *sess, int64_t nsess, int64_t Lw, int64_t P,
                                 double val_fraction, calm_window *train, int64_t *ntrain,
                                 calm_window *val, int64_t *nval);

#endif
