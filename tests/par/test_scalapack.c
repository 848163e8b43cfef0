/* test_scalapack.c - the ScaLAPACK bridge on the grid shape given as argv (NPROW NPCOL; 0 0 lets
 * the bridge choose; ranks beyond the grid sit out), in double and float, sizes not divisible by
 * the blocks (37 x 29 in 8 x 5 blocks and the like):
 *   - distribute/collect round trips in both storage orders; local elements checked against
 *     ScaLAPACK's own INDXL2G; a wrapped matrix with lld > local rows;
 *   - p?gemm with all four transpose combinations and different block shapes, against a loop;
 *   - p?posv against LAPACK dposv and by residual; a non-SPD matrix gives TESS_ERR_DATA naming
 *     the leading minor, on every rank;
 *   - p?syevd against LAPACK dsyev, ||A Z - Z diag(w)|| and ||Z^T Z - I||;
 *   - p?gesvd (tall and wide) against LAPACK dgesvd, ||U diag(s) VT - A||, orthogonality;
 *   - bad arguments (shapes, blocks, types, a descriptor corrupted on one rank) give TESS_ERR_ARG
 *     on every rank, followed by a working call (nobody left waiting);
 *   - two grids at once on the two halves of the world (BLACS on a sub-communicator). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "par/mesh.h"      /* tess_group_* */
#include "par/scalapack.h" /* tess_scal_* */
#include "tess_test.h"

/* LAPACK (gfortran: hidden CHARACTER lengths last) and ScaLAPACK's INDXL2G, used as oracles. */
void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, int *info, size_t uplo_len);
void dsyev_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w,
            double *work, const int *lwork, int *info, size_t jobz_len, size_t uplo_len);
void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a,
             const int *lda, double *s, double *u, const int *ldu, double *vt, const int *ldvt,
             double *work, const int *lwork, int *info, size_t jobu_len, size_t jobvt_len);
int indxl2g_(const int *indxloc, const int *nb, const int *iproc, const int *isrcproc,
             const int *nprocs);

typedef struct {
    tess_scal_grid *g;
    const tess_group *on; /* the group g was created on */
    tess_scal_dtype t;
    double tol;  /* relative tolerance of the element type */
    int rank;    /* in the grid's group */
    const char *tag;
} ctx;

