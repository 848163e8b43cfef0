/* attention.h - multi-head scaled dot-product self-attention on a fused qkv input (llm.c layout),
 * causal or bidirectional, with optional rotary position embeddings; the fast kernels and the
 * naive reference beside them.
 *
 * Dimension letters: B batch, T sequence length, C channels, NH heads, hs = C/NH head size.
 * Input qkv (B,T,3C) holds per token [q | k | v], each C wide and split into NH heads of hs
 * consecutive channels. Output (B,T,C) holds the heads side by side in the same order; the output
 * projection is a separate linear layer. Scores are scaled by 1/sqrt(hs). Causal: token t attends
 * to tokens s <= t only.
 *
 * RoPE follows GPT-NeoX/LLaMA "rotate-half" (not the interleaved GPT-J pairing): in each head of q
 * and k, channel i < hs/2 is paired with channel i + hs/2 and the pair at position t is rotated by
 * the angle t * base^(-2i/hs):
 *   y[i]        = x[i] cos - x[i + hs/2] sin
 *   y[i + hs/2] = x[i + hs/2] cos + x[i] sin
 * Positions are 0..T-1 within each sequence. v is never rotated.
 *
 * Key-padding mask: kmask (B,T) or NULL (every key present). Key s of sequence b takes part
 * only where kmask[b*T + s] != 0; a masked key gets weight exactly 0 for every query (and so
 * receives no gradient). A query row with no key left (all its keys masked, or with causal
 * attention all keys s <= t masked) is defined as all-zero weights: its output is 0 and no
 * gradient flows through it. Queries at masked positions are still computed (the caller ignores
 * or masks their outputs, e.g. in the loss).
 *
 * The fast path runs QK^T, AV and their backward through tess_matmul_ld on each head's rows
 * where they lie: q, k, v of head h are (T,hs) sub-matrices of a (T,3C) array (leading dimension
 * 3C), the head's output a (T,hs) sub-matrix of out (C). The backward reads qkv again (the caller
 * keeps it unchanged in between); with rope the forward stores q and k rotated in the cache and
 * both read them there (leading dimension 2C); nothing is gathered per head. Causal attention is
 * computed in
 * row blocks: rows [i0,i1) only meet keys [0,i1), so most of the masked triangle is never
 * computed and the cache stores each head's weights block-packed (see
 * tess_nn_attention_cache_size). The forward of short sequences (T <= 64 with T and hs multiples
 * of 8, e.g. the calm DAT's temporal axis, T = 32, hs = 32) runs its products through
 * tess_matmul_small instead (tensor/matmul.h: no BLAS call per product), in row blocks of 8 that
 * skip the masked triangle when causal; the cache layout is the same. Longer bidirectional
 * sequences (64 < T <= 512, T and hs multiples of 8, e.g. the calm DAT's neural axis, T = 256,
 * hs = 32) run the products of forward and backward through tess_matmul_small(_tn) when they
 * have their 16-lane tiles (TESS_MATMUL_SMALL_WIDE), on per-head copies of q, k, v and dout
 * (contiguous or transposed) in the scratch and the (T,T) weights where they lie, the forward in
 * blocks of 64 query rows (scores, softmax and output of a block while it is in L2).
 * Not collective; no allocation; all functions are local to the calling rank. */
#ifndef TESS_NN_ATTENTION_H
#define TESS_NN_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h" /* tess_status */

typedef struct {
    int64_t B, T, C, NH; /* batch, sequence length, channels, heads; hs = C/NH */
    bool causal;         /* token t attends to s <= t only; else bidirectional */
    bool rope;           /* rotate q and k (rotate-half, see above); needs hs even */
    float rope_base;     /* angle of pair i at position t: t * rope_base^(-2i/hs) */
} tess_nn_attention_dims;

/* Fill d (rope_base = 10000) and check it: all sizes >= 1, C divisible by NH, hs even with RoPE,
 * T and hs within BLAS's int range. TESS_ERR_ARG with the offending values otherwise. The kernels
 * assume a checked d; a caller may lower B or T afterwards (e.g. a shorter batch). */
tess_status tess_nn_attention_dims_init(tess_nn_attention_dims *d, int64_t B, int64_t T,
                                        int64_t C, int64_t NH, bool causal, bool rope);
/* The same checks for a d filled or edited by hand (e.g. another rope_base, which must be > 0). */
tess_status tess_nn_attention_dims_check(const tess_nn_attention_dims *d);

/* Floats of the forward cache: per head the softmax weights, block-packed (causal: row block of
 * rows [i0,i1) stored as (i1-i0, i1); bidirectional: (T,T); the long bidirectional path above
 * stores them unnormalised), then when d->rope q and k rotated (B,T,2C) and the RoPE cos/sin
 * tables (T,hs/2) each, then on the long bidirectional path each row's 1/sum (B,NH,T). Allocate
 * it for the largest B and T; it then fits any smaller B or T. */
int64_t tess_nn_attention_cache_size(const tess_nn_attention_dims *d);
/* Floats of the scratch used by forward and backward: 2*T*C (one sequence's q and k gradients in
 * the rotated frame), 2*T (its key mask as rows), one row block of weights, and ts*hs with
 * ts = min(T, 64) (the short path's transposed keys), or with TESS_MATMUL_SMALL_WIDE
 * 4*min(T, 512)*hs (the long backward's per-head blocks). Depends on T, C and NH only
 * and grows with T, so one scratch serves every layer and batch of the same model. */
int64_t tess_nn_attention_scratch_size(const tess_nn_attention_dims *d);

/* out (B,T,C); cache (tess_nn_attention_cache_size floats), written; scratch (scratch_size),
 * clobbered; qkv (B,T,3C); kmask (B,T) key-padding mask or NULL (see above). */
void tess_nn_attention_forward(float *out, float *cache, float *scratch, const float *qkv,
                               const uint8_t *kmask, const tess_nn_attention_dims *d);

/* dqkv (B,T,3C) += d loss / d qkv; scratch (scratch_size), clobbered; dout (B,T,C); qkv (B,T,3C)
 * and cache as passed to and written by tess_nn_attention_forward with the same d, unchanged
 * since (qkv may not alias dqkv). The mask needs no repeating:
 * masked weights are 0 in the cache, which makes their gradients 0. */
void tess_nn_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                                const float *cache, const tess_nn_attention_dims *d);

/* Reference: plain loops, double accumulation, RoPE recomputed in double; the oracle for tests.
 * out (B,T,C); att (B,NH,T,T), the softmax weights, written (masked entries 0); qkv (B,T,3C);
 * kmask (B,T) or NULL. */
void tess_nn_attention_forward_ref(float *out, float *att, const float *qkv, const uint8_t *kmask,
                                   const tess_nn_attention_dims *d);
/* dqkv (B,T,3C) +=; dpreatt (B,NH,T,T) scratch, clobbered; dout (B,T,C); qkv (B,T,3C);
 * att (B,NH,T,T) from tess_nn_attention_forward_ref. */
void tess_nn_attention_backward_ref(float *dqkv, float *dpreatt, const float *dout,
                                    const float *qkv, const float *att,
                                    const tess_nn_attention_dims *d);

#endif
