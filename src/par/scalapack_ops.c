/* scalapack_ops.c - checked wrappers of p?gemm, p?posv, p?syevd and p?gesvd (see scalapack.h).
 *
 * Each wrapper runs the same steps on every rank of the grid's group:
 *   1. check the arguments here (ScaLAPACK's own checks print from every rank and some abort),
 *      then agree on the outcome;
 *   2. grid ranks: workspace query (lwork = -1) and allocation, agreed again;
 *   3. grid ranks: the call; then INFO is reduced over the group, so ranks outside the
 *      grid return the same status;
 *   4. eigen/singular values are broadcast from rank 0 to every rank.
 * All ScaLAPACK calls use the whole matrices (IA = JA = 1) and the lower triangle (UPLO = 'L'). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpicheck.h"       /* TESS_MPI_CHECK */
#include "core/status.h"         /* TESS_REQUIRE, TESS_CHECK, tess_error_push */
#include "par/scalapack.h"      /* tess_scal_* */
#include "par/coll.h"           /* tess_par_agree */
#include "par/scalapack_impl.h" /* ScaLAPACK prototypes, tess_scal_check_matrix */

/* Reduce ScaLAPACK's INFO over the grid's group: out[0] is the largest positive INFO, out[1]
 * the largest -INFO (an argument ScaLAPACK rejected despite our checks). */
static tess_status scal_reduce_info(const tess_scal_grid *g, int info, int out[2]) {
    out[0] = info > 0 ? info : 0;
    out[1] = info < 0 ? -info : 0;
    TESS_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, out, 2, MPI_INT, MPI_MAX, g->group->comm));
    return TESS_OK;
}

/* Workspace size from a query result; float results are rounded, so pad them. */
static tess_status scal_lwork(double query, tess_scal_dtype t, int *lwork) {
    double pad = t == TESS_SCAL_F32 ? query * 1e-6 + 1.0 : 0.0;
    double w = ceil(query + pad);
    TESS_REQUIRE(w >= 1.0 && w <= 2147483647.0, TESS_ERR_ARG,
                 "ScaLAPACK asks for %.0f workspace elements; the 32-bit int interface allows "
                 "at most 2147483647",
                 w);
    *lwork = (int)w;
    return TESS_OK;
}

static void *scal_alloc(size_t count, size_t es) { return malloc((count > 0 ? count : 1) * es); }

/* ---- gemm ---- */

static tess_status scal_gemm_check(const tess_scal_matrix *C, const tess_scal_matrix *A,
                                   const tess_scal_matrix *B, bool trans_a, bool trans_b) {
    const tess_scal_grid *g = C->grid;
    TESS_CHECK(tess_scal_check_matrix(g, C, C->dtype, "C"));
    TESS_CHECK(tess_scal_check_matrix(g, A, C->dtype, "A"));
    TESS_CHECK(tess_scal_check_matrix(g, B, C->dtype, "B"));
    TESS_REQUIRE(C != A && C != B, TESS_ERR_ARG, "C must be a different matrix from A and B");
    int64_t am = trans_a ? A->n : A->m, ak = trans_a ? A->m : A->n;
    int64_t bk = trans_b ? B->n : B->m, bn = trans_b ? B->m : B->n;
    TESS_REQUIRE(am == C->m, TESS_ERR_ARG,
                 "A: op(A) has %lld rows, C has %lld (A is %lld x %lld%s)", (long long)am,
                 (long long)C->m, (long long)A->m, (long long)A->n,
                 trans_a ? ", transposed" : "");
    TESS_REQUIRE(bn == C->n, TESS_ERR_ARG,
                 "B: op(B) has %lld columns, C has %lld (B is %lld x %lld%s)", (long long)bn,
                 (long long)C->n, (long long)B->m, (long long)B->n, trans_b ? ", transposed" : "");
    TESS_REQUIRE(ak == bk, TESS_ERR_ARG,
                 "B: inner dimensions differ: op(A) is %lld x %lld, op(B) is %lld x %lld",
                 (long long)am, (long long)ak, (long long)bk, (long long)bn);
    return TESS_OK;
}