/* A failed setup step leaves nothing to test: report and end the job. */
static void must(tess_status s, const char *what) {
    if (s == TESS_OK) return;
    fprintf(stderr, "setup failed: %s\n", what);
    tess_error_write();
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Counter-based uniform draw in [-1, 1): splitmix64 of (seed, index). */
static double draw(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static double *random_matrix(int64_t m, int64_t n, uint64_t seed) {
    double *a = malloc((size_t)(m * n) * sizeof *a);
    if (!a) must(TESS_ERR_MEM, "random matrix");
    for (int64_t i = 0; i < m * n; i++) a[i] = draw(seed, (uint64_t)i);
    return a;
}

static double *zeros(int64_t count) {
    double *a = calloc((size_t)(count > 0 ? count : 1), sizeof *a);
    if (!a) must(TESS_ERR_MEM, "zeros");
    return a;
}

static double max_abs(const double *a, int64_t count) {
    double m = 0.0;
    for (int64_t i = 0; i < count; i++) m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

/* Row-major (m, n) -> column-major copy, or the transpose of a row-major matrix. */
static double *transpose(const double *a, int64_t m, int64_t n) {
    double *t = zeros(m * n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) t[j * m + i] = a[i * n + j];
    return t;
}

/* C (m,n) = A (m,k) @ B (k,n), row-major, naive. */
static void matmul(double *c, const double *a, const double *b, int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t p = 0; p < k; p++) s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}

/* A matrix of c->t on c->g holding the row-major global a (same on every rank). */
static tess_scal_matrix *dist(const ctx *c, const double *a, int64_t m, int64_t n, int64_t mb,
                              int64_t nb) {
    tess_scal_matrix *A = NULL;
    must(tess_scal_matrix_create(c->g, c->t, m, n, mb, nb, &A), "matrix_create");
    void *buf = NULL;
    if (c->t == TESS_SCAL_F32) {
        float *f = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof *f);
        if (!f) must(TESS_ERR_MEM, "float copy");
        for (int64_t i = 0; i < m * n; i++) f[i] = (float)a[i];
        buf = f;
    }
    must(tess_scal_matrix_distribute(A, buf ? buf : a, TESS_SCAL_ROW_MAJOR), "distribute");
    free(buf);
    return A;
}

/* Collect A row-major into out (as double) on rank 0; other ranks get zeros. */
static void coll(const ctx *c, const tess_scal_matrix *A, double *out) {
    int64_t count = A->m * A->n;
    memset(out, 0, (size_t)count * sizeof *out);
    if (c->t == TESS_SCAL_F64) {
        must(tess_scal_matrix_collect(A, c->rank == 0 ? out : NULL, TESS_SCAL_ROW_MAJOR),
             "collect");
        return;
    }
    float *f = c->rank == 0 ? malloc((size_t)(count > 0 ? count : 1) * sizeof *f) : NULL;
    if (c->rank == 0 && !f) must(TESS_ERR_MEM, "float buffer");
    must(tess_scal_matrix_collect(A, f, TESS_SCAL_ROW_MAJOR), "collect");
    for (int64_t i = 0; c->rank == 0 && i < count; i++) out[i] = f[i];
    free(f);
}

/* ---- layout: round trips and local placement ---- */

/* Every local element of A holds i*1000 + j for its global (i, j), by ScaLAPACK's INDXL2G and by
 * tess_scal_local_to_global. Returns the number of mismatches. */
static int64_t check_local(const tess_scal_matrix *A) {
    const tess_scal_grid *g = A->grid;
    int64_t bad = 0;
    int mb = (int)A->mb, nb = (int)A->nb, zero = 0;
    for (int64_t lj = 0; lj < A->nloc; lj++)
        for (int64_t li = 0; li < A->mloc; li++) {
            int l1 = (int)li + 1, c1 = (int)lj + 1;
            int64_t i = indxl2g_(&l1, &mb, &g->myrow, &zero, &g->nprow) - 1;
            int64_t j = indxl2g_(&c1, &nb, &g->mycol, &zero, &g->npcol) - 1;
            int64_t ti, tj;
            tess_scal_local_to_global(A, li, lj, &ti, &tj);
            double v = A->dtype == TESS_SCAL_F64 ? ((double *)A->data)[li + lj * A->lld]
                                                 : ((float *)A->data)[li + lj * A->lld];
            if (ti != i || tj != j || v != (double)(i * 1000 + j)) bad++;
        }
    return bad;
}

static void test_roundtrip(const ctx *c) {
    const int64_t m = 37, n = 29, mb = 8, nb = 5;
    double *a = zeros(m * n), *out = zeros(m * n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) a[i * n + j] = (double)(i * 1000 + j);
    tess_scal_matrix *A = dist(c, a, m, n, mb, nb);
    int64_t bad = check_local(A);
    TESS_TEST_CHECK(bad == 0, "%s: %lld local elements misplaced after distribute", c->tag,
                    (long long)bad);
    coll(c, A, out);
    TESS_TEST_CHECK(c->rank != 0 || memcmp(a, out, (size_t)(m * n) * sizeof *a) == 0,
                    "%s: row-major round trip", c->tag);

    /* Column-major in and out, into a wrapped matrix with a padded lld. */
    double *acol = transpose(a, m, n);
    size_t es = c->t == TESS_SCAL_F64 ? sizeof(double) : sizeof(float);
    int64_t lld = A->mloc + 3, ncols = A->nloc > 0 ? A->nloc : 1;
    void *store = calloc((size_t)(lld * ncols), es), *gcol = malloc((size_t)(m * n) * es);
    if (!store || !gcol) must(TESS_ERR_MEM, "wrap storage");
    for (int64_t i = 0; i < m * n; i++) {
        if (c->t == TESS_SCAL_F64) ((double *)gcol)[i] = acol[i];
        else ((float *)gcol)[i] = (float)acol[i];
    }
    tess_scal_matrix *W = NULL;
    must(tess_scal_matrix_wrap(c->g, c->t, m, n, mb, nb, store, lld, &W), "wrap");
    must(tess_scal_matrix_distribute(W, gcol, TESS_SCAL_COL_MAJOR), "distribute col-major");
    bad = check_local(W);
    TESS_TEST_CHECK(bad == 0, "%s: %lld local elements misplaced (column-major, lld %lld)", c->tag,
                    (long long)bad, (long long)lld);
    memset(gcol, 0, (size_t)(m * n) * es);
    must(tess_scal_matrix_collect(W, gcol, TESS_SCAL_COL_MAJOR), "collect col-major");
    bad = 0;
    for (int64_t i = 0; c->rank == 0 && i < m * n; i++) {
        double v = c->t == TESS_SCAL_F64 ? ((double *)gcol)[i] : ((float *)gcol)[i];
        bad += v != acol[i];
    }
    TESS_TEST_CHECK(bad == 0, "%s: column-major round trip, %lld differ", c->tag, (long long)bad);
    tess_scal_matrix_destroy(&W);
    TESS_TEST_CHECK(W == NULL, "destroy nulls the handle");
    tess_scal_matrix_destroy(&A);
    free(store);
    free(gcol);
    free(acol);
    free(a);
    free(out);
}

/* ---- gemm ---- */

static void test_gemm(const ctx *c) {
    const int64_t M = 37, N = 29, K = 23;
    const double alpha = 1.5, beta = -0.5;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            double *a = random_matrix(M, K, 11), *b = random_matrix(K, N, 12);
            double *c0 = random_matrix(M, N, 13), *ref = zeros(M * N), *out = zeros(M * N);
            double *as = ta ? transpose(a, M, K) : a, *bs = tb ? transpose(b, K, N) : b;
            tess_scal_matrix *A = dist(c, as, ta ? K : M, ta ? M : K, 8, 8);
            tess_scal_matrix *B = dist(c, bs, tb ? N : K, tb ? K : N, 8, 8);
            tess_scal_matrix *C = dist(c, c0, M, N, 5, 7);
            tess_status st = tess_scal_gemm(C, A, B, ta, tb, alpha, beta);
            TESS_TEST_CHECK(st == TESS_OK, "%s gemm(%d,%d): %s", c->tag, ta, tb,
                            tess_error_text());
            coll(c, C, out);
            matmul(ref, a, b, M, N, K);
            for (int64_t i = 0; i < M * N; i++) ref[i] = alpha * ref[i] + beta * c0[i];
            for (int64_t i = 0; i < M * N; i++) out[i] -= ref[i];
            if (c->rank == 0)
                TESS_TEST_CHECK(max_abs(out, M * N) <= c->tol * K * 4.0,
                                "%s gemm(%d,%d): max error %.3g", c->tag, ta, tb,
                                max_abs(out, M * N));
            tess_scal_matrix_destroy(&A);
            tess_scal_matrix_destroy(&B);
            tess_scal_matrix_destroy(&C);
            if (as != a) free(as);
            if (bs != b) free(bs);
            free(a);
            free(b);
            free(c0);
            free(ref);
            free(out);
        }
}

