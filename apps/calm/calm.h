/* calm.h - the calm app (docs/calm.md): its modes and its context, shared by main.c and the
 * mode files (simulate.c, pretrain.c). */
#ifndef CALM_APP_H
#define CALM_APP_H

#include <stdint.h>

#include "core/config.h" /* tess_opt_enum */
#include "run/run.h"     /* tess_run, tess_run_step_out */
#include "dat.h"         /* calm_dat */
#include "decode.h"      /* calm_dec */
#include "optim/adamw.h" /* tess_adamw */
#include "optim/sched.h" /* tess_sched */
#include "par/gradsync.h" /* tess_gradsync */
#include "sim.h"         /* calm_sim_config */
#include "split.h"       /* calm_session, calm_window, calm_split */
#include "tok.h"         /* calm_tok */

typedef enum { CALM_MODE_SIMULATE = 0, CALM_MODE_PRETRAIN, CALM_MODE_DECODE, CALM_MODE_COUNT } calm_mode;

static const tess_opt_enum calm_mode_names[] = {{"pretrain", CALM_MODE_PRETRAIN},
                                                {"simulate", CALM_MODE_SIMULATE},
                                                {"decode", CALM_MODE_DECODE}};
TESS_OPT_ENUM_TABLE_CHECK(calm_mode_names, CALM_MODE_COUNT);

/* simulate mode: sessions dealt to ranks, `size` sessions per step. */
typedef struct {
    calm_sim_config cfg;
    char dir[4096]; /* where the session files go */
    char prefix[64];
    int64_t total; /* animals x sessions */
} calm_simulate;


/* How the decode mode trains the dual-axis transformer under the decoding head. */
typedef enum {
    CALM_REGIME_FROZEN = 0, /* pretrained, frozen: only the head trains (probe) */
    CALM_REGIME_FINETUNE,   /* pretrained, trained with the head (decode.backbone_lr) */
    CALM_REGIME_SCRATCH,    /* no DAT pretraining: random init, trained with the head */
    CALM_REGIME_COUNT
} calm_regime;

static const tess_opt_enum calm_regime_names[] = {{"frozen", CALM_REGIME_FROZEN},
                                                  {"finetune", CALM_REGIME_FINETUNE},
                                                  {"scratch", CALM_REGIME_SCRATCH}};
TESS_OPT_ENUM_TABLE_CHECK(calm_regime_names, CALM_REGIME_COUNT);

/* decode mode (decode_stage.c): the behaviour-decoding stage after the pretraining stages. */
typedef struct {
    bool on;
    calm_regime regime;
    calm_split split; /* train.split: tail or animal */
    int64_t steps, batch, b, D, lags, hidden, mlp_steps;
    calm_dec_readout readout;     /* decode.readout */
    tess_sched sched;             /* decode.schedule over decode.steps: peak decode.lr */
    int64_t val_every, best_step; /* decode.val_every; the head step of the best validation */
    int64_t patience;             /* decode.patience: validations without a new best to stop */
    double best_loss;             /* the head's lowest validation loss so far */
    float *best, *best_dat;       /* the head's (and, if it trains, the DAT's) parameters there */
    int val_csv;
    double lr, backbone_lr; /* decode.lr (the head's); the DAT's (decode.backbone_lr, by regime) */
    double weight_decay;    /* decode.weight_decay: the head's */
    char names[CALM_DEC_MAX_TARGETS][48]; /* behaviour datasets (/behavior/<name>) */
    bool binary[CALM_DEC_MAX_TARGETS];
    char cols[2 + 2 * CALM_DEC_MAX_TARGETS][64], tcols[1 + 4 * CALM_DEC_MAX_TARGETS][64];
    const char *colp[2 + 2 * CALM_DEC_MAX_TARGETS], *tcolp[1 + 4 * CALM_DEC_MAX_TARGETS];
    char ylabels[CALM_DEC_MAX_TARGETS][96], pngs[CALM_DEC_MAX_TARGETS][64], title[320];
    double *mu, *sd; /* (sessions, D) training-frame mean and sd (regression targets) */
    tess_registry *reg;
    calm_dec *head;
    tess_adamw *opt;
    tess_gradsync *sync;
    float *target, *dh; /* (b, M, D), (b, max_N, M, d) */
    bool probe; /* decode.probe: the validation-slice probes at finish */
    int loss_csv, res_csv, trace_csv, probe_csv;
} calm_decode;

