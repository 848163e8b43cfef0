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

int64_t fk_gcfl_step(int64_t *cluster, int64_t *ncl, const double *dw, int64_t n, int64_t L,
                     int64_t round, int64_t warmup, double eps1, double eps2) {
    int64_t next[GCFL_MAX], out = 0, splits = 0;
    for (int64_t c = 0; c < *ncl; c++) {
        int64_t idc[GCFL_MAX], m = 0;
        for (int64_t k = 0; k < n; k++) {
            if (cluster[k] == c) idc[m++] = k;
        }
        double max_norm = 0.0, mean_norm = 0.0;
        for (int64_t a = 0; a < m; a++) {
            const double nk = sqrt(dot(dw + idc[a] * L, dw + idc[a] * L, L));
            if (nk > max_norm) max_norm = nk;
        }
        for (int64_t i = 0; i < L; i++) {
            double s = 0.0;
            for (int64_t a = 0; a < m; a++) s += dw[idc[a] * L + i];
            mean_norm += (s / (double)m) * (s / (double)m);
        }
        mean_norm = sqrt(mean_norm);
        if (!(m > 2 && round > warmup && mean_norm < eps1 && max_norm > eps2)) {
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
