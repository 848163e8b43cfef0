/* kalter.c - the Kalter-Conv layer and its float64 reference (kalter.h). */
#include "nn/kalter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"   /* TESS_ASSERT */
#include "nn/graph.h"      /* tess_nn_relu_dropout_forward */
#include "nn/linear.h"     /* tess_nn_linear_tiles_* */
#include "tensor/matmul.h" /* tess_matmul_tiles */
#include "tensor/sparse.h" /* tess_csr_spmm* */
#include "tensor/tensor.h" /* tess_tensor_tanhf, tess_tensor_softplusf, tess_tensor_sigmoidf */

#define KALTER_S_MIN 1e-8

static inline double softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }
static inline double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The cache, carved in this order from one float buffer. */
typedef struct {
    float *u, *a2p, *V, *sm, *g, *pm; /* (N,d) each */
    float *m;                         /* (N,dh+d) */
    float *c, *r;                     /* (N,dm) */
    float *z, *aR, *R, *S, *K, *nu;   /* (N,d) */
    float *wa2;                       /* (d,d) W_A o W_A */
} kalter_cache;

static kalter_cache kalter_carve(float *base, const tess_nn_kalter_dims *dm) {
    const int64_t N = dm->N, d = dm->d, dx = dm->dh + dm->d, m = dm->dm;
    kalter_cache k;
    float *p = base;
    float **nd1[] = {&k.u, &k.a2p, &k.V, &k.sm, &k.g, &k.pm};
    for (size_t i = 0; i < sizeof nd1 / sizeof nd1[0]; i++, p += N * d) *nd1[i] = p;
    k.m = p, p += N * dx;
    k.c = p, p += N * m;
    k.r = p, p += N * m;
    float **nd2[] = {&k.z, &k.aR, &k.R, &k.S, &k.K, &k.nu};
    for (size_t i = 0; i < sizeof nd2 / sizeof nd2[0]; i++, p += N * d) *nd2[i] = p;
    k.wa2 = p;
    return k;
}

int64_t tess_nn_kalter_cache_size(const tess_nn_kalter_dims *dm) {
    const int64_t N = dm->N, d = dm->d, dx = dm->dh + dm->d;
    return N * (12 * d + dx + 2 * dm->dm) + d * d;
}

/* scratch: Gz, GaR, GV, Ga, Gu, Ga2p (N,d); Gc (N,dm); Gm (N,dh+d); tmp (d,d) */
int64_t tess_nn_kalter_scratch_size(const tess_nn_kalter_dims *dm) {
    const int64_t N = dm->N, d = dm->d, dx = dm->dh + dm->d;
    return N * (6 * d + dm->dm + dx) + d * d;
}

/* The update of one row (d channels), in float: sm holds a = u W_A^T + b_A on entry and s- on
 * return; g, pm, R, S, K, nu are the cache's rows; Q = softplus(q). Restrict pointers and no
 * libm: the loop vectorises (inlined with a constant lin). */
static inline void update_row(float *restrict sm, float *restrict g, float *restrict pm,
                       float *restrict R, float *restrict S, float *restrict K,
                       float *restrict nu, float *restrict s_out, float *restrict p_out,
                       const float *restrict V, const float *restrict aR,
                       const float *restrict z, const float *restrict Q,
                       const float *restrict eta, float r_min, bool lin, int64_t d) {
    for (int64_t j = 0; j < d; j++) {
        const float a = sm[j], t = lin ? a : tess_tensor_tanhf(a);
        const float gj = lin ? 1.0f : 1.0f - t * t;
        const float pmj = gj * gj * V[j] + Q[j];
        const float Rj = tess_tensor_softplusf(aR[j]) + r_min;
        const float S0 = eta[j] * eta[j] * pmj + Rj;
        const float Sj = S0 > (float)KALTER_S_MIN ? S0 : (float)KALTER_S_MIN;
        const float inv = 1.0f / Sj, Kj = eta[j] * pmj * inv, nuj = z[j] - eta[j] * t;
        sm[j] = t;
        g[j] = gj;
        pm[j] = pmj;
        R[j] = Rj;
        S[j] = Sj;
        K[j] = Kj;
        nu[j] = nuj;
        s_out[j] = t + Kj * nuj;
        p_out[j] = pmj * (Rj * inv);
    }
}

