/* test_codebook - what the gradient-check table cannot see in the tokenizer layers
 * (nn/conv1d.h, nn/codebook.h): the causal convolution's output before a perturbed frame is
 * bit-identical; the direct convolution (no col) matches the GEMM path and the double oracle
 * on narrow and strided shapes, and so do the patch convolutions (stride = K, no col); the hard straight-through quantiser outputs codebook rows and passes exactly
 * the soft path's gradient; VQ passes dq to z unchanged and the EMA pulls a code to the mean
 * of its assigned vectors; the orthogonality loss of unit rows is never below the Welch bound;
 * l2norm gives unit rows. */
#include <math.h>
#include <string.h>

#include "core/rng.h"    /* tess_rng_* */
#include "nn/codebook.h" /* tess_nn_codebook_*, tess_nn_l2norm_* */
#include "nn/conv1d.h"   /* tess_nn_conv1d_* */
#include "tess_test.h"

static void fill(float *x, int64_t n, uint64_t what) {
    tess_rng_fill_uniform((tess_rng_key){5, 0}, tess_rng_ctr(TESS_RNG_PURPOSE_TEST, what), 0, n, x,
                          -1.0f, 1.0f);
}

static void test_conv_causal(void) {
    enum { B = 2, L = 12, C = 3, OC = 4, K = 5 };
    tess_nn_conv1d_dims d = {.B = B, .L = L, .C = C, .OC = OC, .K = K, .stride = 1, .pad = K - 1};
    TESS_TEST_CHECK(tess_nn_conv1d_out_len(&d) == L, "causal conv keeps the length");
    float in[B * L * C], w[OC * C * K], b[OC], out0[B * L * OC], out1[B * L * OC],
        col[B * L * C * K];
    fill(in, B * L * C, 1), fill(w, OC * C * K, 2), fill(b, OC, 3);
    tess_nn_conv1d_forward(out0, col, in, w, b, &d);
    const int t0 = 7;
    for (int bb = 0; bb < B; bb++)
        for (int c = 0; c < C; c++) in[(bb * L + t0) * C + c] += 0.5f;
    tess_nn_conv1d_forward(out1, col, in, w, b, &d);
    int same_before = 1, changed_at = 0;
    for (int bb = 0; bb < B; bb++)
        for (int t = 0; t < L; t++)
            for (int o = 0; o < OC; o++) {
                int i = (bb * L + t) * OC + o;
                if (t < t0 && memcmp(&out0[i], &out1[i], sizeof(float)) != 0) same_before = 0;
                if (t == t0 && out0[i] != out1[i]) changed_at = 1;
            }
    TESS_TEST_CHECK(same_before, "outputs before the perturbed frame are bit-identical");
    TESS_TEST_CHECK(changed_at, "the output at the perturbed frame changes");
}

/* The direct convolution (no col) against the GEMM path and the double oracle, on a narrow
 * causal convolution like the tokenizer's last one (OC = 1) and a strided one with OC > 1; C = 13
 * leaves tails after the blocks of the dot's lanes and of the axpy. */
