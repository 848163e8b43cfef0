/* main.c - fedkalter: federated graph classification, one dataset per client, on the run driver
 * (docs/fedkalter.md). One step is one federated round: every client trains one local epoch
 * (shuffled mini-batches, its own Adam; FedProx adds a proximal term), then the entries tagged TESS_TAG_SHARED are averaged
 * over all clients weighted by their training graphs (par/aggregate.h) and written back.
 * Clients are virtual and stateful, many per rank (size-balanced), each with its own registry,
 * optimizer and Philox streams, so results do not depend on the number of ranks; the driver
 * checkpoints them as rank-private state ("clients/<k>/params", "clients/<k>/optim"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"     /* tess_log_info */
#include "core/rng.h"     /* tess_rng_* */
#include "data.h"         /* fk_dataset_* */
#include "gcfl.h"         /* fk_gcfl_step */
#include "io/metrics.h"   /* TESS_METRICS_MAX_COLS */
#include "model.h"        /* fk_model_*, fk_work_* */
#include "nn/graph.h"     /* tess_graph_batch_* */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "par/aggregate.h" /* tess_par_aggregate */
#include "par/coll.h"     /* tess_par_allreduce_* */
#include "run/run.h"      /* tess_run_* */

/* GCFL+ is GCFL's network and sharing with another split rule (gcfl.h): the model sees FK_GCFL,
 * the app the flag gcflplus. */
enum { FK_GCFLPLUS = FK_GCFL + 1 };
/* The names of model.method: values from the table, never from list positions. */
static const tess_opt_enum method_names[] = {{"selftrain", FK_SELFTRAIN}, {"fedavg", FK_FEDAVG},
                                             {"fedstar", FK_FEDSTAR}, {"fedkalter", FK_FEDKALTER},
                                             {"fedprox", FK_FEDPROX}, {"gcfl", FK_GCFL},
                                             {"gcflplus", FK_GCFLPLUS}};
TESS_OPT_ENUM_TABLE_CHECK(method_names, FK_GCFLPLUS + 1);

