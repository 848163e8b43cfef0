/* test_tokens_text - a token file made by tess-convert text (char vocabulary) from a real text,
 * read at any rank count: vocabulary and length as the text's, and every window of the first
 * steps, decoded through /vocab, equal to the text at the window's position.
 *   test_tokens_text <nprocs> <text file> <tokens.h5> <vocab size>
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par/layout.h" /* tess_par_block_range */
#include "ds_test.h"     /* ds_test_init, DS_TEST_* */
#include "io/tokens.h"   /* tess_tokens_* */

enum { T = 64, B = 8, STEPS = 4 };

int main(int argc, char **argv) {
    int rank, size;
    ds_test_init(&argc, &argv, &rank, &size);
    TESS_TEST_CHECK(argc == 5, "usage: test_tokens_text <nprocs> <text> <tokens.h5> <vocab>");
    if (argc != 5) {
        int rc = tess_test_finish_mpi("test_tokens_text", MPI_COMM_WORLD);
        MPI_Finalize();
        return rc;
    }
    FILE *f = fopen(argv[2], "rb");
    static unsigned char text[1 << 21];
    size_t n = f ? fread(text, 1, sizeof text, f) : 0;
    if (f) fclose(f);
    TESS_TEST_CHECK(n > 0 && n < sizeof text, "read %zu bytes of '%s'", n, argv[2]);

    tess_tokens_opts o = {
        .seq_len = T, .begin_frac = 0.0, .end_frac = 0.9, .shuffle = true, .key = {42, 0}};
    tess_tokens *r = NULL;
    DS_TEST_OK(tess_tokens_create(&r, ds_world, argv[3], &o));
    if (r) {
        TESS_TEST_CHECK(tess_tokens_count(r) == (int64_t)n &&
                            tess_tokens_vocab_size(r) == strtol(argv[4], NULL, 10),
                        "%lld tokens, vocabulary %lld", (long long)tess_tokens_count(r),
                        (long long)tess_tokens_vocab_size(r));
        const uint8_t *vocab = tess_tokens_vocab(r);
        TESS_TEST_CHECK(vocab != NULL, "/vocab present");
        int32_t out[B * (T + 1)];
        int64_t bad = 0, rows = 0;
        for (int64_t step = 0; step < STEPS && vocab; step++) {
            int64_t nl = 0;
            DS_TEST_OK(tess_tokens_read_step(r, step, B, out, &nl));
            int64_t lo, hi;
            tess_par_block_range(B, size, rank, &lo, &hi);
            lo += step * B;
            for (int64_t i = 0; i < nl; i++) {
                int64_t s = tess_tokens_window_start(r, lo + i);
                bad += s < 0 || s + T + 1 > (int64_t)(0.9 * (double)n) + 1;
                for (int64_t j = 0; j <= T && !bad; j++)
                    bad += vocab[out[i * (T + 1) + j]] != text[s + j];
            }
            rows += nl;
        }
        TESS_TEST_CHECK(bad == 0, "%lld windows differ from the text", (long long)bad);
        MPI_Allreduce(MPI_IN_PLACE, &rows, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        TESS_TEST_CHECK(rows == STEPS * B, "%lld rows over all ranks", (long long)rows);
    }
    DS_TEST_OK(tess_tokens_destroy(&r));
    int rc = tess_test_finish_mpi("test_tokens_text", MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
