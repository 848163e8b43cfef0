/* test_ckpt_load - the load pipeline of io/ckpt_load.c: reads in slabs and batches, hashes on
 * the background worker (io/ckpt_hasher.h) or inline.
 *   test_ckpt_load [single]
 * Initialises MPI with MPI_THREAD_FUNNELED (the worker runs) or, with "single",
 * MPI_THREAD_SINGLE (hashing inline), and checks which one ckpt_hasher_start chose.
 *   1. the worker: jobs on it give the same sums as ckpt_hash_region inline, for full regions,
 *      row parts and a region whose rows are split between ranks;
 *   2. a model with more datasets than one batch (LOAD_BATCH = 64) and tensors of several slabs
 *      (LOAD_SLAB_BYTES = 2 MiB): sharded on dim 0 (uneven), sharded on dim 1 (strided regions),
 *      replicated (every rank reads the whole tensor, the ranks split its hash by rows, so slab
 *      and region boundaries differ), block-cyclic among them; write, load, compare bit for bit;
 *   3. one flipped byte in the last slab of the largest tensor: the load fails on every rank
 *      and names that dataset, and only that one. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_tamper.h"
#include "core/runtime.h" /* tess_runtime_* */
#include "io/ckpt.h"
#include "io/ckpt_hasher.h"
#include "tess_test.h"

enum { N_SMALL = 70 }; /* small tensors: with the large ones, more than one batch */

/* The registry: large.rows [1100,1024] sharded dim 0, large.cols [600,2048] sharded dim 1,
 * large.repl [700,1024] replicated, grid [40,30] block-cyclic 1 x P (blocks 4 x 5), then
 * small.<i> [i+1, 3] sharded dim 0 (ranks beyond i+1 rows hold nothing). */
static tess_registry *build_model(int rank, int size) {
    tess_registry *reg;
    TESS_TEST_CHECK(tess_registry_create(&reg) == TESS_OK, "create");
    struct {
        const char *name;
        int64_t shape[2];
        tess_layout l;
    } big[] = {
        {"large.rows", {1100, 1024}, tess_layout_sharded(0, size, rank)},
        {"large.cols", {600, 2048}, tess_layout_sharded(1, size, rank)},
        {"large.repl", {700, 1024}, tess_layout_replicated()},
        {"grid", {40, 30}, tess_layout_block_cyclic(1, size, 0, rank, 4, 5)},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        TESS_TEST_CHECK(tess_registry_add(reg, big[i].name, 2, big[i].shape, &big[i].l, NULL) ==
                            TESS_OK,
                        "add %s: %s", big[i].name, tess_error_text());
    for (int i = 0; i < N_SMALL; i++) {
        char name[32];
        snprintf(name, sizeof name, "small.%d", i);
        int64_t shape[2] = {i + 1, 3};
        tess_layout l = tess_layout_sharded(0, size, rank);
        TESS_TEST_CHECK(tess_registry_add(reg, name, 2, shape, &l, NULL) == TESS_OK, "add %s: %s",
                        name, tess_error_text());
    }
    TESS_TEST_CHECK(tess_registry_finalize(reg) == TESS_OK, "finalize: %s", tess_error_text());
    return reg;
}

/* Global row-major index of local element j of entry e (block-cyclic: column-major local). */
static int64_t global_index(const tess_registry_entry *e, int64_t j) {
    if (e->layout.kind == TESS_LAYOUT_BLOCK_CYCLIC) {
        const tess_layout *l = &e->layout;
        int64_t lr = e->local_shape[0], li = j % lr, lj = j / lr;
        int64_t gi = (li / l->mb * l->nprow + l->prow) * l->mb + li % l->mb;
        int64_t gj = (lj / l->nb * l->npcol + l->pcol) * l->nb + lj % l->nb;
        return gi * e->shape[1] + gj;
    }
    int64_t row = j / e->local_shape[1] + e->global_offset[0];
    int64_t col = j % e->local_shape[1] + e->global_offset[1];
    return row * e->shape[1] + col;
}

static float value(int k, int64_t i, int64_t g) {
    return (float)k * 0.5f + (float)i * 0.25f + (float)((g * 2654435761u) % 10007) * 1e-4f;
}

/* Set k of the state: 0 the params, 1 the extra set m. */
static void fill(tess_registry *reg, float *m, bool clear) {
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < tess_registry_count(reg); i++) {
            const tess_registry_entry *e = tess_registry_get(reg, i);
            float *x = (k == 0 ? tess_registry_params(reg) : m) + e->flat_offset;
            for (int64_t j = 0; j < e->local_count; j++)
                x[j] = clear ? 0.0f : value(k, i, global_index(e, j));
        }
}

static int64_t mismatches(tess_registry *reg, const float *m) {
    int64_t bad = 0;
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < tess_registry_count(reg); i++) {
            const tess_registry_entry *e = tess_registry_get(reg, i);
            const float *x = (k == 0 ? tess_registry_params(reg) : m) + e->flat_offset;
            for (int64_t j = 0; j < e->local_count; j++) {
                float want = value(k, i, global_index(e, j));
                bad += memcmp(&want, &x[j], sizeof want) != 0;
            }
        }
    return bad;
}

