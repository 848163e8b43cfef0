/* tokens.c - token-stream reader, writer and byte tokenizers (see tokens.h). */
#include "io/tokens.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par/layout.h" /* tess_par_block_range */
#include "io/dataset.h"  /* tess_ds_* */
#include "io/h5.h"       /* tess_h5_quiet_*, tess_h5_reason */
#include "par/coll.h"    /* tess_par_agree */

static const char *const TOKENS_FORMAT = "tessera.tokens";
enum { TOKENS_VERSION = 1, SCAN_CHUNK = 1 << 20, BYTE_VOCAB = 256, MAX_DOMAINS = 256,
       NAMES_MAX = 4096 };

struct tess_tokens {
    tess_ds_file f;
    hid_t dset;
    hid_t fspace; /* file space of /tokens, re-selected per window */
    hid_t mspace; /* (T + 1) */
    int64_t n_tokens, vocab_size;
    int64_t begin, end; /* token range used */
    int64_t T, W;
    bool shuffle;
    tess_rng_key key;
    int64_t *perm;      /* (W) window order of epoch perm_epoch */
    int64_t perm_epoch; /* -1 before the first use */
    uint8_t *vocab;     /* (vocab_size) or NULL */
    hid_t domain;       /* /domain, or H5I_INVALID_HID */
    int64_t n_domains;  /* 0 without /domain */
    char *domain_names; /* NAMES_MAX bytes, or NULL */
};

int64_t tess_tokens_vocab_size(const tess_tokens *r) { return r->vocab_size; }
int64_t tess_tokens_count(const tess_tokens *r) { return r->n_tokens; }
int64_t tess_tokens_num_windows(const tess_tokens *r) { return r->W; }
const uint8_t *tess_tokens_vocab(const tess_tokens *r) { return r->vocab; }
int64_t tess_tokens_num_domains(const tess_tokens *r) { return r->n_domains; }
const char *tess_tokens_domain_names(const tess_tokens *r) { return r->domain_names; }

/* Number of comma-separated names in s, -1 if one is empty. */
static int64_t count_names(const char *s) {
    int64_t n = 1, len = 0;
    for (; *s; s++) {
        if (*s != ',') {
            len++;
            continue;
        }
        if (len == 0) return -1;
        n++, len = 0;
    }
    return len > 0 ? n : -1;
}

int64_t tess_tokens_window_start(tess_tokens *r, int64_t g) {
    TESS_ASSERT(g >= 0);
    int64_t epoch = g / r->W, k = g % r->W;
    if (!r->shuffle) return r->begin + k * r->T;
    if (epoch != r->perm_epoch) {
        tess_rng_permutation(r->key, tess_rng_ctr(TESS_RNG_PURPOSE_DATA, (uint64_t)epoch), r->perm,
                             r->W);
        r->perm_epoch = epoch;
    }
    return r->begin + r->perm[k] * r->T;
}

/* Windows first .. first + n - 1 of dataset dset (/tokens or /domain, named name). */
static tess_status read_windows(tess_tokens *r, hid_t dset, const char *name, int64_t first,
                                int64_t n, int32_t *out) {
    TESS_REQUIRE(first >= 0 && n >= 0, TESS_ERR_ARG, "samples [%lld, +%lld)", (long long)first,
                 (long long)n);
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    herr_t e = 0;
    int64_t i = 0;
    for (; i < n && e >= 0; i++) {
        hsize_t start = (hsize_t)tess_tokens_window_start(r, first + i), count = (hsize_t)r->T + 1;
        e = H5Sselect_hyperslab(r->fspace, H5S_SELECT_SET, &start, NULL, &count, NULL);
        if (e >= 0)
            e = H5Dread(dset, H5T_NATIVE_INT32, r->mspace, r->fspace, H5P_DEFAULT,
                        out + i * (r->T + 1));
    }
    char why[256];
    if (e < 0) tess_h5_reason(why, sizeof why);
    tess_h5_quiet_end(&q);
    TESS_REQUIRE(e >= 0, TESS_ERR_IO, "'%s': reading sample %lld of %s failed: %s", r->f.path,
                 (long long)(first + i - 1), name, why);
    return TESS_OK;
}

tess_status tess_tokens_read(tess_tokens *r, int64_t first, int64_t n, int32_t *out) {
    return read_windows(r, r->dset, "/tokens", first, n, out);
}