/* The adaptation stage (adapt.c) of the animal split: after the DAT stage, the held-out
 * animal's unit and session embeddings - and nothing else - train on its own training part. */
typedef struct {
    int64_t steps, batch, b, val_every; /* adapt.steps (0: no stage), .batch, per rank, .val_every */
    double lr;
    int64_t ntrain, nval;   /* windows in the held-out training part, in its validation slices */
    calm_window *win, *val; /* (ntrain), (nval): after the pretrain windows in the token cache */
    tess_adamw *opt;        /* over the DAT's registry, stepping only the two embeddings */
    float *start, *best;    /* DAT parameters at the stage's start (zero-shot); best validated */
    double best_loss;
    int64_t best_step; /* adaptation step of best (0: the start) */
    int loss_csv, val_csv;
} calm_adapt;

/* The linear analyses of the embeddings (analyses.c): their metrics files. */
typedef struct {
    int id_csv, pca_csv;
} calm_analyses;

/* pretrain mode: the data, both models, their optimizers and the batch buffers. */
typedef struct {
    calm_sim_config simcfg;
    calm_tok_config tokc;
    calm_dat_config datc;
    int64_t tok_steps, tok_restart, tok_batch, tok_b, dat_steps, dat_batch, dat_b, eval_b, horizon;
    int64_t mlp_steps; /* train.mlp_steps: the MLP baseline's */
    int64_t val_every, nval, best_step; /* train.val_every; validation windows; best's DAT step */
    double best_loss;                   /* the lowest validation loss so far */
    calm_window *val_win;               /* (nval) in the validation slices (train.val_every > 0) */
    float *best;                        /* the DAT parameters of best_step (train.val_every > 0) */
    int val_csv;
    double tok_lr, clip, weight_decay, train_fraction;
    tess_sched sched;
    int64_t nsess, units, ntrain, ntest, max_traces;
    const char *split_name; /* train.split */
    calm_session *sess;
    calm_window *train_win, *test_win; /* training, test windows */
    tess_registry *tok_reg, *dat_reg;
    calm_tok *tok;
    calm_dat *dat;
    tess_adamw *tok_opt, *dat_opt;
    tess_gradsync *tok_sync, *dat_sync;
    float *x;       /* (traces, M P) */
    int32_t *ids;   /* (traces, M) */
    int32_t *tokens, *unit, *sid, *count; /* (B, N, M), (B, N), (B), (B) */
    float *frames;  /* (B, N, M P) the windows' z-scored frames */
    uint16_t *cache;  /* token ids of every window (training, then test) and neuron, (.., M) */
    int64_t *win_off; /* (windows + 1) offset of window k's ids in cache */
    int64_t *perm;  /* (units + 1) */
    int tok_csv, dat_csv, fc_csv;
    calm_decode dec; /* decode mode only */
    calm_adapt adapt; /* pretrain mode, animal split, adapt.steps > 0 only */
    calm_analyses lin; /* pretrain mode */
} calm_pretrain;

typedef struct {
    calm_mode mode;
    calm_simulate sim;
    calm_pretrain pre;
} calm_app;

/* The simulator's option table ([sim] section) and its reading into a calm_sim_config
 * (seed from run.seed). */
extern const tess_opt calm_sim_opts[];
extern const int64_t calm_sim_nopts;
tess_status calm_sim_config_read(calm_sim_config *c, const tess_config *cfg, uint64_t seed);

/* Option tables of the pretrain mode ([data], [tok], [model], [train]). */
extern const tess_opt calm_tok_opts[], calm_model_opts[], calm_train_opts[], calm_data_opts[];
extern const int64_t calm_tok_nopts, calm_model_nopts, calm_train_nopts, calm_data_nopts;

/* pretrain mode (pretrain.c): setup collective; steps 0..tok.steps-1 train the tokenizer, the
 * next train.steps the DAT; finish forecasts the held-out tail (collective). */
tess_status calm_pretrain_setup(tess_run *run, calm_pretrain *p);
tess_status calm_pretrain_step(tess_run *run, calm_pretrain *p, int64_t step,
                               tess_run_step_out *out);
tess_status calm_pretrain_finish(tess_run *run, calm_pretrain *p);
void calm_pretrain_free(calm_pretrain *p);