void tess_nn_kalter_forward(float *s_out, float *p_out, float *h_out, float *cache,
                            const float *h, const float *s, const float *P, const tess_csr *A,
                            const tess_csr *Ahat, const tess_csr *Ahat2, const float *mask,
                            const tess_nn_kalter_params *p, const tess_nn_kalter_dims *dm) {
    const int64_t N = dm->N, d = dm->d, dh = dm->dh, dx = dh + d;
    kalter_cache k = kalter_carve(cache, dm);
    /* predict */
    tess_csr_spmm(k.u, Ahat, s, d, 1.0f, 0.0f);
    /* a = u W_A^T + b_A into sm; its tanh below unless linear */
    tess_nn_linear_tiles_forward(k.sm, k.u, p->w_a, p->b_a, N, d, d);
    tess_csr_spmm(k.a2p, Ahat2, P, d, 1.0f, 0.0f);
    for (int64_t i = 0; i < d * d; i++) k.wa2[i] = p->w_a[i] * p->w_a[i];
    tess_nn_linear_tiles_forward(k.V, k.a2p, k.wa2, NULL, N, d, d);
    /* observe: m = (1+eps) X + A X written by column block, X = [h | s] never formed */
    const float e1 = 1.0f + dm->eps;
    for (int64_t n = 0; n < N; n++) {
        float *restrict mr = k.m + n * dx;
        const float *restrict hr = h + n * dh, *restrict sr = s + n * d;
        for (int64_t c = 0; c < dh; c++) mr[c] = e1 * hr[c];
        for (int64_t c = 0; c < d; c++) mr[dh + c] = e1 * sr[c];
    }
    tess_csr_spmm_ld(k.m, dx, A, h, dh, dh, 1.0f, 1.0f);
    tess_csr_spmm_ld(k.m + dh, dx, A, s, d, d, 1.0f, 1.0f);
    tess_nn_linear_tiles_forward(k.c, k.m, p->w1, p->b1, N, dx, dm->dm);
    for (int64_t i = 0; i < N * dm->dm; i++) k.r[i] = k.c[i] > 0.0f ? k.c[i] : 0.0f;
    tess_nn_linear_tiles_forward(k.z, k.r, p->w2, p->b2, N, dm->dm, d);
    tess_nn_linear_tiles_forward(k.aR, h, p->w_r, p->b_r, N, dh, d);
    /* elementwise, in float with the vectorisable tanh / softplus of tensor.h: predict's
     * nonlinearity, the gain and the update; Q = softplus(q) once per channel */
    float Q[d];
    for (int64_t j = 0; j < d; j++) Q[j] = tess_tensor_softplusf(p->q[j]);
    for (int64_t n = 0; n < N; n++) {
        const int64_t o = n * d;
        float *const c[7] = {k.sm + o, k.g + o, k.pm + o, k.R + o, k.S + o, k.K + o, k.nu + o};
        /* a constant lin at each call: the inlined copies carry no select between the two */
        if (dm->linear) {
            update_row(c[0], c[1], c[2], c[3], c[4], c[5], c[6], s_out + o, p_out + o, k.V + o,
                       k.aR + o, k.z + o, Q, p->eta, dm->r_min, true, d);
        } else {
            update_row(c[0], c[1], c[2], c[3], c[4], c[5], c[6], s_out + o, p_out + o, k.V + o,
                       k.aR + o, k.z + o, Q, p->eta, dm->r_min, false, d);
        }
    }
    tess_nn_relu_dropout_forward(h_out, k.z, mask, N * d);
}

