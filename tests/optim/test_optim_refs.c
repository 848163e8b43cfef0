/* test_optim_refs.c - SGD and AdamW against torch.optim on small fixed tensors.
 * usage: test_optim_refs <dir> <case>   reads <dir>/<case>.txt, written by
 * tests/data/optim_refs/gen_optim_refs.py (format described there). Each step loads torch's fake
 * gradients into the registry (frozen entries too), steps with torch's lr, and compares every
 * parameter with torch's values. */
#include <stdlib.h>
#include <string.h>

#include "nn/registry.h"  /* tess_registry_* */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "optim/sgd.h"    /* tess_sgd_* */
#include "tess_test.h"

enum { TOKEN_MAX = 128, HYPER_MAX = 8 };

/* Next whitespace-separated token into buf, skipping '#' comment lines; false at EOF. */
static bool next_token(FILE *f, char *buf) {
    while (fscanf(f, "%127s", buf) == 1) {
        if (buf[0] != '#') return true;
        int c;
        while ((c = fgetc(f)) != EOF && c != '\n') continue;
    }
    return false;
}

static bool expect(FILE *f, const char *want) {
    char tok[TOKEN_MAX];
    bool ok = next_token(f, tok) && strcmp(tok, want) == 0;
    TESS_TEST_CHECK(ok, "expected token '%s'", want);
    return ok;
}

static bool read_values(FILE *f, float *dst, int64_t n) {
    for (int64_t k = 0; k < n; k++)
        if (fscanf(f, "%f", &dst[k]) != 1) return false;
    return true;
}

/* "<kind> <name>" naming entry i, then its local_count values into dst */
static bool read_tensor_line(FILE *f, const tess_registry *reg, const char *kind, int64_t i,
                             float *dst) {
    const tess_registry_entry *e = tess_registry_get(reg, i);
    return expect(f, kind) && expect(f, e->name) && read_values(f, dst, e->local_count);
}

typedef struct {
    char key[HYPER_MAX][TOKEN_MAX];
    double value[HYPER_MAX];
    int n;
} hyper_table;

static double hyper(const hyper_table *h, const char *key) {
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->key[i], key) == 0) return h->value[i];
    TESS_TEST_CHECK(false, "hyperparameter '%s' missing", key);
    return 0.0;
}

/* Reads the header, registers the tensors with the file's flags and loads the initial values. */
static bool load_model(FILE *f, tess_registry *reg, char *optimizer, hyper_table *h, int *steps) {
    char tok[TOKEN_MAX];
    int ntensors = 0;
    if (!expect(f, "optimizer") || !next_token(f, optimizer)) return false;
    while (next_token(f, tok) && strcmp(tok, "hyper") == 0 && h->n < HYPER_MAX) {
        if (fscanf(f, "%127s %lf", h->key[h->n], &h->value[h->n]) != 2) return false;
        h->n++;
    }
    if (strcmp(tok, "steps") != 0 || fscanf(f, "%d", steps) != 1) return false;
    if (!expect(f, "tensors") || fscanf(f, "%d", &ntensors) != 1) return false;
    for (int t = 0; t < ntensors; t++) {
        char name[TOKEN_MAX];
        int trainable, decay, ndim;
        int64_t shape[TESS_MAX_DIMS];
        if (!expect(f, "tensor") ||
            fscanf(f, "%127s %d %d %d", name, &trainable, &decay, &ndim) != 4)
            return false;
        for (int d = 0; d < ndim && d < TESS_MAX_DIMS; d++) {
            long long dim;
            if (fscanf(f, "%lld", &dim) != 1) return false;
            shape[d] = dim;
        }
        tess_layout l = tess_layout_replicated();
        int64_t index;
        if (tess_registry_add(reg, name, ndim, shape, &l, &index) != TESS_OK) return false;
        TESS_TEST_CHECK(tess_registry_get(reg, index)->decay == (decay != 0),
                        "'%s': the default decay rule (ndim >= 2) matches the torch groups", name);
        if (tess_registry_set_trainable(reg, index, trainable != 0) != TESS_OK) return false;
    }
    if (tess_registry_finalize(reg) != TESS_OK) return false;
    for (int64_t i = 0; i < tess_registry_count(reg); i++)
        if (!read_tensor_line(f, reg, "init", i, tess_registry_param(reg, i))) return false;
    return true;
}