/* 1. The worker against inline hashing, on this rank's part of the first three params. */
static void check_worker(const tess_group *g, tess_registry *reg, bool want_worker) {
    tess_state *st = NULL;
    TESS_TEST_CHECK(tess_state_create(&st) == TESS_OK &&
                        tess_state_add_registry(st, "params", reg, false) == TESS_OK,
                    "state: %s", tess_error_text());
    ckpt_plan plan;
    TESS_TEST_CHECK(ckpt_plan_make(g, st, &plan) == TESS_OK && plan.has_bc, "plan: %s",
                    tess_error_text());
    ckpt_hasher *hq = ckpt_hasher_start();
    TESS_TEST_CHECK((hq != NULL) == want_worker, "ckpt_hasher_start: %s, expected %s",
                    hq ? "a worker" : "NULL", want_worker ? "a worker" : "NULL");
    uint64_t got[3] = {0, 0, 0}, want[3];
    for (int64_t i = 0; i < 3; i++) {
        const tess_state_entry *e = plan.items[i].e;
        const ckpt_region *rg = &plan.items[i].r;
        want[i] = ckpt_hash_region(TESS_CKPT_HASH_V2, 0, e, rg, e->data);
        /* the same region in three parts of rows, queued in reverse order */
        const int64_t lo = rg->moff[0], hi = rg->moff[0] + rg->cnt[0];
        const int64_t cut[4] = {lo, lo + (hi - lo) / 3, lo + 2 * (hi - lo) / 3, hi};
        for (int p = 2; p >= 0; p--) {
            ckpt_region part = *rg;
            part.off[0] = rg->off[0] + (cut[p] - lo);
            part.moff[0] = cut[p];
            part.cnt[0] = cut[p + 1] - cut[p];
            part.count = rg->count == 0 ? 0 : rg->count / rg->cnt[0] * part.cnt[0];
            if (part.count > 0) ckpt_hasher_add(hq, TESS_CKPT_HASH_V2, e, &part, e->data, &got[i]);
        }
    }
    ckpt_hasher_finish(hq);
    for (int i = 0; i < 3; i++)
        TESS_TEST_CHECK(got[i] == want[i], "entry %d: worker sum %016llx, inline %016llx", i,
                        (unsigned long long)got[i], (unsigned long long)want[i]);
    ckpt_plan_free(&plan);
    tess_state_destroy(&st);
}

int main(int argc, char **argv) {
    const bool single = argc > 1 && strcmp(argv[1], "single") == 0;
    int level;
    MPI_Init_thread(&argc, &argv, single ? MPI_THREAD_SINGLE : MPI_THREAD_FUNNELED, &level);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL; /* the checkpoint functions' group */
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;
    MPI_Comm comm = rt.comm;
    const int rank = rt.rank, size = rt.size;
    char path[64], bad[64];
    snprintf(path, sizeof path, "load_np%d_%s.h5", size, single ? "single" : "funneled");
    snprintf(bad, sizeof bad, "bad_np%d_%s.h5", size, single ? "single" : "funneled");

    tess_registry *reg = build_model(rank, size);
    float *m;
    TESS_TEST_CHECK(tess_registry_alloc_state(reg, &m) == TESS_OK, "alloc");
    fill(reg, m, false);
    check_worker(g, reg, !single && level >= MPI_THREAD_FUNNELED);

    /* 2. round trip */
    tess_state *state = NULL;
    TESS_TEST_CHECK(tess_state_create(&state) == TESS_OK &&
                        tess_state_add_registry(state, "params", reg, false) == TESS_OK &&
                        tess_state_add_like(state, "optim/m", reg, m, false) == TESS_OK,
                    "state: %s", tess_error_text());
    tess_ckpt_state st = {.state = state, .config_text = "[run]\n", .app = "test_ckpt_load",
                          .step = 3};
    TESS_TEST_CHECK(tess_ckpt_write(g, path, &st) == TESS_OK, "write: %s", tess_error_text());
    fill(reg, m, true);
    TESS_TEST_CHECK(tess_ckpt_load(g, path, &st) == TESS_OK, "load: %s", tess_error_text());
    int64_t wrong = mismatches(reg, m), total;
    MPI_Allreduce(&wrong, &total, 1, MPI_INT64_T, MPI_SUM, comm);
    TESS_TEST_CHECK(total == 0, "%lld elements differ after the load", (long long)total);
    TESS_TEST_CHECK(st.step == 3, "step %lld", (long long)st.step);

    /* 3. one byte of the last slab of large.rows (row 1090 of 1100) flipped on rank 0 */
    int ok = 1;
    if (rank == 0)
        ok = tamper_copy(path, bad) == 0 &&
             tamper_flip_dataset(bad, "/params/large.rows", (1090 * 1024 + 17) * 4 + 1) == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
    TESS_TEST_CHECK(ok, "tampering with %s failed", bad);
    tess_error_clear();
    tess_status s = tess_ckpt_load(g, bad, &st);
    const char *text = tess_error_text();
    TESS_TEST_CHECK(s == TESS_ERR_DATA, "load of %s: %s, expected data error; record:\n%s", bad,
                    tess_status_name(s), text);
    TESS_TEST_CHECK(strstr(text, "1 dataset changed") &&
                        strstr(text, "dataset /params/large.rows does not match its hash"),
                    "record does not name /params/large.rows alone:\n%s", text);
    int v[2] = {(int)s, -(int)s}, r[2];
    MPI_Allreduce(v, r, 2, MPI_INT, MPI_MAX, comm);
    TESS_TEST_CHECK(r[0] == -r[1], "ranks disagree on the status");
    tess_error_clear();

    tess_state_destroy(&state);
    free(m);
    tess_registry_destroy(&reg);
    if (rank == 0) {
        remove(path);
        remove(bad);
    }
    int rc = tess_test_finish_mpi("test_ckpt_load", comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
