/* fuzz_tokens.c - the token reader (tess_tokens_create / read / read_step, io/tokens.h) past the
 * HDF5 open: the checks on the layout, the attributes and the token values, and the windows.
 *
 * The input is a description of a token file, decoded with the fuzz.h cursor and written with
 * the HDF5 API to "<scratch>/fz_tokens.h5":
 *   root attributes   format ("tessera.tokens", another name, or absent), format_version
 *                     (1, 0, 2, or absent)
 *   /tokens           type (uint16, int32, int64, uint8, float32, fixed-length string), rank 0..2,
 *                     dimensions 0..40, values mostly in [-1, vocab_size], or absent
 *   vocab_size        attribute of /tokens: int64, float64 or string; 1..300 or an edge value
 *                     (0, -1, 2^31, 2^40); or absent
 *   tokenizer         attribute of /tokens (string), or absent
 *   /vocab            uint8, int32 or float32 of a length around vocab_size, or absent
 * then the reader options (seq_len 1..6 or an edge value, the range fractions, shuffle, seed)
 * and up to 4 reads (first sample, count; or a step and a batch).
 * Properties checked (fuzz_fail otherwise), besides no crash under ASan/UBSan:
 *   - a refusal leaves an error record and no reader;
 *   - an accepted file had a 1-D integer /tokens, a vocab_size in 1..2^31-1 and every token in
 *     [0, vocab_size); the counts are those of tokens.h (n tokens, W windows of the range);
 *   - every window read is T + 1 consecutive stored tokens starting at begin + k*T, k < W.
 */
#include <hdf5.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io/h5.h"     /* tess_h5_quiet_* */
#include "io/tokens.h" /* tess_tokens_* */

enum { FZ_MAXN = 40, FZ_MAXT = 6, FZ_MAXB = 4 };

int LLVMFuzzerInitialize(int *argc, char ***argv) { return fuzz_start(argc, argv); }

/* Attribute `name` of loc: kind 0 int64, 1 float64, 2 variable-length string, 3 fixed string. */
static void fz_attr(hid_t loc, const char *name, int kind, int64_t iv, const char *sv) {
    hid_t space = H5Screate(H5S_SCALAR), t;
    char text[32];
    const char *vl = text;
    const void *buf;
    double dv = (double)iv;
    if (kind == 0) {
        t = H5Tcopy(H5T_STD_I64LE);
        buf = &iv;
    } else if (kind == 1) {
        t = H5Tcopy(H5T_IEEE_F64LE);
        buf = &dv;
    } else {
        snprintf(text, sizeof text, "%s", sv ? sv : "");
        if (!sv) snprintf(text, sizeof text, "%lld", (long long)iv);
        t = H5Tcopy(H5T_C_S1);
        if (kind == 2) {
            H5Tset_size(t, H5T_VARIABLE);
            buf = &vl;
        } else {
            H5Tset_size(t, strlen(text) + 1);
            buf = text;
        }
    }
    hid_t a = H5Acreate2(loc, name, t, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, t, buf) < 0) fuzz_fail("cannot write attribute %s", name);
    H5Aclose(a);
    H5Tclose(t);
    H5Sclose(space);
}

/* Dataset `name` of type kind (0 uint16, 1 int32, 2 int64, 3 uint8, 4 float32, 5 string) and
 * shape (rank, dims) holding v (the values as the type stores them). */
static void fz_dataset(hid_t f, const char *name, int kind, int rank, const hsize_t *dims,
                       const int64_t *v, int64_t n) {
    static const hid_t *const types[] = {&H5T_STD_U16LE_g, &H5T_STD_I32LE_g, &H5T_STD_I64LE_g,
                                         &H5T_STD_U8LE_g, &H5T_IEEE_F32LE_g};
    hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, NULL);
    hid_t t = kind == 5 ? H5Tcopy(H5T_C_S1) : H5Tcopy(*types[kind]);
    char text[FZ_MAXN * FZ_MAXN][4];
    if (kind == 5) {
        H5Tset_size(t, 4);
        for (int64_t i = 0; i < n; i++) snprintf(text[i], 4, "%d", (int)(v[i] % 100));
    }
    hid_t d = H5Dcreate2(f, name, t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (d < 0 || (n > 0 && H5Dwrite(d, kind == 5 ? t : H5T_NATIVE_INT64, H5S_ALL, H5S_ALL,
                                    H5P_DEFAULT, kind == 5 ? (const void *)text : v) < 0))
        fuzz_fail("cannot write %s", name);
    H5Dclose(d);
    H5Tclose(t);
    H5Sclose(space);
}