static const tess_opt data_opts[] = {
    TESS_OPT_CHOICE("setting", "synthetic",
                    "synthetic|SM|SM-CV|BIO-SM|BIO-SM-SN|BIO-SN-CV|SM-SN-CV|oneDS",
                    "clients: generated graphs, or one TU dataset per client (SM: 7 molecule "
                    "sets; SM-CV: SM and Letter-low/med/high; the others docs/fedkalter.md, "
                    "BIO-* partial: DD and COLLAB are not available), or oneDS: the TU dataset "
                    "data.oneds split over data.clients clients (GCFL)"),
    TESS_OPT_STRING("dir", "", "directory holding the TU datasets (<dir>/<NAME>/<NAME>_A.txt ...)"),
    TESS_OPT_INT("clients", 7, 1, FK_MAX_CLIENTS, "clients of the synthetic and oneDS settings"),
    TESS_OPT_STRING("oneds", "", "oneDS: the TU dataset split over the clients (e.g. NCI1)"),
    TESS_OPT_INT("graphs", 120, 10, 10000, "graphs per synthetic client"),
    TESS_OPT_INT("split_seed", 123, 0, UINT32_MAX, "seed of the stratified 80/10/10 splits"),
};
static const tess_opt model_opts[] = {
    TESS_OPT_ENUM("method", "fedkalter", method_names,
                    "Self-train (no sharing), FedAvg (GIN shared), FedStar (structure channel "
                    "shared), Fed-Kalter (Kalman structure channel shared), FedProx (FedAvg and "
                    "a proximal term), GCFL (FedAvg within clusters split by update similarity), "
                    "GCFL+ (split by the DTW distance of update-norm sequences)"),
    TESS_OPT_INT("hidden", 64, 1, 4096, "hidden width d"),
    TESS_OPT_INT("layers", 3, 1, 8, "graph convolution layers"),
    TESS_OPT_REAL("dropout", 0.5, 0.0, 0.95, "dropout after each convolution and after post"),
    TESS_OPT_REAL("kalter_q0", -2.0, -30.0, 30.0, "initial q of Kalter-Conv (Q = softplus(q))"),
    TESS_OPT_REAL("kalter_bR0", 0.0, -30.0, 1e9,
                  "initial b_R of Kalter-Conv (1e9: R -> infinity, the FedStar limit)"),
    TESS_OPT_BOOL("kalter_share_eta_q", true,
                  "Fed-Kalter: q and eta of every layer shared (averaged); false keeps them local "
                  "(ablation)"),
    TESS_OPT_BOOL("kalter_linear", false,
                  "Fed-Kalter: linear transition s- = A-hat s W_A^T + b_A, g = 1 (ablation; "
                  "false: tanh)"),
};
static const tess_opt train_opts[] = {
    TESS_OPT_RESUMABLE(INT, "rounds", 200, 1, 1000000, "federated rounds (one local epoch each)"),
    TESS_OPT_INT("batch", 128, 1, 1 << 20, "graphs per local mini-batch"),
    TESS_OPT_REAL("lr", 1e-3, 1e-8, 10.0, "Adam learning rate"),
    TESS_OPT_REAL("weight_decay", 5e-4, 0.0, 1.0, "L2 weight decay added to the gradient"),
    TESS_OPT_REAL("prox_mu", 0.01, 0.0, 1e6,
                  "FedProx: (mu/2) |theta_S - theta_S at the round's start|^2 on shared entries"),
    TESS_OPT_RESUMABLE(INT, "eval_every", 5, 1, 1000000,
                       "rounds between evaluations (and the last)"),
    TESS_OPT_REAL("gcfl_eps1", 0.01, 0.0, 1e9,
                  "GCFL: a cluster may split when the norm of its mean update is below this"),
    TESS_OPT_REAL("gcfl_eps2", 0.1, 0.0, 1e9,
                  "GCFL: ... and the largest update norm of its clients is above this"),
    TESS_OPT_INT("gcfl_warmup", 20, 0, 1000000, "GCFL: no split in the first rounds"),
    TESS_OPT_INT("gcfl_seq_length", 5, 1, FK_GCFL_SEQ_MAX,
                 "GCFL+: update norms per client compared by DTW (FedStar's 5; GCFL's paper 10)"),
    TESS_OPT_BOOL("reset_adam", false,
                  "after every download of the averaged shared entries, reset each client's Adam "
                  "(moments and step count, as a re-created optimizer); default: never reset"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("data", data_opts),
    TESS_CONFIG_SECTION("model", model_opts),
    TESS_CONFIG_SECTION("train", train_opts),
};

enum { FK_MAX_LAYERS_APP = 8 }; /* model.layers at most */

typedef struct {
    int64_t id;
    fk_dataset ds;
    fk_model model;
    tess_adamw *opt;
    int64_t *order; /* (n_train) this round's shuffled training ids */
    float *anchor;  /* FedProx: (local_total) the parameters at the round's start */
} fk_client;

typedef struct {
    fk_method method;
    int64_t nclients, nlocal, rounds, batch, eval_every, d;
    float lr, wd, mu;
    bool reset_adam;         /* train.reset_adam */
    /* GCFL: cluster of every client (replicated, checkpointed), their count, the split rule */
    int64_t cluster[FK_MAX_CLIENTS], ncl, gcfl_warmup;
    double gcfl_eps1, gcfl_eps2;
    double *dw;              /* GCFL: (nclients, shared floats) this round's updates */
    bool gcflplus;           /* GCFL+ (method FK_GCFL with the DTW split rule) */
    int64_t seq_len, seq_count; /* GCFL+: T, norms recorded in every sequence (checkpointed) */
    double *seq;             /* GCFL+: (nclients, T) update norms, oldest first (checkpointed) */
    fk_client *clients;      /* (nlocal) */
    tess_registry **regs;    /* (nlocal) */
    int64_t *ids;            /* (nlocal) */
    double *weights;         /* (nlocal) n_train */
    char names[FK_MAX_CLIENTS][TESS_GRAPHS_NAME_MAX];
    int64_t n_train[FK_MAX_CLIENTS];
    int32_t *oneds_client;   /* oneDS: (oneds_total) each graph's client; NULL otherwise */
    int64_t oneds_total;     /* oneDS: graphs of data.oneds (its graph-label lines) */
    fk_dataset oneds_full;   /* oneDS: the whole dataset while this rank cuts its clients */
    fk_work *work;
    tess_graph_batch gb;     /* reserved once for the largest mini-batch, refilled per batch */
    float *X, *Xse;          /* (max nodes, max F), (max nodes, 32) */
    int32_t *y;              /* (batch) */
    double shared_floats;    /* floats of the shared vector per client */
    double acc[FK_MAX_CLIENTS][3]; /* last evaluation: train, val, test per client */
    int64_t layers;
    /* Fed-Kalter, last evaluation, test graphs: per client and layer the means of log R, K eta,
     * P+/P- (summed over ranks at every evaluation: every rank holds every client's) */
    double kstats[FK_MAX_CLIENTS * 3 * FK_MAX_LAYERS_APP];
    double *logr_hist; /* Fed-Kalter, last round, test graphs: (nclients, FK_LOGR_BINS) ln R counts */
    /* Fed-Kalter's per-round and histogram files: column names and the plots' column lists */
    char kcol_names[3 * FK_MAX_LAYERS_APP][24], hcol_names[FK_MAX_CLIENTS + 1][24];
    const char *kcols_R[FK_MAX_LAYERS_APP], *kcols_gain[2 * FK_MAX_LAYERS_APP];
    const char *kcols[3 * FK_MAX_LAYERS_APP], *hcols[FK_MAX_CLIENTS + 1];
    const char *hcol_titles[FK_MAX_CLIENTS];
    char ktitle_names[3 * FK_MAX_LAYERS_APP][24]; /* legend entries: "layer 1", "K eta, layer 1" */
    const char *ktitles_R[FK_MAX_LAYERS_APP], *ktitles_gain[2 * FK_MAX_LAYERS_APP];
    int csv, csv_acc, csv_kal, csv_hist, csv_hlong;
    int csv_gcfl;            /* GCFL: gcfl.csv, per round a row per cluster (the split rule) */
    int csv_cacc;            /* client_accuracy.csv: per evaluated round a row per client */
    bool hist_wide;          /* kalter_logR_hist.csv (one column per client) and its plot */
    tess_timer_id t_train, t_agg, t_eval; /* per round: local epochs, aggregation, evaluation */
} fk_app;

/* Size-balanced assignment: clients by decreasing training graphs (then id) to the least loaded
 * rank (then lowest rank). owner (n) gets each client's rank. */
static void assign(int *owner, const int64_t *n_train, int64_t n, int size) {
    int64_t load[FK_MAX_CLIENTS] = {0}, idx[FK_MAX_CLIENTS];
    for (int64_t k = 0; k < n; k++) idx[k] = k;
    for (int64_t a = 1; a < n; a++) { /* insertion sort, descending size, ascending id */
        int64_t v = idx[a], b = a;
        while (b > 0 && (n_train[idx[b - 1]] < n_train[v] ||
                         (n_train[idx[b - 1]] == n_train[v] && idx[b - 1] > v))) {
            idx[b] = idx[b - 1];
            b--;
        }
        idx[b] = v;
    }
    for (int64_t a = 0; a < n; a++) {
        int best = 0;
        for (int r = 1; r < size; r++) {
            if (load[r] < load[best]) best = r;
        }
        owner[idx[a]] = best;
        load[best] += n_train[idx[a]];
    }
}

/* Nodes (ptr = node_ptr) or A entries (ptr = edge_ptr) of the largest batch of B graphs of a
 * dataset: the sum over its B largest graphs. -1 if out of memory. */
static int64_t max_batch(const tess_graphs *gs, const int64_t *ptr, int64_t B) {
    int64_t *n = malloc((size_t)gs->num_graphs * sizeof(int64_t)), total = 0;
    if (!n) return -1;
    for (int64_t g = 0; g < gs->num_graphs; g++) n[g] = ptr[g + 1] - ptr[g];
    for (int64_t k = 0; k < B && k < gs->num_graphs; k++) { /* partial selection of maxima */
        int64_t best = k;
        for (int64_t g = k + 1; g < gs->num_graphs; g++) {
            if (n[g] > n[best]) best = g;
        }
        int64_t t = n[k];
        n[k] = n[best];
        n[best] = t;
        total += n[k];
    }
    free(n);
    return total;
}

/* Every client's name and training graphs, without parsing a graph: the generated setting from
 * the options, a TU setting from the graph-label files (fk_dataset_tu_count). The same on every
 * rank (the same errors everywhere); it sizes the assignment before any rank loads its clients.
 * tu (FK_MAX_CLIENTS) gets the TU names (NULL entries for the generated setting). */
static tess_status client_sizes(fk_app *a, const tess_config *c, const char **tu) {
    const char *setting = tess_config_string(c, "data.setting");
    int64_t G[FK_MAX_CLIENTS];
    if (strcmp(setting, "synthetic") == 0) {
        a->nclients = tess_config_int(c, "data.clients");
        for (int64_t k = 0; k < a->nclients; k++) {
            tu[k] = NULL;
            G[k] = tess_config_int(c, "data.graphs");
            snprintf(a->names[k], sizeof a->names[k], "synthetic-%lld", (long long)k);
        }
    } else if (strcmp(setting, "oneDS") == 0) {
        const char *dir = tess_config_string(c, "data.dir"), *name = tess_config_string(c, "data.oneds");
        TESS_REQUIRE(name[0] != '\0', TESS_ERR_CONFIG,
                     "data.oneds is required for data.setting = oneDS (the TU dataset to split, "
                     "e.g. NCI1)");
        TESS_REQUIRE(dir[0] != '\0', TESS_ERR_CONFIG,
                     "data.dir is required for data.setting = oneDS (the directory holding the "
                     "TU dataset %s)", name);
        TESS_REQUIRE(strlen(name) + 24 < TESS_GRAPHS_NAME_MAX, TESS_ERR_CONFIG,
                     "data.oneds = '%s': name too long", name);
        a->nclients = tess_config_int(c, "data.clients");
        int64_t total;
        TESS_CHECK(fk_dataset_tu_count(dir, name, &total));
        a->oneds_total = total;
        a->oneds_client = malloc((size_t)(total > 0 ? total : 1) * sizeof(int32_t));
        TESS_REQUIRE(a->oneds_client, TESS_ERR_MEM, "oneDS clients of %lld graphs",
                     (long long)total);
        TESS_CHECK(fk_oneds_assign(name, total, a->nclients,
                                   (uint64_t)tess_config_int(c, "data.split_seed"),
                                   a->oneds_client, G));
        for (int64_t k = 0; k < a->nclients; k++) {
            tu[k] = name;
            snprintf(a->names[k], sizeof a->names[k], "%lld-%s", (long long)k, name);
        }
    } else {
        const char *dir = tess_config_string(c, "data.dir");
        a->nclients = fk_setting_datasets(setting, tu);
        TESS_REQUIRE(a->nclients > 0, TESS_ERR_CONFIG, "data.setting = %s: unknown setting",
                     setting);
        TESS_REQUIRE(dir[0] != '\0', TESS_ERR_CONFIG,
                     "data.dir is required for data.setting = %s (the directory holding the TU "
                     "datasets %s, ...)", setting, tu[0]);
        const char *missing = fk_setting_missing(setting);
        if (missing)
            tess_log_warn("data.setting = %s is partial: %s not available, %lld clients",
                          setting, missing, (long long)a->nclients);
        for (int64_t k = 0; k < a->nclients; k++) {
            TESS_CHECK(fk_dataset_tu_count(dir, tu[k], &G[k]));
            snprintf(a->names[k], sizeof a->names[k], "%s", tu[k]);
        }
    }
    for (int64_t k = 0; k < a->nclients; k++) {
        int64_t n_val, n_test;
        TESS_CHECK(fk_split_sizes(a->names[k], G[k], &a->n_train[k], &n_val, &n_test));
    }
    return TESS_OK;
}

/* Client k's dataset (generated, TU dataset tu parsed, or its oneDS part), its encodings and
 * split. */
static tess_status load_client(fk_dataset *ds, fk_app *a, const tess_config *c, int64_t k,
                               const char *tu) {
    const uint64_t split_seed = (uint64_t)tess_config_int(c, "data.split_seed");
    if (a->oneds_client) { /* the dataset parsed once per rank, each client's graphs copied */
        if (!a->oneds_full.gs.num_graphs)
            TESS_CHECK(fk_dataset_tu(&a->oneds_full, tess_config_string(c, "data.dir"), tu));
        TESS_REQUIRE(a->oneds_full.gs.num_graphs == a->oneds_total, TESS_ERR_DATA,
                     "'%s': %lld graphs parsed, but its graph labels counted %lld", tu,
                     (long long)a->oneds_full.gs.num_graphs, (long long)a->oneds_total);
        TESS_CHECK(fk_dataset_subset(ds, &a->oneds_full.gs, a->oneds_client, k, a->names[k]));
    } else if (tu) TESS_CHECK(fk_dataset_tu(ds, tess_config_string(c, "data.dir"), tu));
    else TESS_CHECK(fk_dataset_synthetic(ds, k, tess_config_int(c, "data.graphs"), split_seed));
    TESS_CHECK(fk_dataset_prepare(ds, k, split_seed));
    TESS_REQUIRE(ds->n_train == a->n_train[k], TESS_ERR_DATA,
                 "'%s': %lld graphs parsed, but its graph labels counted %lld training graphs",
                 a->names[k], (long long)ds->gs.num_graphs, (long long)a->n_train[k]);
    return TESS_OK;
}

/* Fed-Kalter's diagnostics files and plots: kalter_rounds.csv (per evaluated round, per layer the
 * client means of ln R, K eta, P+/P- on the test graphs), kalter_logR_hist_long.csv (last round:
 * per client and bin the fraction of its ln R values, one row each, any client count) and
 * kalter_logR_hist.csv (the same fractions with one column per client, so only up to
 * TESS_METRICS_MAX_COLS - 1 clients), declared with their plots. */
static tess_status kalter_plots(tess_run *run, fk_app *a) {
    const int64_t L = a->layers;
    static const char *const what[3] = {"ln_R", "K_eta", "P_ratio"};
    static const char *const legend[3] = {"", "K eta, ", "P+/P-, "};
    for (int q = 0; q < 3; q++) {
        for (int64_t l = 0; l < L; l++) {
            char *name = a->kcol_names[q * L + l];
            snprintf(name, sizeof a->kcol_names[0], "%s_l%lld", what[q], (long long)(l + 1));
            a->kcols[q * L + l] = name;
            char *title = a->ktitle_names[q * L + l];
            snprintf(title, sizeof a->ktitle_names[0], "%slayer %lld", legend[q], (long long)(l + 1));
            if (q == 0) {
                a->kcols_R[l] = name;
                a->ktitles_R[l] = title;
            } else {
                a->kcols_gain[(q - 1) * L + l] = name;
                a->ktitles_gain[(q - 1) * L + l] = title;
            }
        }
    }
    TESS_CHECK(tess_run_metrics(run, "kalter_rounds", a->kcols, (int)(3 * L), true, &a->csv_kal));
    const tess_plot_spec r_plot = {
        .title = "fedkalter: observation noise R per layer (mean over clients, test graphs)",
        .xlabel = "federated round", .ycols = a->kcols_R, .ny = (int)L,
        .ylabel = "mean ln R (R: noise variance, dimensionless)", .ytitles = a->ktitles_R};
    const tess_plot_spec gain_plot = {
        .title = "fedkalter: Kalman gain K eta and P+/P- = 1 - K eta per layer (mean over clients)",
        .xlabel = "federated round", .ycols = a->kcols_gain, .ny = (int)(2 * L),
        .ylabel = "mean over nodes and channels (dimensionless, 0-1)",
        .ytitles = a->ktitles_gain};
    TESS_CHECK(tess_run_plot(run, a->csv_kal, "kalter_R.png", &r_plot));
    TESS_CHECK(tess_run_plot(run, a->csv_kal, "kalter_gain.png", &gain_plot));
    static const char *const long_cols[3] = {"ln_R", "client", "fraction"};
    TESS_CHECK(tess_run_metrics(run, "kalter_logR_hist_long", long_cols, 3, false, &a->csv_hlong));
    a->logr_hist = calloc((size_t)(a->nclients * FK_LOGR_BINS), sizeof(double));
    TESS_REQUIRE(a->logr_hist, TESS_ERR_MEM, "ln R histograms of %lld clients",
                 (long long)a->nclients);
    a->hist_wide = a->nclients + 1 <= TESS_METRICS_MAX_COLS; /* one column per client */
    if (!a->hist_wide) {
        tess_log_warn("ln R histograms only in kalter_logR_hist_long.csv: %lld clients, "
                      "kalter_logR_hist.csv and its plot take at most %d",
                      (long long)a->nclients, TESS_METRICS_MAX_COLS - 1);
        return TESS_OK;
    }
    snprintf(a->hcol_names[0], sizeof a->hcol_names[0], "ln_R");
    a->hcols[0] = a->hcol_names[0];
    for (int64_t k = 0; k < a->nclients; k++) {
        snprintf(a->hcol_names[k + 1], sizeof a->hcol_names[0], "client_%lld", (long long)k);
        a->hcols[k + 1] = a->hcol_names[k + 1];
        a->hcol_titles[k] = a->names[k];
    }
    TESS_CHECK(tess_run_metrics(run, "kalter_logR_hist", a->hcols, (int)(a->nclients + 1), false,
                                &a->csv_hist));
    const tess_plot_spec hist_plot = {
        .title = "fedkalter: per-client distribution of ln R, last round (test graphs, all layers)",
        .xlabel = "ln R (bin centre; R: noise variance, dimensionless)", .ycols = a->hcols + 1,
        .ny = (int)a->nclients, .ylabel = "fraction of node-channel values per 0.1 bin",
        .ytitles = a->hcol_titles};
    TESS_CHECK(tess_run_plot(run, a->csv_hist, "kalter_logR_hist.png", &hist_plot));
    return TESS_OK;
}

static tess_status setup(tess_run *run, void *ctx) {
    fk_app *a = ctx;
    const tess_config *c = tess_run_config(run);
    const tess_group *g = tess_run_group(run);
    a->method = (fk_method)tess_config_enum(c, "model.method");
    a->gcflplus = (int)a->method == FK_GCFLPLUS;
    if (a->gcflplus) a->method = FK_GCFL;
    a->seq_len = tess_config_int(c, "train.gcfl_seq_length");
    a->rounds = tess_config_int(c, "train.rounds");
    a->batch = tess_config_int(c, "train.batch");
    a->eval_every = tess_config_int(c, "train.eval_every");
    a->lr = (float)tess_config_real(c, "train.lr");
    a->wd = (float)tess_config_real(c, "train.weight_decay");
    a->mu = (float)tess_config_real(c, "train.prox_mu");
    a->reset_adam = tess_config_bool(c, "train.reset_adam");
    a->gcfl_eps1 = tess_config_real(c, "train.gcfl_eps1");
    a->gcfl_eps2 = tess_config_real(c, "train.gcfl_eps2");
    a->gcfl_warmup = tess_config_int(c, "train.gcfl_warmup");
    a->ncl = 1; /* every client in cluster 0 (a->cluster zeroed) */
    a->d = tess_config_int(c, "model.hidden");
    a->layers = tess_config_int(c, "model.layers");
    /* every rank sizes every client, then parses only its own clients' datasets */
    const char *tu[FK_MAX_CLIENTS];
    tess_status s = client_sizes(a, c, tu);
    if (s == TESS_OK && a->nclients < g->size) {
        s = tess_error_push(TESS_ERR_CONFIG, __FILE__, __LINE__, __func__,
                            "%d ranks for %lld clients: run at most one rank per client",
                            g->size, (long long)a->nclients);
    }
    int owner[FK_MAX_CLIENTS];
    if (s == TESS_OK) assign(owner, a->n_train, a->nclients, g->size);
    for (int64_t k = 0; k < a->nclients; k++) a->nlocal += s == TESS_OK && owner[k] == g->rank;
    if (s == TESS_OK) {
        a->clients = calloc((size_t)a->nlocal + 1, sizeof *a->clients);
        a->regs = calloc((size_t)a->nlocal + 1, sizeof *a->regs);
        a->ids = calloc((size_t)a->nlocal + 1, sizeof *a->ids);
        a->weights = calloc((size_t)a->nlocal + 1, sizeof *a->weights);
        if (!a->clients || !a->regs || !a->ids || !a->weights)
            s = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__, "client tables");
    }
    for (int64_t k = 0, j = 0; s == TESS_OK && k < a->nclients; k++) {
        if (owner[k] != g->rank) continue;
        a->clients[j].id = k;
        s = load_client(&a->clients[j++].ds, a, c, k, tu[k]);
    }
    fk_dataset_free(&a->oneds_full);
    TESS_CHECK(tess_par_agree(g, s)); /* a bad file of one rank's client fails every rank */
    tess_run_set_total(run, (double)a->rounds, a->rounds);
    tess_run_set_data_cursor_max(run, a->rounds); /* the cursor counts finished rounds */
    tess_run_local_from_here(run);

    const uint64_t seed = tess_run_seed(run);
    int64_t max_nodes = 1, max_nnz = 0, max_F = 1, max_C = 2;
    tess_state *st = tess_run_state(run);
    for (int64_t j = 0; j < a->nlocal; j++) {
        fk_client *cl = &a->clients[j];
        const tess_graphs *gs = &cl->ds.gs;
        const fk_model_cfg mc = {
            .method = a->method, .F = gs->num_features, .C = gs->num_classes, .d = a->d,
            .L = tess_config_int(c, "model.layers"),
            .dropout = (float)tess_config_real(c, "model.dropout"),
            .kalter_q0 = (float)tess_config_real(c, "model.kalter_q0"),
            .kalter_bR0 = (float)tess_config_real(c, "model.kalter_bR0"),
            .kalter_share_eta_q = tess_config_bool(c, "model.kalter_share_eta_q"),
            .kalter_linear = tess_config_bool(c, "model.kalter_linear")};
        TESS_CHECK(fk_model_create(&cl->model, &mc, seed,
                                   seed * 1000003ull + (uint64_t)cl->id + 1));
        const tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                                      .weight_decay = 0.0f};
        TESS_CHECK(tess_adamw_create(&cl->opt, cl->model.reg, &ac));
        char prefix[64];
        snprintf(prefix, sizeof prefix, "clients/%lld/params", (long long)cl->id);
        TESS_CHECK(tess_state_add_registry(st, prefix, cl->model.reg, true));
        snprintf(prefix, sizeof prefix, "clients/%lld/optim", (long long)cl->id);
        TESS_CHECK(tess_adamw_describe_private(cl->opt, st, prefix));
        cl->order = malloc((size_t)cl->ds.n_train * sizeof(int64_t));
        TESS_REQUIRE(cl->order, TESS_ERR_MEM, "client %lld", (long long)cl->id);
        if (a->method == FK_FEDPROX || a->method == FK_GCFL)
            TESS_CHECK(tess_registry_alloc_state(cl->model.reg, &cl->anchor));
        a->regs[j] = cl->model.reg;
        a->ids[j] = cl->id;
        a->weights[j] = (double)cl->ds.n_train;
        const int64_t mn = max_batch(gs, gs->node_ptr, a->batch);
        const int64_t me = max_batch(gs, gs->edge_ptr, a->batch);
        TESS_REQUIRE(mn >= 0 && me >= 0, TESS_ERR_MEM, "client %lld", (long long)cl->id);
        if (mn > max_nodes) max_nodes = mn;
        if (me > max_nnz) max_nnz = me;
        if (gs->num_features > max_F) max_F = gs->num_features;
        if (gs->num_classes > max_C) max_C = gs->num_classes;
        a->shared_floats = 0; /* the same for every client: count the last one's */
        for (int64_t i = 0; i < tess_registry_count(cl->model.reg); i++) {
            const tess_registry_entry *e = tess_registry_get(cl->model.reg, i);
            if (e->tags & TESS_TAG_SHARED) a->shared_floats += (double)e->global_count;
        }
        tess_log_info("client %lld %s on rank %d: %lld train / %lld val / %lld test graphs, "
                      "F = %lld, C = %lld", (long long)cl->id, gs->name, g->rank,
                      (long long)cl->ds.n_train, (long long)cl->ds.n_val,
                      (long long)cl->ds.n_test, (long long)gs->num_features,
                      (long long)gs->num_classes);
    }
    if (a->nlocal > 0) {
        const fk_model_cfg *mc = &a->clients[0].model.cfg;
        TESS_CHECK(fk_work_create(&a->work, mc, max_nodes, a->batch, max_C));
    }
    TESS_CHECK(tess_graph_batch_reserve(&a->gb, a->batch, max_nodes, max_nnz));
    a->X = malloc((size_t)(max_nodes * max_F) * sizeof(float));
    a->Xse = malloc((size_t)(max_nodes * FK_SE_DIM) * sizeof(float));
    a->y = malloc((size_t)a->batch * sizeof(int32_t));
    TESS_REQUIRE(a->X && a->Xse && a->y, TESS_ERR_MEM, "batch buffers of %lld nodes",
                 (long long)max_nodes);
    TESS_CHECK(tess_par_allreduce_f64(g, &a->shared_floats, 1, TESS_PAR_MAX));
    if (a->method == FK_GCFL) {
        a->dw = malloc((size_t)a->nclients * (size_t)a->shared_floats * sizeof(double));
        TESS_REQUIRE(a->dw, TESS_ERR_MEM, "GCFL updates of %lld clients", (long long)a->nclients);
        const int64_t shape[1] = {a->nclients};
        const tess_layout rep = tess_layout_replicated();
        TESS_CHECK(tess_state_add(st, "gcfl/cluster", TESS_I64, 1, shape, &rep, a->cluster));
        TESS_CHECK(tess_state_add_i64(st, "gcfl/clusters", &a->ncl));
        if (a->gcflplus) {
            a->seq = calloc((size_t)(a->nclients * a->seq_len), sizeof(double));
            TESS_REQUIRE(a->seq, TESS_ERR_MEM, "GCFL+ sequences of %lld clients",
                         (long long)a->nclients);
            const int64_t sshape[2] = {a->nclients, a->seq_len};
            TESS_CHECK(tess_state_add(st, "gcfl/seq", TESS_F64, 2, sshape, &rep, a->seq));
            TESS_CHECK(tess_state_add_i64(st, "gcfl/seq_count", &a->seq_count));
        }
    }

    static const char *const cols[] = {"loss", "bytes_sent", "shared_floats", "clusters"};
    static const char *const acc_cols[] = {"train_acc", "val_acc", "test_acc"};
    static const char *const loss_col[] = {"loss"};
    static const char *const acc_titles[] = {"training graphs", "validation graphs",
                                             "test graphs"};
    TESS_CHECK(tess_run_metrics(run, "metrics", cols, 4, true, &a->csv));
    TESS_CHECK(tess_run_metrics(run, "accuracy", acc_cols, 3, true, &a->csv_acc));
    static const char *const cacc_cols[] = {"client", "train_acc", "val_acc", "test_acc"};
    TESS_CHECK(tess_run_metrics(run, "client_accuracy", cacc_cols, 4, true, &a->csv_cacc));
    if (a->method == FK_GCFL) {
        static const char *const gcfl_cols[] = {"cluster", "clients", "mean_update_norm",
                                                "max_update_norm", "split"};
        TESS_CHECK(tess_run_metrics(run, "gcfl", gcfl_cols, 5, true, &a->csv_gcfl));
    }
    const tess_plot_spec loss_plot = {.title = "fedkalter: mean client training loss",
                                      .xlabel = "federated round", .ycols = loss_col, .ny = 1,
                                      .ylabel = "cross-entropy (nats/graph)", .logy = true};
    const tess_plot_spec acc_plot = {.title = "fedkalter: mean client accuracy",
                                     .xlabel = "federated round", .ycols = acc_cols, .ny = 3,
                                     .ytitles = acc_titles,
                                     .ylabel = "accuracy (fraction of graphs, 0-1)"};
    tess_timers *tm = tess_run_timers(run);
    a->t_train = tess_timer_get(tm, "train");
    a->t_agg = tess_timer_get(tm, "aggregate");
    a->t_eval = tess_timer_get(tm, "eval");
    char subtitle[256];
    const bool linear = a->method == FK_FEDKALTER && tess_config_bool(c, "model.kalter_linear");
    snprintf(subtitle, sizeof subtitle,
             "%s%s on %s, %lld clients, d=%lld L=%lld, %d rank%s, seed %llu",
             tess_config_string(c, "model.method"), linear ? " (linear transition)" : "",
             tess_config_string(c, "data.setting"),
             (long long)a->nclients, (long long)a->d, (long long)a->layers, g->size,
             g->size == 1 ? "" : "s", (unsigned long long)tess_run_seed(run));
    tess_run_plot_subtitle(run, subtitle);
    TESS_CHECK(tess_run_plot(run, a->csv, "loss.png", &loss_plot));
    TESS_CHECK(tess_run_plot(run, a->csv_acc, "accuracy.png", &acc_plot));
    if (a->method == FK_FEDKALTER) TESS_CHECK(kalter_plots(run, a));
    return TESS_OK;
}

