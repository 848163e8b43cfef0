/* zo.c - the zero-order optimizer for Markovian noise (see zo.h). */
#include "optim/zo.h"

#include <Random123/philox.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par/coll.h"   /* tess_par_allreduce_f64 */
#include "par/layout.h" /* tess_par_block_range, tess_layout_kind_name */

static const double two_pi = 6.283185307179586476925286766559;
static const double two_m53 = 1.0 / 9007199254740992.0; /* 2^-53 */

/* One contiguous run of x: local elements [local_off, local_off + n) are global coordinates
 * [global_first, global_first + n); in registry mode `param` is the entry's float view. */
typedef struct {
    int64_t local_off, n, global_first;
    float *param;
    bool dup; /* replicated over the shard group: counted once in norms (by shard rank 0) */
} zo_seg;

struct tess_zo {
    tess_zo_config cfg;
    int64_t d, first, n; /* global dimension; local range (first is the first segment's) */
    const tess_group *eval, *shard;
    int erank, esize, ssize;
    int64_t max_k;
    double *x, *xbar, *e, *p, *g; /* (n) each; xbar NULL unless averaging */
    double *vals;  /* (3 max_k) per active sample: its values (and sharded: its squared norm) */
    double *parts; /* (2 TESS_ZO_MAX_PARTIALS) partial sums of one sample's evaluations */
    zo_seg *segs;
    int64_t nsegs;
    bool registry;
    int64_t cnt[TESS_ZO_NCNT];
    double sca[TESS_ZO_NSCA];
};

/* ---- pure parts ---------------------------------------------------------------------------- */

tess_status tess_zo_config_check(const tess_zo_config *c) {
    TESS_REQUIRE(c, TESS_ERR_ARG, "config is NULL");
    TESS_REQUIRE(c->estimator >= TESS_ZO_EST_TWO_POINT && c->estimator <= TESS_ZO_EST_FIRST_ORDER,
                 TESS_ERR_CONFIG, "zo: unknown estimator %d", (int)c->estimator);
    TESS_REQUIRE(c->dir >= TESS_ZO_DIR_SPHERE && c->dir <= TESS_ZO_DIR_RADEMACHER,
                 TESS_ERR_CONFIG, "zo: unknown direction distribution %d", (int)c->dir);
    TESS_REQUIRE(c->batching == TESS_ZO_BATCH_MLMC || c->batching == TESS_ZO_BATCH_FIXED,
                 TESS_ERR_CONFIG, "zo: unknown batching %d", (int)c->batching);
    TESS_REQUIRE(c->baseline == TESS_ZO_BASELINE_NONE || c->baseline == TESS_ZO_BASELINE_RESIDUAL,
                 TESS_ERR_CONFIG, "zo: unknown one-point baseline %d", (int)c->baseline);
    TESS_REQUIRE(c->rule >= TESS_ZO_RULE_CONSTANT && c->rule <= TESS_ZO_RULE_DECAY,
                 TESS_ERR_CONFIG, "zo: unknown step rule %d", (int)c->rule);
    TESS_REQUIRE(isfinite(c->gamma) && c->gamma > 0.0, TESS_ERR_CONFIG,
                 "zo: smoothing radius gamma = %g must be > 0", c->gamma);
    TESS_REQUIRE(c->batch >= 1, TESS_ERR_CONFIG, "zo: batch B = %lld must be >= 1",
                 (long long)c->batch);
    TESS_REQUIRE(c->cap >= 1, TESS_ERR_CONFIG, "zo: batch cap M = %lld must be >= 1",
                 (long long)c->cap);
    TESS_REQUIRE(isfinite(c->eta) && c->eta > 0.0, TESS_ERR_CONFIG,
                 "zo: step size eta = %g must be > 0", c->eta);
    TESS_REQUIRE(c->rule == TESS_ZO_RULE_CONSTANT || (isfinite(c->mu) && c->mu > 0.0),
                 TESS_ERR_CONFIG, "zo: the switch and decay rules need mu > 0, got mu = %g",
                 c->mu);
    TESS_REQUIRE(c->k_switch >= 0, TESS_ERR_CONFIG, "zo: k_switch = %lld must be >= 0",
                 (long long)c->k_switch);
    TESS_REQUIRE(isfinite(c->radius) && c->radius >= 0.0, TESS_ERR_CONFIG,
                 "zo: projection radius = %g must be >= 0 (0: no projection)", c->radius);
    int64_t levels = 1;
    while (c->batching == TESS_ZO_BATCH_MLMC && levels * 2 <= c->cap && levels < ((int64_t)1 << 21))
        levels *= 2;
    TESS_REQUIRE(c->batch < ((int64_t)1 << 22) / levels, TESS_ERR_CONFIG,
                 "zo: batch B = %lld times the largest level %lld must be below 2^22 samples",
                 (long long)c->batch, (long long)levels);
    return TESS_OK;
}