/* decode mode (decode_stage.c): the pretrain mode's stages (the DAT stage skipped in the scratch
 * regime), then decode.steps steps of the decoding head; finish scores it and the ridge and MLP
 * decoders on the test frames. calm_decode_config reads the [decode] options into p->dec before
 * the pretrain setup reads the data; calm_decode_setup builds the head after it (collective). */
extern const tess_opt calm_decode_opts[];
extern const int64_t calm_decode_nopts;
tess_status calm_decode_config(tess_run *run, calm_pretrain *p);
tess_status calm_decode_setup(tess_run *run, calm_pretrain *p);
tess_status calm_decode_step(tess_run *run, calm_pretrain *p, int64_t step, tess_run_step_out *out);
tess_status calm_decode_finish(tess_run *run, calm_pretrain *p);
void calm_decode_free(calm_decode *d);

/* The adaptation stage (adapt.c, docs/calm.md "Adaptation to a held-out animal"): steps
 * tok.steps + train.steps .. + adapt.steps - 1 of the pretrain mode with train.split = animal.
 * calm_adapt_config reads the [adapt] options before the sessions are read (refusing a stage
 * without the animal split); calm_adapt_windows lists the held-out animal's training windows
 * after they are split; calm_adapt_setup builds the stage's optimizer and state after the models
 * (collective); a step freezes every DAT entry but dat.unit_emb and dat.sess_emb and trains
 * those on the held-out training windows (only the held-out animal's rows get a gradient). */
extern const tess_opt calm_adapt_opts[];
extern const int64_t calm_adapt_nopts;
tess_status calm_adapt_config(tess_run *run, calm_pretrain *p);
tess_status calm_adapt_windows(calm_pretrain *p);
tess_status calm_adapt_setup(tess_run *run, calm_pretrain *p);
tess_status calm_adapt_step(tess_run *run, calm_pretrain *p, int64_t step, tess_run_step_out *out);
void calm_adapt_free(calm_adapt *a);

/* The linear analyses (analyses.c, docs/calm.md "Linear analyses"), in the pretrain mode:
 * setup declares identity.csv, pca.csv and plots/pca.png; finish decodes animal identity from
 * the session and unit embeddings and runs the PCA of the token embedding and the codebook
 * (collective). */
tess_status calm_analyses_setup(tess_run *run, calm_pretrain *p);
tess_status calm_analyses_finish(tess_run *run, calm_pretrain *p);

/* The pretrain mode's pieces the decode stage reuses (pretrain.c): the token cache (built once,
 * collective), a window's neurons, ids and frames into batch slot b (window k: training windows
 * first, then test windows; subsample as in training with key and step), the Philox draw of
 * global sample j of a step. */
tess_status calm_pretrain_cache(tess_run *run, calm_pretrain *p);
void calm_pretrain_window(calm_pretrain *p, int64_t k, int64_t b, bool subsample, uint64_t key,
                          int64_t step);
uint64_t calm_pretrain_draw(const tess_run *run, int64_t step, uint64_t what, int64_t j);
/* One DAT gradient on the b windows already in the batch slots (collective over the run's
 * group): zero the gradients, forward, the global loss parts tot = {cross-entropy sum, MSE sum,
 * pairs} summed over the ranks, backward scaled to the global mean, gradient sync, clipping
 * (gnorm = the norm before clipping). The DAT stage and the adaptation stage share it. */
/* The DAT's validation losses on the n token-cache windows from first (all their neurons up to
 * N_max), split over the ranks in blocks: v = {CE, next-patch MSE, criterion} per pair, the
 * criterion the MSE with a patch head, else the CE. Collective; the DAT and adaptation stages share it. */
tess_status calm_pretrain_validate_span(calm_pretrain *p, const tess_group *g, int64_t first,
                                        int64_t n, double v[3]);
tess_status calm_pretrain_dat_gradients(tess_run *run, calm_pretrain *p, int64_t b, double tot[3],
                                        double *gnorm);

/* simulate mode (simulate.c): setup is collective; a step writes this rank's session of the
 * round (global session index cursor + rank), so the files do not depend on the rank count. */
tess_status calm_simulate_setup(tess_run *run, calm_simulate *s);
tess_status calm_simulate_step(tess_run *run, calm_simulate *s, tess_run_step_out *out);

#endif