/* Run ids[0..n) of client cl in batches; train: one Adam step per batch. Returns the mean batch
 * loss; *correct the graphs classified right. kstats (3 L, may be NULL): Fed-Kalter's diagnostic
 * sums (fk_model_kalter_stats) over the batches, *kcount their count per layer; hist
 * (FK_LOGR_BINS, may be NULL): its ln R counts. */
static tess_status run_graphs(fk_app *a, fk_client *cl, const int64_t *ids, int64_t n, bool train,
                              uint64_t seed, int64_t round, double *mean_loss, int64_t *correct,
                              double *kstats, double *hist, int64_t *kcount) {
    const tess_graphs *gs = &cl->ds.gs;
    const tess_rng_key key = {(uint32_t)seed, (uint32_t)(cl->id + 1)};
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DROPOUT, (uint64_t)round);
    double loss = 0.0;
    int64_t nb = 0;
    *correct = 0;
    for (int64_t first = 0; first < n; first += a->batch, nb++) {
        const int64_t B = n - first < a->batch ? n - first : a->batch;
        tess_graph_batch *b = &a->gb; /* reserved for the largest batch: no allocation */
        TESS_CHECK(tess_graph_batch_fill(b, gs, ids + first, B));
        tess_graph_batch_gather(a->X, b, gs, ids + first, gs->x, gs->num_features);
        tess_graph_batch_gather(a->Xse, b, gs, ids + first, cl->ds.se, FK_SE_DIM);
        for (int64_t i = 0; i < B; i++) a->y[i] = gs->y[ids[first + i]];
        tess_registry *reg = cl->model.reg;
        if (train) tess_registry_zero_grads(reg);
        int64_t ok = 0;
        loss += fk_model_batch(&cl->model, a->work, b, a->X, a->Xse, a->y, train, key, ctr,
                               (uint64_t)nb, &ok);
        *correct += ok;
        if (kstats) *kcount += fk_model_kalter_stats(&cl->model, a->work, b->num_nodes, kstats,
                                                          hist);
        if (!train) continue;
        /* L2 weight decay added to the gradient (PyTorch Adam's weight_decay), all entries */
        float *p = tess_registry_params(reg), *gr = tess_registry_grads(reg);
        for (int64_t i = 0; i < tess_registry_local_total(reg); i++) gr[i] += a->wd * p[i];
        for (int64_t e = 0; a->method == FK_FEDPROX && e < tess_registry_count(reg); e++) {
            const tess_registry_entry *en = tess_registry_get(reg, e);
            if (!(en->tags & TESS_TAG_SHARED)) continue;
            for (int64_t i = en->flat_offset; i < en->flat_offset + en->local_count; i++)
                gr[i] += a->mu * (p[i] - cl->anchor[i]);
        }
        tess_adamw_step(cl->opt, a->lr);
    }
    *mean_loss = nb > 0 ? loss / (double)nb : 0.0;
    return TESS_OK;
}