static int trailing_zeros(uint64_t b) {
    int n = 0;
    while (n < 64 && !(b & ((uint64_t)1 << n))) n++;
    return n;
}

tess_zo_plan tess_zo_plan_make(tess_zo_batching b, uint64_t bits, int64_t batch, int64_t cap) {
    tess_zo_plan p = {.J = 0, .K = batch, .first_active = 0, .first_plus = 0,
                      .inv_batch = 1.0 / (double)batch};
    if (b != TESS_ZO_BATCH_MLMC) return p;
    p.J = 1 + trailing_zeros(bits);
    if (p.J < 62 && ((int64_t)1 << p.J) <= cap) {
        p.K = ((int64_t)1 << p.J) * batch;
        p.first_active = batch;
        p.first_plus = ((int64_t)1 << (p.J - 1)) * batch;
    }
    return p;
}

double tess_zo_plan_weight(const tess_zo_plan *p, int64_t i) {
    TESS_ASSERT(i >= 0 && i < p->K);
    if (i < p->first_active) return 0.0;
    if (i < p->first_plus) return -p->inv_batch;
    return p->inv_batch;
}

uint64_t tess_zo_level_bits(tess_rng_key key, int64_t k) {
    return tess_rng_u64(key, tess_rng_ctr(TESS_RNG_PURPOSE_ZO, (uint64_t)k), TESS_ZO_LEVEL_INDEX);
}

double tess_zo_step_size(const tess_zo_config *c, int64_t k) {
    double eta = c->eta;
    switch (c->rule) {
    case TESS_ZO_RULE_CONSTANT: break;
    case TESS_ZO_RULE_SWITCH:
        if (k >= c->k_switch) {
            double k0 = ceil(2.0 / (c->mu * c->eta));
            eta = fmin(eta, 2.0 / (c->mu * ((double)(k - c->k_switch) + k0)));
        }
        break;
    case TESS_ZO_RULE_DECAY: eta = fmin(eta, 2.0 / (c->mu * (double)(k + 1))); break;
    }
    return eta;
}

static void philox_block(tess_rng_key key, uint64_t ctr, uint64_t block, uint32_t out[4]) {
    philox4x32_ctr_t cb = {{(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)ctr,
                            (uint32_t)(ctr >> 32)}};
    philox4x32_key_t kb = {{key.seed, key.stream}};
    philox4x32_ctr_t r = philox4x32(cb, kb);
    memcpy(out, r.v, sizeof r.v);
}

/* Box-Muller exactly as core/rng.c, so u equals tess_rng_normal element by element. */
static void box_muller(const uint32_t w[4], double z[2]) {
    uint64_t h0 = (uint64_t)w[0] | ((uint64_t)w[1] << 32);
    uint64_t h1 = (uint64_t)w[2] | ((uint64_t)w[3] << 32);
    double u1 = (double)((h0 >> 11) + 1) * two_m53;
    double u2 = (double)(h1 >> 11) * two_m53;
    double r = sqrt(-2.0 * log(u1));
    z[0] = r * cos(two_pi * u2);
    z[1] = r * sin(two_pi * u2);
}