/* ---- posv ---- */

/* SPD (n, n): M M^T + n I. */
static double *spd_matrix(int64_t n, uint64_t seed) {
    double *m = random_matrix(n, n, seed), *mt = transpose(m, n, n), *a = zeros(n * n);
    matmul(a, m, mt, n, n, n);
    for (int64_t i = 0; i < n; i++) a[i * n + i] += (double)n;
    free(m);
    free(mt);
    return a;
}

static void test_posv(const ctx *c) {
    const int64_t n = 37, nrhs = 3;
    double *a = spd_matrix(n, 21), *b = random_matrix(n, nrhs, 22), *x = zeros(n * nrhs);
    tess_scal_matrix *A = dist(c, a, n, n, 8, 8), *B = dist(c, b, n, nrhs, 8, 2);
    tess_status st = tess_scal_posv(B, A);
    TESS_TEST_CHECK(st == TESS_OK, "%s posv: %s", c->tag, tess_error_text());
    coll(c, B, x);
    if (c->rank == 0) {
        /* LAPACK on column-major copies. */
        double *al = transpose(a, n, n), *bl = transpose(b, n, nrhs), *ax = zeros(n * nrhs);
        int in = (int)n, ir = (int)nrhs, info = 0;
        dposv_("L", &in, &ir, al, &in, bl, &in, &info, 1);
        TESS_TEST_CHECK(info == 0, "LAPACK dposv info %d", info);
        double err = 0.0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < nrhs; j++)
                err = fmax(err, fabs(x[i * nrhs + j] - bl[j * n + i]));
        TESS_TEST_CHECK(err <= c->tol * 10.0, "%s posv vs dposv: max difference %.3g", c->tag, err);
        matmul(ax, a, x, n, nrhs, n);
        for (int64_t i = 0; i < n * nrhs; i++) ax[i] -= b[i];
        double res = max_abs(ax, n * nrhs) / (max_abs(a, n * n) * max_abs(x, n * nrhs) * n);
        TESS_TEST_CHECK(res <= c->tol, "%s posv: relative residual %.3g", c->tag, res);
        free(al);
        free(bl);
        free(ax);
    }
    tess_scal_matrix_destroy(&A);
    tess_scal_matrix_destroy(&B);
    free(a);
    free(b);
    free(x);
}