static void test_conv_direct(void) {
    enum { B = 3, L = 16, C = 13, K = 5, MAXO = 3 };
    const tess_nn_conv1d_dims dims[2] = {
        {.B = B, .L = L, .C = C, .OC = 1, .K = K, .stride = 1, .pad = K - 1},
        {.B = B, .L = L, .C = C, .OC = MAXO, .K = K, .stride = 2, .pad = 2}};
    for (int v = 0; v < 2; v++) {
        const tess_nn_conv1d_dims *d = &dims[v];
        const int64_t Lo = tess_nn_conv1d_out_len(d), no = B * Lo * d->OC, nw = d->OC * C * K;
        float in[B * L * C], w[MAXO * C * K], b[MAXO], dout[B * L * MAXO], col[B * L * C * K],
            dcol[B * L * C * K], work[2 * MAXO * C * K];
        float out_d[B * L * MAXO], out_g[B * L * MAXO], out_r[B * L * MAXO];
        float din_d[B * L * C] = {0}, din_g[B * L * C] = {0}, din_r[B * L * C] = {0};
        float dw_d[MAXO * C * K] = {0}, dw_g[MAXO * C * K] = {0}, dw_r[MAXO * C * K] = {0};
        float db_d[MAXO] = {0}, db_r[MAXO] = {0};
        TESS_TEST_CHECK(tess_nn_conv1d_direct_work_size(d) <= 2 * MAXO * C * K, "work fits");
        fill(in, B * L * C, 11), fill(w, nw, 12), fill(b, d->OC, 13), fill(dout, no, 14);
        tess_nn_conv1d_direct_forward(out_d, work, in, w, b, d);
        tess_nn_conv1d_forward(out_g, col, in, w, b, d);
        tess_nn_conv1d_forward_ref(out_r, in, w, b, d);
        tess_nn_conv1d_direct_backward(din_d, dw_d, db_d, work, dout, in, w, d);
        tess_nn_conv1d_backward(din_g, dw_g, NULL, dcol, dout, col, w, d);
        tess_nn_conv1d_backward_ref(din_r, dw_r, db_r, dout, in, w, d);
        double eo = 0.0, eg = 0.0, ei = 0.0, ew = 0.0, eb = 0.0;
        for (int64_t i = 0; i < no; i++) {
            eo = fmax(eo, fabs((double)out_d[i] - out_r[i]));
            eg = fmax(eg, fabs((double)out_d[i] - out_g[i]));
        }
        for (int64_t i = 0; i < B * L * C; i++) {
            ei = fmax(ei, fabs((double)din_d[i] - din_r[i]));
            eg = fmax(eg, fabs((double)din_d[i] - din_g[i]));
        }
        for (int64_t i = 0; i < nw; i++) {
            ew = fmax(ew, fabs((double)dw_d[i] - dw_r[i]));
            eg = fmax(eg, fabs((double)dw_d[i] - dw_g[i]));
        }
        for (int64_t o = 0; o < d->OC; o++) eb = fmax(eb, fabs((double)db_d[o] - db_r[o]));
        TESS_TEST_CHECK(eo < 1e-5 && ei < 1e-5 && ew < 1e-5 && eb < 1e-5,
                        "direct conv %d against the oracle: out %.2g, din %.2g, dw %.2g, db %.2g", v,
                        eo, ei, ew, eb);
        TESS_TEST_CHECK(eg < 1e-5, "direct conv %d against the GEMM path: %.2g", v, eg);
    }
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e;
}

/* The patch convolutions (stride = K, no col) against the GEMM paths and the double oracles:
 * the patch cut c -> c and its transpose, the tokenizer's two middle convolutions. */
