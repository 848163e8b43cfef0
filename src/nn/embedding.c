/* embedding.c - embedding lookup forward and backward (see embedding.h). */
#include "nn/embedding.h"

#include <string.h>

#include "core/status.h" /* TESS_ASSERT */

void tess_nn_embedding_forward(float *out, const int32_t *ids, const float *table, int64_t N,
                               int64_t V, int64_t C) {
    /* out (N,C), ids (N), table (V,C) */
    for (int64_t n = 0; n < N; n++) {
        int64_t id = ids[n];
        TESS_ASSERT(id >= 0 && id < V);
        memcpy(out + n * C, table + id * C, (size_t)C * sizeof(float));
    }
}

void tess_nn_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N,
                                int64_t V, int64_t C) {
    /* dtable (V,C), dout (N,C), ids (N) */
    for (int64_t n = 0; n < N; n++) {
        int64_t id = ids[n];
        TESS_ASSERT(id >= 0 && id < V);
        float *restrict d = dtable + id * C;
        const float *restrict g = dout + n * C;
        for (int64_t c = 0; c < C; c++) d[c] += g[c];
    }
}