static void test_posv_not_spd(const ctx *c) {
    const int64_t n = 37;
    double *a = zeros(n * n), *b = random_matrix(n, 2, 31);
    for (int64_t i = 0; i < n; i++) a[i * n + i] = 1.0;
    a[19 * n + 19] = -1.0; /* leading minors of order >= 20 are not positive */
    tess_scal_matrix *A = dist(c, a, n, n, 8, 8), *B = dist(c, b, n, 2, 8, 8);
    tess_status st = tess_scal_posv(B, A);
    TESS_TEST_CHECK(st == TESS_ERR_DATA, "%s non-SPD posv gives DATA on rank %d, got %s", c->tag,
                    c->rank, tess_status_name(st));
    const char *want = "matrix is not positive definite (leading minor 20";
    TESS_TEST_CHECK(strstr(tess_error_text(), want) != NULL,
                    "%s non-SPD message on rank %d:\n%s", c->tag, c->rank, tess_error_text());
    tess_error_clear();
    tess_scal_matrix_destroy(&A);
    tess_scal_matrix_destroy(&B);
    free(a);
    free(b);
}

/* ---- syevd ---- */

static void test_syevd_n(const ctx *c, int64_t n, int64_t nb) {
    double *s = random_matrix(n, n, 41), *a = zeros(n * n), *z = zeros(n * n), *w = zeros(n);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) a[i * n + j] = s[i * n + j] + s[j * n + i];
    tess_scal_matrix *A = dist(c, a, n, n, nb, nb), *Z = NULL;
    must(tess_scal_matrix_create(c->g, c->t, n, n, nb, nb, &Z), "create Z");
    tess_status st = tess_scal_syevd(w, Z, A);
    TESS_TEST_CHECK(st == TESS_OK, "%s syevd n=%lld: %s", c->tag, (long long)n, tess_error_text());
    coll(c, Z, z);

    /* Eigenvalues on every rank, against LAPACK. */
    double *al = transpose(a, n, n), *wl = zeros(n), wq = 0.0;
    int in = (int)n, lwork = -1, info = 0;
    dsyev_("N", "L", &in, al, &in, wl, &wq, &lwork, &info, 1, 1);
    lwork = (int)wq;
    double *work = zeros(lwork);
    dsyev_("N", "L", &in, al, &in, wl, work, &lwork, &info, 1, 1);
    TESS_TEST_CHECK(info == 0, "LAPACK dsyev info %d", info);
    double scale = max_abs(wl, n), err = 0.0;
    for (int64_t i = 0; i < n; i++) err = fmax(err, fabs(w[i] - wl[i]));
    TESS_TEST_CHECK(err <= c->tol * scale * 10.0, "%s syevd n=%lld rank %d: eigenvalues differ "
                    "from dsyev by %.3g", c->tag, (long long)n, c->rank, err);

    if (c->rank == 0) {
        double *az = zeros(n * n), *zt = transpose(z, n, n), *ztz = zeros(n * n);
        matmul(az, a, z, n, n, n);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) az[i * n + j] -= z[i * n + j] * w[j];
        TESS_TEST_CHECK(max_abs(az, n * n) <= c->tol * scale * n,
                        "%s syevd n=%lld: ||A Z - Z diag(w)|| = %.3g", c->tag, (long long)n,
                        max_abs(az, n * n));
        matmul(ztz, zt, z, n, n, n);
        for (int64_t i = 0; i < n; i++) ztz[i * n + i] -= 1.0;
        TESS_TEST_CHECK(max_abs(ztz, n * n) <= c->tol * n, "%s syevd n=%lld: ||Z^T Z - I|| = %.3g",
                        c->tag, (long long)n, max_abs(ztz, n * n));
        free(az);
        free(zt);
        free(ztz);
    }
    tess_scal_matrix_destroy(&A);
    tess_scal_matrix_destroy(&Z);
    free(s);
    free(a);
    free(z);
    free(w);
    free(al);
    free(wl);
    free(work);
}

