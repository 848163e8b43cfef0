/* moe - train a decoder-only Mixture-of-Experts transformer (nn/transformer.h with the MoE
 * feed-forward of nn/moe.h in every layer or every other layer) on a synthetic multi-domain
 * token source or on real multi-domain text (data.h, data.source), with load balancing, z-loss, aux-loss-free balancing and the paper's
 * specialization (R_sp) and cross-layer coupling (R_cp) losses; measures routing entropy,
 * expert load, specialization and the mutual information between expert choice and domain.
 * A composition on the run driver (run/run.h): options, resume, checkpoints (parameters, the
 * balancing biases, R_cp's co-occurrence averages, AdamW), stops, metrics and plots are the
 * driver's.
 *
 * Parallelism: the ranks form a dp x ep mesh (dist.ep). train.batch is the GLOBAL batch; each
 * of P ranks runs b = batch/P sequences. Each rank of an ep group holds E/ep experts of every
 * MoE layer and exchanges token rows with the others (nn/moe.h, par/dispatch.h); expert
 * gradients are averaged over the dp axis, dense ones over every rank (par/gradsync.h). The aux
 * losses are computed on each rank's tokens and averaged with the gradients, L_lb from counts
 * summed over every rank (moe.lb_global), so the objective does not depend on the number of
 * ranks; the balancing biases and the identity-coupled R_cp's co-occurrence averages are
 * updated from counts summed over the ranks, so every rank updates alike.
 * Outputs under run.dir: config.ini, metrics.csv (training: losses, L_o and L_v of Guo et al.,
 * the dropped fraction, MaxVio and dead experts of the batch), eval.csv (held-out loss, perplexity,
 * the unigram baseline, routing statistics averaged over the MoE layers), routing.csv (one row
 * per MoE layer and evaluation), experts.csv (one row per expert, MoE layer and evaluation: the
 * load f_e), domains.csv (held-out loss per domain), domain_experts.csv (the share of each
 * expert among a domain's top-1 choices, per MoE layer), plots/, checkpoints/.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"       /* tess_log_* */
#include "core/timer.h"     /* tess_timer_now */
#include "data.h"           /* moe_data_* */
#include "nn/moe.h"         /* tess_nn_moe_* */
#include "nn/transformer.h" /* tess_tfm_* */
#include "optim/adamw.h"    /* tess_adamw_* */
#include "optim/adamw_opts.h" /* TESS_ADAMW_SCHED_OPTS, tess_adamw_sched_read */
#include "optim/clip.h"     /* tess_clip_grad_norm */
#include "optim/guard.h"    /* tess_guard_* */
#include "optim/sched.h"    /* tess_sched_* */
#include "par/coll.h"       /* tess_par_allreduce_* */
#include "par/gradsync.h"   /* tess_gradsync_* */
#include "par/mesh.h"       /* tess_mesh_* */
#include "run/run.h"        /* tess_run_* */
#include "tensor/tensor.h"  /* tess_tensor_sqnorm */

/* metrics.csv: TRAIN_COLS; routing.csv: layer, then ROUTE_COLS statistics (a row per MoE layer,
 * any number of layers); eval.csv: EVAL_COLS. */
enum { TRAIN_COLS = 15, ROUTE_COLS = 8, EVAL_COLS = 10 };

static const tess_opt_enum source_names[] = {{"synthetic", MOE_SOURCE_SYNTHETIC},
                                             {"text", MOE_SOURCE_TEXT}};
TESS_OPT_ENUM_TABLE_CHECK(source_names, MOE_SOURCE_COUNT);

/* run.mode: train (default), or eval: restore a trained run's checkpoint through the driver
 * (ckpt.resume, ckpt.dir), evaluate it on data.eval_file once, write the evaluation files
 * (eval.csv, routing.csv, experts.csv, domains.csv, domain_experts.csv, one row set stamped with
 * the checkpoint's step) into run.dir and change nothing: no step, no checkpoint. */
typedef enum { MOE_MODE_TRAIN = 0, MOE_MODE_EVAL, MOE_MODE_COUNT } moe_mode;
static const tess_opt_enum mode_names[] = {{"train", MOE_MODE_TRAIN}, {"eval", MOE_MODE_EVAL}};
TESS_OPT_ENUM_TABLE_CHECK(mode_names, MOE_MODE_COUNT);