tess_status tess_scal_gemm(tess_scal_matrix *C, const tess_scal_matrix *A,
                           const tess_scal_matrix *B, bool trans_a, bool trans_b, double alpha,
                           double beta) {
    TESS_REQUIRE(C != NULL && C->grid != NULL, TESS_ERR_ARG, "C is NULL");
    const tess_scal_grid *g = C->grid;
    tess_status st = tess_par_agree(g->group, scal_gemm_check(C, A, B, trans_a, trans_b));
    TESS_REQUIRE(st == TESS_OK, st, "C = op(A) op(B) not computed");
    if (!g->in_grid) return TESS_OK;
    int m = (int)C->m, n = (int)C->n, k = (int)(trans_a ? A->m : A->n), one = 1;
    const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
    if (C->dtype == TESS_SCAL_F64) {
        pdgemm_(&ta, &tb, &m, &n, &k, &alpha, A->data, &one, &one, A->desc, B->data, &one, &one,
                B->desc, &beta, C->data, &one, &one, C->desc);
    } else {
        float fa = (float)alpha, fb = (float)beta;
        psgemm_(&ta, &tb, &m, &n, &k, &fa, A->data, &one, &one, A->desc, B->data, &one, &one,
                B->desc, &fb, C->data, &one, &one, C->desc);
    }
    return TESS_OK;
}

/* ---- posv ---- */

static tess_status scal_posv_check(const tess_scal_matrix *B, const tess_scal_matrix *A) {
    const tess_scal_grid *g = B->grid;
    TESS_CHECK(tess_scal_check_matrix(g, A, B->dtype, "A"));
    TESS_CHECK(tess_scal_check_matrix(g, B, B->dtype, "B"));
    TESS_REQUIRE(B != A, TESS_ERR_ARG, "B must be a different matrix from A");
    TESS_REQUIRE(A->m == A->n, TESS_ERR_ARG, "A must be square, got %lld x %lld", (long long)A->m,
                 (long long)A->n);
    TESS_REQUIRE(A->mb == A->nb, TESS_ERR_ARG,
                 "A: p?posv needs square blocks, got mb %lld, nb %lld", (long long)A->mb,
                 (long long)A->nb);
    TESS_REQUIRE(B->m == A->n, TESS_ERR_ARG, "B has %lld rows, A is %lld x %lld", (long long)B->m,
                 (long long)A->m, (long long)A->n);
    TESS_REQUIRE(B->mb == A->mb, TESS_ERR_ARG, "B: row block %lld must equal A's block %lld",
                 (long long)B->mb, (long long)A->mb);
    return TESS_OK;
}

tess_status tess_scal_posv(tess_scal_matrix *B, tess_scal_matrix *A) {
    TESS_REQUIRE(B != NULL && B->grid != NULL, TESS_ERR_ARG, "B is NULL");
    const tess_scal_grid *g = B->grid;
    tess_status st = tess_par_agree(g->group, scal_posv_check(B, A));
    TESS_REQUIRE(st == TESS_OK, st, "A X = B not solved");
    if (A->n == 0 || B->n == 0) return TESS_OK;
    int info = 0;
    if (g->in_grid) {
        int n = (int)A->n, nrhs = (int)B->n, one = 1;
        if (B->dtype == TESS_SCAL_F64) {
            pdposv_("L", &n, &nrhs, A->data, &one, &one, A->desc, B->data, &one, &one, B->desc,
                    &info, 1);
        } else {
            psposv_("L", &n, &nrhs, A->data, &one, &one, A->desc, B->data, &one, &one, B->desc,
                    &info, 1);
        }
    }
    int worst[2];
    TESS_CHECK(scal_reduce_info(g, info, worst));
    TESS_REQUIRE(worst[1] == 0, TESS_ERR_INTERNAL, "p?posv rejected argument %d", worst[1]);
    TESS_REQUIRE(worst[0] == 0, TESS_ERR_DATA,
                 "matrix is not positive definite (leading minor %d of %lld)", worst[0],
                 (long long)A->n);
    return TESS_OK;
}

/* ---- syevd ---- */