/* ---- gesvd ---- */

static void test_gesvd_mn(const ctx *c, int64_t m, int64_t n) {
    const int64_t k = m < n ? m : n, nb = 8;
    double *a = random_matrix(m, n, 51), *s = zeros(k), *u = zeros(m * k), *vt = zeros(k * n);
    tess_scal_matrix *A = dist(c, a, m, n, nb, nb), *U = NULL, *VT = NULL;
    must(tess_scal_matrix_create(c->g, c->t, m, k, nb, nb, &U), "create U");
    must(tess_scal_matrix_create(c->g, c->t, k, n, nb, nb, &VT), "create VT");
    tess_status st = tess_scal_gesvd(s, U, VT, A);
    TESS_TEST_CHECK(st == TESS_OK, "%s gesvd %lldx%lld: %s", c->tag, (long long)m, (long long)n,
                    tess_error_text());
    coll(c, U, u);
    coll(c, VT, vt);

    /* Singular values on every rank against LAPACK (A row-major is A^T column-major: same s). */
    double *al = zeros(m * n), *sl = zeros(k), wq = 0.0, dummy = 0.0;
    memcpy(al, a, (size_t)(m * n) * sizeof *a);
    int im = (int)n, in = (int)m, one = 1, lwork = -1, info = 0;
    dgesvd_("N", "N", &im, &in, al, &im, sl, &dummy, &one, &dummy, &one, &wq, &lwork, &info, 1, 1);
    lwork = (int)wq;
    double *work = zeros(lwork);
    dgesvd_("N", "N", &im, &in, al, &im, sl, &dummy, &one, &dummy, &one, work, &lwork, &info, 1, 1);
    TESS_TEST_CHECK(info == 0, "LAPACK dgesvd info %d", info);
    double err = 0.0;
    for (int64_t i = 0; i < k; i++) err = fmax(err, fabs(s[i] - sl[i]));
    TESS_TEST_CHECK(err <= c->tol * sl[0] * 10.0, "%s gesvd %lldx%lld rank %d: s differs from "
                    "dgesvd by %.3g", c->tag, (long long)m, (long long)n, c->rank, err);

    if (c->rank == 0) {
        double *us = zeros(m * k), *usv = zeros(m * n), *ut = transpose(u, m, k);
        double *utu = zeros(k * k), *v = transpose(vt, k, n), *vtv = zeros(k * k);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < k; j++) us[i * k + j] = u[i * k + j] * s[j];
        matmul(usv, us, vt, m, n, k);
        for (int64_t i = 0; i < m * n; i++) usv[i] -= a[i];
        TESS_TEST_CHECK(max_abs(usv, m * n) <= c->tol * sl[0] * k,
                        "%s gesvd: ||U S VT - A|| = %.3g", c->tag, max_abs(usv, m * n));
        matmul(utu, ut, u, k, k, m);
        matmul(vtv, vt, v, k, k, n);
        for (int64_t i = 0; i < k; i++) {
            utu[i * k + i] -= 1.0;
            vtv[i * k + i] -= 1.0;
        }
        TESS_TEST_CHECK(max_abs(utu, k * k) <= c->tol * m, "%s gesvd: ||U^T U - I|| = %.3g",
                        c->tag, max_abs(utu, k * k));
        TESS_TEST_CHECK(max_abs(vtv, k * k) <= c->tol * n, "%s gesvd: ||VT VT^T - I|| = %.3g",
                        c->tag, max_abs(vtv, k * k));
        free(us);
        free(usv);
        free(ut);
        free(utu);
        free(v);
        free(vtv);
    }

    /* Values only (U, VT NULL) on a fresh copy of A. */
    tess_scal_matrix *A2 = dist(c, a, m, n, nb, nb);
    double *s2 = zeros(k);
    st = tess_scal_gesvd(s2, NULL, NULL, A2);
    TESS_TEST_CHECK(st == TESS_OK, "%s gesvd values only: %s", c->tag, tess_error_text());
    err = 0.0;
    for (int64_t i = 0; i < k; i++) err = fmax(err, fabs(s2[i] - sl[i]));
    TESS_TEST_CHECK(err <= c->tol * sl[0] * 10.0, "%s gesvd values only: differs by %.3g", c->tag,
                    err);
    tess_scal_matrix_destroy(&A2);
    tess_scal_matrix_destroy(&A);
    tess_scal_matrix_destroy(&U);
    tess_scal_matrix_destroy(&VT);
    free(a);
    free(s);
    free(s2);
    free(u);
    free(vt);
    free(al);
    free(sl);
    free(work);
}

