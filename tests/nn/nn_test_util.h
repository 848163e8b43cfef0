/* nn_test_util.h - helpers shared by the layer tests of tests/nn: deterministic inputs, a
 * relative error, and the reader of the "name count values..." reference files written by
 * tests/data/nn_refs/gen_*.py. Header-only. */
#ifndef TESS_NN_TEST_UTIL_H
#define TESS_NN_TEST_UTIL_H

#include <Random123/philox.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* x (n) = scale * uniform(-1, 1), drawn from Philox with key (seed, 0) and counter i. */
static inline void nn_test_fill_uniform(float *x, int64_t n, uint32_t seed, float scale) {
    philox4x32_key_t key = {{seed, 0}};
    for (int64_t i = 0; i < n; i++) {
        philox4x32_ctr_t ctr = {{(uint32_t)i, (uint32_t)(i >> 32), 0, 0}};
        philox4x32_ctr_t r = philox4x32(ctr, key);
        x[i] = scale * (float)(r.v[0] * (2.0 / 4294967296.0) - 1.0);
    }
}

/* max |a - b| / max(1, max |b|) over n values. */
static inline double nn_test_rel_err(const float *a, const float *b, int64_t n) {
    double err = 0.0, mag = 1.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        err = e > err ? e : err;
        mag = fabs((double)b[i]) > mag ? fabs((double)b[i]) : mag;
    }
    return err / mag;
}

/* Read section `name` of n values from the reference file at path into x (n). 0 on success,
 * -1 if the file cannot be read or has no section of that name and size. */
static inline int nn_test_read_section(const char *path, const char *name, float *x, int64_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char word[64];
    long long count;
    int rc = -1;
    while (rc != 0 && fscanf(f, "%63s %lld", word, &count) == 2) {
        int match = strcmp(word, name) == 0 && count == n;
        long long i = 0;
        for (float v; i < count && fscanf(f, "%f", &v) == 1; i++)
            if (match) x[i] = v;
        if (i < count) break; /* truncated section */
        if (match) rc = 0;
    }
    fclose(f);
    return rc;
}

#endif
