/* dispatch.h - an all-to-all-v exchange plan for token rows (expert-parallel MoE dispatch), built
 * once per step from the rows each rank sends and reused for every exchange of that step: the
 * forward dispatch of token rows, the return of expert outputs (the reverse exchange, counts
 * swapped), and their adjoints in backward, with rows of any width.
 *
 * Layout. P = g->size ranks, S slots per rank (local experts). A sender orders its rows by
 * destination (rank, slot): send_counts[r*S + j] rows for slot j of rank r, consecutively. After
 * the plan, recv_counts[q*S + j] is the number of rows rank q sends to this rank's slot j, and a
 * forward exchange delivers rows in the order [source q][slot j][rows, in the sender's order].
 * tess_dispatch_regroup reorders them to [slot j][source q] so each slot's rows are contiguous,
 * and tess_dispatch_ungroup reverses that.
 *
 * Cost. The plan is one MPI_Alltoall of P*S int32 counts; an exchange is one MPI_Alltoallv of
 * rows as a contiguous datatype of `width` floats, with no extra agreement on buffer room (the
 * counts are already known on both sides). Counts in rows must stay below 2^31 (Open MPI 4.1 has
 * no large-count all-to-all-v).
 * Fixed-size blocks (tess_dispatch_plan_fixed): when every rank sends the same number of rows to
 * every (rank, slot) - drop-and-pad MoE, every expert's block padded to its capacity - the plan
 * needs no communication and an exchange is one MPI_Alltoall of equal blocks (S*rows rows per
 * rank pair), no counts and no displacements.
 * The all-gather mode (tess_dispatch_create_allgather) is the correctness oracle of the all-to-all
 * one (Megatron's AllGather dispatcher): same interface, same results bit for bit, through other
 * collectives. Its plan all-gathers every rank's P*S counts (MPI_Allgather); a forward exchange
 * all-gathers every rank's send rows, padded to the largest send total M (MPI_Allgather of M rows),
 * and each rank keeps the rows addressed to it; a reverse exchange writes each received row back
 * to its place in a zeroed (P M, width) buffer and sums it over the ranks (MPI_Reduce_scatter_block,
 * rank q receiving its M rows): every place holds one rank's row and zeros elsewhere, so the sum
 * is exact. Cost P times the all-to-all's volume and a (P M, width) buffer: for tests.
 * Collective on g: every rank calls plan and each exchange in the same order. */
#ifndef TESS_PAR_DISPATCH_H
#define TESS_PAR_DISPATCH_H

#include <stdint.h>

#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

typedef struct tess_dispatch tess_dispatch;

/* A plan object for group g (borrowed, must outlive it) with `slots` >= 1 slots per rank. Not
 * collective. TESS_ERR_ARG for slots < 1; TESS_ERR_MEM. */
tess_status tess_dispatch_create(tess_dispatch **d, const tess_group *g, int64_t slots);
/* The same in the all-gather mode. */
tess_status tess_dispatch_create_allgather(tess_dispatch **d, const tess_group *g, int64_t slots);
/* NULL-safe; sets *d = NULL. */
void tess_dispatch_destroy(tess_dispatch **d);

/* Exchange the counts: send_counts (P*S) rows from this rank to each (rank, slot). Collective.
 * TESS_ERR_ARG if a count is negative or a rank's total reaches 2^31; TESS_ERR_MPI. */
tess_status tess_dispatch_plan(tess_dispatch *d, const int64_t *send_counts);

/* A plan in which every rank sends `rows` >= 0 rows to every (rank, slot) and so receives
 * `rows` from every (rank, slot): no communication (not collective), but every rank of the group
 * must pass the same `rows` before its next exchange (exchanges of unequal blocks are erroneous
 * MPI). The forward and reverse exchanges of the all-to-all mode are then MPI_Alltoall of equal
 * blocks; the all-gather mode works as with counts. TESS_ERR_ARG if rows < 0 or P*S*rows reaches
 * 2^31. */
tess_status tess_dispatch_plan_fixed(tess_dispatch *d, int64_t rows);

/* A plan whose counts both sides already know, without communication (not collective): a subset
 * of an exchanged plan's rows, chosen by flags that travelled with them, e.g. the rows of an
 * expert-parallel MoE layer that must go back to their token's rank. send_counts (P*S) rows
 * from this rank to each (rank, slot), recv_counts (P*S) rows from each (rank, slot) = (source,
 * this rank's slot); every rank's counts must match its peers' (else the exchanges are
 * erroneous MPI). All-to-all mode only: TESS_ERR_ARG in the all-gather mode, or for a count
 * out of range. */
tess_status tess_dispatch_plan_local(tess_dispatch *d, const int64_t *send_counts,
                                     const int64_t *recv_counts);

/* Of the current plan: rows sent and received in total, and the received counts (P*S), indexed
 * [source][slot]; rows received for slot j in total (slot_rows). */
int64_t tess_dispatch_send_rows(const tess_dispatch *d);
int64_t tess_dispatch_recv_rows(const tess_dispatch *d);
const int64_t *tess_dispatch_recv_counts(const tess_dispatch *d);
int64_t tess_dispatch_slot_rows(const tess_dispatch *d, int64_t j);

/* Forward: send (send_rows, width) in [dest][slot] order -> recv (recv_rows, width) in
 * [source][slot] order. Reverse: the adjoint, recv-side rows back to their senders, each landing
 * where its forward row came from. width >= 1 floats. Collective; TESS_ERR_MPI, and TESS_ERR_MEM
 * when the all-gather mode cannot grow its buffer. */
tess_status tess_dispatch_forward(tess_dispatch *d, const float *send, float *recv, int64_t width);
tess_status tess_dispatch_reverse(tess_dispatch *d, const float *recv, float *send, int64_t width);

/* Forward exchange of int32 rows (width >= 1 ints), e.g. token ids travelling with the rows.
 * All-to-all mode only (TESS_ERR_ARG in the all-gather mode); collective; TESS_ERR_MPI. */
tess_status tess_dispatch_forward_i32(tess_dispatch *d, const int32_t *send, int32_t *recv,
                                      int64_t width);

/* [source][slot] -> [slot][source] (regroup) and back (ungroup), rows of width floats; in and
 * out (recv_rows, width) must not alias. Not collective. */
void tess_dispatch_regroup(const tess_dispatch *d, const float *in, float *out, int64_t width);
void tess_dispatch_ungroup(const tess_dispatch *d, const float *in, float *out, int64_t width);

#endif