static void test_conv_patch(void) {
    enum { B = 3, M = 4, K = 4, C = 13, OC = 5, L = M * K, N = B * L * C };
    const tess_nn_conv1d_dims dc = {.B = B, .L = L, .C = C, .OC = OC, .K = K, .stride = K},
                              dt = {.B = B, .L = M, .C = OC, .OC = C, .K = K, .stride = K};
    float in[N], w[OC * C * K], b[C], dout[N], col[N], dcol[N], work[2 * OC * C * K];
    float out_p[N], out_g[N], out_r[N], din_p[N] = {0}, din_g[N] = {0}, din_r[N] = {0};
    float dw_p[OC * C * K] = {0}, dw_g[OC * C * K] = {0}, dw_r[OC * C * K] = {0};
    float db_p[C] = {0}, db_g[C] = {0}, db_r[C] = {0};
    TESS_TEST_CHECK(tess_nn_conv1d_patch_work_size(&dc) <= 2 * OC * C * K &&
                        tess_nn_conv1d_patch_work_size(&dt) <= 2 * OC * C * K,
                    "work fits");
    /* conv: in (B, L, C) -> (B, M, OC) */
    fill(in, N, 21), fill(w, OC * C * K, 22), fill(b, OC, 23), fill(dout, B * M * OC, 24);
    tess_nn_conv1d_patch_forward(out_p, work, in, w, b, &dc);
    tess_nn_conv1d_forward(out_g, col, in, w, b, &dc);
    tess_nn_conv1d_forward_ref(out_r, in, w, b, &dc);
    tess_nn_conv1d_patch_backward(din_p, dw_p, db_p, work, dout, in, w, &dc);
    tess_nn_conv1d_backward(din_g, dw_g, db_g, dcol, dout, col, w, &dc);
    tess_nn_conv1d_backward_ref(din_r, dw_r, db_r, dout, in, w, &dc);
    double e = fmax(fmax(max_diff(out_p, out_r, B * M * OC), max_diff(din_p, din_r, N)),
                    fmax(max_diff(dw_p, dw_r, OC * C * K), max_diff(db_p, db_r, OC)));
    TESS_TEST_CHECK(e < 1e-5, "patch conv against the oracle: %.2g", e);
    e = fmax(fmax(max_diff(out_p, out_g, B * M * OC), max_diff(din_p, din_g, N)),
             max_diff(dw_p, dw_g, OC * C * K));
    TESS_TEST_CHECK(e < 1e-5, "patch conv against the GEMM path: %.2g", e);
    /* transposed: in (B, M, OC) -> (B, L, C) */
    memset(din_p, 0, sizeof din_p), memset(din_g, 0, sizeof din_g), memset(din_r, 0, sizeof din_r);
    memset(dw_p, 0, sizeof dw_p), memset(dw_g, 0, sizeof dw_g), memset(dw_r, 0, sizeof dw_r);
    fill(in, B * M * OC, 25), fill(b, C, 26), fill(dout, N, 27);
    tess_nn_convt1d_patch_forward(out_p, work, in, w, b, &dt);
    tess_nn_convt1d_forward(out_g, col, in, w, b, &dt);
    tess_nn_convt1d_forward_ref(out_r, in, w, b, &dt);
    tess_nn_convt1d_patch_backward(din_p, dw_p, db_p, work, dout, in, w, &dt);
    tess_nn_convt1d_backward(din_g, dw_g, db_g, col, dout, in, w, &dt);
    tess_nn_convt1d_backward_ref(din_r, dw_r, db_r, dout, in, w, &dt);
    e = fmax(fmax(max_diff(out_p, out_r, N), max_diff(din_p, din_r, B * M * OC)),
             max_diff(dw_p, dw_r, OC * C * K));
    TESS_TEST_CHECK(e < 1e-5, "patch convt against the oracle: %.2g", e);
    e = fmax(fmax(max_diff(out_p, out_g, N), max_diff(din_p, din_g, B * M * OC)),
             max_diff(dw_p, dw_g, OC * C * K));
    TESS_TEST_CHECK(e < 1e-5, "patch convt against the GEMM path: %.2g", e);
}

