/* test_tokens - token streams: rank 0 writes random streams (uint16 and int32 storage), every
 * rank reads its share of each step, and every window is compared with a reference computed
 * here from the stream and tess_rng_permutation alone: so the samples are those of the global
 * order, whatever the number of ranks. Also: split ranges, sequential order, epochs, ranks
 * reading different numbers of samples, the byte tokenizers, per-token domain labels (/domain)
 * read back window by window, and a domain label out of range refused on every rank. Run at 1,
 * 2, 3 and 4 ranks. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"    /* tess_rng_* */
#include "par/layout.h" /* tess_par_block_range */
#include "ds_test.h"     /* ds_test_init, DS_TEST_* */
#include "io/tokens.h"   /* tess_tokens_* */

enum { NTOK = 1000, T = 16, B = 8, STEPS = 20 };

static void make_stream(int32_t *tok, int64_t vocab) {
    for (int64_t i = 0; i < NTOK; i++)
        tok[i] = (int32_t)(tess_rng_u64((tess_rng_key){5, 5}, 0, (uint64_t)i) % (uint64_t)vocab);
}

/* Reference: first token of sample g, from the definition in tokens.h. */
static int64_t ref_start(int64_t g, int64_t begin, int64_t W, bool shuffle, tess_rng_key key,
                         int64_t *perm) {
    int64_t epoch = g / W, k = g % W;
    if (!shuffle) return begin + k * T;
    tess_rng_permutation(key, tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)epoch), perm, W);
    return begin + perm[k] * T;
}

/* Read STEPS steps of batch B and compare every row; check the shares add up to B. */
static void check_steps(tess_tokens *r, const int32_t *stream, int64_t begin, int64_t W,
                        const tess_tokens_opts *o, int rank, int size) {
    int32_t out[B * (T + 1)];
    int64_t perm[NTOK], lo, hi, bad = 0;
    tess_par_block_range(B, size, rank, &lo, &hi);
    for (int64_t step = 0; step < STEPS; step++) {
        int64_t n = -1;
        DS_TEST_OK(tess_tokens_read_step(r, step, B, out, &n));
        TESS_TEST_CHECK(n == hi - lo, "step %lld: %lld rows, expected %lld", (long long)step,
                        (long long)n, (long long)(hi - lo));
        int64_t total = n;
        MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        TESS_TEST_CHECK(total == B, "step %lld: %lld rows over all ranks", (long long)step,
                        (long long)total);
        for (int64_t i = 0; i < n && i < hi - lo; i++) {
            int64_t g = step * B + lo + i;
            int64_t s = ref_start(g, begin, W, o->shuffle, o->key, perm);
            bad += tess_tokens_window_start(r, g) != s;
            bad += memcmp(out + i * (T + 1), stream + s, (T + 1) * sizeof(int32_t)) != 0;
        }
    }
    TESS_TEST_CHECK(bad == 0, "%lld windows differ from the reference", (long long)bad);
}

/* One epoch of a shuffled reader visits every window once. */
static void check_epoch(tess_tokens *r, int64_t begin, int64_t W, int64_t epoch) {
    char *seen = calloc((size_t)W, 1);
    int64_t dup = 0;
    for (int64_t k = 0; k < W; k++) {
        int64_t s = tess_tokens_window_start(r, epoch * W + k) - begin;
        if (s % T != 0 || s / T >= W || seen[s / T]++) dup++;
    }
    TESS_TEST_CHECK(dup == 0, "epoch %lld: %lld windows repeated or off the grid", (long long)epoch,
                    (long long)dup);
    free(seen);
}

