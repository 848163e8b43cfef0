/* gcfl.h - the clustering of GCFL (Xie et al., "Federated Graph Classification over Non-IID
 * Graphs", NeurIPS 2021, github.com/Oxfordblue7/GCFL): clients start in one cluster; after each
 * round a cluster C with more than 2 clients is split in two when, past the warm-up,
 *
 *     || mean_{k in C} dW_k || < eps1   and   max_{k in C} || dW_k || > eps2
 *
 * (dW_k: client k's update of the shared entries in the round; the cluster has converged as a
 * whole while some clients still move). The split is the global minimum cut (Stoer-Wagner) of the
 * complete graph on C with weights 1 + cos(dW_i, dW_j). The shared entries are then averaged
 * within each cluster only.
 *
 * GCFL+ (the same paper) splits by the dynamics instead: every client records the norm of its
 * update ||dW_k|| every round; once every client has T of them since the start or the last split,
 * the first cluster (in cluster order) that passes the rule above splits by the minimum cut with
 * weights max(D) - D, D the pairwise dynamic-time-warping distances of its clients' last T norms,
 * and every sequence restarts (at most one split per round, as the reference code does). The
 * reference records the norm of the last mini-batch's gradient of the GIN weights; we record the
 * norm of the round's update (the same quantity GCFL's rule tests).
 *
 * Deterministic: the same inputs give the same clusters on every rank (ties: lowest index). Not
 * collective; no allocation. */
#ifndef FEDKALTER_GCFL_H
#define FEDKALTER_GCFL_H

#include <stdbool.h>
#include <stdint.h>

/* Minimum cut of the complete graph on n >= 2 vertices with symmetric weights w (n, n) (the
 * diagonal is ignored): side[i] = true for the side holding vertex 0. Returns the cut weight.
 * Stoer-Wagner with the maximum-adjacency search from the lowest active vertex, ties to the lowest
 * index, the first minimal phase kept. n <= 64. */
double fk_gcfl_min_cut(const double *w, int64_t n, bool *side);

/* The two norms of the split rule for every cluster c < ncl of cluster (n) (ids 0..ncl-1), dw
 * (n, L) as in fk_gcfl_step: mean_norm[c] = || mean_{k in c} dW_k || (unweighted, as the
 * reference), max_norm[c] = max_{k in c} || dW_k ||, size[c] its clients (an empty cluster: 0,
 * 0, 0). Output arrays (ncl). */
void fk_gcfl_norms(const int64_t *cluster, int64_t ncl, const double *dw, int64_t n, int64_t L,
                   double *mean_norm, double *max_norm, int64_t *size);

/* One round's clustering step. cluster (n): cluster id of each client, ids 0..*ncl-1 numbered by
 * the clusters' order; dw (n, L): each client's update this round; round: 1-based. Clusters that
 * split are replaced in place of their position by two: first the side holding the cluster's
 * lowest client id, then the other; later clusters' ids shift. Splits only when round > warmup.
 * Returns the number of clusters split. n <= 64. */
int64_t fk_gcfl_step(int64_t *cluster, int64_t *ncl, const double *dw, int64_t n, int64_t L,
                     int64_t round, int64_t warmup, double eps1, double eps2);

enum { FK_GCFL_SEQ_MAX = 1000 }; /* GCFL+: longest norm sequence */

/* Dynamic time warping distance of x and y (n <= FK_GCFL_SEQ_MAX each; no window, as
 * dtaidistance's dtw.distance that the reference uses): the square root of the smallest sum of
 * (x_i - y_j)^2 over monotone warping paths from (0, 0) to (n-1, n-1). */
double fk_gcfl_dtw(const double *x, const double *y, int64_t n);

/* GCFL+'s round step. seq (n, T): each client's last T update norms, oldest first; *count: how
 * many the sequences hold (0..T; the same for every client). Appends ||dw_k|| to every sequence,
 * then, when *count == T, splits the first cluster that passes the GCFL rule (round > warmup,
 * more than 2 clients, mean-update norm < eps1, largest norm > eps2) by the minimum cut of
 * max(D) - D over its clients (D: fk_gcfl_dtw of their sequences), numbered as fk_gcfl_step,
 * and sets *count = 0. Returns the clusters split (0 or 1). n <= 64, 1 <= T <= FK_GCFL_SEQ_MAX. */
int64_t fk_gcflplus_step(int64_t *cluster, int64_t *ncl, const double *dw, double *seq,
                         int64_t *count, int64_t n, int64_t L, int64_t T, int64_t round,
                         int64_t warmup, double eps1, double eps2);

#endif
