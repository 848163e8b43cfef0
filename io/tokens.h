/* tokens.h - token streams in HDF5 for language-model training: a reader that yields the (B, T+1)
 * windows of a step from global sample indices, in an order that depends on the seed and not on
 * the number of ranks; a writer; and a byte-level text tokenizer (tess-convert text wraps it).
 *
 * File layout, format "tessera.tokens" version 1 (docs/datasets.md has the h5ls listing):
 *   /          attributes format, format_version
 *   /tokens    uint16 (vocab_size <= 65536) or int32, shape (n_tokens); attributes vocab_size
 *              (int64), tokenizer (string: "byte", "char", or any name)
 *   /vocab     optional uint8 (vocab_size): the byte that token id t stands for
 *   /domain    optional uint8, shape (n_tokens): the domain (source corpus) of every token;
 *              attributes n_domains (int64, 1..256) and names (string: n_domains
 *              comma-separated names, in id order)
 *
 * Samples. The reader uses the token range [begin, end) = [floor(begin_frac * n), floor(end_frac *
 * n)) and cuts it into W = floor((end - begin - 1) / T) windows of T + 1 tokens starting at
 * begin + k*T (consecutive windows share one token: the last target of one is the first input of
 * the next). Global sample g belongs to epoch e = g / W and is window perm_e[g % W], where perm_e
 * is tess_rng_permutation(key, tess_rng_ctr(TESS_RNG_PURPOSE_DATA, e), W) (identity when not
 * shuffled). So every window is seen once per epoch, and sample g is the same on any number of
 * ranks.
 *
 * I/O: the file is opened on a group with MPI-IO. Creation validates the layout and
 * checks every token against vocab_size (each rank scans its block of the stream) with an agreed
 * verdict. Window reads are independent (not collective): one contiguous read per window, so
 * ranks never wait for each other in the data loader and may read different numbers of samples.
 */
#ifndef TESS_IO_TOKENS_H
#define TESS_IO_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rng.h"    /* tess_rng_key */
#include "core/status.h" /* tess_status */
#include "par/mesh.h"    /* tess_group */

typedef struct tess_tokens tess_tokens;

typedef struct {
    int64_t seq_len;             /* T >= 1: a sample is T + 1 consecutive tokens */
    double begin_frac, end_frac; /* 0 <= begin < end <= 1: the part of the stream used */
    bool shuffle;                /* Philox permutation of the windows per epoch, else in order */
    tess_rng_key key;            /* data order key (seed, stream) */
} tess_tokens_opts;

/* Open path on g (borrowed: must outlive the reader), validate (TESS_ERR_NOINPUT missing file; TESS_ERR_DATA layout or a token
 * outside [0, vocab_size), naming file, position and value; TESS_ERR_CONFIG when the range holds
 * fewer than T + 1 tokens) and return a reader in *r. Every rank returns the same status; on
 * failure *r is NULL. Collective on g. */
tess_status tess_tokens_create(tess_tokens **r, const tess_group *g, const char *path,
                               const tess_tokens_opts *opts);
/* Close the file and free the reader; sets *r = NULL. Collective on the reader's group. */
tess_status tess_tokens_destroy(tess_tokens **r);

/* Accessors (not collective). */
int64_t tess_tokens_vocab_size(const tess_tokens *r);
int64_t tess_tokens_count(const tess_tokens *r);       /* tokens in the whole file */
int64_t tess_tokens_num_windows(const tess_tokens *r); /* W: samples per epoch */
/* The byte of each token id (vocab_size entries), or NULL if the file has no /vocab. */
const uint8_t *tess_tokens_vocab(const tess_tokens *r);
/* Domains of a file with /domain: their number (0 without /domain) and their comma-separated
 * names (NULL without /domain; owned by the reader). */
int64_t tess_tokens_num_domains(const tess_tokens *r);
const char *tess_tokens_domain_names(const tess_tokens *r);

/* First token (file position) of global sample g >= 0. Recomputes the permutation when g is in
 * another epoch than the last call (O(W), no allocation). Not collective. */
int64_t tess_tokens_window_start(tess_tokens *r, int64_t g);

/* out (n, T+1) int32: samples first .. first + n - 1 of the global order. Not collective (each
 * rank reads on its own; a failure is local to this rank). */
tess_status tess_tokens_read(tess_tokens *r, int64_t first, int64_t n, int32_t *out);

/* out (n, T+1) int32: the domain of every token of samples first .. first + n - 1, the same
 * windows as tess_tokens_read. TESS_ERR_ARG if the file has no /domain. Not collective. */
tess_status tess_tokens_read_domains(tess_tokens *r, int64_t first, int64_t n, int32_t *out);

/* This rank's share of global step `step` with global batch B: samples step*B + i for i in
 * tess_par_block_range(B, size, rank) of the reader's group. out (ceil(B/size), T+1) int32 at
 * least; *n_local receives the number of rows filled (0 on trailing ranks when size > B). Not
 * collective. */
tess_status tess_tokens_read_step(tess_tokens *r, int64_t step, int64_t batch, int32_t *out,
                                  int64_t *n_local);

/* Write a token stream to path (through path.tmp and a rename): tokens (n) in [0, vocab_size),
 * stored as uint16 when vocab_size <= 65536, else int32; vocab (vocab_size bytes) or NULL.
 * Not collective: call on one process. */
tess_status tess_tokens_write(const char *path, const int32_t *tokens, int64_t n,
                              int64_t vocab_size, const char *tokenizer, const uint8_t *vocab);

/* The domain labels of a stream being written (borrowed). */
typedef struct {
    const int32_t *ids; /* (n) in [0, count): the domain of every token */
    int64_t count;      /* 1..256 */
    const char *names;  /* count comma-separated names, none empty */
} tess_tokens_domains;

/* tess_tokens_write plus /domain from dom (NULL: none, the same file as tess_tokens_write).
 * TESS_ERR_ARG naming the first bad domain id, a count outside 1..256 or names that are not
 * count non-empty names. Not collective. */
tess_status tess_tokens_write_domains(const char *path, const int32_t *tokens, int64_t n,
                                      int64_t vocab_size, const char *tokenizer,
                                      const uint8_t *vocab, const tess_tokens_domains *dom);

/* Byte-level tokenizers of a text. */
typedef enum {
    TESS_TOKENS_BYTE = 0, /* token = byte value, vocab_size 256 */
    TESS_TOKENS_CHAR,     /* token = rank of the byte among the distinct bytes of the text */
} tess_tokens_tokenizer;

/* Encode text (n bytes) into tokens (n); vocab (256) receives the byte of each token id and
 * *vocab_size the number of ids. Not collective, cannot fail. */
void tess_tokens_encode(const uint8_t *text, int64_t n, tess_tokens_tokenizer kind, int32_t *tokens,
                        uint8_t *vocab, int64_t *vocab_size);

#endif