tess_status tess_tokens_read_domains(tess_tokens *r, int64_t first, int64_t n, int32_t *out) {
    TESS_REQUIRE(r->n_domains > 0, TESS_ERR_ARG, "'%s' has no /domain (no domain labels)",
                 r->f.path);
    return read_windows(r, r->domain, "/domain", first, n, out);
}

tess_status tess_tokens_read_step(tess_tokens *r, int64_t step, int64_t batch, int32_t *out,
                                  int64_t *n_local) {
    TESS_REQUIRE(step >= 0 && batch >= 1, TESS_ERR_ARG, "step %lld, batch %lld", (long long)step,
                 (long long)batch);
    int64_t lo, hi;
    tess_par_block_range(batch, r->f.size, r->f.rank, &lo, &hi);
    *n_local = hi - lo;
    TESS_CHECK(tess_tokens_read(r, step * batch + lo, hi - lo, out));
    return TESS_OK;
}

/* Layout and attributes: identical on every rank. */
static tess_status open_meta(tess_tokens *r, const tess_tokens_opts *o) {
    const tess_ds_file *f = &r->f;
    int64_t dims[1];
    TESS_CHECK(tess_ds_dataset_open(f, "/tokens", TESS_DS_INT, 1, NULL, dims, &r->dset));
    r->n_tokens = dims[0];
    TESS_CHECK(tess_ds_attr_int(f, "/tokens", "vocab_size", &r->vocab_size));
    TESS_REQUIRE(r->vocab_size >= 1 && r->vocab_size <= INT32_MAX, TESS_ERR_DATA,
                 "'%s': /tokens has vocab_size %lld, expected 1..%d", f->path,
                 (long long)r->vocab_size, INT32_MAX);
    r->begin = (int64_t)floor(o->begin_frac * (double)r->n_tokens);
    r->end = (int64_t)floor(o->end_frac * (double)r->n_tokens);
    r->T = o->seq_len;
    /* T < end - begin: the range holds T + 1 tokens (T + 1 overflows for T = INT64_MAX) */
    TESS_REQUIRE(r->T < r->end - r->begin, TESS_ERR_CONFIG,
                 "'%s': tokens [%lld, %lld) (fractions %g..%g of %lld) hold fewer than seq_len + "
                 "1 = %llu tokens",
                 f->path, (long long)r->begin, (long long)r->end, o->begin_frac, o->end_frac,
                 (long long)r->n_tokens, (unsigned long long)r->T + 1u);
    r->W = (r->end - r->begin - 1) / r->T;
    if (tess_ds_exists(f, "/vocab")) {
        hid_t v;
        int64_t want[1] = {r->vocab_size};
        TESS_CHECK(tess_ds_dataset_open(f, "/vocab", TESS_DS_INT, 1, want, dims, &v));
        r->vocab = malloc((size_t)r->vocab_size);
        herr_t e =
            r->vocab ? H5Dread(v, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, r->vocab) : -1;
        H5Dclose(v);
        TESS_REQUIRE(e >= 0, TESS_ERR_DATA, "'%s': cannot read /vocab", f->path);
    }
    if (tess_ds_exists(f, "/domain")) {
        int64_t want[1] = {r->n_tokens};
        TESS_CHECK(tess_ds_dataset_open(f, "/domain", TESS_DS_INT, 1, want, dims, &r->domain));
        TESS_CHECK(tess_ds_attr_int(f, "/domain", "n_domains", &r->n_domains));
        TESS_REQUIRE(r->n_domains >= 1 && r->n_domains <= MAX_DOMAINS, TESS_ERR_DATA,
                     "'%s': /domain has n_domains %lld, expected 1..%d", f->path,
                     (long long)r->n_domains, MAX_DOMAINS);
        r->domain_names = malloc(NAMES_MAX);
        TESS_REQUIRE(r->domain_names != NULL, TESS_ERR_MEM, "out of memory");
        TESS_CHECK(tess_ds_attr_string(f, "/domain", "names", r->domain_names, NAMES_MAX));
        TESS_REQUIRE(count_names(r->domain_names) == r->n_domains, TESS_ERR_DATA,
                     "'%s': /domain names '%s' are not %lld non-empty comma-separated names",
                     f->path, r->domain_names, (long long)r->n_domains);
    }
    return TESS_OK;
}

/* Each rank checks its block of dataset dset (/tokens or /domain, named name; n_tokens
 * values) against [0, bound) (bound_name for messages), in chunks. */
