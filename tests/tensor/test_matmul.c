/* test_matmul.c - tess_matmul (BLAS) against hand-computed products and against tess_matmul_ref
 * for every transpose combination, with beta = 0 (overwrite, NaNs ignored) and beta = 1; and
 * tess_matmul_ld on sub-matrices of wider arrays against tess_matmul_ld_ref and against
 * tess_matmul on contiguous copies, leaving the columns past N untouched; tess_matmul_small and
 * tess_matmul_small_tn against tess_matmul_ld_ref over row and column tails (of their 8 x 32 and
 * 4 x 16 tiles), K = 0, and beta 0 (C not read), 1, 0.5; tess_matmul_tiles likewise for every
 * transpose pair, K blocks and the bias, and its copy of op(B) against B transposed by hand. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include <string.h>

#include "tensor/matmul.h" /* tess_matmul, tess_matmul_ld, and their _ref */
#include "tess_test.h"

static float next_val(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (float)((double)(*s >> 8) / 8388608.0 - 1.0);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    /* (2,3) @ (3,2): [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]] = [[58,64],[139,154]] */
    const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {7, 8, 9, 10, 11, 12};
    float C[4] = {NAN, NAN, NAN, NAN};
    tess_matmul(C, A, B, 2, 2, 3, false, false, 1.0f, 0.0f);
    TESS_TEST_CHECK(C[0] == 58 && C[1] == 64 && C[2] == 139 && C[3] == 154,
                    "A@B = [58 64; 139 154], got [%g %g; %g %g]", C[0], C[1], C[2], C[3]);
    /* trans_a reads A stored (2,3) as A^T (3,2): C2 (3,3) = A^T @ A = [[17,22,27],[22,29,36],
     * [27,36,45]] */
    float C2[9];
    tess_matmul(C2, A, A, 3, 3, 2, true, false, 1.0f, 0.0f);
    TESS_TEST_CHECK(C2[0] == 17 && C2[1] == 22 && C2[4] == 29 && C2[8] == 45, "A^T A");
    /* beta = 1 accumulates, alpha scales: C += 0.5 A@B */
    tess_matmul(C, A, B, 2, 2, 3, false, false, 0.5f, 1.0f);
    TESS_TEST_CHECK(C[0] == 87 && C[3] == 231, "beta = 1 accumulates: got %g %g", C[0], C[3]);

    enum { M = 5, N = 7, K = 6 };
    float a[M * K], b[K * N], c1[M * N], c2[M * N];
    uint32_t s = 99;
    for (int i = 0; i < M * K; i++) a[i] = next_val(&s);
    for (int i = 0; i < K * N; i++) b[i] = next_val(&s);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        for (int i = 0; i < M * N; i++) c1[i] = c2[i] = next_val(&s);
        tess_matmul(c1, a, b, M, N, K, ta, tb, 0.75f, 1.0f);
        tess_matmul_ref(c2, a, b, M, N, K, ta, tb, 0.75f, 1.0f);
        double err = 0;
        for (int i = 0; i < M * N; i++) err = fmax(err, fabs(c1[i] - c2[i]));
        TESS_TEST_CHECK(err < 1e-5, "trans_a=%d trans_b=%d: max |blas - ref| = %g", ta, tb, err);
    }
    /* Strided: A, B, C are column windows [off, off + width) of arrays LD = 13 floats wide (as
     * one head's rows inside a qkv array); every element outside the window of C must survive. */
    enum { LD = 13, OFF = 3 };
    float wa[LD * 7], wb[LD * 7], wc1[LD * 7], wc2[LD * 7], ca[7 * 7], cb[7 * 7], cc[7 * 7];
    for (int i = 0; i < LD * 7; i++) wa[i] = next_val(&s), wb[i] = next_val(&s);
    for (int t = 0; t < 8; t++) {
        bool ta = t & 1, tb = t & 2;
        float beta = t & 4 ? 1.0f : 0.0f;
        /* stored shapes: A (M,K) or (K,M), B (K,N) or (N,K), C (M,N) */
        const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
        for (int i = 0; i < LD * 7; i++) wc1[i] = wc2[i] = next_val(&s);
        for (int r = 0; r < ar; r++) memcpy(ca + r * ac, wa + r * LD + OFF, sizeof(float) * ac);
        for (int r = 0; r < br; r++) memcpy(cb + r * bc, wb + r * LD + OFF, sizeof(float) * bc);
        for (int r = 0; r < M; r++) memcpy(cc + r * N, wc1 + r * LD + OFF, sizeof(float) * N);
        tess_matmul_ld(wc1 + OFF, LD, wa + OFF, LD, wb + OFF, LD, M, N, K, ta, tb, 0.5f, beta);
        tess_matmul_ld_ref(wc2 + OFF, LD, wa + OFF, LD, wb + OFF, LD, M, N, K, ta, tb, 0.5f, beta);
        tess_matmul(cc, ca, cb, M, N, K, ta, tb, 0.5f, beta);
        double err = 0, errc = 0;
        int outside = 0;
        for (int r = 0; r < 7; r++) {
            for (int j = 0; j < LD; j++) {
                const int i = r * LD + j;
                if (r < M && j >= OFF && j < OFF + N) {
                    err = fmax(err, fabs(wc1[i] - wc2[i]));
                    errc = fmax(errc, fabs(wc1[i] - cc[r * N + j - OFF]));
                } else {
                    outside += wc1[i] != wc2[i];
                }
            }
        }
        TESS_TEST_CHECK(err < 1e-5 && errc < 1e-5,
                        "ld, trans_a=%d trans_b=%d beta=%g: max |blas - ref| = %g, "
                        "|ld - contiguous| = %g", ta, tb, beta, err, errc);
        TESS_TEST_CHECK(outside == 0, "ld, trans_a=%d trans_b=%d: %d elements outside C changed",
                        ta, tb, outside);
    }
    /* tess_matmul_small: C (M,N) windows of arrays SLD wide (column offset SOFF), A (M,K) and
     * B (K,N) windows too; M over the 8- and 4-row tiles' tails, N over 32-, 16- and 8-column
     * blocks (32 with M >= 64: the wide tiles when TESS_MATMUL_SMALL_WIDE). */
    enum { SLD = 85, SOFF = 5, SROWS = 80 };
    static float sa[SROWS * SLD], sb[SROWS * SLD], sc1[SROWS * SLD], sc2[SROWS * SLD];
    for (int i = 0; i < SROWS * SLD; i++) sa[i] = next_val(&s), sb[i] = next_val(&s);
    const int ms[] = {1, 3, 4, 7, 8, 9, 17, 32, 64, 65, 79}, ns[] = {8, 16, 24, 32, 40, 56, 80},
              ks[] = {0, 1, 5, 32, 33};
    const float betas[] = {0.0f, 1.0f, 0.5f};
    int small_bad = 0, small_outside = 0;
    double small_err = 0.0;
    for (size_t im = 0; im < sizeof ms / sizeof ms[0]; im++) {
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
            for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
                for (size_t ib = 0; ib < sizeof betas / sizeof betas[0]; ib++) {
                    const int m = ms[im], n = ns[in], k = ks[ik];
                    for (int i = 0; i < SROWS * SLD; i++) sc1[i] = sc2[i] = next_val(&s);
                    if (betas[ib] == 0.0f) /* beta 0 must not read C */
                        for (int r = 0; r < m; r++) sc1[r * SLD + SOFF] = NAN;
                    /* odd rounds: tess_matmul_small_tn, A (K,M) stored transposed */
                    const bool tn = (im + in + ik + ib) % 2 == 1;
                    if (tn)
                        tess_matmul_small_tn(sc1 + SOFF, SLD, sa + SOFF, SLD, sb + SOFF, SLD, m,
                                             n, k, 0.75f, betas[ib]);
                    else
                        tess_matmul_small(sc1 + SOFF, SLD, sa + SOFF, SLD, sb + SOFF, SLD, m, n,
                                          k, 0.75f, betas[ib]);
                    tess_matmul_ld_ref(sc2 + SOFF, SLD, sa + SOFF, SLD, sb + SOFF, SLD, m, n, k,
                                       tn, false, 0.75f, betas[ib]);
                    for (int r = 0; r < SROWS; r++) {
                        for (int j = 0; j < SLD; j++) {
                            const int i = r * SLD + j;
                            if (r < m && j >= SOFF && j < SOFF + n) {
                                const double e = fabs((double)sc1[i] - sc2[i]);
                                small_bad += !(e < 1e-5);
                                small_err = fmax(small_err, e);
                            } else {
                                small_outside += sc1[i] != sc2[i];
                            }
                        }
                    }
                }
            }
        }
    }
    TESS_TEST_CHECK(small_bad == 0, "small: %d elements off tess_matmul_ld_ref by >= 1e-5 (max %g)",
                    small_bad, small_err);
    TESS_TEST_CHECK(small_outside == 0, "small: %d elements outside C changed", small_outside);

    /* tess_matmul_tiles: every transpose pair, C (M,N) a window of an array TLD wide, A and B
     * windows too; M over the 6-row tiles and their tails, N over 64-column blocks and masked
     * vectors, K = 0, 7 and above the k block (300 > TESS_MATMUL_TILES_KC), beta 0 (C not
     * read) and 0.5, with and without the bias, against tess_matmul_ld_ref plus the bias. */
    enum { TLD = 320, TOFF = 3, TROWS = 310, CLD = 90 };
    static float ta_[TROWS * TLD], tb_[TROWS * TLD], tc1[64 * CLD], tc2[64 * CLD], tbias[80];
    for (int i = 0; i < TROWS * TLD; i++) ta_[i] = next_val(&s), tb_[i] = next_val(&s);
    for (int i = 0; i < 80; i++) tbias[i] = next_val(&s);
    const int tms[] = {1, 5, 6, 13, 64}, tns[] = {1, 16, 33, 64, 80}, tks[] = {0, 7, 300};
    int tiles_bad = 0, tiles_outside = 0;
    double tiles_err = 0.0;
    for (int t = 0; t < 32; t++) {
        const bool ta = t & 1, tb = t & 2;
        const float beta = t & 4 ? 0.5f : 0.0f;
        const float *bias = t & 8 ? tbias : NULL;
        /* with trans_a, A's leading dimension on both sides of the packing threshold (lda >= 256:
         * op(A) packed in panels of 48 rows; 70: read in place) */
        if ((t & 16) && !ta) continue;
        const int alda = t & 16 ? 70 : TLD;
        for (size_t im = 0; im < sizeof tms / sizeof tms[0]; im++) {
            for (size_t in = 0; in < sizeof tns / sizeof tns[0]; in++) {
                for (size_t ik = 0; ik < sizeof tks / sizeof tks[0]; ik++) {
                    const int m = tms[im], n = tns[in], k = tks[ik];
                    for (int i = 0; i < 64 * CLD; i++) tc1[i] = tc2[i] = next_val(&s);
                    if (beta == 0.0f) /* beta 0 must not read C */
                        for (int r = 0; r < m; r++) tc1[r * CLD + TOFF] = NAN;
                    tess_matmul_tiles(tc1 + TOFF, CLD, ta_ + TOFF, alda, tb_ + TOFF, TLD, m, n,
                                      k, ta, tb, 0.75f, beta, bias);
                    tess_matmul_ld_ref(tc2 + TOFF, CLD, ta_ + TOFF, alda, tb_ + TOFF, TLD, m, n,
                                       k, ta, tb, 0.75f, beta);
                    for (int r = 0; r < 64; r++) {
                        for (int j = 0; j < CLD; j++) {
                            const int i = r * CLD + j;
                            if (r < m && j >= TOFF && j < TOFF + n) {
                                const double want = tc2[i] + (bias ? bias[j - TOFF] : 0.0f);
                                const double e = fabs((double)tc1[i] - want);
                                tiles_bad += !(e < 1e-4);
                                tiles_err = fmax(tiles_err, e);
                            } else {
                                tiles_outside += tc1[i] != tc2[i];
                            }
                        }
                    }
                }
            }
        }
    }
    TESS_TEST_CHECK(tiles_bad == 0, "tiles: %d elements off tess_matmul_ld_ref by >= 1e-4 (max %g)",
                    tiles_bad, tiles_err);
    TESS_TEST_CHECK(tiles_outside == 0, "tiles: %d elements outside C changed", tiles_outside);
    { /* trans_a: packed (lda TLD) and in place (lda 70) give the same bits, 64 x 80 x 300 */
        static float a70[300 * 70], a320[300 * TLD], c70[64 * 80], c320[64 * 80];
        for (int k = 0; k < 300; k++) {
            for (int r = 0; r < 64; r++) a70[k * 70 + r] = a320[k * TLD + r] = next_val(&s);
        }
        tess_matmul_tiles(c70, 80, a70, 70, tb_, TLD, 64, 80, 300, true, false, 0.75f, 0.0f, tbias);
        tess_matmul_tiles(c320, 80, a320, TLD, tb_, TLD, 64, 80, 300, true, false, 0.75f, 0.0f,
                          tbias);
        TESS_TEST_CHECK(memcmp(c70, c320, sizeof c70) == 0,
                        "tiles: trans_a packed and in place bitwise equal");
    }

    { /* trans_b copies op(B) (16 x 16 register transposes, element by element at the edges):
       * the same bits as the product on B transposed by hand, read in place; N and K over
       * whole and partial 16 x 16 blocks and two k blocks */
        static float bn[130 * 300], bk[300 * 130], cn[13 * 130], ck[13 * 130];
        const int nns[] = {16, 33, 80, 130}, nks[] = {7, 40, 300};
        int differ = 0;
        for (size_t in = 0; in < sizeof nns / sizeof nns[0]; in++) {
            for (size_t ik = 0; ik < sizeof nks / sizeof nks[0]; ik++) {
                const int n = nns[in], k = nks[ik];
                for (int j = 0; j < n; j++) {
                    for (int q = 0; q < k; q++) bn[j * k + q] = bk[q * n + j] = next_val(&s);
                }
                tess_matmul_tiles(cn, n, ta_, TLD, bn, k, 13, n, k, false, true, 1.0f, 0.0f, NULL);
                tess_matmul_tiles(ck, n, ta_, TLD, bk, n, 13, n, k, false, false, 1.0f, 0.0f, NULL);
                differ += memcmp(cn, ck, (size_t)(13 * n) * sizeof(float)) != 0;
            }
        }
        TESS_TEST_CHECK(differ == 0, "tiles: trans_b = B transposed by hand, bitwise (%d of 12 "
                        "shapes differ)", differ);
    }

    int rc = tess_test_finish("matmul");
    MPI_Finalize();
    return rc;
}
