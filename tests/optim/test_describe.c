/* test_describe - optimizers describe their state into a tess_state (nn/state.h): the entry names
 * under the caller's prefix, shapes and layouts like the registry entries, data pointing at the
 * optimizer's own memory (so a checkpoint load restores it in place: writing through the entries
 * changes what the next step uses), nothing for plain SGD, refused prefixes, and the private
 * variant of a federated client's optimizer. */
#include <stdlib.h>
#include <string.h>

#include "nn/registry.h" /* tess_registry_* */
#include "nn/state.h"    /* tess_state_* */
#include "optim/adamw.h" /* tess_adamw_* */
#include "optim/sgd.h"   /* tess_sgd_* */
#include "tess_test.h"

static tess_registry *make_registry(void) {
    tess_registry *reg = NULL;
    const int64_t w[2] = {3, 4}, b[1] = {4};
    const tess_layout rep = tess_layout_replicated(), sh = tess_layout_sharded(0, 2, 1);
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "fc.w", 2, w, &sh, NULL) == TESS_OK &&
                        tess_registry_add(reg, "fc.b", 1, b, &rep, NULL) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "registry: %s", tess_error_text());
    float *g = tess_registry_grads(reg);
    for (int64_t i = 0; i < tess_registry_local_total(reg); i++) g[i] = 0.25f * (float)(i + 1);
    return reg;
}

/* Entry `name` of st is laid out like registry entry i, at base + its flat offset. */
static void check_like(const tess_state *st, const char *name, const tess_registry *reg,
                       int64_t i, const float *base) {
    const int64_t k = tess_state_find(st, name);
    TESS_TEST_CHECK(k >= 0, "no entry %s", name);
    if (k < 0) return;
    const tess_state_entry *e = tess_state_get(st, k);
    const tess_registry_entry *r = tess_registry_get(reg, i);
    TESS_TEST_CHECK(e->dtype == TESS_F32 && e->ndim == r->ndim && e->shape[0] == r->shape[0] &&
                        e->local_count == r->local_count && e->layout.kind == r->layout.kind &&
                        e->global_offset[0] == r->global_offset[0] && !e->private_to_rank &&
                        e->data == base + r->flat_offset,
                    "%s is not laid out like %s", name, r->name);
}

static void test_adamw(void) {
    tess_registry *reg = make_registry();
    const tess_adamw_config cfg = tess_adamw_config_default();
    tess_adamw *opt = NULL;
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_adamw_create(&opt, reg, &cfg) == TESS_OK &&
                        tess_state_create(&st) == TESS_OK &&
                        tess_adamw_describe(opt, st, "opt/adam") == TESS_OK,
                    "describe: %s", tess_error_text());
    TESS_TEST_CHECK(tess_state_count(st) == 5, "%lld entries, expected m, v of 2 and step_count",
                    (long long)tess_state_count(st));
    tess_adamw_step(opt, 0.1f);
    const int64_t ks = tess_state_find(st, "opt/adam/step_count");
    TESS_TEST_CHECK(ks == 4, "step_count is entry %lld", (long long)ks);
    if (ks != 4) return;
    const tess_state_entry *sc = tess_state_get(st, ks);
    TESS_TEST_CHECK(sc->dtype == TESS_I64 && sc->global_count == 1 &&
                        *(const int64_t *)sc->data == 1,
                    "the step count entry reads the optimizer's count");
    /* m after one step is (1 - beta1) g: the entries point at the moments */
    const tess_state_entry *m = tess_state_get(st, tess_state_find(st, "opt/adam/m/fc.b"));
    const int64_t b_off = tess_registry_get(reg, 1)->flat_offset;
    const float want = (1.0f - cfg.beta1) * tess_registry_grads(reg)[b_off];
    TESS_TEST_CHECK(((const float *)m->data)[0] == want, "m[0] = %g, expected %g",
                    (double)((const float *)m->data)[0], (double)want);
    check_like(st, "opt/adam/m/fc.w", reg, 0, (const float *)tess_state_get(st, 0)->data);
    check_like(st, "opt/adam/v/fc.b", reg, 1,
               (const float *)tess_state_get(st, 2)->data - tess_registry_get(reg, 0)->flat_offset);
    /* a load writes through the entries: the count restored in place */
    *(int64_t *)sc->data = 41;
    TESS_TEST_CHECK(tess_adamw_step_count(opt) == 41, "restored count %lld",
                    (long long)tess_adamw_step_count(opt));
    tess_adamw_step(opt, 0.1f);
    TESS_TEST_CHECK(*(const int64_t *)sc->data == 42, "step after a restore");
    /* the same prefix twice, a prefix too long */
    TESS_TEST_CHECK(tess_adamw_describe(opt, st, "opt/adam") == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "'opt/adam/m/fc.w' added twice"),
                    "describe twice: %s", tess_error_text());
    tess_error_clear();
    char prefix[TESS_STATE_NAME_MAX];
    memset(prefix, 'p', sizeof prefix - 1);
    prefix[sizeof prefix - 1] = '\0';
    TESS_TEST_CHECK(tess_adamw_describe(opt, st, prefix) == TESS_ERR_ARG &&
                        strstr(tess_error_text(), "name longer than 191 bytes"),
                    "long prefix: %s", tess_error_text());
    tess_error_clear();
    tess_state_destroy(&st);
    tess_adamw_destroy(&opt);
    tess_registry_destroy(&reg);
}