/* GCFL's server step after the local epochs (gcfl.h): every client's update of the shared
 * entries (parameters minus the round's start, in double) gathered on every rank in client order
 * (one slot per client, zeros elsewhere: the sums are exact), the clusters split where the rule
 * says so (the same on every rank; gcfl.csv gets a row per cluster the round started with: its
 * clients, the rule's two norms, whether it split), then the shared entries averaged within each
 * cluster.
 * Collective on g. *bytes += what the aggregations sent. */
static tess_status gcfl_round(tess_run *run, fk_app *a, const tess_group *g, int64_t round,
                              int64_t *bytes) {
    const int64_t Ls = (int64_t)a->shared_floats;
    memset(a->dw, 0, (size_t)(a->nclients * Ls) * sizeof(double));
    for (int64_t j = 0; j < a->nlocal; j++) {
        const fk_client *cl = &a->clients[j];
        const tess_registry *reg = cl->model.reg;
        const float *p = tess_registry_params(reg);
        double *row = a->dw + cl->id * Ls;
        for (int64_t e = 0; e < tess_registry_count(reg); e++) {
            const tess_registry_entry *en = tess_registry_get(reg, e);
            if (!(en->tags & TESS_TAG_SHARED)) continue;
            for (int64_t i = en->flat_offset; i < en->flat_offset + en->local_count; i++)
                *row++ = (double)p[i] - (double)cl->anchor[i];
        }
    }
    TESS_CHECK(tess_par_allreduce_f64(g, a->dw, a->nclients * Ls, TESS_PAR_SUM));
    const int64_t before = a->ncl;
    /* the split rule's norms of the clusters the round started with, and their clients */
    double mean_norm[FK_MAX_CLIENTS], max_norm[FK_MAX_CLIENTS];
    int64_t csize[FK_MAX_CLIENTS], old[FK_MAX_CLIENTS];
    fk_gcfl_norms(a->cluster, a->ncl, a->dw, a->nclients, Ls, mean_norm, max_norm, csize);
    memcpy(old, a->cluster, (size_t)a->nclients * sizeof(int64_t));
    const int64_t splits =
        a->gcflplus ? fk_gcflplus_step(a->cluster, &a->ncl, a->dw, a->seq, &a->seq_count,
                                       a->nclients, Ls, a->seq_len, round + 1, a->gcfl_warmup,
                                       a->gcfl_eps1, a->gcfl_eps2)
                    : fk_gcfl_step(a->cluster, &a->ncl, a->dw, a->nclients, Ls, round + 1,
                                   a->gcfl_warmup, a->gcfl_eps1, a->gcfl_eps2);
    if (splits > 0)
        tess_log_info("round %lld: %s split %lld cluster(s) into %lld", (long long)(round + 1),
                      a->gcflplus ? "GCFL+" : "GCFL", (long long)before, (long long)a->ncl);
    for (int64_t c = 0; c < before; c++) { /* split: its clients now in two clusters */
        int64_t first = -1;
        bool split = false;
        for (int64_t k = 0; k < a->nclients; k++) {
            if (old[k] != c) continue;
            if (first < 0) first = a->cluster[k];
            split = split || a->cluster[k] != first;
        }
        const double row[5] = {(double)c, (double)csize[c], mean_norm[c], max_norm[c],
                               split ? 1.0 : 0.0};
        TESS_CHECK(tess_run_metrics_row(run, a->csv_gcfl, row));
    }
    for (int64_t c = 0; c < a->ncl; c++) { /* each cluster: its clients of this rank, in order */
        tess_registry *regs[FK_MAX_CLIENTS];
        int64_t ids[FK_MAX_CLIENTS], size = 0, b = 0;
        double w[FK_MAX_CLIENTS];
        int n = 0;
        for (int64_t k = 0; k < a->nclients; k++) size += a->cluster[k] == c;
        for (int64_t j = 0; j < a->nlocal; j++) {
            if (a->cluster[a->ids[j]] != c) continue;
            regs[n] = a->regs[j], ids[n] = a->ids[j], w[n++] = a->weights[j];
        }
        TESS_CHECK(tess_par_aggregate(g, regs, ids, w, n, size, TESS_TAG_SHARED, &b));
        *bytes += b;
    }
    return TESS_OK;
}

