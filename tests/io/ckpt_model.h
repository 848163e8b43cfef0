/* ckpt_model.h - a small registry with every layout the checkpoint module handles, and values
 * that are a pure function of (set, entry, global index), so a checkpoint written at any rank
 * count can be checked bitwise at any other. Header-only, for the tests in tests/io/.
 *
 * Entries at P ranks (rank r):
 *   emb.w              [11,6]   sharded dim 0 over P (uneven)
 *   layers.0.attn.w_qkv [5,9]   sharded dim 1 over P
 *   layers.0.norm.g    [7]      replicated
 *   layers.0.mlp.w     [3,4,5]  replicated
 *   experts.w          [4,3,2]  sharded dim 0 over 2 parts held by ranks r % 2 (P even; else 1
 *                               part): each shard repeated over "data-parallel replicas"
 *   grid.a             [9,7]    block-cyclic 2x2 grid (P = 4) or 1 x P, blocks 2 x 3
 *   head.b             [13]     sharded dim 0 over P
 *   tiny               [1]      sharded dim 0 over P (all but rank 0 hold nothing)
 * Variant "other" changes emb.w to [11,8] (a different model). */
#ifndef TESS_TEST_CKPT_MODEL_H
#define TESS_TEST_CKPT_MODEL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/ckpt.h"     /* tess_ckpt_state */
#include "nn/registry.h" /* tess_registry_* */
#include "nn/state.h"    /* tess_state_* */
#include "par/mesh.h"    /* tess_group */

/* The state: params/<name>, optim/m/<name>, optim/v/<name>, optim/step_count. */
typedef struct {
    tess_registry *reg;
    float *m, *v;
    int64_t step_count;
    tess_state *state;
    tess_ckpt_state st;
} ckpt_model;

static inline tess_status ckpt_model_build(ckpt_model *cm, int rank, int size, bool other) {
    memset(cm, 0, sizeof *cm);
    TESS_CHECK(tess_registry_create(&cm->reg));
    const int dp_parts = size % 2 == 0 ? 2 : 1;
    const int grid_r = size == 4 ? 2 : 1, grid_c = size / grid_r;
    struct {
        const char *name;
        int ndim;
        int64_t shape[4];
        tess_layout l;
    } e[] = {
        {"emb.w", 2, {11, other ? 8 : 6}, tess_layout_sharded(0, size, rank)},
        {"layers.0.attn.w_qkv", 2, {5, 9}, tess_layout_sharded(1, size, rank)},
        {"layers.0.norm.g", 1, {7}, tess_layout_replicated()},
        {"layers.0.mlp.w", 3, {3, 4, 5}, tess_layout_replicated()},
        {"experts.w", 3, {4, 3, 2}, tess_layout_sharded(0, dp_parts, rank % dp_parts)},
        {"grid.a", 2, {9, 7},
         tess_layout_block_cyclic(grid_r, grid_c, rank / grid_c, rank % grid_c, 2, 3)},
        {"head.b", 1, {13}, tess_layout_sharded(0, size, rank)},
        {"tiny", 1, {1}, tess_layout_sharded(0, size, rank)},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        TESS_CHECK(tess_registry_add(cm->reg, e[i].name, e[i].ndim, e[i].shape, &e[i].l, NULL));
    TESS_CHECK(tess_registry_finalize(cm->reg));
    TESS_CHECK(tess_registry_alloc_state(cm->reg, &cm->m));
    TESS_CHECK(tess_registry_alloc_state(cm->reg, &cm->v));
    TESS_CHECK(tess_state_create(&cm->state));
    TESS_CHECK(tess_state_add_registry(cm->state, "params", cm->reg, false));
    TESS_CHECK(tess_state_add_like(cm->state, "optim/m", cm->reg, cm->m, false));
    TESS_CHECK(tess_state_add_like(cm->state, "optim/v", cm->reg, cm->v, false));
    TESS_CHECK(tess_state_add_i64(cm->state, "optim/step_count", &cm->step_count));
    cm->st = (tess_ckpt_state){.state = cm->state, .config_text = "[run]\nseed = 7\n",
                               .app = "test_ckpt"};
    return TESS_OK;
}

static inline void ckpt_model_free(ckpt_model *cm) {
    tess_state_destroy(&cm->state);
    free(cm->m);
    free(cm->v);
    tess_registry_destroy(&cm->reg);
}

/* The value of element g (global row-major index) of entry i in set k. */
static inline float ckpt_model_value(int k, int64_t i, int64_t g) {
    return (float)(k * 1.25 + (double)i * 0.5 + sin((double)g * 0.37 + (double)i)) +
           (g == 3 ? 1e-30f : 0.0f);
}

/* Global row-major index of local element j of entry e. */
static inline int64_t ckpt_model_global_index(const tess_registry_entry *e, int64_t j) {
    if (e->layout.kind == TESS_LAYOUT_BLOCK_CYCLIC) {
        const tess_layout *l = &e->layout;
        int64_t lr = e->local_shape[0], li = j % lr, lj = j / lr; /* column-major local */
        int64_t gi = (li / l->mb * l->nprow + l->prow) * l->mb + li % l->mb;
        int64_t gj = (lj / l->nb * l->npcol + l->pcol) * l->nb + lj % l->nb;
        return gi * e->shape[1] + gj;
    }
    int64_t rem = j, g = 0, idx[TESS_MAX_DIMS];
    for (int d = e->ndim - 1; d >= 0; d--) {
        idx[d] = rem % e->local_shape[d] + e->global_offset[d];
        rem /= e->local_shape[d];
    }
    for (int d = 0; d < e->ndim; d++) g = g * e->shape[d] + idx[d];
    return g;
}

static inline float *ckpt_model_set(ckpt_model *cm, int k) {
    return k == 0 ? tess_registry_params(cm->reg) : k == 1 ? cm->m : cm->v;
}

static inline void ckpt_model_fill(ckpt_model *cm, int64_t step) {
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < tess_registry_count(cm->reg); i++) {
            const tess_registry_entry *e = tess_registry_get(cm->reg, i);
            float *x = ckpt_model_set(cm, k) + e->flat_offset;
            for (int64_t j = 0; j < e->local_count; j++)
                x[j] = ckpt_model_value(k, i, ckpt_model_global_index(e, j));
        }
    cm->step_count = step + 5;
    cm->st.step = step;
    cm->st.data_cursor = step * 32;
    cm->st.seed = 0xfeedbeefcafeull;
}

/* Number of elements (over all sets) whose bits differ from the expected values. */
static inline int64_t ckpt_model_mismatches(ckpt_model *cm) {
    int64_t bad = 0;
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < tess_registry_count(cm->reg); i++) {
            const tess_registry_entry *e = tess_registry_get(cm->reg, i);
            const float *x = ckpt_model_set(cm, k) + e->flat_offset;
            for (int64_t j = 0; j < e->local_count; j++) {
                float want = ckpt_model_value(k, i, ckpt_model_global_index(e, j));
                bad += memcmp(&want, &x[j], sizeof want) != 0;
            }
        }
    return bad;
}

static inline void ckpt_model_clear(ckpt_model *cm) {
    int64_t n = tess_registry_local_total(cm->reg);
    memset(tess_registry_params(cm->reg), 0, (size_t)n * sizeof(float));
    memset(cm->m, 0, (size_t)n * sizeof(float));
    memset(cm->v, 0, (size_t)n * sizeof(float));
    cm->step_count = 0;
    cm->st.step = cm->st.data_cursor = -1;
    cm->st.seed = 0;
}

#endif