/* ---- errors ---- */

/* st is TESS_ERR_ARG on every rank; `text` is in the record where `here` holds. Clears it. */
static void expect_arg(const ctx *c, tess_status st, bool here, const char *text,
                       const char *what) {
    TESS_TEST_CHECK(st == TESS_ERR_ARG, "%s: %s gives ARG on rank %d, got %s", c->tag, what,
                    c->rank, tess_status_name(st));
    if (here)
        TESS_TEST_CHECK(strstr(tess_error_text(), text) != NULL, "%s: %s, record on rank %d:\n%s",
                        c->tag, what, c->rank, tess_error_text());
    tess_error_clear();
}

static void test_errors(const ctx *c) {
    const int64_t n = 37;
    double *a = random_matrix(n, n, 61), *out = zeros(n * n);
    tess_scal_matrix *A = dist(c, a, n, n, 8, 8), *B = dist(c, a, n - 1, n, 8, 8);
    tess_scal_matrix *C = dist(c, a, n, n, 8, 8), *R = dist(c, a, n, n - 1, 8, 8), *Z = NULL;
    tess_scal_matrix *X = NULL;
    double w[37];

    expect_arg(c, tess_scal_gemm(C, A, B, false, false, 1.0, 0.0), true, "inner dimensions differ",
               "gemm with K mismatch");
    expect_arg(c, tess_scal_gemm(C, A, R, false, false, 1.0, 0.0), true,
                "B: op(B) has 36 columns", "gemm with N mismatch");
    expect_arg(c, tess_scal_gemm(C, C, A, false, false, 1.0, 0.0), true,
               "C must be a different matrix", "gemm with C aliasing A");
    expect_arg(c, tess_scal_posv(B, A), true, "B has 36 rows", "posv with B rows mismatch");
    expect_arg(c, tess_scal_syevd(w, C, R), true, "A must be square", "syevd of a non-square A");
    must(tess_scal_matrix_create(c->g, c->t, n, n, 8, 4, &Z), "create Z");
    expect_arg(c, tess_scal_syevd(w, Z, A), true, "Z is 37 x 37 in 8 x 4 blocks",
               "syevd with Z blocks unlike A's");
    expect_arg(c, tess_scal_posv(C, Z), true, "A: p?posv needs square blocks",
               "posv with non-square blocks");

    /* Creation: bad block, bad lld of wrapped storage (every grid rank). */
    expect_arg(c, tess_scal_matrix_create(c->g, c->t, n, n, 0, 8, &X), true,
               "block shape must be >= 1", "create with mb = 0");
    TESS_TEST_CHECK(X == NULL, "failed create leaves *out NULL");
    double store[4];
    expect_arg(c, tess_scal_matrix_wrap(c->g, c->t, n, n, 8, 8, store, 0, &X), c->g->in_grid,
               "lld = 0 < max(1, local rows", "wrap with lld 0");

    /* A descriptor corrupted on the last grid rank only: everyone returns ARG. */
    int last = c->g->nprow * c->g->npcol - 1;
    int saved = A->desc[8];
    if (c->rank == last) A->desc[8] = 0;
    expect_arg(c, tess_scal_gemm(C, A, A, true, false, 1.0, 0.0), c->rank == last,
               "A: descriptor lld = 0", "gemm with a corrupted lld on one rank");
    A->desc[8] = saved;
    int ctxt = A->desc[1];
    A->desc[1] = 12345;
    expect_arg(c, tess_scal_matrix_collect(A, out, TESS_SCAL_ROW_MAJOR), true,
               "descriptor context 12345", "collect with a foreign context");
    A->desc[1] = ctxt;
    A->desc[0] = 2;
    expect_arg(c, tess_scal_posv(C, A), true, "A: descriptor type 2",
               "posv with a band descriptor");
    A->desc[0] = 1;

    /* Type mismatch and a grid larger than the communicator. */
    tess_scal_matrix *F = NULL;
    tess_scal_dtype other = c->t == TESS_SCAL_F64 ? TESS_SCAL_F32 : TESS_SCAL_F64;
    must(tess_scal_matrix_create(c->g, other, n, n, 8, 8, &F), "create other type");
    expect_arg(c, tess_scal_gemm(C, A, F, false, false, 1.0, 0.0), true, "B has element type",
               "gemm with mixed types");
    tess_scal_grid *big = NULL;
    expect_arg(c, tess_scal_grid_create(c->on, c->g->size + 1, 1, &big), true, "needs",
               "grid larger than the communicator");
    TESS_TEST_CHECK(big == NULL, "failed grid_create leaves *out NULL");

    /* After all that, a real call still works everywhere. */
    tess_status st = tess_scal_gemm(C, A, A, false, true, 1.0, 0.0);
    TESS_TEST_CHECK(st == TESS_OK, "%s gemm after errors: %s", c->tag, tess_error_text());
    coll(c, C, out);
    double *ref = zeros(n * n), *at = transpose(a, n, n);
    matmul(ref, a, at, n, n, n);
    for (int64_t i = 0; i < n * n; i++) ref[i] -= out[i];
    if (c->rank == 0)
        TESS_TEST_CHECK(max_abs(ref, n * n) <= c->tol * n * 4.0, "%s gemm after errors: %.3g",
                        c->tag, max_abs(ref, n * n));
    tess_scal_matrix *all[] = {A, B, C, R, Z, F};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tess_scal_matrix_destroy(&all[i]);
    free(a);
    free(out);
    free(ref);
    free(at);
}

