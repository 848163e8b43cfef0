/* test_clip.c - global-norm clipping on one rank: the norm over trainable gradients only, torch's
 * scale factor, no change below the threshold or with max_norm 0, and non-finite norms that
 * leave the gradients alone. */
#include "nn/registry.h" /* tess_registry_* */
#include "optim/clip.h"  /* tess_clip_grad_norm */
#include "tess_test.h"

enum { N_W = 12, N_B = 4, N_F = 5 };

static void fill(tess_registry *reg) {
    float *g = tess_registry_grads(reg);
    for (int k = 0; k < N_W + N_B + N_F; k++) g[k] = 0.25f * (float)(k % 7) - 0.6f;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_registry *reg = NULL;
    const int64_t sw[2] = {3, 4}, sb[1] = {N_B}, sf[1] = {N_F};
    const tess_layout rep = tess_layout_replicated();
    int64_t frozen = -1;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "w", 2, sw, &rep, NULL) == TESS_OK &&
                        tess_registry_add(reg, "b", 1, sb, &rep, NULL) == TESS_OK &&
                        tess_registry_add(reg, "stat", 1, sf, &rep, &frozen) == TESS_OK &&
                        tess_registry_set_trainable(reg, frozen, false) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "setup: %s", tess_error_text());
    fill(reg);
    const float *g = tess_registry_grads(reg);
    double sq = 0.0;
    for (int k = 0; k < N_W + N_B; k++) sq += (double)g[k] * g[k];
    const double want = sqrt(sq);
    float before[N_W + N_B + N_F];
    for (int k = 0; k < N_W + N_B + N_F; k++) before[k] = g[k];

    double norm = -1.0;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, NULL, &norm) == TESS_OK, "norm only");
    TESS_TEST_CLOSE(norm, want, 0.0, 1e-14, "norm over trainable grads (frozen excluded)");
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, want * 2.0, NULL, &norm) == TESS_OK, "loose clip");
    int changed = 0;
    for (int k = 0; k < N_W + N_B + N_F; k++) changed += g[k] != before[k];
    TESS_TEST_CHECK(changed == 0, "below max_norm: %d grads changed", changed);

    const double max_norm = want / 3.0;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, max_norm, NULL, &norm) == TESS_OK, "clip");
    TESS_TEST_CLOSE(norm, want, 0.0, 1e-14, "returns the pre-clip norm");
    const float coef = (float)(max_norm / (want + 1e-6));
    for (int k = 0; k < N_W + N_B; k++)
        TESS_TEST_CHECK(g[k] == before[k] * coef, "grad %d scaled by %g", k, (double)coef);
    for (int k = N_W + N_B; k < N_W + N_B + N_F; k++)
        TESS_TEST_CHECK(g[k] == before[k], "frozen grad %d untouched", k);
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 0.0, NULL, &norm) == TESS_OK, "re-norm");
    TESS_TEST_CLOSE(norm, max_norm, 1e-9, 1e-6, "clipped norm = max_norm");

    fill(reg);
    float *gw = tess_registry_grads(reg);
    gw[N_W + N_B] = NAN;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 1e-3, NULL, &norm) == TESS_OK &&
                        isfinite(norm),
                    "NaN in a frozen grad is ignored");
    fill(reg);
    gw[3] = NAN;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 1e-3, NULL, &norm) == TESS_OK && isnan(norm),
                    "NaN grad gives a NaN norm");
    TESS_TEST_CHECK(gw[0] == before[0], "non-finite norm scales nothing");
    gw[3] = INFINITY;
    TESS_TEST_CHECK(tess_clip_grad_norm(reg, 1e-3, NULL, &norm) == TESS_OK &&
                        isinf(norm) && gw[0] == before[0],
                    "Inf grad gives an Inf norm and no scaling");
    tess_registry_destroy(&reg);
    int rc = tess_test_finish("clip");
    MPI_Finalize();
    return rc;
}
