/* gcfl.c - GCFL's cluster splitting (gcfl.h). */
#include "gcfl.h"

#include <math.h>
#include <string.h>

enum { GCFL_MAX = 64 };

double fk_gcfl_min_cut(const double *w, int64_t n, bool *side) {
    double W[GCFL_MAX][GCFL_MAX], key[GCFL_MAX], best = INFINITY;
    int64_t rep[GCFL_MAX]; /* the merged vertex each original vertex now belongs to */
    bool active[GCFL_MAX], in_a[GCFL_MAX];
    for (int64_t i = 0; i < n; i++) {
        rep[i] = i;
        active[i] = true;
        for (int64_t j = 0; j < n; j++) W[i][j] = i == j ? 0.0 : w[i * n + j];
    }
    for (int64_t left = n; left > 1; left--) {
        /* maximum-adjacency order from the lowest active vertex */
        int64_t prev = -1, last = -1;
        for (int64_t i = 0; i < n; i++) {
            in_a[i] = false;
            key[i] = 0.0;
        }
        for (int64_t added = 0; added < left; added++) {
            int64_t v = -1;
            for (int64_t i = 0; i < n; i++) {
                if (active[i] && !in_a[i] && (v < 0 || key[i] > key[v])) v = i;
            }
            prev = last;
            last = v;
            in_a[v] = true;
            for (int64_t i = 0; i < n; i++) {
                if (active[i] && !in_a[i]) key[i] += W[v][i];
            }
        }
        /* the cut of this phase: last against the rest */
        if (key[last] < best) {
            best = key[last];
            for (int64_t i = 0; i < n; i++) side[i] = rep[i] != last;
        }
        for (int64_t i = 0; i < n; i++) { /* merge last into prev */
            W[prev][i] += W[last][i];
            W[i][prev] = W[prev][i];
            if (rep[i] == last) rep[i] = prev;
        }
        W[prev][prev] = 0.0;
        active[last] = false;
    }
    if (!side[0]) {
        for (int64_t i = 0; i < n; i++) side[i] = !side[i];
    }
    return best;
}

static double dot(const double *a, const double *b, int64_t L) {
    double s = 0.0;
    for (int64_t i = 0; i < L; i++) s += a[i] * b[i];
    return s;
}

/* The clients idc (*m) of cluster c and the two norms of GCFL's split rule over them: *mean_norm =
 * || mean_k dW_k || (unweighted, as the reference), *max_norm = max_k || dW_k ||. */
static void cluster_norms(const int64_t *cluster, int64_t c, const double *dw, int64_t n,
                          int64_t L, int64_t *idc, int64_t *m, double *mean_norm,
                          double *max_norm) {
    *m = 0;
    for (int64_t k = 0; k < n; k++) {
        if (cluster[k] == c) idc[(*m)++] = k;
    }
    *max_norm = 0.0;
    for (int64_t a = 0; a < *m; a++) {
        const double nk = sqrt(dot(dw + idc[a] * L, dw + idc[a] * L, L));
        if (nk > *max_norm) *max_norm = nk;
    }
    double sq = 0.0;
    for (int64_t i = 0; *m > 0 && i < L; i++) {
        double s = 0.0;
        for (int64_t a = 0; a < *m; a++) s += dw[idc[a] * L + i];
        sq += (s / (double)*m) * (s / (double)*m);
    }
    *mean_norm = sqrt(sq);
}

void fk_gcfl_norms(const int64_t *cluster, int64_t ncl, const double *dw, int64_t n, int64_t L,
                   double *mean_norm, double *max_norm, int64_t *size) {
    for (int64_t c = 0; c < ncl; c++) {
        int64_t idc[GCFL_MAX];
        cluster_norms(cluster, c, dw, n, L, idc, &size[c], &mean_norm[c], &max_norm[c]);
    }
}

/* The clients idc (m) of cluster c, and whether the cluster passes GCFL's split rule. */
static bool split_rule(const int64_t *cluster, int64_t c, const double *dw, int64_t n, int64_t L,
                       int64_t round, int64_t warmup, double eps1, double eps2, int64_t *idc,
                       int64_t *m) {
    double mean_norm, max_norm;
    cluster_norms(cluster, c, dw, n, L, idc, m, &mean_norm, &max_norm);
    return *m > 2 && round > warmup && mean_norm < eps1 && max_norm > eps2;
}