static void run_case(const char *path) {
    FILE *f = fopen(path, "r");
    TESS_TEST_CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    tess_registry *reg = NULL;
    tess_sgd *sgd = NULL;
    tess_adamw *adamw = NULL;
    float *expected = NULL;
    char optimizer[TOKEN_MAX] = "";
    hyper_table h = {.n = 0};
    int steps = 0;
    bool ok = tess_registry_create(&reg) == TESS_OK && load_model(f, reg, optimizer, &h, &steps);
    TESS_TEST_CHECK(ok, "header and initial values of %s", path);
    if (ok && strcmp(optimizer, "sgd") == 0) {
        tess_sgd_config cfg = {.momentum = (float)hyper(&h, "momentum"),
                               .weight_decay = (float)hyper(&h, "weight_decay"),
                               .nesterov = hyper(&h, "nesterov") != 0.0};
        ok = tess_sgd_create(&sgd, reg, &cfg) == TESS_OK;
    } else if (ok) {
        tess_adamw_config cfg = {.beta1 = (float)hyper(&h, "beta1"),
                                 .beta2 = (float)hyper(&h, "beta2"),
                                 .eps = (float)hyper(&h, "eps"),
                                 .weight_decay = (float)hyper(&h, "weight_decay")};
        ok = strcmp(optimizer, "adamw") == 0 && tess_adamw_create(&adamw, reg, &cfg) == TESS_OK;
    }
    TESS_TEST_CHECK(ok, "optimizer '%s' created: %s", optimizer, tess_error_text());
    const int64_t n = ok ? tess_registry_local_total(reg) : 0;
    expected = malloc((size_t)(n > 0 ? n : 1) * sizeof *expected);
    for (int s = 1; ok && s <= steps; s++) {
        float lr = 0.0f;
        int step_no = 0;
        ok = expect(f, "step") && fscanf(f, "%d", &step_no) == 1 && step_no == s &&
             expect(f, "lr") && fscanf(f, "%f", &lr) == 1;
        for (int64_t i = 0; ok && i < tess_registry_count(reg); i++) {
            const tess_registry_entry *e = tess_registry_get(reg, i);
            ok = read_tensor_line(f, reg, "grad", i, tess_registry_grad(reg, i)) &&
                 read_tensor_line(f, reg, "param", i, expected + e->flat_offset);
        }
        TESS_TEST_CHECK(ok, "%s: step %d parsed", path, s);
        if (!ok) break;
        if (sgd) tess_sgd_step(sgd, lr);
        else tess_adamw_step(adamw, lr);
        for (int64_t i = 0; i < tess_registry_count(reg); i++) {
            const tess_registry_entry *e = tess_registry_get(reg, i);
            const float *p = tess_registry_param(reg, i);
            double worst = 0.0;
            int64_t worst_k = 0;
            for (int64_t k = 0; k < e->local_count; k++) {
                double ref = expected[e->flat_offset + k];
                double err = fabs(p[k] - ref) / (1e-6 + 1e-5 * fabs(ref));
                if (err > worst) {
                    worst = err;
                    worst_k = k;
                }
            }
            TESS_TEST_CHECK(worst <= 1.0, "%s step %d '%s'[%lld]: got %.9g, torch %.9g", path, s,
                            e->name, (long long)worst_k, (double)p[worst_k],
                            (double)expected[e->flat_offset + worst_k]);
        }
    }
    if (adamw) TESS_TEST_CHECK(tess_adamw_step_count(adamw) == steps, "AdamW counted its steps");
    free(expected);
    tess_sgd_destroy(&sgd);
    tess_adamw_destroy(&adamw);
    tess_registry_destroy(&reg);
    TESS_TEST_CHECK(reg == NULL && sgd == NULL && adamw == NULL, "destroy sets NULL");
    fclose(f);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    TESS_TEST_CHECK(argc == 3, "usage: %s <dir> <case>", argv[0]);
    if (argc == 3) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.txt", argv[1], argv[2]);
        run_case(path);
    }
    int rc = tess_test_finish(argc == 3 ? argv[2] : "optim_refs");
    MPI_Finalize();
    return rc;
}
