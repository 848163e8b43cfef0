/* embedding.h - token embedding lookup: row ids[n] of a (V, C) table per row n.
 *
 * Layer convention (docs/nn.md): outputs, inputs, parameters, dimensions; backward ADDS into the
 * gradient. Ids must lie in [0, V) (TESS_ASSERT: validate untrusted data before it gets here).
 * N = rows (B*T flattened), V = vocabulary size, C = channels. Not collective; no allocation.
 * The lookup is a copy, so there is no separate _ref. */
#ifndef TESS_NN_EMBEDDING_H
#define TESS_NN_EMBEDDING_H

#include <stdint.h>

/* out (N,C): out[n,:] = table[ids[n],:]; ids (N) in [0,V); table (V,C). */
void tess_nn_embedding_forward(float *out, const int32_t *ids, const float *table, int64_t N,
                               int64_t V, int64_t C);

/* dtable (V,C): dtable[ids[n],:] += dout[n,:] for every n (repeated ids add up); dout (N,C). */
void tess_nn_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N,
                                int64_t V, int64_t C);

#endif