static tess_status step(tess_run *run, void *ctx, int64_t round, tess_run_step_out *out) {
    fk_app *a = ctx;
    const tess_group *g = tess_run_group(run);
    const uint64_t seed = tess_run_seed(run);
    double per[FK_MAX_CLIENTS * 4]; /* loss, train, val, test accuracy per client (this rank's) */
    memset(per, 0, sizeof per);
    tess_timers *tm = tess_run_timers(run);
    tess_timer_start(tm, a->t_train);
    for (int64_t j = 0; j < a->nlocal; j++) {
        fk_client *cl = &a->clients[j];
        const int64_t n = cl->ds.n_train;
        /* this round's order of the training graphs: Fisher-Yates on (seed, client, round) */
        memcpy(cl->order, cl->ds.split, (size_t)n * sizeof(int64_t));
        const tess_rng_key key = {(uint32_t)seed, (uint32_t)(cl->id + 1)};
        const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)round);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t k = (int64_t)tess_rng_uniform(key, ctr, (uint64_t)i, 0, (double)(i + 1));
            if (k > i) k = i;
            const int64_t t = cl->order[i];
            cl->order[i] = cl->order[k];
            cl->order[k] = t;
        }
        if (cl->anchor)
            memcpy(cl->anchor, tess_registry_params(cl->model.reg),
                   (size_t)tess_registry_local_total(cl->model.reg) * sizeof(float));
        int64_t ok;
        TESS_CHECK(run_graphs(a, cl, cl->order, n, true, seed, round, &per[cl->id * 4], &ok,
                              NULL, NULL, NULL));
    }
    tess_timer_stop(tm, a->t_train);
    int64_t bytes = 0;
    tess_timer_start(tm, a->t_agg);
    if (a->method == FK_GCFL) {
        TESS_CHECK(gcfl_round(run, a, g, round, &bytes));
    } else if (a->method != FK_SELFTRAIN) {
        TESS_CHECK(tess_par_aggregate(g, a->regs, a->ids, a->weights, (int)a->nlocal,
                                      a->nclients, TESS_TAG_SHARED, &bytes));
        for (int64_t j = 0; a->reset_adam && j < a->nlocal; j++) tess_adamw_reset(a->clients[j].opt);
    }
    tess_timer_stop(tm, a->t_agg);
    const bool eval = (round + 1) % a->eval_every == 0 || round + 1 == a->rounds;
    const bool diag = eval && a->method == FK_FEDKALTER, last = round + 1 == a->rounds;
    if (diag) memset(a->kstats, 0, sizeof a->kstats);
    if (diag && last && a->logr_hist) memset(a->logr_hist, 0, (size_t)(a->nclients * FK_LOGR_BINS) * sizeof(double));
    if (eval) {
        tess_timer_start(tm, a->t_eval);
        for (int64_t j = 0; j < a->nlocal; j++) {
            fk_client *cl = &a->clients[j];
            const fk_dataset *ds = &cl->ds;
            const int64_t start[3] = {0, ds->n_train, ds->n_train + ds->n_val};
            const int64_t count[3] = {ds->n_train, ds->n_val, ds->n_test};
            double *ks = a->kstats + cl->id * 3 * FK_MAX_LAYERS_APP;
            double *hist = diag && last && a->logr_hist ? a->logr_hist + cl->id * FK_LOGR_BINS : NULL;
            int64_t kn = 0;
            for (int part = 0; part < 3; part++) {
                double l;
                int64_t ok;
                TESS_CHECK(run_graphs(a, cl, ds->split + start[part], count[part], false, seed,
                                      round, &l, &ok, diag && part == 2 ? ks : NULL,
                                      part == 2 ? hist : NULL, &kn));
                per[cl->id * 4 + 1 + part] = (double)ok / (double)count[part];
            }
            for (int64_t i = 0; diag && i < 3 * FK_MAX_LAYERS_APP; i++) ks[i] /= (double)kn;
        }
        tess_timer_stop(tm, a->t_eval);
    }
    /* one slot per client, zeros elsewhere: the sums are exact, the means in client order */
    TESS_CHECK(tess_par_allreduce_f64(g, per, a->nclients * 4, TESS_PAR_SUM));
    TESS_CHECK(tess_par_allreduce_i64(g, &bytes, 1, TESS_PAR_SUM));
    if (diag) {
        /* one slot per client as above; the row: per layer the mean over clients in client order
         * of ln R, then of K eta, then of P+/P- */
        TESS_CHECK(tess_par_allreduce_f64(g, a->kstats, a->nclients * 3 * FK_MAX_LAYERS_APP,
                                          TESS_PAR_SUM));
        double krow[3 * FK_MAX_LAYERS_APP] = {0};
        for (int64_t k = 0; k < a->nclients; k++)
            for (int64_t l = 0; l < a->layers; l++)
                for (int q = 0; q < 3; q++)
                    krow[q * a->layers + l] += a->kstats[(k * FK_MAX_LAYERS_APP + l) * 3 + q] /
                                               (double)a->nclients;
        TESS_CHECK(tess_run_metrics_row(run, a->csv_kal, krow));
    }
    double mean[4] = {0, 0, 0, 0}, items = 0;
    for (int64_t k = 0; k < a->nclients; k++) {
        for (int q = 0; q < 4; q++) mean[q] += per[k * 4 + q] / (double)a->nclients;
        if (eval)
            for (int q = 0; q < 3; q++) a->acc[k][q] = per[k * 4 + 1 + q];
        items += (double)a->n_train[k];
    }
    const double row[4] = {mean[0], (double)bytes, a->shared_floats,
                           a->method == FK_SELFTRAIN ? (double)a->nclients : (double)a->ncl};
    TESS_CHECK(tess_run_metrics_row(run, a->csv, row));
    if (eval) TESS_CHECK(tess_run_metrics_row(run, a->csv_acc, mean + 1));
    for (int64_t k = 0; eval && k < a->nclients; k++) {
        const double crow[4] = {(double)k, per[k * 4 + 1], per[k * 4 + 2], per[k * 4 + 3]};
        TESS_CHECK(tess_run_metrics_row(run, a->csv_cacc, crow));
    }
    *out = (tess_run_step_out){.done = round + 1 == a->rounds, .loss = mean[0], .items = items,
                               .position = NAN, .data_cursor = round + 1};
    return TESS_OK;
}