static void test_sgd(void) {
    tess_registry *reg = make_registry();
    tess_sgd *plain = NULL, *mom = NULL;
    const tess_sgd_config c0 = {.momentum = 0.0f}, c1 = {.momentum = 0.9f};
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_sgd_create(&plain, reg, &c0) == TESS_OK &&
                        tess_sgd_create(&mom, reg, &c1) == TESS_OK &&
                        tess_state_create(&st) == TESS_OK,
                    "create: %s", tess_error_text());
    TESS_TEST_CHECK(tess_sgd_describe(plain, st, "sgd") == TESS_OK && tess_state_count(st) == 0,
                    "plain SGD has no state");
    TESS_TEST_CHECK(tess_sgd_describe(mom, st, "opt/sgd") == TESS_OK && tess_state_count(st) == 2,
                    "momentum SGD: %s", tess_error_text());
    tess_sgd_step(mom, 0.1f);
    const tess_state_entry *w = tess_state_get(st, 0);
    TESS_TEST_CHECK(strcmp(w->name, "opt/sgd/momentum/fc.w") == 0 &&
                        strcmp(tess_state_get(st, 1)->name, "opt/sgd/momentum/fc.b") == 0,
                    "names %s, %s", w->name, tess_state_get(st, 1)->name);
    /* after one step the buffer is the gradient (torch: buf = g at step 1) */
    TESS_TEST_CHECK(((const float *)w->data)[0] == tess_registry_grads(reg)[0],
                    "momentum[0] = %g", (double)((const float *)w->data)[0]);
    check_like(st, "opt/sgd/momentum/fc.b", reg, 1,
               (const float *)w->data - tess_registry_get(reg, 0)->flat_offset);
    tess_state_destroy(&st);
    tess_sgd_destroy(&plain);
    tess_sgd_destroy(&mom);
    tess_registry_destroy(&reg);
}

