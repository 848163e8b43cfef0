/* test_ckpt_clients - rank-private state entries (federated clients) in checkpoints.
 *   test_ckpt_clients              at P ranks: round trip, then every refusal below
 *   test_ckpt_clients write PATH   write PATH with client c on rank c % P
 *   test_ckpt_clients read PATH    load PATH with client c on rank (5c + 1) % P (another dealing
 *                                  than the writer's at every rank count), bitwise compare
 * The state: NCLIENTS clients of different shapes (private entries clients/<c>/w f32 [c+1,3],
 * clients/<c>/b f64 [c+2], clients/<c>/steps i64 [1]), a shared registry (params/shared.w
 * [10,4] sharded along dim 0, params/shared.g [5] replicated), an AdamW over it after one step
 * described under opt/adam, and scalars run/loss (f64) and run/epoch (i64). Values are functions
 * of (client, global index), so any dealing and rank count can be checked bit for bit.
 * Refusals: a non-private entry that differs between ranks or that one rank alone lists, a
 * private entry listed by two ranks or under another rank's private entry (TESS_ERR_ARG naming
 * the entries and the ranks); on load a
 * client nobody lists (extra dataset), a client of the wrong shape and a client the file lacks
 * (TESS_ERR_DATA naming the dataset). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/runtime.h" /* tess_runtime_* */
#include "io/ckpt.h"      /* tess_ckpt_* */
#include "nn/registry.h"  /* tess_registry_* */
#include "nn/state.h"     /* tess_state_* */
#include "optim/adamw.h"  /* tess_adamw_* */
#include "par/mesh.h"     /* tess_group_* */
#include "tess_test.h"

enum { NCLIENTS = 7, MAX_CLIENT_ROWS = NCLIENTS };

static float wval(int c, int64_t i) { return (float)(sin((double)(c * 100 + i)) * 3.0); }
static double bval(int c, int64_t i) { return 1.0 / (double)(c + 3) + (double)i * 1e-7; }
static int64_t sval(int c) { return ((int64_t)1 << 55) + c; }

typedef struct {
    float w[MAX_CLIENT_ROWS * 3];
    double b[NCLIENTS + 1];
    int64_t steps;
} client;

/* Which clients this rank holds: deal(c, size) == rank. */
typedef int (*deal_fn)(int c, int size);
static int deal_write(int c, int size) { return c % size; }
static int deal_read(int c, int size) { return (5 * c + 1) % size; }

typedef struct {
    client cl[NCLIENTS];
    tess_registry *reg, *ref_reg; /* ref_reg: the same model, replicated, stepped alike */
    tess_adamw *opt, *ref_opt;
    double loss;
    int64_t epoch;
    tess_state *st;
    tess_ckpt_state ck;
} world;

/* The shared model on this rank's layout (sharded over size) and its one AdamW step from
 * params and grads that are functions of the global index. */
static tess_status build_model(tess_registry **reg, tess_adamw **opt, int rank, int size,
                               bool step) {
    TESS_CHECK(tess_registry_create(reg));
    const int64_t w[2] = {10, 4}, g[1] = {5};
    const tess_layout sh = tess_layout_sharded(0, size, rank), rep = tess_layout_replicated();
    TESS_CHECK(tess_registry_add(*reg, "shared.w", 2, w, &sh, NULL));
    TESS_CHECK(tess_registry_add(*reg, "shared.g", 1, g, &rep, NULL));
    TESS_CHECK(tess_registry_finalize(*reg));
    const tess_adamw_config cfg = tess_adamw_config_default();
    TESS_CHECK(tess_adamw_create(opt, *reg, &cfg));
    if (!step) return TESS_OK;
    for (int64_t i = 0; i < tess_registry_count(*reg); i++) {
        const tess_registry_entry *e = tess_registry_get(*reg, i);
        float *p = tess_registry_param(*reg, i), *gr = tess_registry_grads(*reg) + e->flat_offset;
        const int64_t first = e->global_offset[0] * (e->global_count / e->shape[0]);
        for (int64_t j = 0; j < e->local_count; j++) {
            p[j] = (float)cos((double)(first + j + 10 * i));
            gr[j] = (float)sin((double)(first + j) * 0.3 + (double)i);
        }
    }
    tess_adamw_step(*opt, 0.01f);
    return TESS_OK;
}

/* The state of this rank: its clients (by deal; fill: reference values, else poison), the shared
 * model (stepped when fill) and the scalars. */