/* The backward of update_row for one row: Gz += ds_out K (Gz holds h+'s part already),
 * GaR, GV, Ga overwritten, teta / tq (d) the row's terms of eta's and q's gradients. The 1/S^2
 * terms are written through r = R / S, c = P- / S and 1/S (no R^2 overflow for large R). */
static inline void backward_row(float *restrict Gz, float *restrict GaR, float *restrict GV,
                         float *restrict Ga, float *restrict teta, float *restrict tq,
                         const float *restrict ds_out, const float *restrict dp_out,
                         const float *restrict Kc, const float *restrict S,
                         const float *restrict Rc, const float *restrict pmc,
                         const float *restrict smc, const float *restrict g,
                         const float *restrict nu, const float *restrict V,
                         const float *restrict aR, const float *restrict eta, bool lin,
                         int64_t d) {
    for (int64_t j = 0; j < d; j++) {
        const float gs = ds_out[j], gp = dp_out[j], e = eta[j];
        const float K = Kc[j], R = Rc[j], pm = pmc[j], sm = smc[j], gg = g[j];
        const float inv = 1.0f / S[j], r = R * inv, c = pm * inv;
        Gz[j] += gs * K;
        const float GK = gs * nu[j];
        const float Gsm = gs * (1.0f - K * e);
        const float Gpm = gp * r * r + GK * e * r * inv;
        const float GR = gp * K * K - GK * e * c * inv;
        teta[j] = -gs * K * sm + GK * c * (R - e * e * pm) * inv - 2.0f * gp * e * c * c * R;
        tq[j] = Gpm;
        GaR[j] = GR * tess_tensor_sigmoidf(aR[j]);
        GV[j] = Gpm * gg * gg;
        const float Gg = Gpm * 2.0f * gg * V[j];
        Ga[j] = lin ? Gsm : (Gsm - 2.0f * sm * Gg) * gg; /* g' = 0 if linear */
    }
}

