/* tess-text2h5 - turn a text file into a Tessera token stream in HDF5 (io/tokens.h).
 *
 *   tess-text2h5 [--tokenizer byte|char] <input.txt> <out.h5>
 *
 * byte: token = byte value, vocabulary 256. char (default): token = rank of the byte among the
 * distinct bytes of the text (65 for tinyshakespeare), as in char-rnn. /vocab maps ids back to
 * bytes. A serial tool: run it as one process. Exit codes: 0, 64 bad command line, 66 missing
 * input, 74 cannot write.
 */
#include <errno.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"     /* tess_log_info */
#include "core/runtime.h" /* tess_runtime_* */
#include "io/tokens.h"    /* tess_tokens_* */

static const char *const USAGE = "usage: tess-text2h5 [--tokenizer byte|char] <input.txt> <out.h5>";

static tess_status read_file(const char *path, uint8_t **buf, int64_t *n) {
    FILE *f = fopen(path, "rb");
    TESS_REQUIRE(f != NULL, TESS_ERR_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    *buf = size >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)size + 1) : NULL;
    bool ok = *buf && fread(*buf, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok) {
        free(*buf);
        *buf = NULL;
    }
    TESS_REQUIRE(ok, TESS_ERR_NOINPUT, "cannot read '%s'", path);
    *n = size;
    return TESS_OK;
}

static tess_status convert(const char *in, const char *out, tess_tokens_tokenizer kind) {
    uint8_t *text = NULL, vocab[256];
    int64_t n = 0, V = 0;
    TESS_CHECK(read_file(in, &text, &n));
    int32_t *tokens = malloc((size_t)(n > 0 ? n : 1) * sizeof *tokens);
    if (!tokens) free(text);
    TESS_REQUIRE(tokens != NULL, TESS_ERR_MEM, "cannot allocate %lld tokens", (long long)n);
    tess_tokens_encode(text, n, kind, tokens, vocab, &V);
    free(text);
    tess_status s =
        n > 0 ? tess_tokens_write(out, tokens, n, V, kind == TESS_TOKENS_BYTE ? "byte" : "char",
                                  vocab)
              : tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__, "'%s' is empty", in);
    free(tokens);
    TESS_REQUIRE(s == TESS_OK, s, "converting '%s'", in);
    tess_log_info("%s: %lld bytes -> %lld tokens, vocabulary %lld (%s); wrote %s", in, (long long)n,
                  (long long)n, (long long)V, kind == TESS_TOKENS_BYTE ? "byte" : "char", out);
    return TESS_OK;
}

static tess_status run(const tess_runtime *rt, int argc, char **argv) {
    TESS_REQUIRE(rt->size == 1, TESS_ERR_ARG,
                 "tess-text2h5 is a serial tool: run it as one "
                 "process, not %d",
                 rt->size);
    tess_tokens_tokenizer kind = TESS_TOKENS_CHAR;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tokenizer") == 0) {
            TESS_REQUIRE(i + 1 < argc, TESS_ERR_ARG, "--tokenizer needs a value\n%s", USAGE);
            const char *v = argv[++i];
            TESS_REQUIRE(strcmp(v, "byte") == 0 || strcmp(v, "char") == 0, TESS_ERR_ARG,
                         "unknown --tokenizer '%s'\n%s", v, USAGE);
            kind = strcmp(v, "byte") == 0 ? TESS_TOKENS_BYTE : TESS_TOKENS_CHAR;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s\n", USAGE);
            return TESS_OK;
        } else {
            TESS_REQUIRE(argv[i][0] != '-' && npos < 2, TESS_ERR_ARG,
                         "unexpected argument "
                         "'%s'\n%s",
                         argv[i], USAGE);
            pos[npos++] = argv[i];
        }
    }
    TESS_REQUIRE(npos == 2, TESS_ERR_ARG, "expected an input text and an output file\n%s", USAGE);
    TESS_CHECK(convert(pos[0], pos[1], kind));
    return TESS_OK;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    tess_status s = tess_runtime_start(&rt, MPI_COMM_WORLD);
    if (s == TESS_OK) s = run(&rt, argc, argv);
    return tess_runtime_finish(&rt, s, true);
}
