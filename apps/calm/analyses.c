/* analyses.c - the linear analyses of the pretrain mode's embeddings (docs/calm.md, "Linear
 * analyses"), at the end of the run on the DAT's parameters as the forecast leaves them:
 *
 *   animal identity from the session embeddings E_sess (one row per session; leave one
 *   session out, when every animal has two or more sessions) and from the unit embeddings
 *   E_unit (one row per neuron; 5 folds over the units by a Philox permutation keyed by
 *   run.seed), by the one-vs-rest ridge decoder of linear.h against chance -> identity.csv;
 *   PCA of the DAT's token embedding E_tok (K x d) and of the tokenizer's codebook (K x D_c,
 *   rows L2-normalised as the quantiser uses them) through the ScaLAPACK bridge -> pca.csv (the
 *   min(K - 1, columns) components the centred rows can span), plots/pca.png.
 *
 * The parameters are replicated, so every rank computes the identity decoding (cheap, not
 * collective) and the PCA runs on a grid over the run's ranks (collective). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calm.h"
#include "core/log.h"  /* tess_log_info */
#include "core/rng.h"  /* tess_rng_permutation */
#include "linear.h"    /* calm_lin_* */

enum { UNIT_FOLDS = 5 };

tess_status calm_analyses_setup(tess_run *run, calm_pretrain *p) {
    static const char *const icols[] = {"embedding", "accuracy", "chance", "rows",
                                        "classes",   "folds",    "lambda_min", "lambda_max"};
    TESS_CHECK(tess_run_metrics(run, "identity", icols, 8, false, &p->lin.id_csv));
    static const char *const pcols[] = {"component", "ev_tok_emb", "cum_tok_emb", "ev_codebook",
                                        "cum_codebook"};
    TESS_CHECK(tess_run_metrics(run, "pca", pcols, 5, false, &p->lin.pca_csv));
    static const char *const y[] = {"ev_tok_emb", "ev_codebook"}, *const y2[] = {"cum_tok_emb", "cum_codebook"};
    static const char *const yt[] = {"DAT token embedding E_tok", "tokenizer codebook (normalised rows)"},
                             *const y2t[] = {"E_tok, cumulative", "codebook, cumulative"};
    const tess_plot_spec ps = {.title = "calm: PCA of the token embeddings (explained variance)",
                               .xlabel = "principal component (rank)", .ycols = y, .ny = 2,
                               .ytitles = yt, .ylabel = "explained variance ratio",
                               .y2cols = y2, .ny2 = 2, .y2titles = y2t,
                               .y2label = "cumulative explained variance ratio"};
    TESS_CHECK(tess_run_plot(run, p->lin.pca_csv, "pca.png", &ps));
    return TESS_OK;
}

/* The rows of registry entry `name` of reg (replicated: the whole tensor on every rank). */
static const float *entry(const tess_registry *reg, const char *name, int64_t *rows, int64_t *cols) {
    const int64_t i = tess_registry_find(reg, name);
    TESS_ASSERT(i >= 0);
    const tess_registry_entry *e = tess_registry_get(reg, i);
    *rows = e->shape[0], *cols = e->shape[1];
    return tess_registry_param(reg, i);
}

/* Identity decoding of embedding `kind` (0 sessions, 1 units) into identity.csv and the log. */
static tess_status identity(tess_run *run, calm_pretrain *p, int kind, int64_t animals) {
    const char *name = kind == 0 ? "dat.sess_emb" : "dat.unit_emb";
    int64_t n = 0, d = 0;
    const float *X = entry(p->dat_reg, name, &n, &d);
    int64_t *label = malloc(sizeof(int64_t) * (size_t)(3 * n + animals));
    TESS_REQUIRE(label, TESS_ERR_MEM, "out of memory for the identity decoding");
    int64_t *fold = label + n, *perm = fold + n, *per = perm + n;
    memset(per, 0, sizeof(int64_t) * (size_t)animals);
    for (int64_t s = 0; s < p->nsess; s++) {
        per[p->sess[s].animal]++;
        if (kind == 0) label[s] = p->sess[s].animal, fold[s] = s; /* leave one session out */
        for (int64_t u = 0; kind == 1 && u < p->sess[s].N; u++) label[p->sess[s].unit0 + u] = p->sess[s].animal;
    }
    int64_t folds = kind == 0 ? n : UNIT_FOLDS;
    if (kind == 1) {
        for (int64_t i = 0; i < n; i++) perm[i] = i;
        tess_rng_permutation((tess_rng_key){(uint32_t)tess_run_seed(run), 11}, 0, perm, n);
        for (int64_t i = 0; i < n; i++) fold[perm[i]] = i % UNIT_FOLDS;
    }
    bool ok = animals >= 2 && folds >= 3 && n >= folds;
    for (int64_t a = 0; kind == 0 && a < animals; a++) ok &= per[a] >= 2;
    calm_lin_result r = {.accuracy = NAN, .chance = NAN, .lambda_min = NAN, .lambda_max = NAN};
    tess_status st = ok ? calm_lin_identity(X, n, d, label, animals, fold, folds, &r) : TESS_OK;
    free(label);
    TESS_CHECK(st);
    const double row[8] = {(double)kind, r.accuracy, r.chance, (double)n, (double)animals,
                           (double)folds, r.lambda_min, r.lambda_max};
    TESS_CHECK(tess_run_metrics_row(run, p->lin.id_csv, row));
    if (!ok)
        tess_log_info("linear analyses: animal identity from %s embeddings not decoded: it needs "
                      "2 or more animals%s (%lld animals, %lld %s)",
                      kind == 0 ? "session" : "unit",
                      kind == 0 ? ", each with 2 or more sessions" : "", (long long)animals,
                      (long long)n, kind == 0 ? "sessions" : "units");
    else
        tess_log_info("linear analyses: animal identity from %s embeddings (%lld rows, %lld "
                      "animals, %s): accuracy %.3f, chance %.3f (relative penalties %g-%g)",
                      kind == 0 ? "session" : "unit", (long long)n, (long long)animals,
                      kind == 0 ? "leave one session out" : "5 folds over the units", r.accuracy,
                      r.chance, r.lambda_min, r.lambda_max);
    return TESS_OK;
}