void tess_nn_kalter_backward(float *dh, float *ds, float *dP, const tess_nn_kalter_params *g,
                             float *scratch, const float *ds_out, const float *dp_out,
                             const float *dh_out, const float *h, const float *cache,
                             const tess_csr *A, const tess_csr *Ahat, const tess_csr *Ahat2,
                             const float *mask, const tess_nn_kalter_params *p,
                             const tess_nn_kalter_dims *dm) {
    const int64_t N = dm->N, d = dm->d, dh_ = dm->dh, dx = dh_ + d, H = dm->dm;
    const kalter_cache k = kalter_carve((float *)cache, dm);
    float *Gz = scratch, *GaR = Gz + N * d, *GV = GaR + N * d, *Ga = GV + N * d;
    float *Gu = Ga + N * d, *Ga2p = Gu + N * d, *Gc = Ga2p + N * d, *Gm = Gc + N * H;
    float *tmp = Gm + N * dx;
    double geta[d], gq[d];
    memset(geta, 0, sizeof geta);
    memset(gq, 0, sizeof gq);
    /* update, noise, covariance and mean nonlinearity: elementwise in float (backward_row), the
     * per-channel sums of eta's and q's gradients in double */
    float teta[d], tq[d];
    const bool lin = dm->linear;
    memset(Gz, 0, (size_t)(N * d) * sizeof(float));
    tess_nn_relu_dropout_backward(Gz, dh_out, k.z, mask, N * d); /* h+ = mask o relu(z) */
    for (int64_t n = 0; n < N; n++) {
        const int64_t o = n * d;
        const float *const c[9] = {k.K + o, k.S + o, k.R + o, k.pm + o, k.sm + o,
                                   k.g + o, k.nu + o, k.V + o, k.aR + o};
        if (lin) { /* constant lin per call, as in the forward */
            backward_row(Gz + o, GaR + o, GV + o, Ga + o, teta, tq, ds_out + o, dp_out + o, c[0],
                         c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], p->eta, true, d);
        } else {
            backward_row(Gz + o, GaR + o, GV + o, Ga + o, teta, tq, ds_out + o, dp_out + o, c[0],
                         c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], p->eta, false, d);
        }
        for (int64_t j = 0; j < d; j++) {
            geta[j] += teta[j];
            gq[j] += tq[j];
        }
    }
    for (int64_t j = 0; j < d; j++) {
        g->eta[j] += (float)geta[j];
        g->q[j] += (float)(gq[j] * sigmoid(p->q[j]));
    }
    /* noise: a_R = h W_R^T + b_R */
    tess_nn_linear_tiles_backward(dh, g->w_r, g->b_r, GaR, h, p->w_r, N, dh_, d);
    /* covariance: V = (Ahat2 P)(W_A o W_A)^T */
    tess_matmul_tiles(Ga2p, d, GV, d, k.wa2, d, N, d, d, false, false, 1.0f, 0.0f, NULL);
    tess_csr_spmm_t(dP, Ahat2, Ga2p, d);
    tess_matmul_tiles(tmp, d, GV, d, k.a2p, d, d, d, N, true, false, 1.0f, 0.0f, NULL);
    for (int64_t i = 0; i < d * d; i++) g->w_a[i] += 2.0f * p->w_a[i] * tmp[i];
    /* mean: a = (Ahat s) W_A^T + b_A; Gu = Ga W_A overwritten */
    tess_matmul_tiles(Gu, d, Ga, d, p->w_a, d, N, d, d, false, false, 1.0f, 0.0f, NULL);
    tess_nn_linear_tiles_backward(NULL, g->w_a, g->b_a, Ga, k.u, p->w_a, N, d, d);
    tess_csr_spmm_t(ds, Ahat, Gu, d);
    /* observation GIN over X = [h | s]: Gc = (Gz W_2) o 1[c > 0], Gm = Gc W_1 overwritten */
    tess_matmul_tiles(Gc, H, Gz, d, p->w2, H, N, H, d, false, false, 1.0f, 0.0f, NULL);
    tess_nn_linear_tiles_backward(NULL, g->w2, g->b2, Gz, k.r, p->w2, N, H, d);
    for (int64_t i = 0; i < N * H; i++) {
        if (!(k.c[i] > 0.0f)) Gc[i] = 0.0f;
    }
    tess_matmul_tiles(Gm, dx, Gc, H, p->w1, dx, N, dx, H, false, false, 1.0f, 0.0f, NULL);
    tess_nn_linear_tiles_backward(NULL, g->w1, g->b1, Gc, k.m, p->w1, N, dx, H);
    /* [dh | ds] += (1+eps) Gm + A^T Gm, by column block */
    const float e1 = 1.0f + dm->eps;
    for (int64_t n = 0; n < N; n++) {
        float *restrict hr = dh + n * dh_, *restrict sr = ds + n * d;
        const float *restrict gr = Gm + n * dx;
        for (int64_t c = 0; c < dh_; c++) hr[c] += e1 * gr[c];
        for (int64_t c = 0; c < d; c++) sr[c] += e1 * gr[dh_ + c];
    }
    tess_csr_spmm_t_ld(dh, dh_, A, Gm, dx, dh_);
    tess_csr_spmm_t_ld(ds, d, A, Gm + dh_, dx, d);
}

void tess_nn_kalter_diagnostics(float *k_eta, float *p_ratio, float *R, const float *cache,
                                const tess_nn_kalter_params *p, const tess_nn_kalter_dims *dm) {
    const kalter_cache k = kalter_carve((float *)cache, dm);
    for (int64_t n = 0; n < dm->N; n++) {
        for (int64_t j = 0; j < dm->d; j++) {
            const int64_t i = n * dm->d + j;
            if (k_eta) k_eta[i] = k.K[i] * p->eta[j];
            if (p_ratio) p_ratio[i] = (float)((double)k.R[i] / k.S[i]);
            if (R) R[i] = k.R[i];
        }
    }
}