void tess_zo_direction(tess_rng_key key, tess_zo_dir dir, int64_t k, int64_t i, int64_t first,
                       int64_t n, double *u) {
    TESS_ASSERT(first >= 0 && n >= 0 && first + n <= TESS_ZO_MAX_DIM);
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_ZO, (uint64_t)k);
    const uint64_t base = ((uint64_t)i << TESS_ZO_SAMPLE_SHIFT) + (uint64_t)first;
    uint32_t w[4];
    if (dir == TESS_ZO_DIR_RADEMACHER) {
        for (int64_t j = 0; j < n; j++) {
            uint64_t idx = base + (uint64_t)j;
            if (j == 0 || (idx & 127) == 0) philox_block(key, ctr, idx >> 7, w);
            uint32_t bit = (w[(idx & 127) >> 5] >> (idx & 31)) & 1u;
            u[j] = bit ? 1.0 : -1.0;
        }
        return;
    }
    double z[2];
    int64_t j = 0;
    if (n > 0 && (base & 1)) { /* odd start: the sine half of the first block */
        philox_block(key, ctr, base >> 1, w);
        box_muller(w, z);
        u[j++] = z[1];
    }
    for (; j + 1 < n; j += 2) {
        philox_block(key, ctr, (base + (uint64_t)j) >> 1, w);
        box_muller(w, z);
        u[j] = z[0];
        u[j + 1] = z[1];
    }
    if (j < n) {
        philox_block(key, ctr, (base + (uint64_t)j) >> 1, w);
        box_muller(w, z);
        u[j] = z[0];
    }
}

/* ---- setup --------------------------------------------------------------------------------- */

static tess_status zo_alloc(tess_zo *z, const tess_zo_config *cfg, int64_t d,
                            const tess_group *eval, const tess_group *shard) {
    z->cfg = *cfg;
    z->d = d;
    z->eval = eval;
    z->shard = shard;
    z->erank = eval ? eval->rank : 0;
    z->esize = eval ? eval->size : 1;
    z->ssize = shard ? shard->size : 1;
    z->max_k = cfg->batch;
    if (cfg->batching == TESS_ZO_BATCH_MLMC) {
        int64_t levels = 1;
        while (levels * 2 <= cfg->cap) levels *= 2;
        z->max_k = levels * cfg->batch;
    }
    const size_t nb = (size_t)(z->n > 0 ? z->n : 1) * sizeof(double);
    z->x = calloc(1, nb);
    z->e = calloc(1, nb);
    z->p = calloc(1, nb);
    z->g = calloc(1, nb);
    z->xbar = cfg->average ? calloc(1, nb) : NULL;
    z->vals = calloc((size_t)(3 * z->max_k), sizeof(double));
    z->parts = calloc((size_t)(2 * TESS_ZO_MAX_PARTIALS), sizeof(double));
    TESS_REQUIRE(z->x && z->e && z->p && z->g && (z->xbar || !cfg->average) && z->vals &&
                     z->parts,
                 TESS_ERR_MEM, "zo: cannot allocate 5 x %lld doubles of state", (long long)z->n);
    return TESS_OK;
}

