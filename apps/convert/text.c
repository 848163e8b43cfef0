/* tess-convert text - a text file to a Tessera token stream in HDF5 (io/tokens.h).
 *
 * byte: token = byte value, vocabulary 256. char (default): token = rank of the byte among the
 * distinct bytes of the text (65 for tinyshakespeare), as in char-rnn. /vocab maps ids back to
 * bytes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"   /* convert_cmd */
#include "core/log.h"  /* tess_log_info */
#include "io/tokens.h" /* tess_tokens_* */

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

/* vals[0]: --tokenizer; args: input text, out.h5. */
static tess_status run(const char *const *vals, int nargs, char **args) {
    const char *in = args[0], *out = args[1];
    tess_tokens_tokenizer kind = strcmp(vals[0], "byte") == 0 ? TESS_TOKENS_BYTE : TESS_TOKENS_CHAR;
    uint8_t *text = NULL, vocab[256];
    int64_t n = 0, V = 0;
    TESS_CHECK(read_file(in, &text, &n));
    int32_t *tokens = malloc((size_t)(n > 0 ? n : 1) * sizeof *tokens);
    if (!tokens) free(text);
    TESS_REQUIRE(tokens != NULL, TESS_ERR_MEM, "cannot allocate %lld tokens", (long long)n);
    tess_tokens_encode(text, n, kind, tokens, vocab, &V);
    free(text);
    tess_status s =
        n > 0 ? tess_tokens_write(out, tokens, n, V, vals[0], vocab)
              : tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__, "'%s' is empty", in);
    free(tokens);
    TESS_REQUIRE(s == TESS_OK, s, "converting '%s'", in);
    tess_log_info("%s: %lld bytes -> %lld tokens, vocabulary %lld (%s); wrote %s", in, (long long)n,
                  (long long)n, (long long)V, vals[0], out);
    return TESS_OK;
}

const convert_cmd convert_text = {
    .name = "text",
    .summary = "a text file -> token stream, byte or char vocabulary (io/tokens.h)",
    .args = "<input.txt> <out.h5>",
    .out_arg = 1,
    .min_args = 2,
    .max_args = 2,
    .opts = {{.name = "--tokenizer",
              .choices = "byte|char",
              .def = "char",
              .help = "byte: token = byte value, vocabulary 256; char: the distinct bytes of the "
                      "text in increasing order"}},
    .nopts = 1,
    .details = "The whole file is one token stream; /vocab maps token ids back to bytes\n"
               "(docs/datasets.md).",
    .run = run,
};