static void test_hard_st(void) {
    enum { N = 6, K = 8, D = 4 };
    float z[N * D], E[K * D], G[N * K], rn[K > N ? K : N];
    fill(z, N * D, 4), fill(E, K * D, 5), fill(G, N * K, 6);
    tess_nn_l2norm_forward(z, rn, z, N, D, 1e-6f);
    tess_nn_l2norm_forward(E, rn, E, K, D, 1e-6f);
    double worst = 0.0;
    for (int n = 0; n < N; n++) {
        double s = 0.0;
        for (int j = 0; j < D; j++) s += (double)z[n * D + j] * z[n * D + j];
        worst = fmax(worst, fabs(sqrt(s) - 1.0));
    }
    TESS_TEST_CHECK(worst < 1e-6, "l2norm rows have norm 1 (worst %.2g)", worst);
    tess_nn_codebook_dims soft = {N, K, D, 0.1f, 0.5f, TESS_NN_CODEBOOK_SOFT}, hard = soft;
    hard.mode = TESS_NN_CODEBOOK_HARD_ST;
    float qs[N * D], qh[N * D], ls[N * K], lh[N * K], ys[N * K], yh[N * K], work[N * K];
    int32_t ids_s[N], ids_h[N];
    tess_nn_codebook_forward(qs, ls, ys, ids_s, z, E, G, &soft);
    tess_nn_codebook_forward(qh, lh, yh, ids_h, z, E, G, &hard);
    int rows = 1, argmax = 1;
    for (int n = 0; n < N; n++) {
        rows &= memcmp(qh + n * D, E + ids_h[n] * D, D * sizeof(float)) == 0;
        argmax &= ids_h[n] == ids_s[n];
        for (int k = 0; k < K; k++)
            argmax &= ls[n * K + k] + G[n * K + k] <= ls[n * K + ids_h[n]] + G[n * K + ids_h[n]];
    }
    TESS_TEST_CHECK(rows, "hard mode outputs the chosen codebook rows");
    TESS_TEST_CHECK(argmax, "ids are the argmax of logits + noise");
    float dq[N * D], dzs[N * D] = {0}, dzh[N * D] = {0}, dEs[K * D] = {0}, dEh[K * D] = {0};
    fill(dq, N * D, 7);
    tess_nn_codebook_backward(dzs, dEs, work, dq, NULL, z, E, ys, &soft);
    tess_nn_codebook_backward(dzh, dEh, work, dq, NULL, z, E, yh, &hard);
    TESS_TEST_CHECK(memcmp(dzs, dzh, sizeof dzs) == 0 && memcmp(dEs, dEh, sizeof dEs) == 0,
                    "straight-through: the hard mode's gradient is the soft path's");
    double any = 0.0;
    for (int i = 0; i < N * D; i++) any += fabs(dzh[i]);
    TESS_TEST_CHECK(any > 0.0, "the straight-through gradient reaches z");
}

static void test_vq(void) {
    enum { N = 40, K = 4, D = 3 };
    float z[N * D], E[K * D], q[N * D], dq[N * D], dz[N * D] = {0};
    int32_t ids[N];
    fill(z, N * D, 8), fill(E, K * D, 9), fill(dq, N * D, 10);
    double commit = tess_nn_codebook_vq_forward(q, ids, z, E, N, K, D);
    TESS_TEST_CHECK(commit > 0.0, "commitment loss %.3f > 0", commit);
    tess_nn_codebook_vq_backward(dz, dq, 0.0f, z, q, N, D);
    TESS_TEST_CHECK(memcmp(dz, dq, sizeof dz) == 0, "VQ passes dq to z unchanged");
    /* EMA with decay 0 puts each used code at the mean of its vectors */
    float count[K] = {0}, sum[K * D] = {0}, mean[K * D] = {0};
    int used[K] = {0};
    for (int n = 0; n < N; n++) {
        used[ids[n]]++;
        for (int j = 0; j < D; j++) mean[ids[n] * D + j] += z[n * D + j];
    }
    /* the statistics of two halves summed (two ranks) are the whole batch's */
    float nk[K], sk[K * D], nk2[K], sk2[K * D];
    tess_nn_codebook_ema_stats(nk, sk, z, ids, N / 2, K, D);
    tess_nn_codebook_ema_stats(nk2, sk2, z + (N / 2) * D, ids + N / 2, N - N / 2, K, D);
    for (int k = 0; k < K; k++) {
        nk[k] += nk2[k];
        for (int j = 0; j < D; j++) sk[k * D + j] += sk2[k * D + j];
    }
    float E0[K * D];
    memcpy(E0, E, sizeof E);
    tess_nn_codebook_ema_apply(E, count, sum, nk, sk, K, D, 0.0f);
    double err = 0.0;
    int kept = 1;
    for (int k = 0; k < K; k++) {
        TESS_TEST_CHECK(nk[k] == (float)used[k], "code %d: %g assignments counted, %d made", k,
                        nk[k], used[k]);
        for (int j = 0; j < D; j++) {
            if (used[k]) err = fmax(err, fabs(E[k * D + j] - mean[k * D + j] / used[k]));
            else kept &= E[k * D + j] == E0[k * D + j];
        }
    }
    TESS_TEST_CHECK(err < 1e-5, "EMA (decay 0) moves codes to their means (err %.2g)", err);
    TESS_TEST_CHECK(kept, "EMA leaves unused codes where they are");
    /* decay 0.5: count and row are the average of the old state and this batch */
    float c1[K], s1[K * D];
    memcpy(c1, count, sizeof c1), memcpy(s1, sum, sizeof s1);
    float zero[K] = {0}, zsk[K * D] = {0};
    tess_nn_codebook_ema_apply(E, count, sum, zero, zsk, K, D, 0.5f);
    int halved = 1;
    for (int k = 0; k < K; k++) halved &= count[k] == 0.5f * c1[k] && sum[k * D] == 0.5f * s1[k * D];
    TESS_TEST_CHECK(halved, "an empty batch with decay 0.5 halves count and sum");
}