static void build(world *wd, int rank, int size, deal_fn deal, bool fill) {
    memset(wd, 0, sizeof *wd);
    TESS_TEST_CHECK(build_model(&wd->reg, &wd->opt, rank, size, fill) == TESS_OK &&
                        build_model(&wd->ref_reg, &wd->ref_opt, 0, 1, true) == TESS_OK,
                    "model: %s", tess_error_text());
    TESS_TEST_CHECK(tess_state_create(&wd->st) == TESS_OK &&
                        tess_state_add_registry(wd->st, "params", wd->reg, false) == TESS_OK &&
                        tess_adamw_describe(wd->opt, wd->st, "opt/adam") == TESS_OK &&
                        tess_state_add_f64(wd->st, "run/loss", &wd->loss) == TESS_OK &&
                        tess_state_add_i64(wd->st, "run/epoch", &wd->epoch) == TESS_OK,
                    "shared entries: %s", tess_error_text());
    wd->loss = fill ? 0.125 + 1e-12 : NAN;
    wd->epoch = fill ? 3 : -1;
    for (int c = 0; c < NCLIENTS; c++) {
        if (deal(c, size) != rank) continue;
        client *k = &wd->cl[c];
        for (int64_t i = 0; i < (c + 1) * 3; i++) k->w[i] = fill ? wval(c, i) : NAN;
        for (int64_t i = 0; i < c + 2; i++) k->b[i] = fill ? bval(c, i) : NAN;
        k->steps = fill ? sval(c) : -1;
        char name[64];
        const int64_t ws[2] = {c + 1, 3}, bs[1] = {c + 2}, one[1] = {1};
        snprintf(name, sizeof name, "clients/%d/w", c);
        tess_status s = tess_state_add_private(wd->st, name, TESS_F32, 2, ws, k->w);
        snprintf(name, sizeof name, "clients/%d/b", c);
        if (s == TESS_OK) s = tess_state_add_private(wd->st, name, TESS_F64, 1, bs, k->b);
        snprintf(name, sizeof name, "clients/%d/steps", c);
        if (s == TESS_OK) s = tess_state_add_private(wd->st, name, TESS_I64, 1, one, &k->steps);
        TESS_TEST_CHECK(s == TESS_OK, "client %d: %s", c, tess_error_text());
    }
    wd->ck = (tess_ckpt_state){.state = wd->st, .step = fill ? 11 : -1, .seed = 5,
                               .app = "test_ckpt_clients"};
}

static void unbuild(world *wd) {
    tess_state_destroy(&wd->st);
    tess_adamw_destroy(&wd->opt);
    tess_adamw_destroy(&wd->ref_opt);
    tess_registry_destroy(&wd->reg);
    tess_registry_destroy(&wd->ref_reg);
}

static int64_t differ(const void *a, const void *b, size_t n) { return memcmp(a, b, n) != 0; }

/* Every value this rank holds against the references, bit for bit. */
static void check(world *wd, int rank, int size, deal_fn deal, const char *label) {
    int64_t bad = 0;
    for (int c = 0; c < NCLIENTS; c++) {
        if (deal(c, size) != rank) continue;
        const client *k = &wd->cl[c];
        for (int64_t i = 0; i < (c + 1) * 3; i++) {
            const float v = wval(c, i);
            bad += differ(&k->w[i], &v, sizeof v);
        }
        for (int64_t i = 0; i < c + 2; i++) {
            const double v = bval(c, i);
            bad += differ(&k->b[i], &v, sizeof v);
        }
        bad += k->steps != sval(c);
    }
    /* params, m and v against the replicated reference, at this rank's global offsets */
    const char *prefixes[3] = {"params", "opt/adam/m", "opt/adam/v"};
    tess_state *ref = NULL;
    TESS_TEST_CHECK(tess_state_create(&ref) == TESS_OK &&
                        tess_state_add_registry(ref, "params", wd->ref_reg, false) == TESS_OK &&
                        tess_adamw_describe(wd->ref_opt, ref, "opt/adam") == TESS_OK,
                    "reference state: %s", tess_error_text());
    for (int p = 0; p < 3; p++)
        for (int64_t i = 0; i < tess_registry_count(wd->reg); i++) {
            char name[TESS_STATE_NAME_MAX];
            snprintf(name, sizeof name, "%s/%s", prefixes[p], tess_registry_get(wd->reg, i)->name);
            const tess_state_entry *e = tess_state_get(wd->st, tess_state_find(wd->st, name));
            const tess_state_entry *r = tess_state_get(ref, tess_state_find(ref, name));
            const int64_t first = e->global_offset[0] * (e->global_count / e->shape[0]);
            bad += differ(e->data, (const float *)r->data + first,
                          (size_t)e->local_count * sizeof(float));
        }
    tess_state_destroy(&ref);
    bad += tess_adamw_step_count(wd->opt) != 1;
    bad += differ(&wd->loss, &(double){0.125 + 1e-12}, sizeof(double)) + (wd->epoch != 3);
    TESS_TEST_CHECK(bad == 0 && wd->ck.step == 11 && wd->ck.seed == 5,
                    "%s: %lld values differ on rank %d of %d (step %lld)", label, (long long)bad,
                    rank, size, (long long)wd->ck.step);
}