tess_status tess_zo_create(tess_zo **zo, const tess_zo_config *cfg, int64_t d,
                           const tess_group *eval, const tess_group *shard) {
    TESS_REQUIRE(zo, TESS_ERR_ARG, "zo is NULL");
    *zo = NULL;
    TESS_CHECK(tess_zo_config_check(cfg));
    TESS_REQUIRE(d >= 1 && d <= TESS_ZO_MAX_DIM, TESS_ERR_ARG,
                 "zo: dimension d = %lld must be in 1..2^40", (long long)d);
    TESS_REQUIRE(cfg->estimator != TESS_ZO_EST_FIRST_ORDER || !shard || shard->size == 1,
                 TESS_ERR_ARG, "zo: the first-order baseline needs a replicated x, not %d shards",
                 shard ? shard->size : 1);
    tess_zo *z = calloc(1, sizeof *z);
    TESS_REQUIRE(z, TESS_ERR_MEM, "zo: out of memory");
    int64_t lo = 0, hi = d;
    if (shard) tess_par_block_range(d, shard->size, shard->rank, &lo, &hi);
    z->first = lo;
    z->n = hi - lo;
    z->segs = calloc(1, sizeof *z->segs);
    tess_status s = z->segs ? zo_alloc(z, cfg, d, eval, shard) : TESS_ERR_MEM;
    if (s != TESS_OK) {
        tess_zo_destroy(&z);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "zo: setup failed");
    }
    z->segs[0] = (zo_seg){.local_off = 0, .n = z->n, .global_first = lo, .param = NULL};
    z->nsegs = 1;
    *zo = z;
    return TESS_OK;
}

tess_status tess_zo_create_registry(tess_zo **zo, const tess_zo_config *cfg, tess_registry *reg,
                                    const tess_group *eval, const tess_group *shard) {
    TESS_REQUIRE(zo && reg, TESS_ERR_ARG, "NULL argument");
    *zo = NULL;
    TESS_CHECK(tess_zo_config_check(cfg));
    TESS_REQUIRE(cfg->estimator != TESS_ZO_EST_FIRST_ORDER, TESS_ERR_ARG,
                 "zo: registry mode is zero-order only (estimator first_order)");
    TESS_REQUIRE(tess_registry_is_final(reg), TESS_ERR_ARG, "zo: registry not finalized");
    const int64_t count = tess_registry_count(reg);
    int64_t ntrain = 0, d = 0, nloc = 0;
    for (int64_t i = 0; i < count; i++) {
        const tess_registry_entry *en = tess_registry_get(reg, i);
        if (!en->trainable) continue;
        TESS_REQUIRE(en->layout.kind == TESS_LAYOUT_REPLICATED ||
                         (en->layout.kind == TESS_LAYOUT_SHARDED && en->layout.dim == 0),
                     TESS_ERR_ARG,
                     "zo: entry '%s' has layout %s%s; registry mode takes replicated entries or "
                     "entries sharded along dimension 0",
                     en->name, tess_layout_kind_name(en->layout.kind),
                     en->layout.kind == TESS_LAYOUT_SHARDED ? " (not along dimension 0)" : "");
        ntrain++;
        d += en->global_count;
        nloc += en->local_count;
    }
    TESS_REQUIRE(ntrain > 0, TESS_ERR_ARG, "zo: the registry has no trainable entry");
    TESS_REQUIRE(d <= TESS_ZO_MAX_DIM, TESS_ERR_ARG, "zo: %lld parameters exceed 2^40",
                 (long long)d);
    tess_zo *z = calloc(1, sizeof *z);
    TESS_REQUIRE(z, TESS_ERR_MEM, "zo: out of memory");
    z->n = nloc;
    z->registry = true;
    z->segs = calloc((size_t)ntrain, sizeof *z->segs);
    tess_status s = z->segs ? zo_alloc(z, cfg, d, eval, shard) : TESS_ERR_MEM;
    if (s != TESS_OK) {
        tess_zo_destroy(&z);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "zo: registry setup failed");
    }
    int64_t gbase = 0, loff = 0;
    for (int64_t i = 0; i < count; i++) {
        const tess_registry_entry *en = tess_registry_get(reg, i);
        if (!en->trainable) continue;
        int64_t row = en->global_count / en->shape[0]; /* elements per index of dimension 0 */
        z->segs[z->nsegs++] = (zo_seg){.local_off = loff, .n = en->local_count,
                                       .global_first = gbase + en->global_offset[0] * row,
                                       .param = tess_registry_param(reg, i),
                                       .dup = en->layout.kind == TESS_LAYOUT_REPLICATED};
        gbase += en->global_count;
        loff += en->local_count;
    }
    z->first = z->segs[0].global_first;
    *zo = z;
    return TESS_OK;
}