/* ------------------------------ float64 reference ------------------------------ */

/* y (rows,F) = A x (+ y when add), x (cols,F), naive in double */
static void ref_spmm(double *y, const tess_csr *A, const double *x, int64_t F, int add) {
    for (int64_t i = 0; i < A->rows; i++) {
        for (int64_t f = 0; f < F; f++) {
            double acc = add ? y[i * F + f] : 0.0;
            for (int64_t e = A->indptr[i]; e < A->indptr[i + 1]; e++) {
                acc += (A->val ? (double)A->val[e] : 1.0) * x[(int64_t)A->indices[e] * F + f];
            }
            y[i * F + f] = acc;
        }
    }
}

/* y (cols,F) += A^T x, x (rows,F) */
static void ref_spmm_t(double *y, const tess_csr *A, const double *x, int64_t F) {
    for (int64_t i = 0; i < A->rows; i++) {
        for (int64_t e = A->indptr[i]; e < A->indptr[i + 1]; e++) {
            const double w = A->val ? (double)A->val[e] : 1.0;
            for (int64_t f = 0; f < F; f++) y[(int64_t)A->indices[e] * F + f] += w * x[i * F + f];
        }
    }
}

/* out (N,O) = in (N,C) w^T + b (w (O,C), b may be NULL) */
static void ref_linear(double *out, const double *in, const double *w, const double *b, int64_t N,
                       int64_t C, int64_t O) {
    for (int64_t n = 0; n < N; n++) {
        for (int64_t o = 0; o < O; o++) {
            double acc = b ? b[o] : 0.0;
            for (int64_t c = 0; c < C; c++) acc += in[n * C + c] * w[o * C + c];
            out[n * O + o] = acc;
        }
    }
}

/* din (N,C) += dout w (if din); dw (O,C) += dout^T in; db (O) += column sums (if db) */
static void ref_linear_back(double *din, double *dw, double *db, const double *dout,
                            const double *in, const double *w, int64_t N, int64_t C, int64_t O) {
    for (int64_t n = 0; n < N; n++) {
        for (int64_t o = 0; o < O; o++) {
            const double go = dout[n * O + o];
            for (int64_t c = 0; c < C; c++) {
                if (din) din[n * C + c] += go * w[o * C + c];
                dw[o * C + c] += go * in[n * C + c];
            }
            if (db) db[o] += go;
        }
    }
}

/* every intermediate of the forward, double */
typedef struct {
    double *u, *a2p, *V, *sm, *g, *pm, *X, *m, *c, *r, *z, *aR, *R, *S, *K, *nu, *wa2;
    double *mem;
} ref_fwd;