/* ---- grids on sub-communicators ---- */

static void test_halves(const tess_group *world, int wrank, int wsize) {
    if (wsize < 2) return;
    tess_group *half = NULL;
    must(tess_group_split(world, wrank % 2, wrank, "half", &half), "split");
    tess_scal_grid *g = NULL;
    must(tess_scal_grid_create(half, 0, 0, &g), "grid on a half");
    const int hsize = half->size;
    TESS_TEST_CHECK(g->nprow * g->npcol == hsize, "auto grid uses all %d ranks of the half", hsize);
    ctx c = {.g = g, .on = half, .t = TESS_SCAL_F64, .tol = 1e-12, .rank = g->rank, .tag = "half"};
    const int64_t n = 21;
    double *a = random_matrix(n, n, 70 + (uint64_t)(wrank % 2)), *out = zeros(n * n);
    double *ref = zeros(n * n);
    tess_scal_matrix *A = dist(&c, a, n, n, 4, 4), *C = NULL;
    must(tess_scal_matrix_create(g, TESS_SCAL_F64, n, n, 4, 4, &C), "create C");
    tess_status st = tess_scal_gemm(C, A, A, false, false, 1.0, 0.0);
    TESS_TEST_CHECK(st == TESS_OK, "gemm on half %d: %s", wrank % 2, tess_error_text());
    coll(&c, C, out);
    matmul(ref, a, a, n, n, n);
    for (int64_t i = 0; i < n * n; i++) ref[i] -= out[i];
    if (c.rank == 0)
        TESS_TEST_CHECK(max_abs(ref, n * n) <= 1e-12 * n * 4.0, "gemm on half %d: %.3g",
                        wrank % 2, max_abs(ref, n * n));
    tess_scal_matrix_destroy(&A);
    tess_scal_matrix_destroy(&C);
    tess_scal_grid_destroy(&g);
    TESS_TEST_CHECK(g == NULL, "grid_destroy nulls the handle");
    tess_group_destroy(&half);
    free(a);
    free(out);
    free(ref);
}