tess_status calm_analyses_finish(tess_run *run, calm_pretrain *p) {
    const tess_group *g = tess_run_group(run);
    const int64_t animals = p->sess[p->nsess - 1].animal + 1;
    TESS_CHECK(identity(run, p, 0, animals));
    TESS_CHECK(identity(run, p, 1, animals));
    int64_t K = 0, d = 0, Kc = 0, Dc = 0;
    const float *E = entry(p->dat_reg, "dat.tok_emb", &K, &d);
    const float *C = entry(p->tok_reg, "tok.codebook", &Kc, &Dc);
    /* centred, K rows span at most K - 1 dimensions: the components written */
    const int64_t k1 = K - 1 < d ? K - 1 : d, k2 = Kc - 1 < Dc ? Kc - 1 : Dc, k = k1 > k2 ? k1 : k2;
    double *ev = malloc(sizeof(double) * (size_t)((K < d ? K : d) + (Kc < Dc ? Kc : Dc)));
    float *cn = malloc(sizeof(float) * (size_t)(Kc * Dc));
    if (!ev || !cn) free(ev), free(cn);
    TESS_REQUIRE(ev && cn, TESS_ERR_MEM, "out of memory for the PCA");
    for (int64_t i = 0; i < Kc; i++) { /* the codebook rows as the quantiser uses them */
        double nrm = 0.0;
        for (int64_t j = 0; j < Dc; j++) nrm += (double)C[i * Dc + j] * C[i * Dc + j];
        for (int64_t j = 0; j < Dc; j++) cn[i * Dc + j] = (float)(C[i * Dc + j] / (sqrt(nrm) + 1e-12));
    }
    tess_status st = calm_lin_pca(g, E, K, d, ev);
    const int64_t o = K < d ? K : d; /* the codebook's ratios in ev */
    if (st == TESS_OK) st = calm_lin_pca(g, cn, Kc, Dc, ev + o);
    double cum[2] = {0.0, 0.0};
    int64_t c90[2] = {1, 1}; /* components explaining 90 % */
    for (int64_t i = 0; st == TESS_OK && i < k; i++) {
        double row[5] = {(double)(i + 1), NAN, NAN, NAN, NAN};
        for (int t = 0; t < 2; t++) {
            if (i >= (t ? k2 : k1)) continue;
            cum[t] += ev[(t ? o : 0) + i];
            row[1 + 2 * t] = ev[(t ? o : 0) + i], row[2 + 2 * t] = cum[t];
            if (cum[t] < 0.9) c90[t] = i + 2;
        }
        st = tess_run_metrics_row(run, p->lin.pca_csv, row);
    }
    if (st == TESS_OK)
        tess_log_info("linear analyses: PCA of the token embedding E_tok (%lld x %lld): the first "
                      "3 components explain %.3f, %.3f, %.3f, %lld components 90 %%; of the "
                      "codebook (%lld x %lld): %.3f, %.3f, %.3f, %lld components 90 %%",
                      (long long)K, (long long)d, ev[0], ev[1], ev[2], (long long)c90[0],
                      (long long)Kc, (long long)Dc, ev[o], ev[o + 1], ev[o + 2],
                      (long long)c90[1]);
    free(ev), free(cn);
    TESS_CHECK(st);
    return TESS_OK;
}