static void write_file(const tess_group *g, const char *path) {
    world wd;
    build(&wd, g->rank, g->size, deal_write, true);
    TESS_TEST_CHECK(tess_ckpt_write(g, path, &wd.ck) == TESS_OK, "write %s: %s", path,
                    tess_error_text());
    unbuild(&wd);
}

static void read_file(const tess_group *g, const char *path, deal_fn deal, const char *label) {
    world wd;
    build(&wd, g->rank, g->size, deal, false);
    tess_error_clear();
    tess_status s = tess_ckpt_load(g, path, &wd.ck);
    TESS_TEST_CHECK(s == TESS_OK, "%s: load %s: %s", label, path, tess_error_text());
    if (s == TESS_OK) check(&wd, g->rank, g->size, deal, label);
    TESS_TEST_CHECK(tess_ckpt_verify(g, path, NULL) == TESS_OK, "%s: verify: %s", label,
                    tess_error_text());
    unbuild(&wd);
}

/* op (write or load of path) with wd as edited by the caller; expect status want on every rank
 * and the needles in the record. */
static void expect(const tess_group *g, world *wd, bool write, const char *path,
                   tess_status want, const char *label, const char *needle1,
                   const char *needle2) {
    tess_error_clear();
    tess_status s = write ? tess_ckpt_write(g, path, &wd->ck) : tess_ckpt_load(g, path, &wd->ck);
    const char *t = tess_error_text();
    TESS_TEST_CHECK(s == want, "%s: status %s, expected %s:\n%s", label, tess_status_name(s),
                    tess_status_name(want), t);
    TESS_TEST_CHECK(!needle1 || strstr(t, needle1), "%s: no '%s' in:\n%s", label, needle1, t);
    TESS_TEST_CHECK(!needle2 || strstr(t, needle2), "%s: no '%s' in:\n%s", label, needle2, t);
    if (g->rank == 0 && s != TESS_OK) printf("--- %s:\n%s", label, t);
    tess_error_clear();
    unbuild(wd);
}

