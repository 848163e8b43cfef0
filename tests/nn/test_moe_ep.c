/* test_moe_ep.c - expert parallelism of the MoE layer (nn/moe.h over par/dispatch.h) at 1, 2 and
 * 4 ranks: two coupled MoE layers with a shared expert and every aux loss on (R_sp exact across
 * ranks: co-located pairs on their experts' rank, the split pairs' z travels
 * with the rows), experts sharded over the ep group (= all ranks). Rank r runs rows
 * [r N, (r+1) N) of a global batch; the reference is the single-rank layer pair (every expert
 * local) run on each rank's rows in turn, accumulating gradients. Checked within 1e-6 (max
 * difference over max magnitude): outputs, aux terms, input gradients, each rank's expert
 * gradients times the ep size against the reference's rows of its experts (moe.h: expert
 * gradients are divided by the ep size), and the router gradients summed over the ranks. Also: the registry entries (sharded layout, EXPERT tag, the edp group) and the
 * config error for E not divisible by the ep size. The same layers over the all-gather dispatcher
 * (the oracle of par/dispatch.h) give the same outputs, aux terms and gradients within 1e-6, and
 * the experts of all ranks process exactly the rows all ranks sent (count conservation). Four configurations: dropless softmax;
 * dropless with every token routed to experts 0 and 1 (a selection bias; their ranks receive
 * every rank's rows, the others none);
 * sigmoid scores with capacity by score, padding and router jitter; capacity by position with
 * Guo et al.'s orthogonality and variance losses. Drop-and-pad exchanges fixed-size blocks: with
 * padding and a capacity that drops nothing the layers equal the dropless ones (outputs, aux,
 * gradients), and the PMPI wrappers below show that they make no count exchange and no
 * all-to-all-v (one MPI_Alltoall per row exchange), where the dropless ones make one count
 * exchange per layer and all-to-all-v row exchanges. Dropless, the expert side grows from the
 * exchanged counts to the received rows plus 1/8 and no further on repeated steps (check_grow). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../par/par_test.h" /* par_test_init, DIST_TEST_OK */
#include "nn/moe.h"          /* tess_nn_moe_* */
#include "nn/registry.h"     /* tess_registry_* */
#include "par/coll.h"        /* tess_par_allreduce_f64 */
#include "par/mesh.h"        /* tess_group_* */
#include "tess_ref.h"        /* tess_ref_fill_uniform */

enum { N = 7, C = 6, F = 5, E = 4, K = 2 };

#include "../par/mpi_count.h" /* n_alltoall, n_alltoallv, n_isend: PMPI counters */

typedef struct {
    tess_registry *reg;
    tess_nn_moe_stack *st;
    tess_nn_ffn *f[2];
    tess_arena arena;
    float *y1, *dy1, *scratch;
} pair;

static const tess_tfm_config tcfg = {.V = 8, .T = N, .C = C, .NH = 1, .F = 4, .L = 2};