/* Dead codes: a code is dead after `window` consecutive steps without an assignment, reported
 * once (its idle count restarts), and an assignment resets its count. */
static void test_dead(void) {
    enum { K = 4 };
    int64_t idle[K] = {0}, dead[K];
    const float used01[K] = {1, 3, 0, 0}, used3[K] = {2, 0, 0, 1};
    TESS_TEST_CHECK(tess_nn_codebook_dead(dead, idle, used01, K, 2) == 0, "no code dead after 1 step");
    int64_t n = tess_nn_codebook_dead(dead, idle, used3, K, 2);
    TESS_TEST_CHECK(n == 1 && dead[0] == 2, "code 2 (idle 2 steps, window 2) is dead: %lld codes",
                    (long long)n);
    TESS_TEST_CHECK(idle[0] == 0 && idle[1] == 1 && idle[2] == 0 && idle[3] == 0,
                    "idle counts after the second step: %lld %lld %lld %lld", (long long)idle[0],
                    (long long)idle[1], (long long)idle[2], (long long)idle[3]);
    n = tess_nn_codebook_dead(dead, idle, used3, K, 2);
    TESS_TEST_CHECK(n == 1 && dead[0] == 1, "code 1 dead at its second idle step, code 2 not yet");
    n = tess_nn_codebook_dead(dead, idle, (const float[K]){0, 0, 0, 0}, K, 1);
    TESS_TEST_CHECK(n == K && dead[0] == 0 && dead[3] == 3, "window 1: every unused code, ascending");
}

static void test_welch(void) {
    enum { K = 16, D = 4 };
    float E[K * D], rn[K], gram[K * K];
    fill(E, K * D, 11);
    tess_nn_l2norm_forward(E, rn, E, K, D, 1e-6f);
    double l = tess_nn_codebook_orth_forward(gram, E, K, D);
    double welch = ((double)K * K / D - K) / ((double)K * K);
    TESS_TEST_CHECK(l >= welch - 1e-6, "orth loss %.4f >= Welch bound %.4f", l, welch);
    TESS_TEST_CLOSE(l, tess_nn_codebook_orth_forward_ref(E, K, D), 1e-6, 1e-5, "orth fast vs ref");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_conv_causal();
    test_conv_direct();
    test_conv_patch();
    test_hard_st();
    test_vq();
    test_welch();
    test_dead();
    int rc = tess_test_finish("test_codebook");
    MPI_Finalize();
    return rc;
}