/* The value a type stores for v. */
static int64_t fz_stored(int kind, int64_t v) {
    switch (kind) {
    case 0: return (uint16_t)v;
    case 1: return (int32_t)v;
    case 3: return (uint8_t)v;
    default: return v;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_bytes b = {data, size, 0};
    static const int64_t vocab_edges[] = {0, -1, INT64_C(1) << 31, INT64_C(1) << 40};
    /* decode the file */
    int fmt = fuzz_pick(&b, 8), ver = fuzz_pick(&b, 8);
    bool has_tokens = fuzz_pick(&b, 8) != 0;
    int kind = fuzz_pick(&b, 6);
    uint8_t rk = fuzz_u8(&b);
    int rank = rk < 200 ? 1 : rk % 3;
    hsize_t dims[2] = {1, 1};
    int64_t n = 1;
    for (int k = 0; k < rank; k++) {
        dims[k] = (hsize_t)fuzz_pick(&b, FZ_MAXN + 1);
        n *= (int64_t)dims[k];
    }
    int vkind = fuzz_pick(&b, 8);
    uint8_t vs = fuzz_u8(&b);
    int64_t vocab = vs < 240 ? 1 + vs % 40 : vs < 250 ? 1 + vs * 12 % 300 : vocab_edges[vs % 4];
    static int64_t tok[FZ_MAXN * FZ_MAXN];
    for (int64_t i = 0; i < n; i++) {
        uint8_t x = fuzz_u8(&b);
        int64_t t = x < 250 ? x % (vocab > 0 && vocab < 300 ? vocab : 300) : (int64_t)x - 252;
        if (x == 255) t = vocab; /* one past the end */
        tok[i] = kind == 4 ? t : fz_stored(kind, t);
    }
    int tokenizer = fuzz_pick(&b, 4), has_vocab = fuzz_pick(&b, 4), vocab_kind = fuzz_pick(&b, 3);
    int vocab_len_delta = fuzz_pick(&b, 3) - 1;

    char path[300];
    fuzz_path(path, sizeof path, "fz_tokens.h5");
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 16, 1);
    tess_h5_quiet q;
    tess_h5_quiet_begin(&q);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) fuzz_fail("cannot create %s", path);
    if (fmt < 6) fz_attr(f, "format", 2 + fmt % 2, 0, fmt < 5 ? "tessera.tokens" : "tessera.graphs");
    if (ver < 6) fz_attr(f, "format_version", ver % 2, ver < 5 ? 1 : ver == 5 ? 2 : 0, NULL);
    if (has_tokens) {
        fz_dataset(f, "/tokens", kind, rank, dims, tok, n);
        hid_t d = H5Dopen2(f, "/tokens", H5P_DEFAULT);
        if (vkind < 7) fz_attr(d, "vocab_size", vkind % 4, vocab, NULL);
        if (tokenizer) fz_attr(d, "tokenizer", 2 + tokenizer % 2, 0, "byte");
        H5Dclose(d);
    }
    if (has_vocab && vocab > 0 && vocab < 400) {
        static int64_t bytes[400];
        hsize_t vl = (hsize_t)(vocab + vocab_len_delta);
        for (int64_t i = 0; i < (int64_t)vl; i++) bytes[i] = i & 0xff;
        fz_dataset(f, "/vocab", vocab_kind == 0 ? 3 : vocab_kind == 1 ? 1 : 4, 1, &vl, bytes,
                   (int64_t)vl);
    }
    if (H5Fclose(f) < 0) fuzz_fail("cannot close %s", path);
    tess_h5_quiet_end(&q);

    /* decode the options and open */
    static const double fracs[] = {0.0, 0.25, 0.5, 0.75, 1.0, 0.1, 0.9, -0.5, 1.5, NAN};
    tess_tokens_opts o = {0};
    uint8_t sl = fuzz_u8(&b);
    o.seq_len = sl < 250 ? 1 + sl % FZ_MAXT : sl == 250 ? 0 : sl == 251 ? -1 : INT64_MAX - (sl - 252);
    o.begin_frac = fracs[fuzz_pick(&b, 10)];
    o.end_frac = fracs[(4 + fuzz_pick(&b, 10)) % 10];
    o.shuffle = fuzz_pick(&b, 2);
    o.key.seed = fuzz_u8(&b);
    tess_tokens *r = NULL;
    tess_status s = tess_tokens_create(&r, fuzz_env.rt.world, path, &o);
    fuzz_verdict("create", s);
    if (s != TESS_OK) {
        if (r) fuzz_fail("refused, but a reader was returned");
        if (tess_error_text()[0] == '\0') fuzz_fail("refused without an error record");
        tess_error_clear();
        return 0;
    }

    /* accepted: the file was a valid token file */
    if (!has_tokens || rank != 1 || kind == 4 || kind == 5)
        fuzz_fail("accepted without a 1-D integer /tokens");
    if (vocab < 1 || vocab > INT32_MAX || tess_tokens_vocab_size(r) != vocab)
        fuzz_fail("vocab_size %lld (file %lld)", (long long)tess_tokens_vocab_size(r),
                  (long long)vocab);
    for (int64_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= vocab)
            fuzz_fail("accepted token %lld = %lld", (long long)i, (long long)tok[i]);
    int64_t begin = (int64_t)floor(o.begin_frac * (double)n), end = (int64_t)floor(o.end_frac * (double)n);
    int64_t T = o.seq_len, W = (end - begin - 1) / T;
    if (tess_tokens_count(r) != n || tess_tokens_num_windows(r) != W || W < 1)
        fuzz_fail("counts: %lld tokens, %lld windows; expected %lld, %lld",
                  (long long)tess_tokens_count(r), (long long)tess_tokens_num_windows(r),
                  (long long)n, (long long)W);
    int32_t out[FZ_MAXB * (FZ_MAXT + 1)];
    for (int k = 0; k < 4; k++) {
        int64_t first = fuzz_pick(&b, 4 * (int)(W < 60 ? W : 60)), cnt = fuzz_pick(&b, FZ_MAXB + 1);
        bool step = fuzz_pick(&b, 2);
        int64_t nl = cnt;
        if (step)
            s = tess_tokens_read_step(r, first, cnt, out, &nl);
        else
            s = tess_tokens_read(r, first, cnt, out);
        if (step && cnt == 0) {
            if (s == TESS_OK) fuzz_fail("read_step with batch 0 accepted");
            tess_error_clear();
            continue;
        }
        if (s != TESS_OK) fuzz_fail("reading %lld samples from %lld failed", (long long)cnt,
                                    (long long)first);
        int64_t g0 = step ? first * cnt : first;
        for (int64_t i = 0; i < nl; i++) {
            int64_t w0 = tess_tokens_window_start(r, g0 + i);
            if (w0 < begin || (w0 - begin) % T != 0 || (w0 - begin) / T >= W)
                fuzz_fail("sample %lld starts at %lld", (long long)(g0 + i), (long long)w0);
            for (int64_t t = 0; t <= T; t++)
                if (out[i * (T + 1) + t] != tok[w0 + t])
                    fuzz_fail("sample %lld token %lld: %d, file %lld", (long long)(g0 + i),
                              (long long)t, out[i * (T + 1) + t], (long long)tok[w0 + t]);
        }
    }
    if (tess_tokens_destroy(&r) != TESS_OK) fuzz_fail("destroy failed");
    return 0;
}
