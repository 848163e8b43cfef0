/* data.c - the moe app's token sources (data.h). */
#include "data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par/coll.h" /* tess_par_agree */

/* successor j of token a in domain dom: a hash of (seed, dom, a, j) through Philox, counter
 * (DATA, 1000) kept apart from the sample counters */
static int32_t successor(const moe_data *d, int64_t dom, int64_t a, int64_t j) {
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 1000);
    const uint64_t idx = ((uint64_t)dom * (uint64_t)d->V + (uint64_t)a) * (uint64_t)d->branch +
                         (uint64_t)j;
    return (int32_t)(tess_rng_u64(d->key, ctr, idx) % (uint64_t)d->V);
}

/* index j of the successor picked by u in [0,1) under weights 1/(j+1) */
static int64_t pick(double u, int64_t branch) {
    double z = 0.0;
    for (int64_t j = 0; j < branch; j++) z += 1.0 / (double)(j + 1);
    double c = 0.0;
    for (int64_t j = 0; j < branch; j++) {
        c += 1.0 / ((double)(j + 1) * z);
        if (u < c) return j;
    }
    return branch - 1;
}

void moe_data_batch(const moe_data *d, int split, int64_t first, int64_t B, int32_t *ids,
                    int32_t *targets, int32_t *domain) {
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)split);
    const int64_t T = d->T, stride = T + 2;
    for (int64_t b = 0; b < B; b++) {
        const uint64_t base = (uint64_t)((first + b) * stride);
        const int64_t dom = (int64_t)(tess_rng_u64(d->key, ctr, base) % (uint64_t)d->D);
        int32_t tok = (int32_t)(tess_rng_u64(d->key, ctr, base + 1) % (uint64_t)d->V);
        for (int64_t t = 0; t < T; t++) {
            const double u = tess_rng_uniform(d->key, ctr, base + 2 + (uint64_t)t, 0.0, 1.0);
            const int32_t next = successor(d, dom, tok, pick(u, d->branch));
            ids[b * T + t] = tok;
            targets[b * T + t] = next;
            if (domain) domain[b * T + t] = (int32_t)dom;
            tok = next;
        }
    }
}

double moe_data_step_entropy(const moe_data *d) {
    double z = 0.0, h = 0.0;
    for (int64_t j = 0; j < d->branch; j++) z += 1.0 / (double)(j + 1);
    for (int64_t j = 0; j < d->branch; j++) {
        const double w = 1.0 / ((double)(j + 1) * z);
        h -= w * log(w);
    }
    return h;
}

/* Open one split's stream and check it against the model and the batch. */
static tess_status open_split(tess_tokens **r, const tess_group *g, const char *path, int64_t V,
                              int64_t T, int64_t need, const char *need_opt, tess_rng_key key) {
    const tess_tokens_opts o = {.seq_len = T, .begin_frac = 0.0, .end_frac = 1.0,
                                .shuffle = true, .key = key};
    TESS_CHECK(tess_tokens_create(r, g, path, &o));
    TESS_REQUIRE(tess_tokens_vocab_size(*r) == V, TESS_ERR_CONFIG,
                 "'%s' has vocab_size %lld, the model data.vocab = %lld: set data.vocab to the "
                 "tokenizer's vocabulary",
                 path, (long long)tess_tokens_vocab_size(*r), (long long)V);
    TESS_REQUIRE(tess_tokens_num_domains(*r) > 0, TESS_ERR_DATA,
                 "'%s' has no /domain (per-token domain labels; jobs/moe-text.sh writes them)",
                 path);
    TESS_REQUIRE(tess_tokens_num_windows(*r) >= need, TESS_ERR_CONFIG,
                 "'%s' holds %lld tokens = %lld sequences of data.seq_len + 1 = %lld, fewer than "
                 "one batch (%s = %lld)",
                 path, (long long)tess_tokens_count(*r), (long long)tess_tokens_num_windows(*r),
                 (long long)(T + 1), need_opt, (long long)need);
    return TESS_OK;
}

tess_status moe_source_open_text(moe_source *s, const tess_group *g, const char *train_path,
                                 const char *eval_path, int64_t V, int64_t T, int64_t rows,
                                 int64_t batch, int64_t eval_batch, tess_rng_key key) {
    *s = (moe_source){.kind = MOE_SOURCE_TEXT, .rows = rows};
    s->syn.T = T, s->syn.V = V;
    TESS_CHECK(open_split(&s->file[MOE_SPLIT_TRAIN], g, train_path, V, T, batch, "train.batch",
                          key));
    /* the held-out order: a fixed key, the same whatever run.seed */
    TESS_CHECK(open_split(&s->file[MOE_SPLIT_EVAL], g, eval_path, V, T, eval_batch,
                          "train.eval_batch", (tess_rng_key){.seed = 0, .stream = 2}));
    const tess_tokens *tr = s->file[MOE_SPLIT_TRAIN], *ev = s->file[MOE_SPLIT_EVAL];
    s->D = tess_tokens_num_domains(tr);
    s->names = tess_tokens_domain_names(tr);
    TESS_REQUIRE(strcmp(s->names, tess_tokens_domain_names(ev)) == 0, TESS_ERR_CONFIG,
                 "'%s' has domains '%s', '%s' has '%s': train and eval files must come from one "
                 "corpus",
                 train_path, s->names, eval_path, tess_tokens_domain_names(ev));
    s->win = malloc((size_t)(rows * (T + 1)) * sizeof *s->win);
    s->dwin = malloc((size_t)(rows * (T + 1)) * sizeof *s->dwin);
    TESS_REQUIRE(tess_par_agree(g, s->win && s->dwin ? TESS_OK : TESS_ERR_MEM) == TESS_OK,
                 TESS_ERR_MEM, "cannot allocate %lld windows of %lld tokens", (long long)rows,
                 (long long)(T + 1));
    return TESS_OK;
}

tess_status moe_source_batch(moe_source *s, int split, int64_t first, int64_t B, int32_t *ids,
                             int32_t *targets, int32_t *domain) {
    if (s->kind == MOE_SOURCE_SYNTHETIC) {
        moe_data_batch(&s->syn, split, first, B, ids, targets, domain);
        return TESS_OK;
    }
    TESS_REQUIRE(B <= s->rows, TESS_ERR_ARG, "%lld sequences, the source holds %lld",
                 (long long)B, (long long)s->rows);
    const int64_t T = s->syn.T;
    TESS_CHECK(tess_tokens_read(s->file[split], first, B, s->win));
    if (domain) TESS_CHECK(tess_tokens_read_domains(s->file[split], first, B, s->dwin));
    for (int64_t b = 0; b < B; b++) {
        memcpy(ids + b * T, s->win + b * (T + 1), (size_t)T * sizeof *ids);
        memcpy(targets + b * T, s->win + b * (T + 1) + 1, (size_t)T * sizeof *targets);
        if (domain) memcpy(domain + b * T, s->dwin + b * (T + 1), (size_t)T * sizeof *domain);
    }
    return TESS_OK;
}

tess_status moe_source_close(moe_source *s) {
    tess_status st = TESS_OK;
    for (int i = 0; i < 2; i++) {
        const tess_status si = tess_tokens_destroy(&s->file[i]);
        if (st == TESS_OK) st = si;
    }
    free(s->win);
    free(s->dwin);
    s->win = s->dwin = NULL;
    return st;
}