static tess_status scal_syevd_check(const double *w, const tess_scal_matrix *Z,
                                    const tess_scal_matrix *A) {
    const tess_scal_grid *g = A->grid;
    TESS_CHECK(tess_scal_check_matrix(g, A, A->dtype, "A"));
    TESS_CHECK(tess_scal_check_matrix(g, Z, A->dtype, "Z"));
    TESS_REQUIRE(w != NULL || A->n == 0, TESS_ERR_ARG, "w is NULL");
    TESS_REQUIRE(Z != A, TESS_ERR_ARG, "Z must be a different matrix from A");
    TESS_REQUIRE(A->m == A->n, TESS_ERR_ARG, "A must be square, got %lld x %lld", (long long)A->m,
                 (long long)A->n);
    TESS_REQUIRE(A->mb == A->nb, TESS_ERR_ARG,
                 "A: p?syevd needs square blocks, got mb %lld, nb %lld", (long long)A->mb,
                 (long long)A->nb);
    TESS_REQUIRE(Z->m == A->m && Z->n == A->n && Z->mb == A->mb && Z->nb == A->nb, TESS_ERR_ARG,
                 "Z is %lld x %lld in %lld x %lld blocks, must match A (%lld x %lld in %lld x "
                 "%lld)",
                 (long long)Z->m, (long long)Z->n, (long long)Z->mb, (long long)Z->nb,
                 (long long)A->m, (long long)A->n, (long long)A->mb, (long long)A->nb);
    return TESS_OK;
}

/* Workspace for p?syevd: query, then allocate work (lwork of A's type), iwork and, for F32, a
 * float copy of w. Grid ranks only; local decision. */
typedef struct {
    void *work, *wf;
    int *iwork;
    int lwork, liwork;
} scal_syevd_ws;

static tess_status scal_syevd_alloc(scal_syevd_ws *ws, double *w, tess_scal_matrix *Z,
                                    tess_scal_matrix *A) {
    int n = (int)A->n, one = 1, query = -1, info = 0, iq = 0;
    double qd = 0.0;
    float qf = 0.0f, wq = 0.0f; /* wq: W is not referenced by the query */
    if (A->dtype == TESS_SCAL_F64) {
        pdsyevd_("V", "L", &n, A->data, &one, &one, A->desc, w, Z->data, &one, &one, Z->desc, &qd,
                 &query, &iq, &one, &info, 1, 1);
    } else {
        pssyevd_("V", "L", &n, A->data, &one, &one, A->desc, &wq, Z->data, &one, &one, Z->desc,
                 &qf, &query, &iq, &one, &info, 1, 1);
        qd = qf;
    }
    TESS_REQUIRE(info == 0, TESS_ERR_INTERNAL, "p?syevd workspace query rejected argument %d",
                 -info);
    /* ScaLAPACK 2.2.1's query undercounts what its final PDORMTR step needs, e.g. for n < nb
     * ("PDORMTR parameter number 16 had an illegal value", wrong vectors, INFO = 0). Take at
     * least 2n (the offset PDSYEVD gives PDORMTR) + PDORMTR's own minimum for SIDE = 'L',
     * max(nb(nb-1)/2, (MpC0 + NqC0) nb) + nb^2, with MpC0, NqC0 bounded over the grid. */
    const tess_scal_grid *g = A->grid;
    int64_t nb = A->nb, blocks = (A->n + nb - 1) / nb;
    int64_t mp = (blocks + g->nprow - 1) / g->nprow * nb;
    int64_t nq = (blocks + g->npcol - 1) / g->npcol * nb;
    int64_t ormtr = (mp + nq) * nb > nb * (nb - 1) / 2 ? (mp + nq) * nb : nb * (nb - 1) / 2;
    double need = (double)(2 * A->n + ormtr + nb * nb);
    TESS_CHECK(scal_lwork(qd > need ? qd : need, A->dtype, &ws->lwork));
    ws->liwork = iq > 1 ? iq : 1;
    size_t es = tess_scal_elem_size(A->dtype);
    ws->work = scal_alloc((size_t)ws->lwork, es);
    ws->iwork = scal_alloc((size_t)ws->liwork, sizeof(int));
    TESS_REQUIRE(ws->work && ws->iwork, TESS_ERR_MEM,
                 "p?syevd workspace: %d elements of %zu bytes and %d ints", ws->lwork, es,
                 ws->liwork);
    if (A->dtype == TESS_SCAL_F32) {
        ws->wf = scal_alloc((size_t)n, sizeof(float));
        TESS_REQUIRE(ws->wf, TESS_ERR_MEM, "float eigenvalues (%d)", n);
    }
    return TESS_OK;
}

