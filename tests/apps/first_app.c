/* first_app.c - the complete example app of docs/apps.md, compiled and run by the test suite
 * (tests/apps/CMakeLists.txt: training, rank-count invariance, stop and bitwise resume); the page
 * quotes the block below verbatim (test apps_doc_example).
 */
#include <math.h>
#include <stdlib.h>

#include "core/rng.h"     /* tess_rng_* */
#include "nn/registry.h"  /* tess_registry_* */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "par/coll.h"     /* tess_par_allreduce_f64 */
#include "par/gradsync.h" /* tess_gradsync_* */
#include "run/run.h"      /* tess_run_* */

/* Linear regression y = w . x + b + noise on samples drawn from Philox by global sample index,
 * trained with AdamW, data-parallel: each rank takes its share of every global batch. */
static const tess_opt model_opts[] = {
    TESS_OPT_INT("dim", 8, 1, 4096, "input dimension d"),
};
static const tess_opt train_opts[] = {
    TESS_OPT_RESUMABLE(INT, "steps", 200, 1, 1000000, "optimizer steps"),
    TESS_OPT_INT("batch", 64, 1, 1 << 20, "GLOBAL batch; a multiple of the ranks"),
    TESS_OPT_REAL("lr", 0.05, 1e-6, 10.0, "AdamW learning rate"),
};
static const tess_config_section sections[] = {
    TESS_CONFIG_SECTION("model", model_opts),
    TESS_CONFIG_SECTION("train", train_opts),
};

typedef struct {
    int64_t d, steps, batch, b;  /* b: this rank's share of the batch */
    float lr;
    tess_registry *reg;          /* "w" (d), "b" (1) */
    tess_adamw *opt;
    tess_gradsync *sync;
    float *x, *y;                /* (b, d), (b) */
    int csv;
} first_app;

static tess_status setup(tess_run *run, void *ctx) {
    first_app *a = ctx;
    const tess_config *c = tess_run_config(run);
    const tess_group *g = tess_run_group(run);
    a->d = tess_config_int(c, "model.dim");
    a->steps = tess_config_int(c, "train.steps");
    a->batch = tess_config_int(c, "train.batch");
    a->lr = (float)tess_config_real(c, "train.lr");
    TESS_REQUIRE(a->batch % g->size == 0, TESS_ERR_CONFIG,
                 "train.batch = %lld must be a multiple of the number of ranks (%d)",
                 (long long)a->batch, g->size);
    a->b = a->batch / g->size;
    tess_run_set_total(run, (double)a->steps, a->steps);
    tess_run_local_from_here(run); /* options checked alike on every rank */

    const tess_layout rep = tess_layout_replicated();
    const int64_t wshape[1] = {a->d}, bshape[1] = {1};
    int64_t w;
    TESS_CHECK(tess_registry_create(&a->reg));
    TESS_CHECK(tess_registry_add(a->reg, "w", 1, wshape, &rep, &w));
    TESS_CHECK(tess_registry_add(a->reg, "b", 1, bshape, &rep, NULL));
    TESS_CHECK(tess_registry_set_init(a->reg, w, tess_init_normal(0.0, 0.1)));
    TESS_CHECK(tess_registry_finalize(a->reg));
    TESS_CHECK(tess_registry_init_params(a->reg, tess_run_seed(run)));
    const tess_adamw_config ac = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    TESS_CHECK(tess_adamw_create(&a->opt, a->reg, &ac));
    TESS_CHECK(tess_gradsync_create(&a->sync, a->reg, g, 1024));
    a->x = malloc((size_t)(a->b * a->d) * sizeof *a->x);
    a->y = malloc((size_t)a->b * sizeof *a->y);
    TESS_REQUIRE(a->x && a->y, TESS_ERR_MEM, "no memory for a batch of %lld", (long long)a->b);

    /* The checkpoint holds the parameters and AdamW's state; the driver does the rest. */
    TESS_CHECK(tess_state_add_registry(tess_run_state(run), "params", a->reg, false));
    TESS_CHECK(tess_adamw_describe(a->opt, tess_run_state(run), "optim"));
    static const char *const cols[] = {"loss"};
    TESS_CHECK(tess_run_metrics(run, "metrics", cols, 1, true, &a->csv));
    const tess_plot_spec loss_plot = {.title = "first_app: training loss", .ycols = cols, .ny = 1,
                                      .xlabel = "step (optimizer updates)",
                                      .ylabel = "loss (mean squared error)", .logy = true};
    TESS_CHECK(tess_run_plot(run, a->csv, "loss.png", &loss_plot));
    return TESS_OK;
}