/* 29-bit halves of the FNV-1a hash of a client's parameter bytes (exact in the CSV's %.9g). */
static void param_hash(const tess_registry *reg, double *lo, double *hi) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)tess_registry_params(reg);
    const size_t n = (size_t)tess_registry_local_total(reg) * sizeof(float);
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    *lo = (double)(h & ((1u << 29) - 1));
    *hi = (double)((h >> 29) & ((1u << 29) - 1));
}

static tess_status finish(tess_run *run, void *ctx) {
    fk_app *a = ctx;
    const tess_group *g = tess_run_group(run);
    double hash[FK_MAX_CLIENTS * 2];
    memset(hash, 0, sizeof hash);
    for (int64_t j = 0; j < a->nlocal; j++) {
        const int64_t k = a->clients[j].id;
        param_hash(a->clients[j].model.reg, &hash[2 * k], &hash[2 * k + 1]);
    }
    TESS_CHECK(tess_par_allreduce_f64(g, hash, a->nclients * 2, TESS_PAR_SUM));
    static const char *const cols[] = {"client", "n_train", "train_acc", "val_acc", "test_acc",
                                       "param_hash_lo", "param_hash_hi"};
    int id;
    TESS_CHECK(tess_run_metrics(run, "clients", cols, 7, false, &id));
    double mean = 0;
    for (int64_t k = 0; k < a->nclients; k++) {
        const double row[7] = {(double)k, (double)a->n_train[k], a->acc[k][0], a->acc[k][1],
                               a->acc[k][2], hash[2 * k], hash[2 * k + 1]};
        TESS_CHECK(tess_run_metrics_row(run, id, row));
        tess_log_info("client %lld %-12s test accuracy %.4f", (long long)k, a->names[k],
                      a->acc[k][2]);
        mean += a->acc[k][2] / (double)a->nclients;
    }
    tess_log_info("mean client test accuracy %.4f after %lld rounds", mean, (long long)a->rounds);
    if (a->method != FK_FEDKALTER) return TESS_OK;
    static const char *const kcols[] = {"client", "layer", "mean_log_R", "mean_K_eta",
                                        "mean_P_ratio"};
    TESS_CHECK(tess_run_metrics(run, "kalter", kcols, 5, false, &id));
    for (int64_t k = 0; k < a->nclients; k++) {
        for (int64_t l = 0; l < a->layers; l++) {
            const double *ks = a->kstats + (k * FK_MAX_LAYERS_APP + l) * 3;
            const double row[5] = {(double)k, (double)l, ks[0], ks[1], ks[2]};
            TESS_CHECK(tess_run_metrics_row(run, id, row));
        }
    }
    if (!a->logr_hist) return TESS_OK;
    /* the histograms: one slot per client; rows from the first to the last bin any client uses,
     * one empty bin either side */
    TESS_CHECK(tess_par_allreduce_f64(g, a->logr_hist, a->nclients * FK_LOGR_BINS, TESS_PAR_SUM));
    int64_t lo = FK_LOGR_BINS, hi = -1;
    for (int64_t k = 0; k < a->nclients; k++) {
        double *h = a->logr_hist + k * FK_LOGR_BINS, n = 0.0;
        for (int64_t b = 0; b < FK_LOGR_BINS; b++) n += h[b];
        for (int64_t b = 0; b < FK_LOGR_BINS; b++) {
            if (h[b] > 0.0) lo = b < lo ? b : lo, hi = b > hi ? b : hi;
            h[b] = n > 0.0 ? h[b] / n : 0.0;
        }
    }
    lo = lo > 0 ? lo - 1 : 0;
    hi = hi + 1 < FK_LOGR_BINS ? hi + 1 : FK_LOGR_BINS - 1;
    for (int64_t k = 0; k < a->nclients; k++) { /* long: per client its bins */
        for (int64_t b = lo; b <= hi; b++) {
            const double row[3] = {FK_LOGR_LO + ((double)b + 0.5) * FK_LOGR_WIDTH, (double)k,
                                   a->logr_hist[k * FK_LOGR_BINS + b]};
            TESS_CHECK(tess_run_metrics_row(run, a->csv_hlong, row));
        }
    }
    if (!a->hist_wide) return TESS_OK;
    double hrow[FK_MAX_CLIENTS + 1];
    for (int64_t b = lo; b <= hi; b++) {
        hrow[0] = FK_LOGR_LO + ((double)b + 0.5) * FK_LOGR_WIDTH;
        for (int64_t k = 0; k < a->nclients; k++) hrow[k + 1] = a->logr_hist[k * FK_LOGR_BINS + b];
        TESS_CHECK(tess_run_metrics_row(run, a->csv_hist, hrow));
    }
    return TESS_OK;
}

static void destroy(void *ctx) {
    fk_app *a = ctx;
    for (int64_t j = 0; a->clients && j < a->nlocal; j++) {
        fk_client *cl = &a->clients[j];
        tess_adamw_destroy(&cl->opt);
        fk_model_destroy(&cl->model);
        fk_dataset_free(&cl->ds);
        free(cl->order);
        free(cl->anchor);
    }
    free(a->clients);
    free(a->regs);
    free(a->ids);
    free(a->weights);
    free(a->dw);
    free(a->seq);
    free(a->oneds_client);
    fk_dataset_free(&a->oneds_full);
    free(a->logr_hist);
    fk_work_destroy(&a->work);
    tess_graph_batch_free(&a->gb);
    free(a->X);
    free(a->Xse);
    free(a->y);
}

static const tess_run_app app = {
    .name = "fedkalter", .unit = "round", .rate_unit = "graphs",
    .default_dir = "runs/fedkalter", .sections = sections,
    .nsections = sizeof sections / sizeof sections[0],
    .setup = setup, .step = step, .finish = finish, .destroy = destroy};

int main(int argc, char **argv) {
    fk_app a = {0};
    return tess_run_main(&app, &a, argc, argv);
}