static int scal_syevd_run(scal_syevd_ws *ws, double *w, tess_scal_matrix *Z, tess_scal_matrix *A) {
    int n = (int)A->n, one = 1, info = 0;
    if (A->dtype == TESS_SCAL_F64) {
        pdsyevd_("V", "L", &n, A->data, &one, &one, A->desc, w, Z->data, &one, &one, Z->desc,
                 ws->work, &ws->lwork, ws->iwork, &ws->liwork, &info, 1, 1);
    } else {
        float *wf = ws->wf;
        pssyevd_("V", "L", &n, A->data, &one, &one, A->desc, wf, Z->data, &one, &one, Z->desc,
                 ws->work, &ws->lwork, ws->iwork, &ws->liwork, &info, 1, 1);
        for (int i = 0; i < n; i++) w[i] = wf[i];
    }
    return info;
}

tess_status tess_scal_syevd(double *w, tess_scal_matrix *Z, tess_scal_matrix *A) {
    TESS_REQUIRE(A != NULL && A->grid != NULL, TESS_ERR_ARG, "A is NULL");
    const tess_scal_grid *g = A->grid;
    tess_status st = tess_par_agree(g->group, scal_syevd_check(w, Z, A));
    TESS_REQUIRE(st == TESS_OK, st, "eigen-decomposition of A not computed");
    if (A->n == 0) return TESS_OK;
    scal_syevd_ws ws = {0};
    st = g->in_grid ? scal_syevd_alloc(&ws, w, Z, A) : TESS_OK;
    st = tess_par_agree(g->group, st);
    int info = 0;
    if (st == TESS_OK && g->in_grid) info = scal_syevd_run(&ws, w, Z, A);
    free(ws.work);
    free(ws.iwork);
    free(ws.wf);
    TESS_REQUIRE(st == TESS_OK, st, "p?syevd workspace for n = %lld not allocated",
                 (long long)A->n);
    int worst[2];
    TESS_CHECK(scal_reduce_info(g, info, worst));
    TESS_REQUIRE(worst[1] == 0, TESS_ERR_INTERNAL, "p?syevd rejected argument %d", worst[1]);
    TESS_REQUIRE(worst[0] == 0, TESS_ERR_DATA,
                 "symmetric eigensolver did not converge (info %d: eigenvalue %lld, rows/cols "
                 "%lld)",
                 worst[0], (long long)(worst[0] / (A->n + 1)), (long long)(worst[0] % (A->n + 1)));
    TESS_MPI_CHECK(MPI_Bcast(w, (int)A->n, MPI_DOUBLE, 0, g->group->comm));
    return TESS_OK;
}

/* ---- gesvd ---- */

static tess_status scal_gesvd_check(const double *s, const tess_scal_matrix *U,
                                    const tess_scal_matrix *VT, const tess_scal_matrix *A) {
    const tess_scal_grid *g = A->grid;
    TESS_CHECK(tess_scal_check_matrix(g, A, A->dtype, "A"));
    int64_t k = A->m < A->n ? A->m : A->n;
    TESS_REQUIRE(s != NULL || k == 0, TESS_ERR_ARG, "s is NULL");
    TESS_REQUIRE(U != A && VT != A && (U == NULL || U != VT), TESS_ERR_ARG,
                 "A, U and VT must be different matrices");
    TESS_REQUIRE(A->mb == A->nb, TESS_ERR_ARG,
                 "A: p?gesvd needs square blocks, got mb %lld, nb %lld", (long long)A->mb,
                 (long long)A->nb);
    if (U) {
        TESS_CHECK(tess_scal_check_matrix(g, U, A->dtype, "U"));
        TESS_REQUIRE(U->m == A->m && U->n == k && U->mb == A->mb && U->nb == A->nb, TESS_ERR_ARG,
                     "U is %lld x %lld in %lld x %lld blocks, must be %lld x %lld in A's %lld x "
                     "%lld blocks",
                     (long long)U->m, (long long)U->n, (long long)U->mb, (long long)U->nb,
                     (long long)A->m, (long long)k, (long long)A->mb, (long long)A->nb);
    }
    if (VT) {
        TESS_CHECK(tess_scal_check_matrix(g, VT, A->dtype, "VT"));
        TESS_REQUIRE(VT->m == k && VT->n == A->n && VT->mb == A->mb && VT->nb == A->nb,
                     TESS_ERR_ARG,
                     "VT is %lld x %lld in %lld x %lld blocks, must be %lld x %lld in A's %lld x "
                     "%lld blocks",
                     (long long)VT->m, (long long)VT->n, (long long)VT->mb, (long long)VT->nb,
                     (long long)k, (long long)A->n, (long long)A->mb, (long long)A->nb);
    }
    return TESS_OK;
}