/* Sample s: x ~ N(0, 1)^d, y = sum_j x_j (j + 1) / d - 0.5 + 0.01 N(0, 1). */
static void draw(const first_app *a, uint64_t seed, int64_t s, float *x, float *y) {
    const tess_rng_key key = {.seed = (uint32_t)seed, .stream = 1};
    const uint64_t ctr = tess_rng_ctr(TESS_RNG_PURPOSE_DATA, 0);
    double t = -0.5 + 0.01 * tess_rng_normal(key, ctr, (uint64_t)(s * (a->d + 1)), 0.0, 1.0);
    for (int64_t j = 0; j < a->d; j++) {
        x[j] = (float)tess_rng_normal(key, ctr, (uint64_t)(s * (a->d + 1) + 1 + j), 0.0, 1.0);
        t += x[j] * (double)(j + 1) / (double)a->d;
    }
    *y = (float)t;
}

static tess_status step(tess_run *run, void *ctx, int64_t k, tess_run_step_out *out) {
    first_app *a = ctx;
    const tess_group *g = tess_run_group(run);
    const int64_t first = out->data_cursor + g->rank * a->b; /* this rank's samples */
    float *w = tess_registry_param(a->reg, 0), *dw = tess_registry_grad(a->reg, 0);
    float *bias = tess_registry_param(a->reg, 1), *db = tess_registry_grad(a->reg, 1);
    tess_registry_zero_grads(a->reg);
    double loss = 0.0;
    for (int64_t i = 0; i < a->b; i++) { /* mean squared error over the global batch */
        float *x = a->x + i * a->d;
        draw(a, tess_run_seed(run), first + i, x, &a->y[i]);
        double r = bias[0] - a->y[i];
        for (int64_t j = 0; j < a->d; j++) r += (double)w[j] * x[j];
        loss += r * r / (double)a->b;
        const float gr = (float)(2.0 * r / (double)a->b);
        for (int64_t j = 0; j < a->d; j++) dw[j] += gr * x[j];
        db[0] += gr;
    }
    TESS_CHECK(tess_gradsync_finish(a->sync, NULL)); /* mean gradient over the ranks */
    TESS_CHECK(tess_par_allreduce_f64(g, &loss, 1, TESS_PAR_MEAN));
    tess_adamw_step(a->opt, a->lr);
    if ((k + 1) % 10 == 0) TESS_CHECK(tess_run_metrics_row(run, a->csv, &loss));
    *out = (tess_run_step_out){.done = k + 1 == a->steps, .loss = loss, .items = (double)a->batch,
                               .position = NAN, .data_cursor = out->data_cursor + a->batch};
    return TESS_OK;
}

static void destroy(void *ctx) {
    first_app *a = ctx;
    free(a->x);
    free(a->y);
    tess_gradsync_destroy(&a->sync);
    tess_adamw_destroy(&a->opt);
    tess_registry_destroy(&a->reg);
}

static const tess_run_app app = {
    .name = "first_app", .unit = "step", .rate_unit = "samples",
    .default_dir = "runs/first_app", .sections = sections,
    .nsections = sizeof sections / sizeof sections[0],
    .setup = setup, .step = step, .destroy = destroy};

int main(int argc, char **argv) {
    first_app a = {0};
    return tess_run_main(&app, &a, argc, argv);
}
