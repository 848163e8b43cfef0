/* test_matmul.c - tess_matmul (BLAS) against hand-computed products and against tess_matmul_ref
 * for every transpose combination, with beta = 0 (overwrite, NaNs ignored) and beta = 1. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "tensor/matmul.h" /* tess_matmul, tess_matmul_ref */
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
    int rc = tess_test_finish("matmul");
    MPI_Finalize();
    return rc;
}