/* The pair for up to `rows` rows. */
static tess_status pair_build_rows(pair *p, const tess_nn_moe_config *mc, int64_t rows) {
    *p = (pair){0};
    TESS_CHECK(tess_registry_create(&p->reg));
    TESS_CHECK(tess_nn_moe_stack_create(&p->st, mc));
    for (int l = 0; l < 2; l++) {
        TESS_CHECK(tess_nn_moe_stack_make_ffn(p->st, l, &tcfg, &p->f[l]));
        TESS_CHECK(tess_nn_ffn_add_params(p->f[l], p->reg, l ? "m2" : "m1"));
    }
    TESS_CHECK(tess_registry_finalize(p->reg));
    tess_arena m;
    tess_arena_init_measure(&m);
    for (int l = 0; l < 2; l++) TESS_CHECK(tess_nn_ffn_carve(p->f[l], &m, rows));
    TESS_CHECK(tess_arena_init(&p->arena, tess_arena_high_water(&m)));
    for (int l = 0; l < 2; l++) TESS_CHECK(tess_nn_ffn_carve(p->f[l], &p->arena, rows));
    p->y1 = calloc((size_t)(rows * C), sizeof(float));
    p->dy1 = calloc((size_t)(rows * C), sizeof(float));
    p->scratch = calloc((size_t)tess_nn_ffn_scratch_floats(p->f[0], rows), sizeof(float));
    TESS_REQUIRE(p->y1 && p->dy1 && p->scratch, TESS_ERR_MEM, "pair buffers");
    /* every entry from its global values: element g of entry i is the same at any ep size */
    for (int64_t i = 0; i < tess_registry_count(p->reg); i++) {
        const tess_registry_entry *e = tess_registry_get(p->reg, i);
        int64_t total = 1;
        for (int d = 0; d < e->ndim; d++) total *= e->shape[d];
        float *glob = malloc((size_t)total * sizeof(float));
        TESS_REQUIRE(glob, TESS_ERR_MEM, "globals");
        tess_ref_fill_uniform(glob, total, (uint32_t)(50 + i), strstr(e->name, "router") ? 1.5f : 0.5f);
        const int64_t off = e->global_offset[0] * (total / e->shape[0]);
        memcpy(tess_registry_param(p->reg, i), glob + off, (size_t)e->local_count * sizeof(float));
        free(glob);
    }
    return TESS_OK;
}

static tess_status pair_build(pair *p, const tess_nn_moe_config *mc) {
    return pair_build_rows(p, mc, N);
}

static void pair_free(pair *p) {
    for (int l = 0; l < 2; l++) tess_nn_ffn_destroy(&p->f[l]);
    tess_nn_moe_stack_destroy(&p->st);
    tess_registry_destroy(&p->reg);
    tess_arena_free(&p->arena);
    free(p->y1), free(p->dy1), free(p->scratch);
}

/* forward y2 = m2(m1(x)) on n rows, aux total; backward with dy2 and the aux terms scaled by
 * `scale` into dx and the registry (accumulating) */
static double pair_run_n(pair *p, float *y2, float *dx, const float *x, const float *dy2,
                         int64_t n, float scale) {
    tess_nn_ffn_forward(p->f[0], p->y1, x, n);
    tess_nn_ffn_forward(p->f[1], y2, p->y1, n);
    tess_nn_moe_aux aux;
    tess_nn_moe_stack_aux(p->st, &aux);
    memset(p->dy1, 0, (size_t)(n * C) * sizeof(float));
    tess_nn_moe_stack_set_loss_scale(p->st, scale);
    tess_nn_ffn_backward(p->f[1], p->dy1, p->scratch, dy2, n);
    tess_nn_ffn_backward(p->f[0], dx, p->scratch, p->dy1, n);
    return aux.total;
}

static double pair_run(pair *p, float *y2, float *dx, const float *x, const float *dy2) {
    return pair_run_n(p, y2, dx, x, dy2, N, 1.0f);
}