int64_t fk_gcfl_step(int64_t *cluster, int64_t *ncl, const double *dw, int64_t n, int64_t L,
                     int64_t round, int64_t warmup, double eps1, double eps2) {
    int64_t next[GCFL_MAX], out = 0, splits = 0;
    for (int64_t c = 0; c < *ncl; c++) {
        int64_t idc[GCFL_MAX], m;
        if (!split_rule(cluster, c, dw, n, L, round, warmup, eps1, eps2, idc, &m)) {
            for (int64_t a = 0; a < m; a++) next[idc[a]] = out;
            out++;
            continue;
        }
        double sim[GCFL_MAX * GCFL_MAX];
        bool side[GCFL_MAX];
        for (int64_t a = 0; a < m; a++) {
            for (int64_t b = 0; b < m; b++) {
                const double *x = dw + idc[a] * L, *y = dw + idc[b] * L;
                const double den = fmax(sqrt(dot(x, x, L)) * sqrt(dot(y, y, L)), 1e-12);
                sim[a * m + b] = dot(x, y, L) / den + 1.0;
            }
        }
        fk_gcfl_min_cut(sim, m, side);
        for (int64_t a = 0; a < m; a++) next[idc[a]] = side[a] ? out : out + 1;
        out += 2;
        splits++;
    }
    memcpy(cluster, next, (size_t)n * sizeof(int64_t));
    *ncl = out;
    return splits;
}

double fk_gcfl_dtw(const double *x, const double *y, int64_t n) {
    /* D[i][j] = (x_i - y_j)^2 + min(D[i-1][j], D[i][j-1], D[i-1][j-1]), two rows */
    double prev[FK_GCFL_SEQ_MAX], cur[FK_GCFL_SEQ_MAX];
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < n; j++) {
            const double d = (x[i] - y[j]) * (x[i] - y[j]);
            double best;
            if (i == 0 && j == 0) best = 0.0;
            else if (i == 0) best = cur[j - 1];
            else if (j == 0) best = prev[j];
            else best = fmin(fmin(prev[j], cur[j - 1]), prev[j - 1]);
            cur[j] = d + best;
        }
        memcpy(prev, cur, (size_t)n * sizeof(double));
    }
    return sqrt(prev[n - 1]);
}

int64_t fk_gcflplus_step(int64_t *cluster, int64_t *ncl, const double *dw, double *seq,
                         int64_t *count, int64_t n, int64_t L, int64_t T, int64_t round,
                         int64_t warmup, double eps1, double eps2) {
    for (int64_t k = 0; k < n; k++) { /* append this round's norm, dropping the oldest if full */
        double *s = seq + k * T;
        if (*count == T) memmove(s, s + 1, (size_t)(T - 1) * sizeof(double));
        s[*count == T ? T - 1 : *count] = sqrt(dot(dw + k * L, dw + k * L, L));
    }
    if (*count < T) ++*count;
    if (*count < T) return 0;
    int64_t next[GCFL_MAX], out = 0, splits = 0;
    for (int64_t c = 0; c < *ncl; c++) {
        int64_t idc[GCFL_MAX], m;
        if (splits > 0 ||
            !split_rule(cluster, c, dw, n, L, round, warmup, eps1, eps2, idc, &m)) {
            for (int64_t k = 0; k < n; k++) {
                if (cluster[k] == c) next[k] = out;
            }
            out++;
            continue;
        }
        double dist[GCFL_MAX * GCFL_MAX], dmax = 0.0;
        bool side[GCFL_MAX];
        for (int64_t a = 0; a < m; a++) {
            for (int64_t b = 0; b < m; b++) {
                dist[a * m + b] = a == b ? 0.0 : fk_gcfl_dtw(seq + idc[a] * T, seq + idc[b] * T, T);
                if (dist[a * m + b] > dmax) dmax = dist[a * m + b];
            }
        }
        for (int64_t i = 0; i < m * m; i++) dist[i] = dmax - dist[i];
        fk_gcfl_min_cut(dist, m, side);
        for (int64_t a = 0; a < m; a++) next[idc[a]] = side[a] ? out : out + 1;
        out += 2;
        splits++;
        *count = 0;
    }
    memcpy(cluster, next, (size_t)n * sizeof(int64_t));
    *ncl = out;
    return splits;
}
