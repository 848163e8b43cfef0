/* model.h - one client's network of fedkalter (docs/fedkalter.md): FedStar's reference network
 * and its variants, in one registry per client with tags for the federated average.
 *
 *   x0 = X W_pre^T + b_pre                                   local
 *   s0 = X_se W_se^T + b_se, P0 = softplus(p0)               shared (structure methods)
 *   per layer l:
 *     GIN (Self-train, FedAvg, FedProx): x = dropout(relu(GIN(x)))   GIN shared unless Self-train
 *     FedStar: x = dropout(relu(GIN([x | s]))), s = tanh(A-hat s W^T + b)   GIN local, GCN shared
 *     Fed-Kalter: (s, P, x) = Kalter-Conv(x, s, P)           W_A, b_A, q, eta shared; the rest local
 *   o = [x | s] W_hp^T + b_hp (structure methods; else o = x) local
 *   logits = readout(dropout(relu(post(sumpool(o)))))        local; loss = mean NLL over graphs
 *
 * A workspace (fk_work) holds every activation of one batch; one per rank serves all its clients
 * in turn. Not collective. */
#ifndef FEDKALTER_MODEL_H
#define FEDKALTER_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rng.h"    /* tess_rng_key */
#include "core/status.h" /* tess_status */
#include "nn/graph.h"    /* tess_graph_batch */
#include "nn/kalter.h"   /* tess_nn_kalter_* */
#include "nn/registry.h" /* tess_registry */

/* In the order of the model.method choices. FedProx is FedAvg's network and sharing. */
typedef enum { FK_SELFTRAIN = 0, FK_FEDAVG, FK_FEDSTAR, FK_FEDKALTER, FK_FEDPROX, FK_GCFL } fk_method;

typedef struct {
    fk_method method;
    int64_t F, C;      /* input width, classes (per client) */
    int64_t d, L;      /* hidden width, layers */
    float dropout;     /* probability */
    float kalter_q0;   /* initial q (Q = softplus(q)) */
    float kalter_bR0;  /* initial b_R (large: the R -> infinity, FedStar-like start) */
    bool kalter_share_eta_q; /* q and eta of every layer shared (averaged), else local */
    bool kalter_linear;      /* linear transition (no tanh, g = 1): the ablation */
} fk_model_cfg;

/* Entry indices of one client's registry (-1 where the method has none). */
typedef struct {
    int64_t pre_w, pre_b, se_w, se_b, p0, hp_w, hp_b, post_w, post_b, ro_w, ro_b;
    int64_t gin_w1[8], gin_b1[8], gin_w2[8], gin_b2[8]; /* GIN / Kalter observation network */
    int64_t gcn_w[8], gcn_b[8];                         /* FedStar GCN, Kalter W_A, b_A */
    int64_t q[8], eta[8], wr[8], br[8];                 /* Kalter only */
} fk_entries;

typedef struct {
    fk_model_cfg cfg;
    tess_registry *reg;
    fk_entries e;
} fk_model;

/* Register and finalize the client's parameters, then initialise them: shared entries from
 * server_seed (identical on every client), local ones from client_seed. TESS_ERR_ARG for L > 8. */
tess_status fk_model_create(fk_model *m, const fk_model_cfg *cfg, uint64_t server_seed,
                            uint64_t client_seed);
void fk_model_destroy(fk_model *m);

/* Activations of one batch of at most max_nodes nodes and max_graphs graphs, for any client of
 * the same method, d and L with at most max_C classes (the inputs X, Xse are the caller's). */
typedef struct fk_work fk_work;
tess_status fk_work_create(fk_work **w, const fk_model_cfg *cfg, int64_t max_nodes,
                           int64_t max_graphs, int64_t max_C);
void fk_work_destroy(fk_work **w);

/* One batch: forward (X (N,F) features, Xse (N,32) encodings, y (G) labels, batch b), and when
 * train, backward into the registry's gradients (ADDED) with dropout masks from Philox (key,
 * ctr, the batch index as element offset). Returns the mean NLL; *correct gets the number of
 * graphs whose argmax is their label. */
double fk_model_batch(fk_model *m, fk_work *w, const tess_graph_batch *b, const float *X,
                      const float *Xse, const int32_t *y, bool train, tess_rng_key key,
                      uint64_t ctr, uint64_t batch, int64_t *correct);

/* Histogram of ln R: FK_LOGR_BINS bins of width FK_LOGR_WIDTH from FK_LOGR_LO (R >= 1e-4, so
 * ln R >= -9.21; values beyond the last bin count in it). */
enum { FK_LOGR_BINS = 250 };
#define FK_LOGR_LO (-9.3)
#define FK_LOGR_WIDTH 0.1

/* Fed-Kalter diagnostics of the last fk_model_batch (its N nodes): adds to stats[3 l + 0..2]
 * the sums over nodes and channels of log R, K eta and P+/P- of layer l, to hist
 * (FK_LOGR_BINS, may be NULL) the counts of ln R over nodes, channels and layers, and returns
 * the number of values summed per layer (N d). Uses the workspace's gradient buffers as
 * scratch. */
int64_t fk_model_kalter_stats(const fk_model *m, fk_work *w, int64_t N, double *stats,
                              double *hist);

#endif