static tess_status scan_block(tess_tokens *r, hid_t dset, const char *name, int64_t bound,
                              const char *bound_name) {
    int64_t lo, hi;
    tess_par_block_range(r->n_tokens, r->f.size, r->f.rank, &lo, &hi);
    int64_t chunk = hi - lo < SCAN_CHUNK ? hi - lo : SCAN_CHUNK;
    int32_t *buf = malloc((size_t)(chunk > 0 ? chunk : 1) * sizeof *buf);
    TESS_REQUIRE(buf != NULL, TESS_ERR_MEM, "cannot allocate %lld tokens", (long long)chunk);
    hid_t fs = H5Dget_space(dset);
    tess_status s = TESS_OK;
    for (int64_t a = lo; a < hi && s == TESS_OK; a += chunk) {
        hsize_t start = (hsize_t)a, count = (hsize_t)(hi - a < chunk ? hi - a : chunk);
        hid_t ms = H5Screate_simple(1, &count, NULL);
        herr_t e = H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
        if (e >= 0) e = H5Dread(dset, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, buf);
        H5Sclose(ms);
        if (e < 0) {
            char why[256];
            tess_h5_reason(why, sizeof why);
            s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                "'%s': reading %s[%lld..%lld) failed: %s", r->f.path, name,
                                (long long)a, (long long)(a + (int64_t)count), why);
        }
        for (int64_t i = 0; i < (int64_t)count && s == TESS_OK; i++)
            if (buf[i] < 0 || buf[i] >= bound)
                s = tess_error_push(TESS_ERR_DATA, __FILE__, __LINE__, __func__,
                                    "'%s': %s[%lld] = %d is outside [0, %s = %lld)", r->f.path,
                                    name, (long long)(a + i), buf[i], bound_name,
                                    (long long)bound);
    }
    H5Sclose(fs);
    free(buf);
    return s;
}

static void tokens_free(tess_tokens *r) {
    if (r->mspace != H5I_INVALID_HID) H5Sclose(r->mspace);
    if (r->fspace != H5I_INVALID_HID) H5Sclose(r->fspace);
    if (r->dset != H5I_INVALID_HID) H5Dclose(r->dset);
    if (r->domain != H5I_INVALID_HID) H5Dclose(r->domain);
    free(r->perm);
    free(r->vocab);
    free(r->domain_names);
    free(r);
}

tess_status tess_tokens_create(tess_tokens **rp, const tess_group *g, const char *path,
                               const tess_tokens_opts *o) {
    *rp = NULL;
    TESS_REQUIRE(o->seq_len >= 1 && o->begin_frac >= 0.0 && o->begin_frac < o->end_frac &&
                     o->end_frac <= 1.0,
                 TESS_ERR_ARG, "token reader options: seq_len %lld, range %g..%g",
                 (long long)o->seq_len, o->begin_frac, o->end_frac);
    tess_tokens *r = calloc(1, sizeof *r);
    TESS_REQUIRE(r != NULL, TESS_ERR_MEM, "out of memory");
    r->dset = r->fspace = r->mspace = r->domain = H5I_INVALID_HID;
    r->shuffle = o->shuffle;
    r->key = o->key;
    r->perm_epoch = -1;
    tess_status s = tess_ds_open(&r->f, g, path, TOKENS_FORMAT, TOKENS_VERSION, false);
    if (s != TESS_OK) {
        free(r);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "opening tokens '%s'", path);
    }
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    s = tess_par_agree(g, open_meta(r, o));
    if (s == TESS_OK) s = tess_par_agree(g, scan_block(r, r->dset, "/tokens", r->vocab_size,
                                                      "vocab_size"));
    if (s == TESS_OK && r->n_domains > 0)
        s = tess_par_agree(g, scan_block(r, r->domain, "/domain", r->n_domains, "n_domains"));
    if (s == TESS_OK) {
        tess_status ls = TESS_OK;
        hsize_t w = (hsize_t)r->T + 1;
        r->perm = malloc((size_t)r->W * sizeof *r->perm);
        r->fspace = H5Dget_space(r->dset);
        r->mspace = H5Screate_simple(1, &w, NULL);
        if (!r->perm || r->fspace < 0 || r->mspace < 0)
            ls = tess_error_push(TESS_ERR_MEM, __FILE__, __LINE__, __func__,
                                 "cannot allocate the order of %lld windows", (long long)r->W);
        s = tess_par_agree(g, ls);
    }
    tess_h5_quiet_end(&q);
    if (s != TESS_OK) {
        tess_ds_file f = r->f;
        tokens_free(r);
        tess_ds_close(&f);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "reading tokens '%s'", path);
    }
    *rp = r;
    return TESS_OK;
}

