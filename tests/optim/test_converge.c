/* test_converge.c - AdamW minimises f(x) = 1/2 sum_i a_i (x_i - c_i)^2 (a_i in [0.5, 5]) under a
 * warm-up + cosine schedule, with clipping and the guard in the loop as an app runs them. */
#include "nn/registry.h"  /* tess_registry_* */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "optim/clip.h"   /* tess_clip_grad_norm */
#include "optim/guard.h"  /* tess_guard_* */
#include "optim/sched.h"  /* tess_sched_* */
#include "tess_test.h"

enum { N = 64, STEPS = 600 };

static double loss_and_grad(const float *x, float *g, const double *a, const double *c) {
    double f = 0.0;
    for (int i = 0; i < N; i++) {
        double d = x[i] - c[i];
        f += 0.5 * a[i] * d * d;
        g[i] = (float)(a[i] * d);
    }
    return f;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    double a[N], c[N];
    for (int i = 0; i < N; i++) {
        a[i] = 0.5 + 4.5 * (double)((i * 37) % N) / (N - 1);
        c[i] = sin(0.7 * i) * 2.0;
    }
    tess_registry *reg = NULL;
    tess_adamw *opt = NULL;
    const int64_t shape[1] = {N};
    const tess_layout rep = tess_layout_replicated();
    tess_adamw_config cfg = tess_adamw_config_default();
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "x", 1, shape, &rep, NULL) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK &&
                        tess_adamw_create(&opt, reg, &cfg) == TESS_OK,
                    "setup: %s", tess_error_text());
    tess_sched sched = {.kind = TESS_SCHED_COSINE, .lr = 0.1, .min_lr = 1e-4, .warmup_steps = 20,
                        .total_steps = STEPS};
    tess_guard guard;
    TESS_TEST_CHECK(tess_sched_check(&sched) == TESS_OK &&
                        tess_guard_init(&guard, 3, NULL) == TESS_OK,
                    "schedule and guard");
    float *x = tess_registry_param(reg, 0), *g = tess_registry_grad(reg, 0);
    const double f0 = loss_and_grad(x, g, a, c);
    double f = f0;
    for (int64_t step = 0; step < STEPS; step++) {
        tess_registry_zero_grads(reg);
        f = loss_and_grad(x, g, a, c);
        double norm = 0.0;
        bool skip = true;
        if (tess_clip_grad_norm(reg, 10.0, NULL, &norm) != TESS_OK ||
            tess_guard_check(&guard, step, f, norm, &skip) != TESS_OK)
            break;
        if (!skip) tess_adamw_step(opt, (float)tess_sched_lr(&sched, step));
    }
    f = loss_and_grad(x, g, a, c);
    double worst = 0.0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(x[i] - c[i]));
    TESS_TEST_CHECK(guard.skipped == 0, "no step skipped");
    TESS_TEST_CHECK(tess_adamw_step_count(opt) == STEPS, "every step taken");
    TESS_TEST_CHECK(f < 1e-6 * f0, "loss %.3g -> %.3g", f0, f);
    TESS_TEST_CHECK(worst < 1e-3, "max |x - c| = %.3g", worst);
    tess_adamw_destroy(&opt);
    tess_registry_destroy(&reg);
    int rc = tess_test_finish("converge");
    MPI_Finalize();
    return rc;
}