static double rel(const float *a, const float *b, int64_t n) {
    double d = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

/* Skewed routing (config with bias_balance): a selection bias of 10 on experts 0 and 1 of both
 * layers, far above any score difference, sends every token to them, so the ranks holding them
 * receive every rank's rows (P N k in all) and the others none. */
static void skew(pair *p) {
    for (int l = 0; l < 2; l++) {
        float *b = tess_nn_moe_stack_bias(p->st, l);
        for (int e = 0; e < E; e++) b[e] = e < 2 ? 10.0f : 0.0f;
    }
}

/* The layer pair sharded over world (edp = self) against the single-rank pair on every rank's
 * rows in turn, for config base (ep and edp unset); skewed routing (skew) when `skewed`. Training
 * step 2 (router jitter when configured), rank q's first token q N. */
static void check_ep(const tess_nn_moe_config *base, const char *label, tess_group *world,
                     tess_group *self, int rank, int size, bool skewed) {
    pair ep, ref, ag;
    tess_nn_moe_config epc = *base;
    epc.ep = world, epc.edp = self;
    DIST_TEST_OK(pair_build(&ep, &epc));
    DIST_TEST_OK(pair_build(&ref, base));
    epc.ep_allgather = true;
    DIST_TEST_OK(pair_build(&ag, &epc));
    if (skewed) skew(&ep), skew(&ref), skew(&ag);
    const int64_t wi = tess_registry_find(ep.reg, "m1.w_gate");
    const tess_registry_entry *we = tess_registry_get(ep.reg, wi);
    TESS_TEST_CHECK(we->local_shape[0] == E / size && (we->tags & TESS_TAG_EXPERT) &&
                        we->group == self,
                    "expert entry: %lld local experts, tags %u", (long long)we->local_shape[0],
                    we->tags);
    TESS_TEST_CHECK((tess_registry_get(ep.reg, tess_registry_find(ep.reg, "m1.router"))->tags &
                     TESS_TAG_DENSE) != 0,
                    "router is DENSE");
    /* global batch */
    float *x = malloc((size_t)(size * N * C) * sizeof(float));
    float *dout = malloc((size_t)(size * N * C) * sizeof(float));
    float y[N * C], dx[N * C], ry[N * C], rdx[N * C];
    tess_ref_fill_uniform(x, size * N * C, 7, 1.0f);
    tess_ref_fill_uniform(dout, size * N * C, 8, 1.0f);
    memset(dx, 0, sizeof dx);
    tess_registry_zero_grads(ep.reg);
    tess_nn_moe_stack_set_step(ep.st, true, 2, rank * N);
    const double aux = pair_run(&ep, y, dx, x + rank * N * C, dout + rank * N * C);
    DIST_TEST_OK(tess_nn_moe_stack_status(ep.st));
    /* count conservation: the rows the experts of all ranks processed are the pairs kept by all
     * ranks (every expert's block of capacity rows with padding) */
    for (int l = 0; l < 2; l++) {
        int64_t c[2] = {tess_nn_moe_stack_expert_rows(ep.st, l),
                        base->pad ? E * tess_nn_moe_capacity(N, E, base->k, base->capacity_factor)
                                  : N * base->k - tess_nn_moe_stack_dropped(ep.st, l)};
        DIST_TEST_OK(tess_par_allreduce_i64(world, c, 2, TESS_PAR_SUM));
        TESS_TEST_CHECK(c[0] == c[1], "%s: layer %d: experts processed %lld rows, ranks sent %lld",
                        label, l, (long long)c[0], (long long)c[1]);
    }
    /* the all-gather oracle on the same rows */
    float ay[N * C], adx[N * C];
    memset(adx, 0, sizeof adx);
    tess_registry_zero_grads(ag.reg);
    tess_nn_moe_stack_set_step(ag.st, true, 2, rank * N);
    const double aaux = pair_run(&ag, ay, adx, x + rank * N * C, dout + rank * N * C);
    DIST_TEST_OK(tess_nn_moe_stack_status(ag.st));
    double oworst = fmax(rel(y, ay, N * C), rel(dx, adx, N * C));
    TESS_TEST_CHECK(fabs(aux - aaux) <= 1e-6 * fabs(aaux), "%s: aux %.9g vs the all-gather "
                    "oracle's %.9g", label, aux, aaux);
    for (int64_t i = 0; i < tess_registry_count(ep.reg); i++)
        oworst = fmax(oworst, rel(tess_registry_grad(ep.reg, i), tess_registry_grad(ag.reg, i),
                                  tess_registry_get(ep.reg, i)->local_count));
    TESS_TEST_CHECK(oworst <= 1e-6, "%s: outputs and gradients vs the all-gather oracle: %.3g",
                    label, oworst);
    tess_registry_zero_grads(ref.reg);
    double raux = 0;
    for (int q = 0; q < size; q++) {
        float yq[N * C], dxq[N * C];
        memset(dxq, 0, sizeof dxq);
        tess_nn_moe_stack_set_step(ref.st, true, 2, q * N);
        const double a = pair_run(&ref, yq, dxq, x + q * N * C, dout + q * N * C);
        if (q == rank) raux = a, memcpy(ry, yq, sizeof ry), memcpy(rdx, dxq, sizeof rdx);
    }
    const double ey = rel(y, ry, N * C), edx = rel(dx, rdx, N * C);
    TESS_TEST_CHECK(ey <= 1e-6, "%s: outputs: %.3g", label, ey);
    TESS_TEST_CHECK(edx <= 1e-6, "%s: input gradients: %.3g", label, edx);
    TESS_TEST_CHECK(fabs(aux - raux) <= 1e-6 * fabs(raux), "%s: aux %.9g vs %.9g", label, aux, raux);
    double worst = 0;
    for (int64_t i = 0; i < tess_registry_count(ep.reg); i++) {
        const tess_registry_entry *e = tess_registry_get(ep.reg, i);
        const float *g = tess_registry_grad(ep.reg, i);
        const float *rg = tess_registry_grad(ref.reg, i);
        double err;
        if (e->tags & TESS_TAG_EXPERT) {
            const int64_t per = e->local_count / e->local_shape[0];
            /* the layer divides expert gradients by the ep size (moe.h) */
            float *gs = malloc((size_t)e->local_count * sizeof(float));
            for (int64_t j = 0; j < e->local_count; j++) gs[j] = g[j] * (float)size;
            err = rel(gs, rg + e->global_offset[0] * per, e->local_count);
            free(gs);
        } else {
            double *sum = malloc((size_t)e->local_count * sizeof(double));
            float *sf = malloc((size_t)e->local_count * sizeof(float));
            for (int64_t j = 0; j < e->local_count; j++) sum[j] = g[j];
            DIST_TEST_OK(tess_par_allreduce_f64(world, sum, e->local_count, TESS_PAR_SUM));
            for (int64_t j = 0; j < e->local_count; j++) sf[j] = (float)sum[j];
            err = rel(sf, rg, e->local_count);
            free(sum), free(sf);
        }
        TESS_TEST_CHECK(err <= 1e-6, "%s: gradient of %s: %.3g", label, e->name, err);
        worst = fmax(worst, err);
    }
    if (rank == 0)
        printf("moe ep=%d %s: vs 1 rank: outputs %.2e, input grads %.2e, parameter grads %.2e; "
               "vs the all-gather oracle %.2e (max rel)\n",
               size, label, ey, edx, worst, oworst);
    free(x), free(dout);
    pair_free(&ep);
    pair_free(&ref);
    pair_free(&ag);
}

/* Dropless, the expert side grows from the exchanged counts (moe.h): after a balanced step each
 * layer holds exactly its received rows plus 1/8 (+1); a skewed step (skew) makes the ranks of
 * experts 0 and 1 receive every rank's rows, and their expert side grows to them; the same
 * skewed step again, and a balanced one after it, grow nothing (the steady state allocates
 * nothing). */
static void check_grow(const tess_nn_moe_config *base, tess_group *world, tess_group *self,
                       int rank, int size) {
    tess_nn_moe_config c = *base;
    c.ep = world, c.edp = self;
    pair p;
    DIST_TEST_OK(pair_build(&p, &c));
    float *x = malloc((size_t)(N * C) * sizeof(float)), *dout = malloc((size_t)(N * C) * sizeof(float));
    float y[N * C], dx[N * C];
    tess_ref_fill_uniform(x, N * C, (uint32_t)(47 + rank), 1.0f);
    tess_ref_fill_uniform(dout, N * C, (uint32_t)(57 + rank), 1.0f);
    const int nle = E / size; /* experts per rank; experts 0, 1 on ranks 0 .. 1 / nle */
    int64_t grows[2][4], prev[2] = {0, 0};
    float bias0[2][E]; /* the balanced step's biases, restored for the last step */
    for (int l = 0; l < 2; l++) memcpy(bias0[l], tess_nn_moe_stack_bias(p.st, l), sizeof bias0[l]);
    for (int step = 0; step < 4; step++) {
        if (step == 1) skew(&p);
        if (step == 3)
            for (int l = 0; l < 2; l++)
                memcpy(tess_nn_moe_stack_bias(p.st, l), bias0[l], sizeof bias0[l]);
        memset(dx, 0, sizeof dx);
        pair_run(&p, y, dx, x, dout);
        DIST_TEST_OK(tess_nn_moe_stack_status(p.st));
        for (int l = 0; l < 2; l++) {
            const int64_t rows = tess_nn_moe_stack_expert_rows(p.st, l);
            const int64_t cap = tess_nn_moe_stack_expert_cap(p.st, l, &grows[l][step]);
            /* grown to the received rows plus 1/8 (+1) when they exceed what it held */
            const int64_t want_cap = step == 0 || rows > prev[l] ? rows + rows / 8 + 1 : prev[l];
            TESS_TEST_CHECK(cap == want_cap, "grow: step %d layer %d holds %lld rows for %lld "
                            "received, expected %lld", step, l, (long long)cap, (long long)rows,
                            (long long)want_cap);
            prev[l] = cap;
            if (step == 1) {
                /* a rank holding expert 0 or 1 receives every rank's slot of it */
                const int64_t want = (int64_t)size * N * ((rank * nle < 2) ? (nle < 2 ? 1 : 2) : 0);
                TESS_TEST_CHECK(rows == want, "grow: skewed layer %d received %lld rows, "
                                "expected %lld", l, (long long)rows, (long long)want);
            }
            if (step >= 2)
                TESS_TEST_CHECK(grows[l][step] == grows[l][1], "grow: layer %d grew again at "
                                "step %d (%lld times, %lld after the skewed step)", l, step,
                                (long long)grows[l][step], (long long)grows[l][1]);
        }
    }
    if (rank == 0)
        printf("moe ep=%d grow: layer 0 holds %lld rows, grew %lld times (balanced, skewed, "
               "skewed, balanced steps); grown bytes %lld\n", size,
               (long long)tess_nn_moe_stack_expert_cap(p.st, 0, NULL), (long long)grows[0][3],
               (long long)tess_nn_moe_stack_grown_bytes(p.st));
    free(x), free(dout);
    pair_free(&p);
}

/* Drop-and-pad against dropless at ep = world: capacity by score with factor E/k (capacity N: no
 * expert can receive more than N of a rank's pairs, so nothing is dropped) and padding gives the
 * dropless outputs, aux terms and gradients (the padding rows are zeros and get zero gradients)
 * within 1e-6. Padded, each layer's forward makes 3 row exchanges (x out, y and z back) and its
 * backward 3 (dy and dz out, dx back), counted over both layers 12 MPI_Alltoall and no
 * MPI_Alltoallv. Dropless, R_sp's co-located fast path (moe.h): per layer one count exchange
 * (MPI_Alltoall), in forward x (the token ids in two extra columns) and y, in backward dy and
 * dx (MPI_Alltoallv): 2 and 8, no collective beyond the dropless layer's; the split rows' z
 * (forward) and dz (backward) go point-to-point, each exchange ending with one message of the
 * co-located sums or of N to every other rank: at least 4 (size - 1) MPI_Isend per rank. */
static void check_padded(const tess_nn_moe_config *base, tess_group *world, tess_group *self,
                         int rank, int size) {
    tess_nn_moe_config dc = *base, pc = *base;
    dc.ep = pc.ep = world, dc.edp = pc.edp = self;
    pc.drop = TESS_NN_MOE_DROP_PROBS, pc.capacity_factor = (double)E / K, pc.pad = true;
    pair d, p;
    DIST_TEST_OK(pair_build(&d, &dc));
    DIST_TEST_OK(pair_build(&p, &pc));
    float *x = malloc((size_t)(N * C) * sizeof(float)), *dout = malloc((size_t)(N * C) * sizeof(float));
    float dy[N * C], ddx[N * C], py[N * C], pdx[N * C];
    tess_ref_fill_uniform(x, N * C, (uint32_t)(27 + rank), 1.0f);
    tess_ref_fill_uniform(dout, N * C, (uint32_t)(37 + rank), 1.0f);
    memset(ddx, 0, sizeof ddx), memset(pdx, 0, sizeof pdx);
    tess_registry_zero_grads(d.reg), tess_registry_zero_grads(p.reg);
    int a0 = n_alltoall, v0 = n_alltoallv, s0 = n_isend;
    const double daux = pair_run(&d, dy, ddx, x, dout);
    const int da = n_alltoall - a0, dv = n_alltoallv - v0, ds = n_isend - s0;
    a0 = n_alltoall, v0 = n_alltoallv;
    const double paux = pair_run(&p, py, pdx, x, dout);
    const int pa = n_alltoall - a0, pv = n_alltoallv - v0;
    DIST_TEST_OK(tess_nn_moe_stack_status(d.st));
    DIST_TEST_OK(tess_nn_moe_stack_status(p.st));
    TESS_TEST_CHECK(pa == 12 && pv == 0, "padded: %d MPI_Alltoall, %d MPI_Alltoallv; expected "
                    "12 and 0", pa, pv);
    TESS_TEST_CHECK(da == 2 && dv == 8, "dropless: %d MPI_Alltoall, %d MPI_Alltoallv; expected "
                    "2 and 8", da, dv);
    TESS_TEST_CHECK(ds >= 4 * (size - 1) && (size > 1 || ds == 0),
                    "dropless: %d MPI_Isend, expected at least %d", ds, 4 * (size - 1));
    for (int l = 0; l < 2; l++)
        TESS_TEST_CHECK(tess_nn_moe_stack_dropped(p.st, l) == 0, "padded layer %d dropped %lld",
                        l, (long long)tess_nn_moe_stack_dropped(p.st, l));
    double worst = fmax(rel(py, dy, N * C), rel(pdx, ddx, N * C));
    for (int64_t i = 0; i < tess_registry_count(p.reg); i++)
        worst = fmax(worst, rel(tess_registry_grad(p.reg, i), tess_registry_grad(d.reg, i),
                                tess_registry_get(p.reg, i)->local_count));
    TESS_TEST_CHECK(worst <= 1e-6, "padded, nothing dropped vs dropless: %.3g", worst);
    TESS_TEST_CHECK(fabs(paux - daux) <= 1e-6 * fabs(daux), "padded aux %.9g vs dropless %.9g",
                    paux, daux);
    if (rank == 0)
        printf("moe ep=%d padded (fixed-size MPI_Alltoall, %d calls, %d all-to-all-v) vs dropless "
               "(%d all-to-all, %d all-to-all-v, %d sends on rank 0): max rel %.2e\n",
               size, pa, pv, da, dv, ds, worst);
    free(x), free(dout);
    pair_free(&d);
    pair_free(&p);
}

/* The objective on a global batch of P N rows, (1/P) sum_r [P <dout_r, y_r> + aux_r] with the
 * global-batch L_lb (lb_group = world), has the gradients of one rank on all P N rows at once
 * (`whole`), whether split over the ranks as data parallelism (dense gradients averaged over
 * the ranks) or as data and expert parallelism (experts sharded over world, expert gradients
 * already the mean: moe.h). And one rank running the P N rows as P micro-batches of N with
 * aux scale 1/P accumulates the gradients of `whole` when lambda_lb = 0 (the per-micro-batch
 * L_lb depends on the split by definition). Dropless: a capacity is per rank and micro-batch. */
static void check_split(const tess_nn_moe_config *base, tess_group *world, tess_group *self,
                        int rank, int size) {
    const int64_t B = (int64_t)size * N;
    float *x = malloc((size_t)(B * C) * sizeof(float)), *dout = malloc((size_t)(B * C) * sizeof(float));
    float *wy = malloc((size_t)(B * C) * sizeof(float)), *wdx = calloc((size_t)(B * C), sizeof(float));
    float *my = malloc((size_t)(B * C) * sizeof(float)), *mdx = calloc((size_t)(B * C), sizeof(float));
    float y[N * C], dx[N * C], dsc[N * C];
    tess_ref_fill_uniform(x, B * C, 17, 1.0f);
    tess_ref_fill_uniform(dout, B * C, 18, 1.0f);
    for (int64_t i = 0; i < N * C; i++) dsc[i] = dout[rank * N * C + i] * (float)size;
    for (int mode = 0; mode < 3; mode++) { /* 0: dp; 1: dp and ep; 2: micro-batches */
        tess_nn_moe_config wc = *base, sc = *base;
        if (mode == 2) wc.lambda_lb = sc.lambda_lb = 0;
        if (mode < 2) sc.lb_group = world;
        if (mode == 1) sc.ep = world, sc.edp = self;
        pair whole, split;
        DIST_TEST_OK(pair_build_rows(&whole, &wc, B));
        DIST_TEST_OK(pair_build_rows(&split, &sc, N));
        tess_registry_zero_grads(whole.reg);
        memset(wdx, 0, (size_t)(B * C) * sizeof(float));
        const double waux = pair_run_n(&whole, wy, wdx, x, dout, B, 1.0f);
        tess_registry_zero_grads(split.reg);
        double saux = 0, err = 0;
        if (mode < 2) {
            memset(dx, 0, sizeof dx);
            saux = pair_run_n(&split, y, dx, x + rank * N * C, dsc, N, 1.0f);
            DIST_TEST_OK(tess_nn_moe_stack_status(split.st));
            DIST_TEST_OK(tess_par_allreduce_f64(world, &saux, 1, TESS_PAR_MEAN));
            for (int64_t i = 0; i < N * C; i++) dx[i] /= (float)size;
            err = fmax(rel(y, wy + rank * N * C, N * C), rel(dx, wdx + rank * N * C, N * C));
        } else {
            memset(mdx, 0, (size_t)(B * C) * sizeof(float));
            for (int q = 0; q < size; q++)
                saux += pair_run_n(&split, my + q * N * C, mdx + q * N * C, x + q * N * C,
                                   dout + q * N * C, N, 1.0f / (float)size) / size;
            err = fmax(rel(my, wy, B * C), rel(mdx, wdx, B * C));
        }
        for (int64_t i = 0; i < tess_registry_count(split.reg); i++) {
            const tess_registry_entry *e = tess_registry_get(split.reg, i);
            const int64_t n = e->local_count;
            double *g = malloc((size_t)n * sizeof(double));
            float *gf = malloc((size_t)n * sizeof(float));
            for (int64_t j = 0; j < n; j++) g[j] = tess_registry_grad(split.reg, i)[j];
            if (mode < 2 && !(e->tags & TESS_TAG_EXPERT && mode == 1))
                DIST_TEST_OK(tess_par_allreduce_f64(world, g, n, TESS_PAR_MEAN));
            for (int64_t j = 0; j < n; j++) gf[j] = (float)g[j];
            const int64_t per = e->ndim > 0 && e->local_shape[0] > 0 ? n / e->local_shape[0] : 0;
            const float *wg = tess_registry_grad(whole.reg, i) +
                              (e->tags & TESS_TAG_EXPERT ? e->global_offset[0] * per : 0);
            const double eg = rel(gf, wg, n);
            TESS_TEST_CHECK(eg <= 1e-5, "split %d: gradient of %s: %.3g", mode, e->name, eg);
            err = fmax(err, eg);
            free(g), free(gf);
        }
        TESS_TEST_CHECK(err <= 1e-5, "split %d: outputs, gradients vs the whole batch: %.3g", mode,
                        err);
        TESS_TEST_CHECK(fabs(saux - waux) <= 1e-5 * fabs(waux), "split %d: aux %.9g vs %.9g",
                        mode, saux, waux);
        if (rank == 0)
            printf("moe split %s on %d ranks: max rel difference to the whole batch %.2e\n",
                   mode == 0 ? "dp" : mode == 1 ? "dp+ep" : "micro-batches", size, err);
        pair_free(&whole);
        pair_free(&split);
    }
    free(x), free(dout), free(wy), free(wdx), free(my), free(mdx);
}

int main(int argc, char **argv) {
    int rank, size;
    par_test_init(&argc, &argv, &rank, &size);
    tess_group *world = NULL, *self = NULL;
    DIST_TEST_OK(tess_group_create(MPI_COMM_WORLD, "ep", &world));
    DIST_TEST_OK(tess_group_split(world, rank, 0, "edp", &self));
    const tess_nn_moe_config base = {.E = E, .k = K, .F = F, .every = 1, .shared_F = 3, .lambda_lb = 0.5,
                                     .lambda_z = 0.3, .lambda_sp = 0.7, .lambda_cp = 0.9,
                                     .phi = TESS_NN_MOE_PHI_SQ, .std = 0.02};
    tess_nn_moe_config epc = base;
    epc.ep = world, epc.edp = self;
    if (E % size == 0) {
        check_ep(&base, "dropless", world, self, rank, size, false);
        tess_nn_moe_config sk = base;
        sk.bias_balance = true;
        check_ep(&sk, "dropless, skewed to experts 0 and 1", world, self, rank, size, true);
        /* k = 3: at ep 2 a token's rows are in split and co-located pairs at once (the fast
         * path's backward adds the co-located gradient to the split rows' there) */
        tess_nn_moe_config k3 = base;
        k3.k = 3;
        check_ep(&k3, "dropless, k = 3", world, self, rank, size, false);
        check_grow(&sk, world, self, rank, size);
        /* sigmoid scores, capacity 0.75 by score with padding, jitter */
        tess_nn_moe_config cap = base;
        cap.score = TESS_NN_MOE_SCORE_SIGMOID, cap.lambda_z = 0, cap.jitter = 0.2, cap.seed = 3;
        cap.drop = TESS_NN_MOE_DROP_PROBS, cap.capacity_factor = 0.75, cap.pad = true;
        check_ep(&cap, "sigmoid+capacity+pad+jitter", world, self, rank, size, false);
        cap.score = TESS_NN_MOE_SCORE_SOFTMAX, cap.lambda_z = 0.3;
        cap.drop = TESS_NN_MOE_DROP_POSITION, cap.pad = false, cap.lambda_o = 0.6, cap.lambda_v = 0.8;
        check_ep(&cap, "capacity by position, Guo o+v", world, self, rank, size, false);
        tess_nn_moe_config all = base;
        all.lambda_o = 0.6, all.lambda_v = 0.8;
        check_split(&all, world, self, rank, size);
        check_padded(&base, world, self, rank, size);
    }
    /* E not divisible by the ep size */
    tess_nn_moe_config bad = epc;
    bad.E = 3 * size + (size > 1);
    bad.k = 2;
    if (size > 1)
        DIST_TEST_FAILS(tess_nn_moe_check_config(&bad), TESS_ERR_CONFIG,
                        "must be divisible by the expert-parallel size");
    tess_group_destroy(&self);
    tess_group_destroy(&world);
    int rc = tess_test_finish_mpi("nn_moe_ep", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