void tess_zo_destroy(tess_zo **zo) {
    if (!zo || !*zo) return;
    tess_zo *z = *zo;
    free(z->x);
    free(z->xbar);
    free(z->e);
    free(z->p);
    free(z->g);
    free(z->vals);
    free(z->parts);
    free(z->segs);
    free(z);
    *zo = NULL;
}

int64_t tess_zo_dim(const tess_zo *zo) { return zo->d; }
void tess_zo_local_range(const tess_zo *zo, int64_t *first, int64_t *n) {
    *first = zo->first;
    *n = zo->n;
}
double *tess_zo_x(tess_zo *zo) { return zo->x; }
const double *tess_zo_xbar(const tess_zo *zo) { return zo->xbar; }
int64_t *tess_zo_counters(tess_zo *zo) { return zo->cnt; }
double *tess_zo_scalars(tess_zo *zo) { return zo->sca; }

tess_status tess_zo_describe(tess_zo *zo, tess_state *st, const char *prefix) {
    TESS_REQUIRE(zo && st && prefix, TESS_ERR_ARG, "NULL argument");
    const bool sharded = zo->shard && zo->shard->size > 1;
    TESS_REQUIRE(!zo->registry || !sharded, TESS_ERR_ARG,
                 "zo '%s': registry mode over %d shards keeps x as pieces of several entries, not "
                 "one block: checkpoint the registry instead",
                 prefix, zo->shard ? zo->shard->size : 1);
    const tess_layout xl = sharded ? tess_layout_sharded(0, zo->shard->size, zo->shard->rank)
                                   : tess_layout_replicated();
    const tess_layout rep = tess_layout_replicated();
    const int64_t ncnt = TESS_ZO_NCNT, nsca = TESS_ZO_NSCA;
    const struct {
        const char *part;
        tess_dtype dtype;
        const int64_t *n;
        const tess_layout *l;
        void *data;
    } e[4] = {{"x", TESS_F64, &zo->d, &xl, zo->x},
              {"xbar", TESS_F64, &zo->d, &xl, zo->xbar},
              {"counters", TESS_I64, &ncnt, &rep, zo->cnt},
              {"scalars", TESS_F64, &nsca, &rep, zo->sca}};
    for (int k = 0; k < 4; k++) {
        if (!e[k].data) continue; /* xbar without averaging */
        char name[TESS_STATE_NAME_MAX];
        const int n = snprintf(name, sizeof name, "%s/%s", prefix, e[k].part);
        TESS_REQUIRE(n > 0 && n < (int)sizeof name, TESS_ERR_ARG,
                     "zo state '%s/%s': name longer than %d bytes", prefix, e[k].part,
                     TESS_STATE_NAME_MAX - 1);
        TESS_CHECK(tess_state_add(st, name, e[k].dtype, 1, e[k].n, e[k].l, e[k].data));
    }
    return TESS_OK;
}

/* ---- one iteration ------------------------------------------------------------------------- */

/* Raw direction of sample i of iteration k over this rank's segments into u (n). */
static void raw_direction(const tess_zo *z, int64_t k, int64_t i, double *u) {
    for (int64_t s = 0; s < z->nsegs; s++)
        tess_zo_direction(z->cfg.key, z->cfg.dir, k, i, z->segs[s].global_first, z->segs[s].n,
                          u + z->segs[s].local_off);
}

/* This rank's share of ||u||^2 over the global vector, summed in local order. */
static double local_sqnorm(const tess_zo *z, const double *u) {
    double s = 0.0;
    for (int64_t sg = 0; sg < z->nsegs; sg++) {
        if (z->segs[sg].dup && z->shard && z->shard->rank != 0) continue;
        const double *v = u + z->segs[sg].local_off;
        for (int64_t j = 0; j < z->segs[sg].n; j++) s += v[j] * v[j];
    }
    return s;
}

