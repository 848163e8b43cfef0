/* aggregate.h - weighted, deterministic averaging of a tagged subset of many client models
 * across a group: the federated average.
 *
 * Every rank of g holds nlocal client registries (nlocal may differ between ranks and be 0).
 * The selected entries of a client are those whose tags carry every bit of `tags`, in
 * registration order; concatenated they form the client's vector x_k of L floats. Every client
 * on every rank must select entries with the same names and local counts, REPLICATED and not
 * tagged TESS_TAG_LOCAL; the other entries may differ and are neither read, sent nor written.
 * Afterwards every local client's selected entries hold
 *
 *     x = (sum_k w_k x_k) / (sum_k w_k)
 *
 * over ALL nclients clients of all ranks, each sum taken in double in increasing client-id order
 * and the result rounded to float once. Each element's result is therefore a function of the
 * (id, w_k, x_k) only: bitwise identical for any rank count and any assignment of clients to
 * ranks.
 *
 * Scheme (bandwidth: every float crosses the network about twice). Rank r owns slice r of the
 * vector, tess_par_block_range(L, size, r). Ranks exchange the clients' ids and weights
 * (all-gather of 16 bytes per client), then each rank sends slice j of each of its clients to
 * rank j (all-to-all-v); rank j sums its slice over all clients in id order, divides, and every
 * rank gathers the averaged slices (all-gather-v). Per rank about nlocal*L + L floats are sent,
 * instead of nlocal*L*(size-1) for an all-gather of the clients.
 *
 * Errors: bad arguments (duplicate ids, a negative or non-finite weight, a total weight of 0,
 * nclients not the sum of nlocal, clients that disagree on the selected entries, on one rank or
 * across ranks) return TESS_ERR_ARG on every rank, naming the problem (tess_par_agree), before
 * any client data moves; TESS_ERR_MEM for the buffers (agreed likewise); an MPI failure during
 * the exchange is TESS_ERR_MPI on the rank that saw it.
 */
#ifndef TESS_PAR_AGGREGATE_H
#define TESS_PAR_AGGREGATE_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "nn/registry.h" /* tess_registry */
#include "par/mesh.h"    /* tess_group */

/* Average the entries tagged with all bits of `tags` (!= 0) of every client over all clients
 * (see above). clients (nlocal): finalized registries, written in place; client_ids (nlocal):
 * unique over all ranks, any int64 values; weights (nlocal): finite, >= 0, not all 0;
 * nclients: the number of clients over all ranks (the same on every rank). *bytes_sent (may be
 * NULL) receives the bytes this rank sent to other ranks (metadata and payload), for the log.
 * Collective on g; tags and nclients the same on every rank. */
tess_status tess_par_aggregate(const tess_group *g, tess_registry *const *clients,
                               const int64_t *client_ids, const double *weights, int nlocal,
                               int64_t nclients, uint32_t tags, int64_t *bytes_sent);

#endif