tess_status tess_tokens_destroy(tess_tokens **rp) {
    tess_tokens *r = *rp;
    if (r == NULL) return TESS_OK;
    *rp = NULL;
    tess_ds_file f = r->f;
    tokens_free(r);
    TESS_CHECK(tess_ds_close(&f));
    return TESS_OK;
}

tess_status tess_tokens_write(const char *path, const int32_t *tokens, int64_t n,
                              int64_t vocab_size, const char *tokenizer, const uint8_t *vocab) {
    return tess_tokens_write_domains(path, tokens, n, vocab_size, tokenizer, vocab, NULL);
}

tess_status tess_tokens_write_domains(const char *path, const int32_t *tokens, int64_t n,
                                      int64_t vocab_size, const char *tokenizer,
                                      const uint8_t *vocab, const tess_tokens_domains *dom) {
    TESS_REQUIRE(vocab_size >= 1 && vocab_size <= INT32_MAX && n >= 0, TESS_ERR_ARG,
                 "vocab_size %lld, %lld tokens", (long long)vocab_size, (long long)n);
    for (int64_t i = 0; i < n; i++)
        TESS_REQUIRE(tokens[i] >= 0 && tokens[i] < vocab_size, TESS_ERR_ARG,
                     "token %lld = %d is outside [0, %lld)", (long long)i, tokens[i],
                     (long long)vocab_size);
    if (dom) {
        TESS_REQUIRE(dom->count >= 1 && dom->count <= MAX_DOMAINS, TESS_ERR_ARG,
                     "%lld domains, expected 1..%d", (long long)dom->count, MAX_DOMAINS);
        TESS_REQUIRE(strlen(dom->names) < NAMES_MAX && count_names(dom->names) == dom->count,
                     TESS_ERR_ARG,
                     "domain names '%s' are not %lld non-empty comma-separated names (at most "
                     "%d bytes)",
                     dom->names, (long long)dom->count, NAMES_MAX - 1);
        for (int64_t i = 0; i < n; i++)
            TESS_REQUIRE(dom->ids[i] >= 0 && dom->ids[i] < dom->count, TESS_ERR_ARG,
                         "domain of token %lld = %d is outside [0, %lld)", (long long)i,
                         dom->ids[i], (long long)dom->count);
    }
    tess_ds_writer w;
    TESS_CHECK(tess_ds_writer_create(&w, path, TOKENS_FORMAT, TOKENS_VERSION));
    hid_t ftype = vocab_size <= 65536 ? H5T_STD_U16LE : H5T_STD_I32LE;
    tess_status s = tess_ds_write_array(&w, "/tokens", ftype, H5T_NATIVE_INT32, 1, &n, tokens);
    if (s == TESS_OK) s = tess_ds_write_attr_int(&w, "/tokens", "vocab_size", vocab_size);
    if (s == TESS_OK) s = tess_ds_write_attr_string(&w, "/tokens", "tokenizer", tokenizer);
    if (s == TESS_OK && vocab)
        s = tess_ds_write_array(&w, "/vocab", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, &vocab_size,
                                vocab);
    if (s == TESS_OK && dom)
        s = tess_ds_write_array(&w, "/domain", H5T_STD_U8LE, H5T_NATIVE_INT32, 1, &n, dom->ids);
    if (s == TESS_OK && dom) s = tess_ds_write_attr_int(&w, "/domain", "n_domains", dom->count);
    if (s == TESS_OK && dom) s = tess_ds_write_attr_string(&w, "/domain", "names", dom->names);
    if (s != TESS_OK) {
        tess_ds_writer_abandon(&w);
        return tess_error_push(s, __FILE__, __LINE__, __func__, "writing tokens to '%s'", path);
    }
    TESS_CHECK(tess_ds_writer_commit(&w));
    return TESS_OK;
}

void tess_tokens_encode(const uint8_t *text, int64_t n, tess_tokens_tokenizer kind, int32_t *tokens,
                        uint8_t *vocab, int64_t *vocab_size) {
    int32_t id[BYTE_VOCAB] = {0};
    bool seen[BYTE_VOCAB] = {false};
    for (int64_t i = 0; i < n; i++) seen[text[i]] = true;
    int64_t v = 0;
    for (int b = 0; b < BYTE_VOCAB; b++) {
        if (kind == TESS_TOKENS_CHAR && !seen[b]) continue;
        id[b] = (int32_t)v;
        vocab[v++] = (uint8_t)b;
    }
    for (int64_t i = 0; i < n; i++) tokens[i] = id[text[i]];
    *vocab_size = v;
}