static int parse_dim(const char *s) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 0 || v > 1024) {
        fprintf(stderr, "grid dimension '%s' is not an integer in [0, 1024]\n", s);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm world = MPI_COMM_WORLD;
    int wrank, wsize;
    MPI_Comm_rank(world, &wrank);
    MPI_Comm_size(world, &wsize);
    tess_error_set_rank(wrank);
    if (argc != 3) {
        if (wrank == 0) fprintf(stderr, "usage: %s NPROW NPCOL (0 0 = choose)\n", argv[0]);
        MPI_Abort(world, 2);
    }
    int nprow = parse_dim(argv[1]), npcol = parse_dim(argv[2]);

    tess_group *wg = NULL;
    must(tess_group_create(world, "world", &wg), "world group");
    tess_scal_grid *g = NULL;
    must(tess_scal_grid_create(wg, nprow, npcol, &g), "grid_create");
    if (nprow > 0 && npcol > 0)
        TESS_TEST_CHECK(g->nprow == nprow && g->npcol == npcol, "grid is %d x %d, asked %d x %d",
                        g->nprow, g->npcol, nprow, npcol);
    TESS_TEST_CHECK(g->in_grid == (wrank < g->nprow * g->npcol) && (g->ctxt >= 0) == g->in_grid,
                    "rank %d in_grid %d ctxt %d", wrank, g->in_grid, g->ctxt);
    if (wrank == 0)
        printf("grid %d x %d on %d ranks (%d sit out)\n", g->nprow, g->npcol, wsize,
               wsize - g->nprow * g->npcol);

    const tess_scal_dtype types[] = {TESS_SCAL_F64, TESS_SCAL_F32};
    const double tols[] = {1e-12, 2e-5};
    const char *tags[] = {"f64", "f32"};
    for (int t = 0; t < 2; t++) {
        ctx c = {.g = g, .on = wg, .t = types[t], .tol = tols[t], .rank = g->rank, .tag = tags[t]};
        test_roundtrip(&c);
        test_gemm(&c);
        test_posv(&c);
        test_posv_not_spd(&c);
        test_syevd_n(&c, 37, 8);
        test_syevd_n(&c, 5, 8);
        test_gesvd_mn(&c, 37, 23);
        test_gesvd_mn(&c, 23, 37);
        test_errors(&c);
    }
    test_halves(wg, wrank, wsize);
    tess_scal_grid_destroy(&g);
    tess_group_destroy(&wg);

    int rc = tess_test_finish_mpi("scalapack", world);
    MPI_Finalize();
    return rc;
}