/* Scale the raw direction in z->e to the unit sphere, given its squared norm. */
static void normalise(tess_zo *z, double nrm2) {
    double inv = 1.0 / sqrt(nrm2);
    for (int64_t j = 0; j < z->n; j++) z->e[j] *= inv;
}

/* The estimator's coefficient c_i from the sample's values v and the one-point baseline b. */
static double coefficient(const tess_zo *z, const double *v, double b) {
    double s = z->cfg.dir == TESS_ZO_DIR_SPHERE ? (double)z->d : 1.0;
    if (z->cfg.estimator == TESS_ZO_EST_ONE_POINT) return s / z->cfg.gamma * (v[0] - b);
    return s / (2.0 * z->cfg.gamma) * (v[0] - v[1]);
}

/* Write x + a e into the registry's parameters (rounded to float). */
static void write_params(tess_zo *z, double a) {
    for (int64_t s = 0; s < z->nsegs; s++) {
        const zo_seg *sg = &z->segs[s];
        for (int64_t j = 0; j < sg->n; j++)
            sg->param[j] = (float)(z->x[sg->local_off + j] + a * z->e[sg->local_off + j]);
    }
}

static void read_params(tess_zo *z) {
    for (int64_t s = 0; s < z->nsegs; s++) {
        const zo_seg *sg = &z->segs[s];
        for (int64_t j = 0; j < sg->n; j++) z->x[sg->local_off + j] = (double)sg->param[j];
    }
}

static void axpy(double *y, double a, const double *x, int64_t n) {
    for (int64_t j = 0; j < n; j++) y[j] += a * x[j];
}

/* g += sum_i w_i grad F(x, Z_t) over the active samples, on every rank (no exchange). */
static void first_order(tess_zo *z, const tess_zo_objective *obj, const tess_zo_plan *pl,
                        int64_t t0) {
    for (int64_t i = pl->first_active; i < pl->K; i++) {
        obj->grad(obj->ctx, z->x, z->n, t0 + i, z->e);
        axpy(z->g, tess_zo_plan_weight(pl, i), z->e, z->n);
    }
    z->cnt[TESS_ZO_CNT_EVALS] += pl->K - pl->first_active;
}

/* The zero-order part of one iteration: g = sum_i w_i c_i e_i (file header of zo.h).
 * Per own sample: draw e (sharded sphere: one all-reduce of its squared norm), evaluate
 * (sharded: one all-reduce of the partial sums), so its values are known at once and eval rank 0
 * accumulates it without drawing e again. Then the values (and sharded norms) of all active
 * samples are exchanged over eval, and every other sample's e is drawn again, in sample order. */
