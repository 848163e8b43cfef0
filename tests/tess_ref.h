/* tess_ref.h - the helpers the layer tests share (header-only, include after tess_test.h):
 * deterministic inputs, a relative error, and the reader of the reference files written by
 * tests/data/nn_refs/gen_*.py: sections "<name> <count>" followed by count values.
 *
 * Tolerance for values from PyTorch: the stored answers are float64 results on the stored
 * float32 inputs, so the only error is the C code's fp32 arithmetic over short rows: a few ulp
 * of the largest term. An element passes when |got - want| <= TESS_REF_ATOL + TESS_REF_RTOL
 * |want|; TESS_REF_ATOL covers entries near zero that come from cancelling O(1) terms. */
#ifndef TESS_REF_H
#define TESS_REF_H

#include <Random123/philox.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tess_test.h" /* TESS_TEST_CHECK */

#define TESS_REF_RTOL 1e-5
#define TESS_REF_ATOL 1e-6
#define TESS_REF_MAX_SECTIONS 32

/* x (n) = scale * uniform(-1, 1), drawn from Philox with key (seed, 0) and counter i. */
static inline void tess_ref_fill_uniform(float *x, int64_t n, uint32_t seed, float scale) {
    philox4x32_key_t key = {{seed, 0}};
    for (int64_t i = 0; i < n; i++) {
        philox4x32_ctr_t ctr = {{(uint32_t)i, (uint32_t)(i >> 32), 0, 0}};
        philox4x32_ctr_t r = philox4x32(ctr, key);
        x[i] = scale * (float)(r.v[0] * (2.0 / 4294967296.0) - 1.0);
    }
}

/* max |a - b| / max(1, max |b|) over n values. */
static inline double tess_ref_rel_err(const float *a, const float *b, int64_t n) {
    double err = 0.0, mag = 1.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        err = e > err ? e : err;
        mag = fabs((double)b[i]) > mag ? fabs((double)b[i]) : mag;
    }
    return err / mag;
}

/* One section of a reference file, as floats and as int32 (ids, targets, dims). */
typedef struct {
    char name[32];
    int64_t n;
    float *f;   /* (n) */
    int32_t *i; /* (n) */
    bool used;  /* set by whoever consumed it (tess_ref_find marks it) */
} tess_ref_section;

typedef struct {
    char layer[64];
    int nsec;
    tess_ref_section sec[TESS_REF_MAX_SECTIONS];
} tess_ref_file;

static inline void tess_ref_free(tess_ref_file *r) {
    for (int s = 0; s < r->nsec; s++) {
        free(r->sec[s].f);
        free(r->sec[s].i);
    }
    r->nsec = 0;
}

/* Load dir/<layer>.txt. Returns 0, or -1 after recording a test failure. */
static inline int tess_ref_load(tess_ref_file *r, const char *dir, const char *layer) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.txt", dir, layer);
    snprintf(r->layer, sizeof r->layer, "%s", layer);
    r->nsec = 0;
    FILE *fp = fopen(path, "r");
    TESS_TEST_CHECK(fp != NULL, "cannot open %s", path);
    if (!fp) return -1;
    char name[32];
    long long count;
    int ok = 1;
    while (ok && fscanf(fp, "%31s %lld", name, &count) == 2) {
        ok = r->nsec < TESS_REF_MAX_SECTIONS && count >= 0;
        if (!ok) break;
        tess_ref_section *s = &r->sec[r->nsec++];
        snprintf(s->name, sizeof s->name, "%s", name);
        s->n = count;
        s->used = false;
        s->f = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
        s->i = malloc((size_t)(count > 0 ? count : 1) * sizeof(int32_t));
        ok = s->f && s->i;
        for (long long k = 0; ok && k < count; k++) {
            double v;
            ok = fscanf(fp, "%lf", &v) == 1;
            s->f[k] = (float)v;
            s->i[k] = (int32_t)lrint(v);
        }
    }
    ok = ok && feof(fp);
    fclose(fp);
    TESS_TEST_CHECK(ok, "%s: malformed reference file", path);
    if (!ok) tess_ref_free(r);
    return ok ? 0 : -1;
}

/* Section `name`, marked used, or NULL if there is none. A section of another size than n is a
 * test failure (and NULL). */
static inline tess_ref_section *tess_ref_find(tess_ref_file *r, const char *name, int64_t n) {
    for (int s = 0; s < r->nsec; s++) {
        if (strcmp(r->sec[s].name, name) != 0) continue;
        r->sec[s].used = true;
        TESS_TEST_CHECK(r->sec[s].n == n, "%s: section %s has %lld values, expected %lld",
                        r->layer, name, (long long)r->sec[s].n, (long long)n);
        return r->sec[s].n == n ? &r->sec[s] : NULL;
    }
    return NULL;
}

/* Compare got (n) with section s element by element (TESS_REF_ATOL + TESS_REF_RTOL |want|);
 * prints the worst error as a fraction of the tolerance. */
static inline void tess_ref_compare(const tess_ref_file *r, const tess_ref_section *s,
                                    const float *got, const char *variant) {
    double worst = 0; /* largest |got - want| / (ATOL + RTOL |want|) */
    int64_t at = 0;
    for (int64_t k = 0; k < s->n; k++) {
        double want = s->f[k], err = fabs((double)got[k] - want);
        double q = err / (TESS_REF_ATOL + TESS_REF_RTOL * fabs(want));
        if (!(q <= worst)) { /* NaN counts as the worst */
            worst = q;
            at = k;
        }
    }
    printf("  %-22s %-5s %-8s vs torch: worst error %.2f of tolerance\n", r->layer, variant,
           s->name, worst);
    TESS_TEST_CHECK(worst <= 1.0, "%s (%s): %s[%lld] = %.9g, torch says %.9g", r->layer, variant,
                    s->name, (long long)at, got[at], s->f[at]);
}

#endif