static const tess_opt run_opts[] = {
    TESS_OPT_RESUMABLE(INT, "log_every", 10, 1, INT32_MAX, "steps between metrics.csv rows"),
    TESS_OPT_RESUMABLE(ENUM, "mode", "train", mode_names,
                       "train, or eval: evaluate the checkpoint ckpt.resume restores on "
                       "data.eval_file and stop (no step, no checkpoint)"),
};
static const tess_opt model_opts[] = {
    TESS_OPT_INT("layers", 4, 1, 1024, "transformer blocks"),
    TESS_OPT_INT("channels", 64, 2, 65536, "model width C"),
    TESS_OPT_INT("heads", 4, 1, 1024, "attention heads (channels/heads must be even)"),
    TESS_OPT_INT("mlp_hidden", 128, 1, 1 << 20, "hidden width of the dense SwiGLU layers"),
    TESS_OPT_REAL("norm_eps", 1e-5, 1e-12, 1.0, "epsilon of the RMSNorms"),
    TESS_OPT_REAL("rope_base", 10000.0, 1.0, 1e9, "RoPE base"),
};
static const tess_opt moe_opts[] = {
    TESS_OPT_INT("experts", 8, 1, 256, "routed experts E per MoE layer"),
    TESS_OPT_INT("top_k", 2, 1, 16, "experts per token k (<= experts)"),
    TESS_OPT_INT("expert_hidden", 64, 1, 1 << 20, "hidden width of each SwiGLU expert"),
    TESS_OPT_INT("every", 1, 1, 1024, "MoE in layers l with (l+1) % every == 0 (2: every other)"),
    TESS_OPT_INT("shared_hidden", 0, 0, 1 << 20, "width of a shared SwiGLU expert (DeepSeekMoE), 0: none"),
    TESS_OPT_REAL("lambda_lb", 1e-2, 0.0, 1e3, "load-balancing loss weight"),
    TESS_OPT_BOOL("lb_global", true, "L_lb from counts summed over every rank (the global batch)"),
    TESS_OPT_REAL("lambda_z", 0.0, 0.0, 1e3, "router z-loss weight (1e-3 when used)"),
    TESS_OPT_REAL("lambda_sp", 2e-3, 0.0, 1e3, "specialization loss R_sp weight (needs top_k >= 2)"),
    TESS_OPT_REAL("lambda_cp", 1e-3, 0.0, 1e3, "cross-layer coupling loss R_cp weight"),
    TESS_OPT_BOOL("cp_detach", false,
                  "ablation: R_cp's gradient into the shallower layer of each pair only"),
    TESS_OPT_BOOL("cp_identity", false,
                  "ablation: R_cp weighs each expert pair by its co-occurrence average"),
    TESS_OPT_REAL("cp_decay", 0.99, 0.0, 1.0,
                  "decay per training step of cp_identity's co-occurrence average"),
    TESS_OPT_ENUM("phi", "sq", tess_nn_moe_phi_names, "phi of R_sp: sq (c^2), abs (|c|), signed (c)"),
    TESS_OPT_BOOL("bias_balance", false, "aux-loss-free balancing: a selection bias per expert"),
    TESS_OPT_REAL("bias_rate", 1e-3, 0.0, 1.0, "step of the balancing bias per training step"),
    TESS_OPT_REAL("init_std", 0.02, 0.0, 10.0, "init std of the router and expert input weights"),
    TESS_OPT_ENUM("score", "softmax", tess_nn_moe_score_names,
                  "router scores: softmax, or sigmoid normalised over the experts"),
    TESS_OPT_REAL("jitter", 0.0, 0.0, 0.99, "router input jitter eps (x * U[1-eps, 1+eps), training only), 0: off"),
    TESS_OPT_ENUM("drop", "none", tess_nn_moe_drop_names,
                  "capacity drop policy: none (dropless), probs (keep highest scores), position"),
    TESS_OPT_REAL("capacity_factor", 1.0, 0.0, 1e3,
                  "capacity ceil(tokens * top_k * factor / experts) per expert and rank (with drop)"),
    TESS_OPT_BOOL("pad", false, "pad every expert's rows to the capacity (with drop)"),
    TESS_OPT_REAL("lambda_ortho", 0.0, 0.0, 1e3, "Guo et al. orthogonality loss weight (ablation 'Guo o+v')"),
    TESS_OPT_REAL("lambda_var", 0.0, 0.0, 1e3, "Guo et al. routing-variance weight (maximised)"),
    TESS_OPT_BOOL("guo_autoscale", false,
                  "lambda_ortho, lambda_var are targets: each weight becomes the power of ten "
                  "nearest target / loss at the first step (Guo et al.)"),
};
static const tess_opt data_opts[] = {
    TESS_OPT_ENUM("source", "synthetic", source_names,
                  "synthetic: Markov chains per domain; text: train_file/eval_file token streams "
                  "with domain labels (jobs/moe-text.sh)"),
    TESS_OPT_STRING("train_file", "runs/moe-text/train.h5", "text: training token stream"),
    TESS_OPT_RESUMABLE(STRING, "eval_file", "runs/moe-text/val.h5",
                       "text: held-out token stream (run.mode = eval: any split, e.g. test.h5)"),
    TESS_OPT_INT("vocab", 256, 2, 1 << 24,
                 "vocabulary V shared by the domains (text: the tokenizer's, e.g. 2048)"),
    TESS_OPT_INT("domains", 4, 1, 1024, "synthetic: domains D (Markov chains)"),
    TESS_OPT_INT("branch", 4, 1, 1024, "synthetic: successors per token and domain"),
    TESS_OPT_INT("seq_len", 64, 1, 1 << 16, "tokens per sequence T"),
    TESS_OPT_INT("unigram_samples", 2048, 1, 1 << 18, "training sequences of the unigram baseline"),
};
static const tess_opt train_opts[] = {
    TESS_OPT_RESUMABLE(INT, "steps", 300, 1, INT64_MAX / 2, "optimizer steps"),
    TESS_OPT_INT("batch", 16, 1, 1 << 24, "GLOBAL batch in sequences; a multiple of the ranks"),
    TESS_OPT_RESUMABLE(INT, "eval_every", 50, 1, INT64_MAX / 2,
                       "steps between held-out evaluations"),
    TESS_OPT_RESUMABLE(INT, "eval_batch", 64, 1, 1 << 16, "held-out sequences per evaluation"),
    TESS_OPT_REAL("grad_clip", 1.0, 0.0, 1e9, "global-norm clipping threshold (0: off)"),
    TESS_OPT_RESUMABLE(INT, "max_bad_steps", 5, 1, 1000000,
                       "non-finite steps in a row before aborting"),
};
static const tess_opt optim_opts[] = {TESS_ADAMW_SCHED_OPTS(30)};
static const tess_opt dist_opts[] = {
    TESS_OPT_RESUMABLE(INT, "bucket_kib", 1024, 1, 1 << 22,
                       "gradient all-reduce bucket size (KiB)"),
    TESS_OPT_RESUMABLE(INT, "ep", 1, 1, 1 << 16,
                       "expert-parallel size: divides the ranks and moe.experts"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("model", model_opts), TESS_CONFIG_SECTION("moe", moe_opts),
    TESS_CONFIG_SECTION("data", data_opts),   TESS_CONFIG_SECTION("train", train_opts),
    TESS_CONFIG_SECTION("optim", optim_opts), TESS_CONFIG_SECTION("dist", dist_opts),
};

typedef struct {
    moe_source src; /* src.syn: V, T (and the chains when synthetic) */
    tess_tfm_config mc;
    tess_nn_moe_config moe;
    double bias_rate, cp_decay;
    bool lb_global;
    tess_sched sched;
    tess_adamw_config adamw;
    int64_t global_B, b, log_every, eval_every, eval_batch, uni_samples, nmoe, ep;
    tess_mesh *mesh;                 /* dp x ep over the run's group */
    double clip;
    tess_registry *reg;
    tess_nn_moe_stack *stack;
    tess_tfm *model;
    tess_adamw *opt;
    tess_gradsync *sync;
    tess_guard guard;
    int32_t *ids, *targets, *domain; /* (b, T) */
    int64_t *counts;                 /* (nmoe, E) the training batch's routed pairs per expert,
                                      * then with cp_identity (nmoe - 1, E, E) the co-occurrence
                                      * of adjacent MoE layers' top-k, summed over the ranks
                                      * (balancing bias, load metrics, R_cp's chat) */
    double *stats;                   /* evaluation sums, reduced over ranks */
    double *route;                   /* (nmoe, 1 + ROUTE_COLS) routing.csv rows */
    int train_csv, eval_csv, route_csv, expert_csv, domain_csv, domain_expert_csv;
    double unigram_loss, first_loss, loss, eval_loss, t_log;
    int64_t steps_run;
    bool eval_only;                  /* run.mode = eval */
} moe_app;

/* Adjacent MoE layer pairs whose co-occurrence the app counts: nmoe - 1 with cp_identity. */
static int64_t cooc_pairs(const moe_app *a) {
    return a->moe.cp_identity && a->nmoe > 1 ? a->nmoe - 1 : 0;
}

static void moe_destroy(void *ctx) {
    moe_app *a = ctx;
    free(a->ids);
    free(a->targets);
    free(a->domain);
    free(a->counts);
    free(a->stats);
    free(a->route);
    moe_source_close(&a->src);
    tess_adamw_destroy(&a->opt);
    tess_gradsync_destroy(&a->sync);
    tess_tfm_destroy(&a->model);
    tess_nn_moe_stack_destroy(&a->stack);
    tess_registry_destroy(&a->reg);
    tess_mesh_destroy(&a->mesh);
}

/* The options into a, checked identically on every rank. */
static tess_status read_options(moe_app *a, const tess_config *c, int nranks, uint64_t seed) {
    a->global_B = tess_config_int(c, "train.batch");
    TESS_REQUIRE(a->global_B % nranks == 0, TESS_ERR_CONFIG,
                 "train.batch = %lld must be a multiple of the number of ranks (%d)",
                 (long long)a->global_B, nranks);
    a->b = a->global_B / nranks;
    const int64_t steps = tess_config_int(c, "train.steps");
    a->src.kind = (moe_source_kind)tess_config_enum(c, "data.source");
    a->src.syn = (moe_data){.V = tess_config_int(c, "data.vocab"),
                            .D = tess_config_int(c, "data.domains"),
                            .T = tess_config_int(c, "data.seq_len"),
                            .branch = tess_config_int(c, "data.branch"),
                            .key = {.seed = (uint32_t)seed, .stream = 1}};
    a->src.D = a->src.syn.D;
    a->moe = (tess_nn_moe_config){.E = tess_config_int(c, "moe.experts"),
                                  .k = tess_config_int(c, "moe.top_k"),
                                  .F = tess_config_int(c, "moe.expert_hidden"),
                                  .every = tess_config_int(c, "moe.every"),
                                  .shared_F = tess_config_int(c, "moe.shared_hidden"),
                                  .lambda_lb = tess_config_real(c, "moe.lambda_lb"),
                                  .lambda_z = tess_config_real(c, "moe.lambda_z"),
                                  .lambda_sp = tess_config_real(c, "moe.lambda_sp"),
                                  .lambda_cp = tess_config_real(c, "moe.lambda_cp"),
                                  .phi = (tess_nn_moe_phi)tess_config_enum(c, "moe.phi"),
                                  .bias_balance = tess_config_bool(c, "moe.bias_balance"),
                                  .std = tess_config_real(c, "moe.init_std"),
                                  .score = (tess_nn_moe_score)tess_config_enum(c, "moe.score"),
                                  .jitter = tess_config_real(c, "moe.jitter"),
                                  .seed = seed,
                                  .drop = (tess_nn_moe_drop)tess_config_enum(c, "moe.drop"),
                                  .capacity_factor = tess_config_real(c, "moe.capacity_factor"),
                                  .pad = tess_config_bool(c, "moe.pad"),
                                  .lambda_o = tess_config_real(c, "moe.lambda_ortho"),
                                  .lambda_v = tess_config_real(c, "moe.lambda_var"),
                                  .guo_autoscale = tess_config_bool(c, "moe.guo_autoscale"),
                                  .cp_detach = tess_config_bool(c, "moe.cp_detach"),
                                  .cp_identity = tess_config_bool(c, "moe.cp_identity")};
    a->bias_rate = tess_config_real(c, "moe.bias_rate");
    a->cp_decay = tess_config_real(c, "moe.cp_decay");
    a->lb_global = tess_config_bool(c, "moe.lb_global");
    TESS_CHECK(tess_nn_moe_check_config(&a->moe));
    a->ep = tess_config_int(c, "dist.ep");
    TESS_REQUIRE(nranks % a->ep == 0, TESS_ERR_CONFIG,
                 "dist.ep = %lld must divide the number of ranks (%d)", (long long)a->ep, nranks);
    TESS_REQUIRE(a->moe.E % a->ep == 0, TESS_ERR_CONFIG,
                 "moe.experts = %lld must be divisible by dist.ep = %lld", (long long)a->moe.E,
                 (long long)a->ep);
    a->mc = (tess_tfm_config){.V = a->src.syn.V, .T = a->src.syn.T,
                              .C = tess_config_int(c, "model.channels"),
                              .NH = tess_config_int(c, "model.heads"),
                              .F = tess_config_int(c, "model.mlp_hidden"),
                              .L = tess_config_int(c, "model.layers"),
                              .norm = TESS_NN_NORM_RMS, .mlp = TESS_NN_FFN_SWIGLU,
                              .causal = true,
                              .norm_eps = (float)tess_config_real(c, "model.norm_eps"),
                              .rope_base = (float)tess_config_real(c, "model.rope_base"),
                              .make_ffn = tess_nn_moe_stack_make_ffn};
    a->nmoe = a->mc.L / a->moe.every;
    TESS_REQUIRE(a->nmoe >= 1, TESS_ERR_CONFIG,
                 "model.layers = %lld with moe.every = %lld gives no MoE layer",
                 (long long)a->mc.L, (long long)a->moe.every);
    TESS_CHECK(tess_adamw_sched_read(c, "optim", steps, "train.steps", &a->adamw, &a->sched));
    TESS_CHECK(tess_tfm_check_config(&a->mc, a->b));
    a->log_every = tess_config_int(c, "run.log_every");
    a->eval_every = tess_config_int(c, "train.eval_every");
    a->eval_batch = tess_config_int(c, "train.eval_batch");
    /* the expert exchange is collective on ep: every rank evaluates the same number of chunks of
     * the same size (with padding the blocks are fixed-size, moe.h) */
    TESS_REQUIRE(a->ep == 1 || a->eval_batch % nranks == 0, TESS_ERR_CONFIG,
                 "train.eval_batch = %lld must be a multiple of the number of ranks (%d) with "
                 "dist.ep = %lld (every rank evaluates as many sequences)",
                 (long long)a->eval_batch, nranks, (long long)a->ep);
    a->uni_samples = tess_config_int(c, "data.unigram_samples");
    a->clip = tess_config_real(c, "train.grad_clip");
    return TESS_OK;
}

/* Held-out cross-entropy (nats) of the add-one-smoothed unigram distribution of uni_samples
 * training sequences, on the eval_batch held-out sequences: the baseline a model must beat.
 * Every rank computes the same value (no communication). */
static tess_status unigram_baseline(moe_app *a) {
    const int64_t V = a->mc.V, T = a->mc.T;
    double *cnt = calloc((size_t)V, sizeof *cnt);
    TESS_REQUIRE(cnt != NULL, TESS_ERR_MEM, "cannot allocate the unigram counts (V = %lld)",
                 (long long)V);
    double total = (double)V, nll = 0.0;
    for (int64_t v = 0; v < V; v++) cnt[v] = 1.0;
    tess_status s = TESS_OK;
    for (int64_t i = 0; i < a->uni_samples && s == TESS_OK; i += a->b) {
        const int64_t B = a->uni_samples - i < a->b ? a->uni_samples - i : a->b;
        s = moe_source_batch(&a->src, MOE_SPLIT_TRAIN, i, B, a->ids, a->targets, NULL);
        for (int64_t t = 0; t < B * T && s == TESS_OK; t++) cnt[a->targets[t]] += 1.0;
        total += (double)(B * T);
    }
    for (int64_t i = 0; i < a->eval_batch && s == TESS_OK; i += a->b) {
        const int64_t B = a->eval_batch - i < a->b ? a->eval_batch - i : a->b;
        s = moe_source_batch(&a->src, MOE_SPLIT_EVAL, i, B, a->ids, a->targets, NULL);
        for (int64_t t = 0; t < B * T && s == TESS_OK; t++) nll -= log(cnt[a->targets[t]] / total);
    }
    a->unigram_loss = nll / (double)(a->eval_batch * T);
    free(cnt);
    return s;
}

static tess_status declare_metrics(tess_run *run, moe_app *a) {
    static const char *const train_cols[TRAIN_COLS] = {
        "loss", "aux",     "lb",   "z",  "sp", "cp",        "o",        "v",
        "dropped", "maxvio", "dead", "lr", "grad_norm", "tok_per_s", "a2a_share"};
    static const char *const eval_cols[EVAL_COLS] = {
        "val_loss", "val_ppl", "unigram_loss", "entropy", "mass",
        "maxvio",   "dead",    "mi_domain",    "mi_next", "cos2"};
    static const char *const route_cols[1 + ROUTE_COLS] = {
        "layer", "entropy", "mass", "maxvio", "dead", "mi_domain", "cos2", "mi_next", "load_max"};
    static const char *const expert_cols[] = {"layer", "expert", "load"};
    static const char *const domain_cols[] = {"domain", "val_loss", "tokens"};
    static const char *const domain_expert_cols[] = {"layer", "domain", "expert", "share"};
    static const char *const loss_plot[] = {"loss"};
    static const char *const aux_plot[] = {"lb"}, *const aux_plot2[] = {"sp", "cp"};
    static const char *const aux_titles[] = {"L_lb"}, *const aux_titles2[] = {"R_sp", "R_cp"};
    static const char *const guo_plot[] = {"o"}, *const guo_plot2[] = {"v"};
    static const char *const guo_titles[] = {"L_o, orthogonality"};
    static const char *const guo_titles2[] = {"L_v, routing variance (maximised)"};
    static const char *const load_plot[] = {"maxvio", "dead", "dropped"};
    static const char *const load_titles[] = {"MaxVio", "dead experts (no pair routed)",
                                              "dropped fraction of the (token, slot) pairs"};
    static const char *const eval_plot[] = {"val_loss", "unigram_loss"};
    static const char *const entropy_plot[] = {"entropy", "mass"};
    static const char *const mi_plot[] = {"mi_domain", "mi_next"};
    static const char *const mi_titles[] = {"top-1 expert vs domain",
                                            "top-1 expert vs next layer's top-1"};
    static const char *const entropy_titles[] = {"routing entropy / log E", "top-k mass"};
    static const char *const eval_titles[] = {"held-out loss", "unigram baseline"};
    TESS_CHECK(tess_run_metrics(run, "metrics", train_cols, TRAIN_COLS, true, &a->train_csv));
    TESS_CHECK(tess_run_metrics(run, "eval", eval_cols, EVAL_COLS, true, &a->eval_csv));
    TESS_CHECK(tess_run_metrics(run, "routing", route_cols, 1 + ROUTE_COLS, true, &a->route_csv));
    TESS_CHECK(tess_run_metrics(run, "experts", expert_cols, 3, true, &a->expert_csv));
    TESS_CHECK(tess_run_metrics(run, "domains", domain_cols, 3, true, &a->domain_csv));
    TESS_CHECK(tess_run_metrics(run, "domain_experts", domain_expert_cols, 4, true,
                                &a->domain_expert_csv));
    const char *const step = "step (optimizer updates)";
    /* the dropped fraction on load.png with a capacity; guo.png needs k >= 2 (L_o) */
    const bool cap = a->moe.drop != TESS_NN_MOE_DROP_NONE;
    const int nplots = a->moe.k >= 2 ? 7 : 6;
    const tess_plot_spec plots[7] = {
        {.title = "moe: training loss", .xlabel = step, .ycols = loss_plot, .ny = 1,
         .ylabel = "cross-entropy (nats/token)", .logy = true},
        {.title = "moe: auxiliary losses (sums over MoE layers)", .xlabel = step,
         .ycols = aux_plot, .ny = 1, .ylabel = "L_lb (dimensionless; 1 per layer when balanced)",
         .ytitles = aux_titles, .y2cols = aux_plot2, .ny2 = 2, .y2titles = aux_titles2,
         .y2label = "R_sp, R_cp (dimensionless)"},
        {.title = "moe: held-out loss and the unigram baseline", .xlabel = step,
         .ycols = eval_plot, .ny = 2, .ytitles = eval_titles,
         .ylabel = "cross-entropy (nats/token)"},
        {.title = "moe: routing entropy and top-k mass (means over MoE layers)", .xlabel = step,
         .ycols = entropy_plot, .ny = 2, .ytitles = entropy_titles,
         .ylabel = "entropy / log E, top-k probability mass (fractions, 0-1)"},
        {.title = "moe: mutual information of top-1 expert with the domain and with the next "
                  "layer's top-1 (means over MoE layers)",
         .xlabel = step, .ycols = mi_plot, .ny = 2, .ytitles = mi_titles,
         .ylabel = "mutual information (nats)"},
        {.title = "moe: expert load of the training batch (means over MoE layers)",
         .xlabel = step, .ycols = load_plot, .ny = cap ? 3 : 2, .ytitles = load_titles,
         .ylabel = cap ? "MaxVio, dropped fraction (dimensionless); dead experts (count)"
                       : "MaxVio (dimensionless); dead experts (count)"},
        {.title = "moe: the baseline losses of Guo et al. (sums over MoE layers, measured at any "
                  "weight)",
         .xlabel = step, .ycols = guo_plot, .ny = 1, .ytitles = guo_titles,
         .ylabel = "L_o (squared output norm, dimensionless)", .y2cols = guo_plot2, .ny2 = 1,
         .y2titles = guo_titles2, .y2label = "L_v (variance of the scores, dimensionless)"}};
    const int ids[7] = {a->train_csv, a->train_csv, a->eval_csv, a->eval_csv,
                        a->eval_csv,  a->train_csv, a->train_csv};
    static const char *const pngs[7] = {"loss.png",      "aux.png",  "eval.png", "entropy.png",
                                        "mi_domain.png", "load.png", "guo.png"};
    for (int i = 0; i < nplots; i++) TESS_CHECK(tess_run_plot(run, ids[i], pngs[i], &plots[i]));
    return TESS_OK;
}

static tess_status moe_setup(tess_run *run, void *ctx) {
    moe_app *a = ctx;
    const tess_config *c = tess_run_config(run);
    const tess_group *dp = tess_run_group(run);
    const uint64_t seed = tess_run_seed(run);
    TESS_CHECK(read_options(a, c, dp->size, seed));
    a->eval_only = tess_config_enum(c, "run.mode") == MOE_MODE_EVAL;
    /* run.dir is the evaluation's own: the trained run's files stay as they are */
    const char *resume = tess_config_string(c, "ckpt.resume");
    TESS_REQUIRE(!a->eval_only || (resume[0] && (strcmp(resume, "auto") != 0 ||
                                                 tess_config_string(c, "ckpt.dir")[0])),
                 TESS_ERR_CONFIG,
                 "run.mode = eval evaluates a trained run's checkpoint into a new run.dir: set "
                 "ckpt.resume = auto with ckpt.dir = <trained run>/checkpoints, or ckpt.resume = "
                 "a checkpoint file (got ckpt.resume = '%s')",
                 resume);
    const int64_t steps = tess_config_int(c, "train.steps");
    tess_run_set_total(run, (double)steps, steps);
    if (a->src.kind == MOE_SOURCE_TEXT) { /* collective, agreed: the same status on every rank */
        const char *train = tess_config_string(c, "data.train_file");
        const char *eval = tess_config_string(c, "data.eval_file");
        const tess_status s = moe_source_open_text(
            &a->src, dp, train, eval, a->mc.V, a->mc.T, a->b, a->global_B, a->eval_batch,
            (tess_rng_key){.seed = (uint32_t)seed, .stream = 1});
        if (s != TESS_OK)
            return tess_error_push(s, __FILE__, __LINE__, __func__,
                                   "data.source = text reads data.train_file = '%s' and "
                                   "data.eval_file = '%s' (made by jobs/moe-text.sh)",
                                   train, eval);
    }

    /* Everything above failed, if at all, identically on every rank. */
    tess_run_local_from_here(run);
    /* experts sharded over "ep", their gradients reduced over "dp" (the ranks holding the same
     * experts); dense weights over every rank */
    const tess_mesh_axis axes[] = {{"dp", TESS_MESH_REST}, {"ep", (int)a->ep}};
    TESS_CHECK(tess_mesh_create(dp, 2, axes, &a->mesh));
    if (a->ep > 1) {
        a->moe.edp = tess_mesh_axis_group(a->mesh, 0);
        a->moe.ep = tess_mesh_axis_group(a->mesh, 1);
    }
    if (a->lb_global) a->moe.lb_group = dp;
    TESS_CHECK(tess_registry_create(&a->reg));
    TESS_CHECK(tess_nn_moe_stack_create(&a->stack, &a->moe));
    a->mc.ffn_ctx = a->stack;
    TESS_CHECK(tess_tfm_create(&a->model, &a->mc, a->b, a->reg));
    TESS_REQUIRE(tess_nn_moe_stack_layers(a->stack) == a->nmoe, TESS_ERR_INTERNAL,
                 "expected %lld MoE layers, the model has %lld", (long long)a->nmoe,
                 (long long)tess_nn_moe_stack_layers(a->stack));
    TESS_CHECK(tess_registry_finalize(a->reg));
    TESS_CHECK(tess_registry_init_params(a->reg, seed));
    TESS_CHECK(tess_adamw_create(&a->opt, a->reg, &a->adamw));
    TESS_CHECK(tess_gradsync_create(&a->sync, a->reg, dp,
                                    tess_config_int(c, "dist.bucket_kib") * 1024 /
                                        (int64_t)sizeof(float)));
    tess_tfm_set_grad_hook(a->model, tess_gradsync_hook, a->sync);
    const int64_t n = a->b * a->mc.T, E = a->moe.E;
    a->ids = malloc((size_t)n * sizeof *a->ids);
    a->targets = malloc((size_t)n * sizeof *a->targets);
    a->domain = malloc((size_t)n * sizeof *a->domain);
    a->counts = malloc((size_t)(a->nmoe * E + cooc_pairs(a) * E * E) * sizeof *a->counts);
    /* per layer: entropy, mass, cos2, E counts, D x E domain-by-top-1, E x E top-1 pairs with
     * the next layer; then loss * tokens and tokens; then per domain the loss sum and tokens */
    const int64_t per = 3 + E + a->src.D * E + E * E;
    a->stats = malloc((size_t)(a->nmoe * per + 2 + 2 * a->src.D) * sizeof *a->stats);
    a->route = malloc((size_t)(a->nmoe * (1 + ROUTE_COLS)) * sizeof *a->route);
    TESS_REQUIRE(a->ids && a->targets && a->domain && a->counts && a->stats && a->route,
                 TESS_ERR_MEM,
                 "cannot allocate a batch of %lld tokens", (long long)n);
    TESS_CHECK(tess_guard_init(&a->guard, (int)tess_config_int(c, "train.max_bad_steps"),
                               dp->rank == 0 ? stderr : NULL));
    TESS_CHECK(unigram_baseline(a));

    /* What a checkpoint holds: the parameters (with the balancing biases) and AdamW's state. */
    tess_state *st = tess_run_state(run);
    TESS_CHECK(tess_state_add_registry(st, "params", a->reg, false));
    TESS_CHECK(tess_adamw_describe(a->opt, st, "optim"));
    /* a resume holds at most one update and global_B sequences per step */
    TESS_CHECK(tess_run_bound_counter(run, "optim/step_count", 1));
    int64_t cursor_max;
    if (__builtin_mul_overflow(a->sched.total_steps, a->global_B, &cursor_max))
        cursor_max = INT64_MAX;
    tess_run_set_data_cursor_max(run, cursor_max);
    TESS_CHECK(declare_metrics(run, a));

    if (a->src.kind == MOE_SOURCE_TEXT)
        tess_log_info("moe: text V=%lld T=%lld, %lld domains (%s), unigram baseline %.3f nats",
                      (long long)a->mc.V, (long long)a->mc.T, (long long)a->src.D, a->src.names,
                      a->unigram_loss);
    else
        tess_log_info("moe: synthetic V=%lld D=%lld branch=%lld T=%lld (step entropy %.3f "
                      "nats, unigram baseline %.3f nats)",
                      (long long)a->mc.V, (long long)a->src.D, (long long)a->src.syn.branch,
                      (long long)a->mc.T, moe_data_step_entropy(&a->src.syn), a->unigram_loss);
    tess_log_info("moe: model L=%lld C=%lld heads=%lld, %lld MoE layers E=%lld k=%lld F=%lld; "
                  "%lld parameters",
                  (long long)a->mc.L, (long long)a->mc.C, (long long)a->mc.NH,
                  (long long)a->nmoe, (long long)E, (long long)a->moe.k, (long long)a->moe.F,
                  (long long)tess_registry_global_total(a->reg));
    tess_log_info("moe: lambda lb %g z %g sp %g cp %g%s%s ortho %g var %g, bias balance %s; %s "
                  "scores, jitter %g, drop %s (capacity factor %g%s); %lld steps, global batch "
                  "%lld = %d ranks x %lld",
                  a->moe.lambda_lb, a->moe.lambda_z, a->moe.lambda_sp, a->moe.lambda_cp,
                  a->moe.cp_identity ? " (identity-coupled)" : "",
                  a->moe.cp_detach ? " (deeper layer detached)" : "", a->moe.lambda_o,
                  a->moe.lambda_v, a->moe.bias_balance ? "on" : "off",
                  tess_nn_moe_score_names[a->moe.score].name, a->moe.jitter,
                  tess_nn_moe_drop_names[a->moe.drop].name, a->moe.capacity_factor,
                  a->moe.pad ? ", padded" : "", (long long)steps, (long long)a->global_B,
                  dp->size, (long long)a->b);
    char subtitle[256];
    char guo[64] = "", cap[64] = "";
    if (a->moe.lambda_o > 0 || a->moe.lambda_v > 0)
        snprintf(guo, sizeof guo, " o %g v %g%s", a->moe.lambda_o, a->moe.lambda_v,
                 a->moe.guo_autoscale ? " (targets)" : "");
    if (a->moe.cp_detach) strncat(guo, " (cp detached)", sizeof guo - strlen(guo) - 1);
    if (a->moe.cp_identity) strncat(guo, " (cp identity)", sizeof guo - strlen(guo) - 1);
    if (a->moe.drop != TESS_NN_MOE_DROP_NONE)
        snprintf(cap, sizeof cap, ", cap %g %s%s", a->moe.capacity_factor,
                 tess_nn_moe_drop_names[a->moe.drop].name, a->moe.pad ? " pad" : "");
    snprintf(subtitle, sizeof subtitle,
             "L=%lld C=%lld, %lld MoE E=%lld k=%lld, lb %g sp %g cp %g%s%s, batch %lld, "
             "%d rank%s (ep %lld)",
             (long long)a->mc.L, (long long)a->mc.C, (long long)a->nmoe, (long long)E,
             (long long)a->moe.k, a->moe.lambda_lb, a->moe.lambda_sp, a->moe.lambda_cp, guo, cap,
             (long long)a->global_B, dp->size, dp->size == 1 ? "" : "s", (long long)a->ep);
    tess_run_plot_subtitle(run, subtitle);
    a->first_loss = a->loss = a->eval_loss = NAN;
    a->t_log = tess_timer_now();
    return TESS_OK;
}

/* Mutual information (nats) of a joint count table (R,C). */
static double mutual_info(const double *joint, int64_t R, int64_t C) {
    double tot = 0.0;
    for (int64_t i = 0; i < R * C; i++) tot += joint[i];
    if (tot <= 0) return 0.0;
    double mi = 0.0;
    for (int64_t r = 0; r < R; r++) {
        double pr = 0.0;
        for (int64_t c = 0; c < C; c++) pr += joint[r * C + c];
        for (int64_t c = 0; c < C; c++) {
            if (joint[r * C + c] <= 0) continue;
            double pc = 0.0;
            for (int64_t q = 0; q < R; q++) pc += joint[q * C + c];
            const double p = joint[r * C + c] / tot;
            mi += p * log(p * tot * tot / (pr * pc));
        }
    }
    return mi;
}

/* Held-out loss and the routing statistics over eval_batch sequences split across the ranks
 * (block ranges, uneven allowed), in chunks of at most b. Collective on the run's group. */
static tess_status evaluate(tess_run *run, moe_app *a, const tess_group *g) {
    const int64_t T = a->mc.T, E = a->moe.E, k = a->moe.k, D = a->src.D, L = a->nmoe;
    const int64_t V = a->mc.V, per = 3 + E + D * E + E * E, nst = L * per + 2 + 2 * D;
    double *dom = a->stats + L * per + 2; /* (D, 2): loss sum, tokens */
    const int64_t share = (a->eval_batch + g->size - 1) / g->size;
    const int64_t lo = share * g->rank < a->eval_batch ? share * g->rank : a->eval_batch;
    const int64_t hi = lo + share < a->eval_batch ? lo + share : a->eval_batch;
    memset(a->stats, 0, (size_t)nst * sizeof *a->stats);
    tess_nn_moe_stack_set_step(a->stack, false, 0, 0);
    for (int64_t first = lo; first < hi; first += a->b) {
        const int64_t B = hi - first < a->b ? hi - first : a->b, N = B * T;
        TESS_CHECK(moe_source_batch(&a->src, MOE_SPLIT_EVAL, first, B, a->ids, a->targets,
                                    a->domain));
        const float l = tess_tfm_forward(a->model, a->ids, a->targets, B);
        TESS_CHECK(tess_nn_moe_stack_status(a->stack));
        a->stats[L * per] += (double)l * (double)N;
        a->stats[L * per + 1] += (double)N;
        const float *lg = tess_tfm_logits(a->model); /* (N, V) */
        for (int64_t t = 0; t < N; t++) {
            const float *row = lg + t * V;
            float mx = row[0];
            for (int64_t v = 1; v < V; v++) mx = fmaxf(mx, row[v]);
            double z = 0.0;
            for (int64_t v = 0; v < V; v++) z += exp((double)(row[v] - mx));
            dom[2 * a->domain[t]] += (double)mx + log(z) - (double)row[a->targets[t]];
            dom[2 * a->domain[t] + 1] += 1.0;
        }
        for (int64_t i = 0; i < L; i++) {
            double *s = a->stats + i * per;
            const float *p = tess_nn_moe_stack_probs(a->stack, i, NULL);
            const float *m = tess_nn_moe_stack_mass(a->stack, i);
            const int32_t *tk = tess_nn_moe_stack_topk(a->stack, i);
            const int64_t *cnt = tess_nn_moe_stack_counts(a->stack, i);
            for (int64_t t = 0; t < N; t++) {
                double h = 0.0;
                for (int64_t e = 0; e < E; e++)
                    if (p[t * E + e] > 0) h -= p[t * E + e] * log(p[t * E + e]);
                s[0] += E > 1 ? h / log((double)E) : 0.0;
                s[1] += m[t];
                s[3 + E + a->domain[t] * E + tk[t * k]] += 1.0;
                if (i + 1 < L)
                    s[3 + E + D * E + tk[t * k] * E +
                      tess_nn_moe_stack_topk(a->stack, i + 1)[t * k]] += 1.0;
            }
            if (k >= 2) s[2] += tess_nn_moe_stack_cosine(a->stack, i, TESS_NN_MOE_PHI_SQ) * N;
            for (int64_t e = 0; e < E; e++) s[3 + e] += (double)cnt[e];
        }
    }
    TESS_CHECK(tess_par_allreduce_f64(g, a->stats, nst, TESS_PAR_SUM));
    const double tokens = a->stats[L * per + 1];
    a->eval_loss = a->stats[L * per] / tokens;
    /* layer means: entropy, mass, maxvio, dead, mi_domain, mi_next (over L - 1 pairs), cos2 */
    double mean[7] = {0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < L; i++) {
        const double *s = a->stats + i * per;
        const double assigned = (double)k * tokens, ideal = assigned / (double)E;
        double vio = 0.0, dead = 0.0, fmax_e = 0.0;
        for (int64_t e = 0; e < E; e++) {
            vio = fmax(vio, fabs(s[3 + e] - ideal) / ideal);
            dead += s[3 + e] == 0.0;
            fmax_e = fmax(fmax_e, s[3 + e] / assigned);
            const double erow[3] = {(double)i, (double)e, s[3 + e] / assigned};
            TESS_CHECK(tess_run_metrics_row(run, a->expert_csv, erow));
        }
        const double H = s[0] / tokens, M = s[1] / tokens, cos2 = k >= 2 ? s[2] / tokens : NAN;
        const double mi = mutual_info(s + 3 + E, D, E);
        const double next = i + 1 < L ? mutual_info(s + 3 + E + D * E, E, E) : NAN;
        double *r = a->route + i * (1 + ROUTE_COLS);
        r[0] = (double)i, r[1] = H, r[2] = M, r[3] = vio, r[4] = dead, r[5] = mi, r[6] = cos2;
        r[7] = next, r[8] = fmax_e;
        TESS_CHECK(tess_run_metrics_row(run, a->route_csv, r));
        mean[0] += H / L, mean[1] += M / L, mean[2] += vio / L, mean[3] += dead / L;
        mean[4] += mi / L, mean[6] += cos2 / L;
        if (i + 1 < L) mean[5] += next / (double)(L - 1);
    }
    for (int64_t d = 0; d < D; d++) {
        const double drow[3] = {(double)d, dom[2 * d + 1] > 0 ? dom[2 * d] / dom[2 * d + 1] : NAN,
                                dom[2 * d + 1]};
        TESS_CHECK(tess_run_metrics_row(run, a->domain_csv, drow));
        for (int64_t i = 0; i < L; i++) {
            const double *j = a->stats + i * per + 3 + E + d * E; /* top-1 counts of domain d */
            double n = 0.0;
            for (int64_t e = 0; e < E; e++) n += j[e];
            for (int64_t e = 0; e < E; e++) {
                const double r[4] = {(double)i, (double)d, (double)e, n > 0 ? j[e] / n : NAN};
                TESS_CHECK(tess_run_metrics_row(run, a->domain_expert_csv, r));
            }
        }
    }
    const double row[EVAL_COLS] = {a->eval_loss, exp(a->eval_loss), a->unigram_loss, mean[0],
                                   mean[1], mean[2], mean[3], mean[4],
                                   L > 1 ? mean[5] : NAN, mean[6]};
    TESS_CHECK(tess_run_metrics_row(run, a->eval_csv, row));
    return TESS_OK;
}

/* a->counts: every MoE layer's routed pairs per expert in the last forward (before capacity
 * drops) and, with cp_identity, every adjacent pair's top-k co-occurrence, summed over the ranks
 * of g in one all-reduce. Collective on g. */
static tess_status global_counts(moe_app *a, const tess_group *g) {
    const int64_t E = a->moe.E, n = a->nmoe * E + cooc_pairs(a) * E * E;
    for (int64_t i = 0; i < a->nmoe; i++)
        memcpy(a->counts + i * E, tess_nn_moe_stack_counts(a->stack, i),
               (size_t)E * sizeof *a->counts);
    memset(a->counts + a->nmoe * E, 0, (size_t)(n - a->nmoe * E) * sizeof *a->counts);
    for (int64_t i = 1; i <= cooc_pairs(a); i++)
        tess_nn_moe_stack_cooc_counts(a->stack, i, a->counts + a->nmoe * E + (i - 1) * E * E);
    TESS_CHECK(tess_par_allreduce_i64(g, a->counts, n, TESS_PAR_SUM));
    return TESS_OK;
}

/* cp_identity: each adjacent pair's co-occurrence average from its counts summed over the ranks
 * (a->counts, global_counts). */
static void update_coocs(moe_app *a) {
    const int64_t E = a->moe.E;
    for (int64_t i = 1; i <= cooc_pairs(a); i++)
        tess_nn_moe_cooc_update(tess_nn_moe_stack_cooc(a->stack, i),
                                a->counts + a->nmoe * E + (i - 1) * E * E, E,
                                (float)a->cp_decay);
}

/* Aux-loss-free balancing: each MoE layer's bias from its counts summed over the ranks
 * (a->counts, global_counts). */
static void update_biases(moe_app *a) {
    for (int64_t i = 0; i < a->nmoe; i++)
        tess_nn_moe_bias_update(tess_nn_moe_stack_bias(a->stack, i), a->counts + i * a->moe.E,
                                a->moe.E, (float)a->bias_rate);
}

/* The load of the training batch from a->counts (global_counts), means over the MoE layers:
 * load[0] = MaxVio = max_e |c_e - k n / E| / (k n / E) for n tokens, load[1] = dead experts (no
 * pair routed to them). */
static void batch_load(const moe_app *a, double n, double load[2]) {
    const int64_t E = a->moe.E;
    const double ideal = (double)a->moe.k * n / (double)E;
    load[0] = load[1] = 0.0;
    for (int64_t i = 0; i < a->nmoe; i++) {
        double vio = 0.0, dead = 0.0;
        for (int64_t e = 0; e < E; e++) {
            const double c = (double)a->counts[i * E + e];
            vio = fmax(vio, fabs(c - ideal) / ideal);
            dead += c == 0.0;
        }
        load[0] += vio / (double)a->nmoe;
        load[1] += dead / (double)a->nmoe;
    }
}

/* Guo et al.'s automatic scaling, at the first training step after its forward: from L_o and
 * L_v averaged over the MoE layers and the ranks (so every rank sets the same weights), logged.
 * Collective on dp. */
static tess_status guo_autoscale(moe_app *a, const tess_group *dp) {
    tess_nn_moe_aux aux;
    tess_nn_moe_stack_aux(a->stack, &aux);
    double l[2] = {aux.o / (double)a->nmoe, aux.v / (double)a->nmoe};
    TESS_CHECK(tess_par_allreduce_f64(dp, l, 2, TESS_PAR_MEAN));
    TESS_CHECK(tess_nn_moe_stack_guo_autoscale(a->stack, l[0], l[1]));
    double wo, wv;
    tess_nn_moe_stack_guo_weights(a->stack, &wo, &wv);
    tess_log_info("moe: Guo et al.'s weights scaled at the first step: lambda_ortho %g (L_o %.3g, "
                  "target %g), lambda_var %g (L_v %.3g, target %g), kept for the run",
                  wo, l[0], a->moe.lambda_o, wv, l[1], a->moe.lambda_v);
    return TESS_OK;
}

/* One optimizer step on sequences [cursor, cursor + global_B) of the training stream. */
static tess_status moe_step(tess_run *run, void *ctx, int64_t step, tess_run_step_out *out) {
    moe_app *a = ctx;
    TESS_REQUIRE(!a->eval_only, TESS_ERR_CONFIG,
                 "run.mode = eval: no checkpoint was restored (ckpt.resume = %s, ckpt.dir = '%s')",
                 tess_config_string(tess_run_config(run), "ckpt.resume"),
                 tess_config_string(tess_run_config(run), "ckpt.dir"));
    const tess_group *dp = tess_run_group(run);
    const int64_t cursor = out->data_cursor, done = step + 1, steps = a->sched.total_steps;
    const bool log = done % a->log_every == 0 || done == steps;
    TESS_CHECK(tess_par_agree(dp, moe_source_batch(&a->src, MOE_SPLIT_TRAIN,
                                                   cursor + dp->rank * a->b, a->b, a->ids,
                                                   a->targets, NULL)));
    tess_registry_zero_grads(a->reg);
    tess_nn_moe_stack_set_step(a->stack, true, (uint64_t)step,
                               (cursor + dp->rank * a->b) * a->mc.T);
    const double ce = tess_tfm_forward(a->model, a->ids, a->targets, a->b);
    if (tess_nn_moe_stack_guo_pending(a->stack)) TESS_CHECK(guo_autoscale(a, dp));
    tess_nn_moe_aux aux;
    tess_nn_moe_stack_aux(a->stack, &aux);
    tess_nn_moe_stack_set_loss_scale(a->stack, 1.0f);
    tess_tfm_backward(a->model, 1.0f);
    TESS_CHECK(tess_nn_moe_stack_status(a->stack));
    TESS_CHECK(tess_gradsync_finish(a->sync, NULL));
    /* L_o is measured on logged steps whatever lambda_ortho is (NAN for top_k = 1) */
    double lo = aux.o;
    if (log && a->moe.lambda_o <= 0) {
        lo = 0.0;
        for (int64_t i = 0; i < a->nmoe; i++) lo += tess_nn_moe_stack_ortho(a->stack, i);
    }
    /* the share of the wall time since the last row spent in the expert exchanges */
    const double now = log ? tess_timer_now() : 0.0;
    double v[10] = {ce, aux.total, aux.lb, aux.z, aux.sp, aux.cp, lo,
                    a->moe.E >= 2 ? aux.v : NAN, aux.dropped,
                    log ? tess_nn_moe_stack_exchange_seconds(a->stack, true, NULL) /
                              (now - a->t_log)
                        : 0.0};
    TESS_CHECK(tess_par_allreduce_f64(dp, v, 10, TESS_PAR_MEAN));
    if (a->moe.bias_balance || a->moe.cp_identity || log) TESS_CHECK(global_counts(a, dp));
    if (a->moe.bias_balance) update_biases(a);
    if (a->moe.cp_identity) update_coocs(a);
    if (isnan(a->first_loss)) a->first_loss = v[0];
    a->loss = v[0];
    double norm;
    const double lr = tess_sched_lr(&a->sched, step);
    bool skip;
    TESS_CHECK(tess_clip_grad_norm(a->reg, a->clip, dp, &norm));
    TESS_CHECK(tess_guard_check(&a->guard, step, v[0] + v[1], norm, &skip));
    if (!skip) tess_adamw_step(a->opt, (float)lr);
    a->steps_run++;

    const double tokens = (double)(a->global_B * a->mc.T);
    if (log) {
        const int64_t since = done % a->log_every ? done % a->log_every : a->log_every;
        double load[2];
        batch_load(a, tokens, load);
        const double row[TRAIN_COLS] = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                                        load[0], load[1], lr, norm,
                                        tokens * (double)since / (now - a->t_log), v[9]};
        a->t_log = now;
        TESS_CHECK(tess_run_metrics_row(run, a->train_csv, row));
    }
    if (done % a->eval_every == 0 || done == steps) TESS_CHECK(evaluate(run, a, dp));
    *out = (tess_run_step_out){.done = done == steps, .loss = v[0], .items = tokens,
                               .position = NAN, .data_cursor = cursor + a->global_B};
    return TESS_OK;
}

