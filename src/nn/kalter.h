/* kalter.h - the Kalter-Conv layer: one step of a diagonal extended Kalman filter on a graph
 * (docs/nn.md, docs/fedkalter.md). The structural embedding of every node is the filter's state
 * (mean s, diagonal variance P); a GIN over the feature-augmented neighbourhood [h | s] is its
 * noisy measurement, with a feature-conditioned noise R. One layer:
 *
 *   Predict   u = Ahat s,  s- = tanh(u W_A^T + b_A),  g = 1 - s- o s-
 *             V = (Ahat2 P)(W_A o W_A)^T,  P- = g o g o V + softplus(q)
 *   Observe   X = [h | s],  m = (1+eps) X + A X,  c = m W_1^T + b_1,  r = relu(c),
 *             z = r W_2^T + b_2,  a_R = h W_R^T + b_R,  R = softplus(a_R) + r_min
 *   Update    nu = z - eta o s-,  S = max(eta^2 o P- + R, 1e-8),  K = eta o P- / S,
 *             s+ = s- + K o nu,  P+ = P- o R / S,  h+ = mask o relu(z)
 *
 * (elementwise products o; vectors b_A, q, eta, b_R broadcast over rows; softplus(x) = x for
 * x > 20, else log1p(exp(x)).) As R -> infinity, K -> 0: s+ = tanh(Ahat s W_A^T + b_A) (the GCN
 * structure channel of FedStar) and h+ = relu(GIN([h | s])) (its feature channel). Invariants:
 * P+ > 0, P+ <= P-, 0 <= K eta < 1. The linear-transition ablation (dims.linear) drops the
 * tanh: s- = u W_A^T + b_A and g = 1, so P- = V + softplus(q).
 *
 * Layer convention (docs/nn.md): weights (out, in); forward overwrites outputs and the cache;
 * backward ADDS into every gradient. Not collective; no allocation in the fast path (the _ref
 * pair allocates its intermediates and works in double: the float64 oracle of the tests).
 * A (pattern), Ahat, Ahat2 are (N,N), e.g. from tess_graph_batch (nn/graph.h). */
#ifndef TESS_NN_KALTER_H
#define TESS_NN_KALTER_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/sparse.h" /* tess_csr */

typedef struct {
    int64_t N;   /* nodes */
    int64_t dh;  /* width of the feature channel h at the input */
    int64_t d;   /* state width (also the width of z and of h+) */
    int64_t dm;  /* hidden width of the observation GIN */
    float eps;   /* GIN epsilon (fixed, not trained) */
    float r_min; /* lower bound of R (1e-4 in the method) */
    bool linear; /* the linear-transition ablation: s- = u W_A^T + b_A, g = 1 (false: tanh) */
} tess_nn_kalter_dims;

/* Parameters (or, for backward, their gradients: same struct, same shapes). */
typedef struct {
    float *w_a; /* (d, d) transition */
    float *b_a; /* (d) */
    float *q;   /* (d) process noise Q = softplus(q) */
    float *eta; /* (d) observation model H = diag(eta) */
    float *w1;  /* (dm, dh + d) observation GIN */
    float *b1;  /* (dm) */
    float *w2;  /* (d, dm) */
    float *b2;  /* (d) */
    float *w_r; /* (d, dh) observation noise */
    float *b_r; /* (d) */
} tess_nn_kalter_params;

/* The same in double, for the reference. */
typedef struct {
    double *w_a, *b_a, *q, *eta, *w1, *b1, *w2, *b2, *w_r, *b_r;
} tess_nn_kalter_params_f64;

/* Floats of the cache kept from forward for backward (u, Ahat2 P, V, s-, g, P-, m, c, r, z, a_R,
 * R, S, K, nu, W_A o W_A; X = [h | s] is never formed: m is written by column block), and of
 * backward's scratch. The dense products run through tess_matmul_tiles (tensor/matmul.h). */
int64_t tess_nn_kalter_cache_size(const tess_nn_kalter_dims *dm);
int64_t tess_nn_kalter_scratch_size(const tess_nn_kalter_dims *dm);

/* s_out, p_out, h_out (N,d); cache (cache_size). h (N,dh), s (N,d), P (N,d) > 0; mask (N,d) of
 * 0 or 1/(1 - p_drop), or NULL for no dropout. Outputs must not alias inputs. */
void tess_nn_kalter_forward(float *s_out, float *p_out, float *h_out, float *cache,
                            const float *h, const float *s, const float *P, const tess_csr *A,
                            const tess_csr *Ahat, const tess_csr *Ahat2, const float *mask,
                            const tess_nn_kalter_params *p, const tess_nn_kalter_dims *dm);

/* dh (N,dh), ds (N,d), dP (N,d) and every gradient of g += the gradients of
 * L = <ds_out, s+> + <dp_out, P+> + <dh_out, h+>. scratch (scratch_size) is overwritten.
 * The inputs are those of the forward that filled cache. */
void tess_nn_kalter_backward(float *dh, float *ds, float *dP, const tess_nn_kalter_params *g,
                             float *scratch, const float *ds_out, const float *dp_out,
                             const float *dh_out, const float *h, const float *cache,
                             const tess_csr *A, const tess_csr *Ahat, const tess_csr *Ahat2,
                             const float *mask, const tess_nn_kalter_params *p,
                             const tess_nn_kalter_dims *dm);

/* The float64 reference: the same equations with naive loops, every intermediate in double.
 * backward recomputes the forward. The tess_csr values (float) are read as constants. */
void tess_nn_kalter_forward_ref(double *s_out, double *p_out, double *h_out, const double *h,
                                const double *s, const double *P, const tess_csr *A,
                                const tess_csr *Ahat, const tess_csr *Ahat2, const double *mask,
                                const tess_nn_kalter_params_f64 *p, const tess_nn_kalter_dims *dm);
void tess_nn_kalter_backward_ref(double *dh, double *ds, double *dP,
                                 const tess_nn_kalter_params_f64 *g, const double *ds_out,
                                 const double *dp_out, const double *dh_out, const double *h,
                                 const double *s, const double *P, const tess_csr *A,
                                 const tess_csr *Ahat, const tess_csr *Ahat2, const double *mask,
                                 const tess_nn_kalter_params_f64 *p,
                                 const tess_nn_kalter_dims *dm);

/* Diagnostics of the last forward from its cache: K eta (N,d) and P+ / P- (N,d) = R / S, and R
 * itself (N,d), each into its own buffer (any may be NULL). */
void tess_nn_kalter_diagnostics(float *k_eta, float *p_ratio, float *R, const float *cache,
                                const tess_nn_kalter_params *p, const tess_nn_kalter_dims *dm);

#endif