static void refusals(const tess_group *g, const char *path) {
    const int rank = g->rank, size = g->size, last = size - 1;
    world wd;
    int64_t one[1] = {1};
    char want[256];

    /* a non-private entry that differs between ranks */
    build(&wd, rank, size, deal_write, true);
    if (rank == last) {
        tess_state_destroy(&wd.st);
        tess_state_create(&wd.st);
        tess_state_add_registry(wd.st, "params", wd.reg, false);
        tess_adamw_describe(wd.opt, wd.st, "opt/adam");
        tess_state_add_i64(wd.st, "run/loss", &wd.epoch); /* i64 where rank 0 has f64 */
        tess_state_add_i64(wd.st, "run/epoch", &wd.epoch);
        wd.ck.state = wd.st;
    }
    snprintf(want, sizeof want, "state entry 'run/loss' differs between ranks 0 and %d: rank 0 "
             "has f64 [1] replicated, rank %d has i64 [1] replicated", last, last);
    expect(g, &wd, true, "refused.h5", size > 1 ? TESS_ERR_ARG : TESS_OK, "entry differs",
           size > 1 ? want : NULL, NULL);

    /* an entry only some ranks list */
    build(&wd, rank, size, deal_write, true);
    if (rank == last) tess_state_add_i64(wd.st, "run/extra", &wd.epoch);
    snprintf(want, sizeof want, "state entry 'run/extra' is listed by rank %d but not by rank 0",
             last);
    expect(g, &wd, true, "refused.h5", size > 1 ? TESS_ERR_ARG : TESS_OK, "entry on one rank",
           size > 1 ? want : NULL, NULL);

    /* a private entry listed by two ranks */
    build(&wd, rank, size, deal_write, true);
    if (rank == last && last != deal_write(0, size))
        tess_state_add_private(wd.st, "clients/0/steps", TESS_I64, 1, one, &wd.epoch);
    snprintf(want, sizeof want, "private state entry 'clients/0/steps' is listed by rank 0 and by "
             "rank %d", last);
    expect(g, &wd, true, "refused.h5", size > 1 ? TESS_ERR_ARG : TESS_OK, "private on two ranks",
           size > 1 ? want : NULL, NULL);

    /* a private entry under another rank's private entry */
    build(&wd, rank, size, deal_write, true);
    if (rank == last && last != deal_write(0, size))
        tess_state_add_private(wd.st, "clients/0/w/x", TESS_I64, 1, one, &wd.epoch);
    snprintf(want, sizeof want, "state entries 'clients/0/w' (rank 0) and 'clients/0/w/x' "
             "(rank %d): one names a group of the other", last);
    expect(g, &wd, true, "refused.h5", size > 1 ? TESS_ERR_ARG : TESS_OK,
           "private under another's private", size > 1 ? want : NULL, NULL);

    /* load: a client nobody lists is an extra dataset */
    build(&wd, rank, size, deal_read, false);
    tess_state_destroy(&wd.st);
    tess_state_create(&wd.st);
    tess_state_add_registry(wd.st, "params", wd.reg, false);
    tess_adamw_describe(wd.opt, wd.st, "opt/adam");
    tess_state_add_f64(wd.st, "run/loss", &wd.loss);
    tess_state_add_i64(wd.st, "run/epoch", &wd.epoch);
    wd.ck.state = wd.st;
    expect(g, &wd, false, path, TESS_ERR_DATA, "clients nobody lists",
           "dataset /clients/0/b is not in the state", "21 problems");

    /* load: a client of another shape, on whichever rank lists it */
    build(&wd, rank, size, deal_read, false);
    if (deal_read(2, size) == rank) {
        const int64_t ws[2] = {4, 3};
        tess_state_destroy(&wd.st);
        tess_state_create(&wd.st);
        tess_state_add_registry(wd.st, "params", wd.reg, false);
        tess_adamw_describe(wd.opt, wd.st, "opt/adam");
        tess_state_add_f64(wd.st, "run/loss", &wd.loss);
        tess_state_add_i64(wd.st, "run/epoch", &wd.epoch);
        for (int c = 0; c < NCLIENTS; c++) {
            if (deal_read(c, size) != rank) continue;
            char name[64];
            const int64_t w2[2] = {c + 1, 3}, bs[1] = {c + 2};
            snprintf(name, sizeof name, "clients/%d/w", c);
            tess_state_add_private(wd.st, name, TESS_F32, 2, c == 2 ? ws : w2, wd.cl[c].w);
            snprintf(name, sizeof name, "clients/%d/b", c);
            tess_state_add_private(wd.st, name, TESS_F64, 1, bs, wd.cl[c].b);
            snprintf(name, sizeof name, "clients/%d/steps", c);
            tess_state_add_private(wd.st, name, TESS_I64, 1, one, &wd.cl[c].steps);
        }
        wd.ck.state = wd.st;
    }
    expect(g, &wd, false, path, TESS_ERR_DATA, "client of another shape",
           "dataset /clients/2/w has shape [3,3], expected [4,3]", "1 problem");

    /* load: a client the file does not hold */
    build(&wd, rank, size, deal_read, false);
    double extra[3];
    const int64_t three[1] = {3};
    if (rank == last) tess_state_add_private(wd.st, "clients/9/b", TESS_F64, 1, three, extra);
    expect(g, &wd, false, path, TESS_ERR_DATA, "client missing from the file",
           "dataset /clients/9/b is missing (expected float64 [3])", NULL);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL; /* the checkpoint functions' group */
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;
    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        write_file(g, argv[2]);
    } else if (argc == 3 && strcmp(argv[1], "read") == 0) {
        read_file(g, argv[2], deal_read, "reshard");
    } else {
        write_file(g, "clients.h5");
        read_file(g, "clients.h5", deal_write, "round trip");
        read_file(g, "clients.h5", deal_read, "clients moved");
        refusals(g, "clients.h5");
    }
    int rc = tess_test_finish_mpi("test_ckpt_clients", rt.comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