static tess_status zero_order(tess_zo *z, const tess_zo_objective *obj, tess_zo_loss_fn loss,
                              void *lctx, const tess_zo_plan *pl, int64_t k, int64_t t0,
                              double *comm_bytes) {
    const tess_zo_config *c = &z->cfg;
    const int64_t a = pl->first_active, nact = pl->K - a;
    const int64_t spp = c->estimator == TESS_ZO_EST_ONE_POINT_SYM ? 2 : 1;
    const int64_t nv = c->estimator == TESS_ZO_EST_ONE_POINT ? 1 : 2;
    const int64_t np = z->registry ? 1 : obj->npartials;
    const bool sphere = c->dir == TESS_ZO_DIR_SPHERE;
    const bool shard_norm = sphere && z->ssize > 1;          /* the norm needs a reduction */
    const bool shard_parts = !z->registry && z->ssize > 1;   /* the values need a reduction */
    const int64_t nx = nv + (shard_norm ? 1 : 0);            /* exchanged scalars per sample */
    const bool inline_acc = z->erank == 0;
    int64_t lo, hi;
    tess_par_block_range(nact, z->esize, z->erank, &lo, &hi);

    memset(z->vals, 0, (size_t)(nact * nx) * sizeof(double));
    double base = z->sca[TESS_ZO_SCA_BASELINE];
    bool has_base = z->cnt[TESS_ZO_CNT_HAS_BASE] != 0;
    for (int64_t q = lo; q < hi; q++) {
        const int64_t i = a + q;
        double *v = z->vals + q * nx;
        raw_direction(z, k, i, z->e);
        if (sphere) {
            double nrm2 = local_sqnorm(z, z->e);
            if (shard_norm) {
                TESS_CHECK(tess_par_allreduce_f64(z->shard, &nrm2, 1, TESS_PAR_SUM));
                *comm_bytes += sizeof(double);
                v[nv] = nrm2;
            }
            normalise(z, nrm2);
        }
        for (int64_t s = 0; s < nv; s++) {
            const double sign = s == 0 ? 1.0 : -1.0;
            const int64_t t = t0 + i * spp + (spp == 2 ? s : 0);
            if (z->registry) {
                write_params(z, sign * c->gamma);
                v[s] = loss(lctx, t);
                continue;
            }
            for (int64_t j = 0; j < z->n; j++) z->p[j] = z->x[j] + sign * c->gamma * z->e[j];
            obj->partial(obj->ctx, z->p, z->first, z->n, t, z->parts + s * np);
        }
        if (!z->registry) {
            if (shard_parts) {
                TESS_CHECK(tess_par_allreduce_f64(z->shard, z->parts, nv * np, TESS_PAR_SUM));
                *comm_bytes += (double)(nv * np) * sizeof(double);
            }
            for (int64_t s = 0; s < nv; s++) {
                const int64_t t = t0 + i * spp + (spp == 2 ? s : 0);
                const double *sum = z->parts + s * np;
                v[s] = obj->finish ? obj->finish(obj->ctx, sum, t) : sum[0];
            }
        }
        if (inline_acc) {
            double cq = coefficient(z, v, has_base ? base : 0.0);
            base = v[0];
            has_base = true;
            axpy(z->g, tess_zo_plan_weight(pl, i) * cq, z->e, z->n);
        }
    }
    if (z->esize > 1) {
        /* each entry has exactly one non-zero contributor: the sum is exact in any order */
        TESS_CHECK(tess_par_allreduce_f64(z->eval, z->vals, nact * nx, TESS_PAR_SUM));
        *comm_bytes += (double)(nact * nx) * sizeof(double);
    }
    base = z->sca[TESS_ZO_SCA_BASELINE];
    has_base = z->cnt[TESS_ZO_CNT_HAS_BASE] != 0;
    for (int64_t q = 0; q < nact; q++) {
        const int64_t i = a + q;
        const double *v = z->vals + q * nx;
        double cq = coefficient(z, v, has_base ? base : 0.0);
        base = v[0];
        has_base = true;
        if (inline_acc && q >= lo && q < hi) continue;
        raw_direction(z, k, i, z->e);
        if (sphere) normalise(z, shard_norm ? v[nv] : local_sqnorm(z, z->e));
        axpy(z->g, tess_zo_plan_weight(pl, i) * cq, z->e, z->n);
    }
    z->sca[TESS_ZO_SCA_BASELINE] = base;
    z->cnt[TESS_ZO_CNT_HAS_BASE] = 1;
    z->cnt[TESS_ZO_CNT_EVALS] += nact * nv;
    return TESS_OK;
}