int main(int argc, char **argv) {
    int rank, size;
    ds_test_init(&argc, &argv, &rank, &size);
    static int32_t small[NTOK], big[NTOK];
    make_stream(small, 50);
    make_stream(big, 70000);
    uint8_t vocab[50];
    for (int i = 0; i < 50; i++) vocab[i] = (uint8_t)('A' + i);
    /* domains: three contiguous blocks of the small stream, named */
    static int32_t dom[NTOK];
    for (int64_t i = 0; i < NTOK; i++) dom[i] = i < 300 ? 0 : i < 750 ? 1 : 2;
    const tess_tokens_domains td = {.ids = dom, .count = 3, .names = "prose,code,verse"};
    if (rank == 0) {
        DS_TEST_OK(tess_tokens_write("small.h5", small, NTOK, 50, "test", vocab));
        DS_TEST_OK(tess_tokens_write("big.h5", big, NTOK, 70000, "test", NULL));
        DS_TEST_OK(tess_tokens_write_domains("dom.h5", small, NTOK, 50, "test", NULL, &td));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* refused by the writer before it creates a file (so on every rank): an id >= count, names
     * that are not count names */
    dom[NTOK - 1] = 3;
    DS_TEST_FAILS(tess_tokens_write_domains("bad.h5", small, NTOK, 50, "t", NULL, &td),
                  TESS_ERR_ARG, "domain of token 999 = 3 is outside [0, 3)");
    dom[NTOK - 1] = 2;
    const tess_tokens_domains two = {.ids = dom, .count = 3, .names = "prose,,verse"};
    DS_TEST_FAILS(tess_tokens_write_domains("bad.h5", small, NTOK, 50, "t", NULL, &two),
                  TESS_ERR_ARG, "are not 3 non-empty comma-separated names");

    /* 1. Whole stream, shuffled, 20 steps of 8 = 160 samples > W = 62: three epochs. */
    tess_tokens_opts o = {
        .seq_len = T, .begin_frac = 0.0, .end_frac = 1.0, .shuffle = true, .key = {1234, 3}};
    tess_tokens *r = NULL;
    DS_TEST_OK(tess_tokens_create(&r, ds_world, "small.h5", &o));
    if (r) {
        TESS_TEST_CHECK(tess_tokens_count(r) == NTOK && tess_tokens_vocab_size(r) == 50 &&
                            tess_tokens_num_windows(r) == (NTOK - 1) / T,
                        "count %lld vocab %lld W %lld", (long long)tess_tokens_count(r),
                        (long long)tess_tokens_vocab_size(r),
                        (long long)tess_tokens_num_windows(r));
        const uint8_t *v = tess_tokens_vocab(r);
        TESS_TEST_CHECK(v && memcmp(v, vocab, 50) == 0, "/vocab read back");
        check_steps(r, small, 0, (NTOK - 1) / T, &o, rank, size);
        for (int64_t e = 0; e < 3; e++) check_epoch(r, 0, (NTOK - 1) / T, e);
        /* Ranks read different numbers of samples from different places (not collective). */
        int32_t out[4 * (T + 1)];
        int64_t perm[NTOK], first = 7 * rank, n = rank % 4 + 1, bad = 0;
        DS_TEST_OK(tess_tokens_read(r, first, n, out));
        for (int64_t i = 0; i < n; i++) {
            int64_t s = ref_start(first + i, 0, (NTOK - 1) / T, true, o.key, perm);
            bad += memcmp(out + i * (T + 1), small + s, (T + 1) * sizeof(int32_t)) != 0;
        }
        TESS_TEST_CHECK(bad == 0, "uneven reads: %lld windows differ", (long long)bad);
    }
    DS_TEST_OK(tess_tokens_destroy(&r));
    TESS_TEST_CHECK(r == NULL, "destroy sets NULL");

    /* 2. The last 10 % in order (a validation split): begin 900, W = 99 / 16 = 6. */
    o = (tess_tokens_opts){.seq_len = T, .begin_frac = 0.9, .end_frac = 1.0, .shuffle = false};
    DS_TEST_OK(tess_tokens_create(&r, ds_world, "small.h5", &o));
    if (r) {
        TESS_TEST_CHECK(tess_tokens_num_windows(r) == 6, "W %lld",
                        (long long)tess_tokens_num_windows(r));
        check_steps(r, small, 900, 6, &o, rank, size);
    }
    DS_TEST_OK(tess_tokens_destroy(&r));

    /* 3. int32 storage (vocabulary > 65536), the first 90 %, shuffled with another key. */
    o = (tess_tokens_opts){
        .seq_len = T, .begin_frac = 0.0, .end_frac = 0.9, .shuffle = true, .key = {99, 1}};
    DS_TEST_OK(tess_tokens_create(&r, ds_world, "big.h5", &o));
    if (r) {
        TESS_TEST_CHECK(tess_tokens_vocab(r) == NULL, "no /vocab");
        check_steps(r, big, 0, (900 - 1) / T, &o, rank, size);
    }
    DS_TEST_OK(tess_tokens_destroy(&r));

    /* 4. Too long a window for the range: a configuration error on every rank. */
    o = (tess_tokens_opts){.seq_len = 100, .begin_frac = 0.95, .end_frac = 1.0};
    DS_TEST_FAILS(tess_tokens_create(&r, ds_world, "small.h5", &o), TESS_ERR_CONFIG,
                  "hold fewer than seq_len + 1 = 101 tokens");
    TESS_TEST_CHECK(r == NULL, "no reader after a failure");

    /* 5. Domain labels: every window's labels are those of its tokens; a file without /domain
     * has none and refuses to read them. */
    o = (tess_tokens_opts){
        .seq_len = T, .begin_frac = 0.0, .end_frac = 1.0, .shuffle = true, .key = {7, 7}};
    DS_TEST_OK(tess_tokens_create(&r, ds_world, "dom.h5", &o));
    if (r) {
        const char *names = tess_tokens_domain_names(r);
        TESS_TEST_CHECK(tess_tokens_num_domains(r) == 3 && names &&
                            strcmp(names, "prose,code,verse") == 0,
                        "domains %lld '%s'", (long long)tess_tokens_num_domains(r),
                        names ? names : "(null)");
        int32_t tw[5 * (T + 1)], dw[5 * (T + 1)];
        int64_t bad = 0, first = 11 * rank;
        DS_TEST_OK(tess_tokens_read(r, first, 5, tw));
        DS_TEST_OK(tess_tokens_read_domains(r, first, 5, dw));
        for (int64_t i = 0; i < 5; i++) {
            const int64_t s0 = tess_tokens_window_start(r, first + i);
            bad += memcmp(tw + i * (T + 1), small + s0, (T + 1) * sizeof(int32_t)) != 0;
            bad += memcmp(dw + i * (T + 1), dom + s0, (T + 1) * sizeof(int32_t)) != 0;
        }
        TESS_TEST_CHECK(bad == 0, "domain windows: %lld differ", (long long)bad);
    }
    DS_TEST_OK(tess_tokens_destroy(&r));
    DS_TEST_OK(tess_tokens_create(&r, ds_world, "small.h5", &o));
    if (r) {
        int32_t dw[T + 1];
        TESS_TEST_CHECK(tess_tokens_num_domains(r) == 0 && tess_tokens_domain_names(r) == NULL,
                        "no /domain in small.h5");
        DS_TEST_FAILS(tess_tokens_read_domains(r, 0, 1, dw), TESS_ERR_ARG,
                      "'small.h5' has no /domain");
    }
    DS_TEST_OK(tess_tokens_destroy(&r));

    /* 6. Tokenizers. */
    const uint8_t text[] = "hello world";
    int32_t tok[11];
    uint8_t voc[256];
    int64_t V = 0;
    tess_tokens_encode(text, 11, TESS_TOKENS_BYTE, tok, voc, &V);
    TESS_TEST_CHECK(V == 256 && tok[0] == 'h' && tok[5] == ' ' && voc['h'] == 'h', "byte: V %lld",
                    (long long)V);
    tess_tokens_encode(text, 11, TESS_TOKENS_CHAR, tok, voc, &V);
    TESS_TEST_CHECK(V == 8 && memcmp(voc, " dehlorw", 8) == 0, "char: V %lld", (long long)V);
    const int32_t want[11] = {3, 2, 4, 4, 5, 0, 7, 5, 6, 4, 1};
    TESS_TEST_CHECK(memcmp(tok, want, sizeof want) == 0, "char tokens of 'hello world'");

    int rc = tess_test_finish_mpi("test_tokens", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