static void ref_forward_all(ref_fwd *f, double *s_out, double *p_out, double *h_out,
                            const double *h, const double *s, const double *P, const tess_csr *A,
                            const tess_csr *Ahat, const tess_csr *Ahat2, const double *mask,
                            const tess_nn_kalter_params_f64 *p, const tess_nn_kalter_dims *dm) {
    const int64_t N = dm->N, d = dm->d, dh = dm->dh, dx = dh + d, H = dm->dm;
    f->mem = calloc((size_t)(N * (12 * d + 2 * dx + 2 * H) + d * d + 1), sizeof(double));
    TESS_ASSERT(f->mem != NULL);
    double *q = f->mem;
    double **nd1[] = {&f->u, &f->a2p, &f->V, &f->sm, &f->g, &f->pm};
    for (size_t i = 0; i < 6; i++, q += N * d) *nd1[i] = q;
    f->X = q, q += N * dx;
    f->m = q, q += N * dx;
    f->c = q, q += N * H;
    f->r = q, q += N * H;
    double **nd2[] = {&f->z, &f->aR, &f->R, &f->S, &f->K, &f->nu};
    for (size_t i = 0; i < 6; i++, q += N * d) *nd2[i] = q;
    f->wa2 = q;
    ref_spmm(f->u, Ahat, s, d, 0);
    ref_linear(f->sm, f->u, p->w_a, p->b_a, N, d, d);
    ref_spmm(f->a2p, Ahat2, P, d, 0);
    for (int64_t i = 0; i < d * d; i++) f->wa2[i] = p->w_a[i] * p->w_a[i];
    ref_linear(f->V, f->a2p, f->wa2, NULL, N, d, d);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = 0; c < dx; c++) f->X[n * dx + c] = c < dh ? h[n * dh + c] : s[n * d + c - dh];
    }
    for (int64_t i = 0; i < N * dx; i++) f->m[i] = (1.0 + dm->eps) * f->X[i];
    ref_spmm(f->m, A, f->X, dx, 1);
    ref_linear(f->c, f->m, p->w1, p->b1, N, dx, H);
    for (int64_t i = 0; i < N * H; i++) f->r[i] = f->c[i] > 0.0 ? f->c[i] : 0.0;
    ref_linear(f->z, f->r, p->w2, p->b2, N, H, d);
    ref_linear(f->aR, h, p->w_r, p->b_r, N, dh, d);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t j = 0; j < d; j++) {
            const int64_t i = n * d + j;
            const double eta = p->eta[j];
            if (!dm->linear) f->sm[i] = tanh(f->sm[i]);
            f->g[i] = dm->linear ? 1.0 : 1.0 - f->sm[i] * f->sm[i];
            f->pm[i] = f->g[i] * f->g[i] * f->V[i] + softplus(p->q[j]);
            f->R[i] = softplus(f->aR[i]) + dm->r_min;
            f->S[i] = fmax(eta * eta * f->pm[i] + f->R[i], KALTER_S_MIN);
            f->K[i] = eta * f->pm[i] / f->S[i];
            f->nu[i] = f->z[i] - eta * f->sm[i];
            s_out[i] = f->sm[i] + f->K[i] * f->nu[i];
            p_out[i] = f->pm[i] * f->R[i] / f->S[i];
            const double hz = f->z[i] > 0.0 ? f->z[i] : 0.0;
            h_out[i] = mask ? mask[i] * hz : hz;
        }
    }
}

void tess_nn_kalter_forward_ref(double *s_out, double *p_out, double *h_out, const double *h,
                                const double *s, const double *P, const tess_csr *A,
                                const tess_csr *Ahat, const tess_csr *Ahat2, const double *mask,
                                const tess_nn_kalter_params_f64 *p, const tess_nn_kalter_dims *dm) {
    ref_fwd f;
    ref_forward_all(&f, s_out, p_out, h_out, h, s, P, A, Ahat, Ahat2, mask, p, dm);
    free(f.mem);
}