/* A federated client's optimizer: every entry private to the rank, same names and memory. */
static void test_adamw_private(void) {
    tess_registry *reg = NULL;
    const int64_t w[2] = {2, 3}, b[1] = {3};
    const tess_layout rep = tess_layout_replicated();
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK &&
                        tess_registry_add(reg, "w", 2, w, &rep, NULL) == TESS_OK &&
                        tess_registry_add(reg, "b", 1, b, &rep, NULL) == TESS_OK &&
                        tess_registry_finalize(reg) == TESS_OK,
                    "registry: %s", tess_error_text());
    float *g = tess_registry_grads(reg);
    for (int64_t i = 0; i < tess_registry_local_total(reg); i++) g[i] = 0.5f * (float)(i + 1);
    const tess_adamw_config cfg = tess_adamw_config_default();
    tess_adamw *opt = NULL;
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_adamw_create(&opt, reg, &cfg) == TESS_OK &&
                        tess_state_create(&st) == TESS_OK &&
                        tess_adamw_describe_private(opt, st, "clients/4/optim") == TESS_OK,
                    "describe_private: %s", tess_error_text());
    TESS_TEST_CHECK(tess_state_count(st) == 5, "%lld entries", (long long)tess_state_count(st));
    for (int64_t i = 0; i < tess_state_count(st); i++)
        TESS_TEST_CHECK(tess_state_get(st, i)->private_to_rank, "%s is not private",
                        tess_state_get(st, i)->name);
    tess_adamw_step(opt, 0.1f);
    const int64_t ks = tess_state_find(st, "clients/4/optim/step_count");
    const int64_t km = tess_state_find(st, "clients/4/optim/m/b");
    TESS_TEST_CHECK(ks >= 0 && km >= 0, "names under the prefix");
    if (ks >= 0 && km >= 0) {
        const tess_state_entry *sc = tess_state_get(st, ks), *m = tess_state_get(st, km);
        TESS_TEST_CHECK(sc->dtype == TESS_I64 && *(const int64_t *)sc->data == 1,
                        "the private step count reads the optimizer's count");
        const float want = (1.0f - cfg.beta1) * g[tess_registry_get(reg, 1)->flat_offset];
        TESS_TEST_CHECK(((const float *)m->data)[0] == want, "private m points at the moments");
    }
    tess_state_destroy(&st);
    tess_adamw_destroy(&opt);
    tess_registry_destroy(&reg);
}

/* tess_adamw_reset: after 3 steps and a reset, the next step from the same parameters and
 * gradients is bitwise that of a fresh optimizer, the count is 1, and the described state
 * entries still point at the moments (zeroed in place). */
static void test_adamw_reset(void) {
    tess_registry *used = make_registry(), *fresh = make_registry();
    const tess_adamw_config cfg = tess_adamw_config_default();
    tess_adamw *a = NULL, *b = NULL;
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_adamw_create(&a, used, &cfg) == TESS_OK &&
                        tess_adamw_create(&b, fresh, &cfg) == TESS_OK &&
                        tess_state_create(&st) == TESS_OK &&
                        tess_adamw_describe(a, st, "opt") == TESS_OK,
                    "create: %s", tess_error_text());
    for (int k = 0; k < 3; k++) tess_adamw_step(a, 0.1f);
    const float *m = tess_state_get(st, tess_state_find(st, "opt/m/fc.b"))->data;
    TESS_TEST_CHECK(m[0] != 0.0f, "moments after 3 steps");
    tess_adamw_reset(a);
    TESS_TEST_CHECK(tess_adamw_step_count(a) == 0 && m[0] == 0.0f, "reset: count 0, m zero");
    const int64_t n = tess_registry_local_total(used);
    memcpy(tess_registry_params(fresh), tess_registry_params(used), (size_t)n * sizeof(float));
    tess_adamw_step(a, 0.1f);
    tess_adamw_step(b, 0.1f);
    TESS_TEST_CHECK(memcmp(tess_registry_params(used), tess_registry_params(fresh),
                           (size_t)n * sizeof(float)) == 0 && tess_adamw_step_count(a) == 1,
                    "the step after a reset is a fresh optimizer's first step");
    tess_state_destroy(&st);
    tess_adamw_destroy(&a);
    tess_adamw_destroy(&b);
    tess_registry_destroy(&used);
    tess_registry_destroy(&fresh);
}

int main(void) {
    test_adamw();
    test_adamw_reset();
    test_adamw_private();
    test_sgd();
    return tess_test_finish("test_describe");
}
