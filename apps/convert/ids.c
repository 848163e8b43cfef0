/* tess-convert ids - token ids already produced by a tokenizer (one text file of whitespace-
 * separated decimal ids per domain, e.g. `spm_encode --output_format=id`) to one Tessera token
 * stream in HDF5 with the domain of every token (io/tokens.h /domain). The domains are stored in
 * argument order: domain d is the d-th NAME=FILE argument, its tokens follow those of domain
 * d - 1.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"   /* convert_cmd */
#include "core/log.h"  /* tess_log_info */
#include "io/tokens.h" /* tess_tokens_write_domains */

enum { NAMES_MAX = 4096 };

/* A growing int32 array. */
typedef struct {
    int32_t *v;
    int64_t n, cap;
} ivec;

static tess_status push(ivec *a, int32_t x) {
    if (a->n == a->cap) {
        const int64_t cap = a->cap ? 2 * a->cap : 1 << 16;
        int32_t *v = realloc(a->v, (size_t)cap * sizeof *v);
        TESS_REQUIRE(v != NULL, TESS_ERR_MEM, "cannot grow the token array to %lld",
                     (long long)cap);
        a->v = v, a->cap = cap;
    }
    a->v[a->n++] = x;
    return TESS_OK;
}

/* Append the ids of path (domain dom) to tok and dom_ids; every id must be in [0, V). */
static tess_status read_ids(const char *path, int32_t dom, int64_t V, ivec *tok, ivec *dom_ids) {
    FILE *f = fopen(path, "r");
    TESS_REQUIRE(f != NULL, TESS_ERR_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
    tess_status s = TESS_OK;
    int64_t line = 1, before = tok->n;
    int c = fgetc(f);
    while (c != EOF && s == TESS_OK) {
        if (c == '\n') line++;
        if (isspace(c)) {
            c = fgetc(f);
            continue;
        }
        long long x = 0;
        int digits = 0;
        for (; c != EOF && isdigit(c); c = fgetc(f), digits++)
            x = x < (long long)V ? 10 * x + (c - '0') : x;
        if (digits == 0 || (c != EOF && !isspace(c)))
            s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                "%s:%lld: expected a non-negative integer token id, found '%c'",
                                path, (long long)line, c == EOF ? '?' : c);
        else if (x >= V)
            s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                "%s:%lld: token id %lld is outside [0, --vocab-size = %lld)", path,
                                (long long)line, x, (long long)V);
        if (s == TESS_OK) s = push(tok, (int32_t)x);
        if (s == TESS_OK) s = push(dom_ids, dom);
    }
    fclose(f);
    if (s != TESS_OK) return s;
    TESS_REQUIRE(tok->n > before, TESS_ERR_DATA, "'%s' holds no token ids", path);
    return TESS_OK;
}

/* vals: --vocab-size, --tokenizer; args: out.h5, then NAME=FILE per domain. */
static tess_status run(const char *const *vals, int nargs, char **args) {
    char *end = NULL;
    errno = 0;
    const long long V = strtoll(vals[0], &end, 10);
    TESS_REQUIRE(errno == 0 && end != vals[0] && *end == '\0' && V >= 1 && V <= INT32_MAX,
                 TESS_ERR_ARG, "--vocab-size '%s': expected an integer in 1..%d", vals[0],
                 INT32_MAX);
    const char *out = args[0];
    char names[NAMES_MAX] = "";
    ivec tok = {0}, dom = {0};
    tess_status s = TESS_OK;
    for (int d = 1; d < nargs && s == TESS_OK; d++) {
        char *eq = strchr(args[d], '=');
        const size_t len = eq ? (size_t)(eq - args[d]) : 0;
        if (!eq || len == 0 || eq[1] == '\0' || memchr(args[d], ',', len) ||
            strlen(names) + len + 2 > sizeof names) {
            s = tess_error_push(TESS_ERR_ARG, __FILE__, __LINE__, __func__,
                                "argument '%s': expected NAME=FILE (a name without ',')", args[d]);
            break;
        }
        if (d > 1) strcat(names, ",");
        strncat(names, args[d], len);
        s = read_ids(eq + 1, (int32_t)(d - 1), V, &tok, &dom);
    }
    if (s == TESS_OK) {
        const tess_tokens_domains td = {.ids = dom.v, .count = nargs - 1, .names = names};
        s = tess_tokens_write_domains(out, tok.v, tok.n, V, vals[1], NULL, &td);
    }
    if (s == TESS_OK)
        tess_log_info("%lld tokens of %d domains (%s), vocabulary %lld (%s); wrote %s",
                      (long long)tok.n, nargs - 1, names, V, vals[1], out);
    free(tok.v);
    free(dom.v);
    return s;
}

const convert_cmd convert_ids = {
    .name = "ids",
    .summary = "token id files, one per domain -> token stream with domain labels (io/tokens.h)",
    .args = "<out.h5> <NAME=ids.txt>...",
    .min_args = 2,
    .max_args = 0,
    .opts = {{.name = "--vocab-size",
              .metavar = "V",
              .def = "0",
              .help = "the tokenizer's vocabulary size; every id must be below it (required)"},
             {.name = "--tokenizer",
              .metavar = "NAME",
              .def = "sentencepiece",
              .help = "the tokenizer's name, stored in the file"}},
    .nopts = 2,
    .details = "Each FILE holds whitespace-separated decimal token ids (spm_encode\n"
               "--output_format=id writes one line per input line). Domain d is the d-th\n"
               "NAME=FILE argument; /domain records it per token (docs/datasets.md).\n"
               "jobs/moe-text.sh builds the moe app's multi-domain corpus with it.",
    .run = run,
};