void tess_nn_kalter_backward_ref(double *dh, double *ds, double *dP,
                                 const tess_nn_kalter_params_f64 *g, const double *ds_out,
                                 const double *dp_out, const double *dh_out, const double *h,
                                 const double *s, const double *P, const tess_csr *A,
                                 const tess_csr *Ahat, const tess_csr *Ahat2, const double *mask,
                                 const tess_nn_kalter_params_f64 *p,
                                 const tess_nn_kalter_dims *dm) {
    const int64_t N = dm->N, d = dm->d, dh_ = dm->dh, dx = dh_ + d, H = dm->dm;
    double *outs = calloc((size_t)(3 * N * d + 1), sizeof(double));
    double *work = calloc((size_t)(8 * N * d + N * H + 2 * N * dx + 1), sizeof(double));
    TESS_ASSERT(outs && work);
    ref_fwd f;
    ref_forward_all(&f, outs, outs + N * d, outs + 2 * N * d, h, s, P, A, Ahat, Ahat2, mask, p, dm);
    double *Gz = work, *GaR = Gz + N * d, *GV = GaR + N * d, *Ga = GV + N * d, *Gu = Ga + N * d;
    double *Ga2p = Gu + N * d, *Gpm = Ga2p + N * d, *Gc = Gpm + N * d + N * d;
    double *Gm = Gc + N * H, *GX = Gm + N * dx;
    /* update (the equations of kalter.h differentiated term by term) */
    for (int64_t n = 0; n < N; n++) {
        for (int64_t j = 0; j < d; j++) {
            const int64_t i = n * d + j;
            const double eta = p->eta[j], S2 = f.S[i] * f.S[i];
            const double hmask = mask ? mask[i] : 1.0;
            Gz[i] = ds_out[i] * f.K[i] + (f.z[i] > 0.0 ? dh_out[i] * hmask : 0.0);
            const double GK = ds_out[i] * f.nu[i];
            const double Gsm = ds_out[i] * (1.0 - f.K[i] * eta);
            Gpm[i] = dp_out[i] * f.R[i] * f.R[i] / S2 + GK * eta * f.R[i] / S2;
            const double GR = dp_out[i] * f.K[i] * f.K[i] - GK * eta * f.pm[i] / S2;
            g->eta[j] += -ds_out[i] * f.K[i] * f.sm[i] +
                         GK * f.pm[i] * (f.R[i] - eta * eta * f.pm[i]) / S2 -
                         2.0 * dp_out[i] * eta * f.pm[i] * f.pm[i] * f.R[i] / S2;
            GaR[i] = GR * sigmoid(f.aR[i]);
            g->q[j] += Gpm[i] * sigmoid(p->q[j]);
            GV[i] = Gpm[i] * f.g[i] * f.g[i];
            const double Gg = Gpm[i] * 2.0 * f.g[i] * f.V[i];
            Ga[i] = dm->linear ? Gsm : (Gsm - 2.0 * f.sm[i] * Gg) * f.g[i];
        }
    }
    ref_linear_back(dh, g->w_r, g->b_r, GaR, h, p->w_r, N, dh_, d);
    /* V = a2p wa2^T: G_a2p = GV wa2, G_wa2 = GV^T a2p -> G_W_A += 2 W_A o G_wa2 */
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = 0; c < d; c++) {
            double acc = 0.0;
            for (int64_t o = 0; o < d; o++) acc += GV[n * d + o] * f.wa2[o * d + c];
            Ga2p[n * d + c] = acc;
        }
    }
    for (int64_t o = 0; o < d; o++) {
        for (int64_t c = 0; c < d; c++) {
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) acc += GV[n * d + o] * f.a2p[n * d + c];
            g->w_a[o * d + c] += 2.0 * p->w_a[o * d + c] * acc;
        }
    }
    ref_spmm_t(dP, Ahat2, Ga2p, d);
    ref_linear_back(Gu, g->w_a, g->b_a, Ga, f.u, p->w_a, N, d, d);
    ref_spmm_t(ds, Ahat, Gu, d);
    ref_linear_back(Gc, g->w2, g->b2, Gz, f.r, p->w2, N, H, d);
    for (int64_t i = 0; i < N * H; i++) {
        if (!(f.c[i] > 0.0)) Gc[i] = 0.0;
    }
    ref_linear_back(Gm, g->w1, g->b1, Gc, f.m, p->w1, N, dx, H);
    for (int64_t i = 0; i < N * dx; i++) GX[i] = (1.0 + dm->eps) * Gm[i];
    ref_spmm_t(GX, A, Gm, dx);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = 0; c < dx; c++) {
            if (c < dh_) dh[n * dh_ + c] += GX[n * dx + c];
            else ds[n * d + c - dh_] += GX[n * dx + c];
        }
    }
    free(f.mem);
    free(outs);
    free(work);
}