/* One p?gesvd call; lwork = -1 is the query (result in *query). U or VT NULL: not computed, A's
 * storage and descriptor stand in for them (not referenced by ScaLAPACK). */
static int scal_gesvd_call(tess_scal_matrix *A, void *s, tess_scal_matrix *U, tess_scal_matrix *VT,
                           void *work, int lwork) {
    int m = (int)A->m, n = (int)A->n, one = 1, info = 0;
    const char ju = U ? 'V' : 'N', jvt = VT ? 'V' : 'N';
    void *u = U ? U->data : A->data, *vt = VT ? VT->data : A->data;
    const int *du = U ? U->desc : A->desc, *dvt = VT ? VT->desc : A->desc;
    if (A->dtype == TESS_SCAL_F64) {
        pdgesvd_(&ju, &jvt, &m, &n, A->data, &one, &one, A->desc, s, u, &one, &one, du, vt, &one,
                 &one, dvt, work, &lwork, &info, 1, 1);
    } else {
        psgesvd_(&ju, &jvt, &m, &n, A->data, &one, &one, A->desc, s, u, &one, &one, du, vt, &one,
                 &one, dvt, work, &lwork, &info, 1, 1);
    }
    return info;
}

tess_status tess_scal_gesvd(double *s, tess_scal_matrix *U, tess_scal_matrix *VT,
                            tess_scal_matrix *A) {
    TESS_REQUIRE(A != NULL && A->grid != NULL, TESS_ERR_ARG, "A is NULL");
    const tess_scal_grid *g = A->grid;
    tess_status st = tess_par_agree(g->group, scal_gesvd_check(s, U, VT, A));
    TESS_REQUIRE(st == TESS_OK, st, "SVD of A not computed");
    int k = (int)(A->m < A->n ? A->m : A->n);
    if (k == 0) return TESS_OK;
    bool f32 = A->dtype == TESS_SCAL_F32;
    size_t es = tess_scal_elem_size(A->dtype);
    void *work = NULL, *sv = s;
    int lwork = 0, info = 0;
    st = TESS_OK;
    if (g->in_grid) {
        double qd = 0.0;
        float qf = 0.0f, sq = 0.0f; /* sq: S is not referenced by the query */
        info = scal_gesvd_call(A, f32 ? (void *)&sq : (void *)s, U, VT,
                               f32 ? (void *)&qf : (void *)&qd, -1);
        if (info != 0) {
            st = tess_error_push(TESS_ERR_INTERNAL, __FILE__, __LINE__, __func__,
                                 "p?gesvd workspace query rejected argument %d", -info);
        } else {
            st = scal_lwork(f32 ? (double)qf : qd, A->dtype, &lwork);
        }
        if (st == TESS_OK) {
            work = scal_alloc((size_t)lwork, es);
            if (f32) sv = scal_alloc((size_t)k, sizeof(float));
            if (!work || !sv) {
                st = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                     "p?gesvd workspace: %d elements of %zu bytes", lwork, es);
            }
        }
    }
    st = tess_par_agree(g->group, st);
    info = 0;
    if (st == TESS_OK && g->in_grid) {
        info = scal_gesvd_call(A, sv, U, VT, work, lwork);
        if (f32) {
            for (int i = 0; i < k; i++) s[i] = ((float *)sv)[i];
        }
    }
    free(work);
    if (f32 && sv != s) free(sv);
    TESS_REQUIRE(st == TESS_OK, st, "p?gesvd workspace for %lld x %lld not allocated",
                 (long long)A->m, (long long)A->n);
    int worst[2];
    TESS_CHECK(scal_reduce_info(g, info, worst));
    TESS_REQUIRE(worst[1] == 0, TESS_ERR_INTERNAL, "p?gesvd rejected argument %d", worst[1]);
    TESS_REQUIRE(worst[0] != k + 1, TESS_ERR_DATA,
                 "singular values differ across the grid (heterogeneous ranks)");
    TESS_REQUIRE(worst[0] == 0, TESS_ERR_DATA,
                 "SVD did not converge (bidiagonal QR, info %d of %d)", worst[0], k);
    TESS_MPI_CHECK(MPI_Bcast(s, k, MPI_DOUBLE, 0, g->group->comm));
    return TESS_OK;
}