static tess_status step_impl(tess_zo *z, const tess_zo_objective *obj, tess_zo_loss_fn loss,
                             void *lctx, tess_zo_step_info *info) {
    const tess_zo_config *c = &z->cfg;
    const int64_t k = z->cnt[TESS_ZO_CNT_STEP], t0 = z->cnt[TESS_ZO_CNT_T];
    const int64_t evals0 = z->cnt[TESS_ZO_CNT_EVALS];
    const uint64_t bits = c->batching == TESS_ZO_BATCH_MLMC ? tess_zo_level_bits(c->key, k) : 0;
    const tess_zo_plan pl = tess_zo_plan_make(c->batching, bits, c->batch, c->cap);
    const int64_t steps = pl.K * (c->estimator == TESS_ZO_EST_ONE_POINT_SYM ? 2 : 1);
    double comm = 0.0;
    if (obj && obj->prepare) obj->prepare(obj->ctx, t0, steps);
    if (z->registry) read_params(z);
    memset(z->g, 0, (size_t)z->n * sizeof(double));
    if (c->estimator == TESS_ZO_EST_FIRST_ORDER)
        first_order(z, obj, &pl, t0);
    else
        TESS_CHECK(zero_order(z, obj, loss, lctx, &pl, k, t0, &comm));

    const double eta = tess_zo_step_size(c, k);
    axpy(z->x, -eta, z->g, z->n);
    if (c->radius > 0.0) {
        double nrm2 = local_sqnorm(z, z->x);
        if (z->ssize > 1) {
            TESS_CHECK(tess_par_allreduce_f64(z->shard, &nrm2, 1, TESS_PAR_SUM));
            comm += sizeof(double);
        }
        if (nrm2 > c->radius * c->radius) {
            double f = c->radius / sqrt(nrm2);
            for (int64_t j = 0; j < z->n; j++) z->x[j] *= f;
        }
    }
    if (z->xbar) {
        double w = (double)(k + 1);
        z->sca[TESS_ZO_SCA_AVG_WEIGHT] += w;
        double r = w / z->sca[TESS_ZO_SCA_AVG_WEIGHT];
        for (int64_t j = 0; j < z->n; j++) z->xbar[j] += r * (z->x[j] - z->xbar[j]);
    }
    if (z->registry) {
        for (int64_t s = 0; s < z->nsegs; s++) {
            const zo_seg *sg = &z->segs[s];
            for (int64_t j = 0; j < sg->n; j++) sg->param[j] = (float)z->x[sg->local_off + j];
        }
    }
    z->cnt[TESS_ZO_CNT_STEP] = k + 1;
    z->cnt[TESS_ZO_CNT_T] = t0 + steps;
    if (info)
        *info = (tess_zo_step_info){.plan = pl, .samples = steps,
                                    .evals = z->cnt[TESS_ZO_CNT_EVALS] - evals0, .eta = eta,
                                    .comm_bytes = comm};
    return TESS_OK;
}

tess_status tess_zo_step(tess_zo *zo, const tess_zo_objective *obj, tess_zo_step_info *info) {
    TESS_REQUIRE(zo && obj, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(!zo->registry, TESS_ERR_ARG,
                 "zo: this optimizer is in registry mode: use tess_zo_step_registry");
    if (zo->cfg.estimator == TESS_ZO_EST_FIRST_ORDER) {
        TESS_REQUIRE(obj->grad, TESS_ERR_ARG, "zo: the first_order estimator needs obj->grad");
    } else {
        TESS_REQUIRE(obj->partial, TESS_ERR_ARG, "zo: the objective has no partial callback");
        TESS_REQUIRE(obj->npartials >= 1 && obj->npartials <= TESS_ZO_MAX_PARTIALS, TESS_ERR_ARG,
                     "zo: npartials = %lld must be in 1..%d", (long long)obj->npartials,
                     TESS_ZO_MAX_PARTIALS);
    }
    TESS_CHECK(step_impl(zo, obj, NULL, NULL, info));
    return TESS_OK;
}

tess_status tess_zo_step_registry(tess_zo *zo, tess_zo_loss_fn loss, void *ctx,
                                  tess_zo_step_info *info) {
    TESS_REQUIRE(zo && loss, TESS_ERR_ARG, "NULL argument");
    TESS_REQUIRE(zo->registry, TESS_ERR_ARG,
                 "zo: not in registry mode (made by tess_zo_create): use tess_zo_step");
    TESS_CHECK(step_impl(zo, NULL, loss, ctx, info));
    return TESS_OK;
}