/* run.mode = eval, after the driver restored the checkpoint: one evaluation (stamped with its
 * step), then the run's length set to that step, so that the driver runs no step and writes no
 * checkpoint. Collective on the run's group. */
static tess_status moe_restored(tess_run *run, void *ctx) {
    moe_app *a = ctx;
    if (!a->eval_only) return TESS_OK;
    const int64_t at = tess_run_start_step(run);
    TESS_CHECK(evaluate(run, a, tess_run_group(run)));
    tess_log_info("moe: eval of the checkpoint at step %lld on %lld held-out sequences: loss "
                  "%.6g (perplexity %.4g), unigram baseline %.4g",
                  (long long)at, (long long)a->eval_batch, a->eval_loss, exp(a->eval_loss),
                  a->unigram_loss);
    tess_run_set_total(run, (double)at, at);
    return TESS_OK;
}

static tess_status moe_finish(tess_run *run, void *ctx) {
    moe_app *a = ctx;
    const double seconds = tess_timer_elapsed(tess_run_timers(run),
                                              tess_timer_get(tess_run_timers(run), "step"));
    tess_log_info("moe: loss %.4g -> %.4g; held-out loss %.4g (perplexity %.2f) vs unigram "
                  "baseline %.4g; %lld steps in %.1f s (%.0f tok/s on %d ranks, %lld skipped)",
                  a->first_loss, a->loss, a->eval_loss, exp(a->eval_loss), a->unigram_loss,
                  (long long)a->steps_run, seconds,
                  (double)(a->steps_run * a->global_B * a->mc.T) / seconds,
                  tess_run_group(run)->size, (long long)a->guard.skipped);
    return TESS_OK;
}

static const tess_run_app moe_run_app = {
    .name = "moe", .unit = "step", .rate_unit = "tok", .default_dir = "runs/moe",
    .sections = sections, .nsections = sizeof sections / sizeof sections[0],
    .run_opts = run_opts, .nrun_opts = sizeof run_opts / sizeof run_opts[0],
    .setup = moe_setup, .restored = moe_restored, .step = moe_step, .finish = moe_finish,
    .destroy = moe_destroy};

int main(int argc, char **argv) {
    moe_app app = {0};
    return tess_run_main(&moe_run_app, &app, argc, argv);
}
