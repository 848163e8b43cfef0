/* ckpt_forge.c - what a forger with h5py and the format's documentation can do to a checkpoint:
 * change a value a resume uses and make every check of the file agree again (the dataset's hash
 * recomputed, the integrity record rewritten), so that only a range check can refuse it.
 * usage: ckpt_forge FILE cursor N          root attribute data_cursor = N
 *        ckpt_forge FILE counter PATH N    the one-element int64 dataset PATH = N
 * 1 rank; exit 0, or 1 with a message. For tests (tests/run/check_resume_ranges.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_tamper.h" /* tamper_* (tests/io) */
#include "io/ckpt.h"     /* tess_ckpt_hash_* */

/* PATH's only element = v and its hash attribute recomputed (scheme v2, formats 2-4). */
static int set_counter(const char *file, const char *path, int64_t v) {
    hid_t f = tamper_open(file, H5F_ACC_RDWR);
    hid_t d = f >= 0 ? H5Dopen2(f, path, H5P_DEFAULT) : -1;
    const uint64_t hash =
        tess_ckpt_hash_final(tess_ckpt_hash_add(TESS_CKPT_HASH_V2, 0, &v, 8, 0, 1), 1);
    hid_t a = d >= 0 ? H5Aopen(d, "hash", H5P_DEFAULT) : -1;
    int rc = a >= 0 && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0 &&
                     H5Awrite(a, H5T_NATIVE_UINT64, &hash) >= 0
                 ? 0
                 : -1;
    if (a >= 0) H5Aclose(a);
    if (d >= 0) H5Dclose(d);
    if (f >= 0 && H5Fclose(f) < 0) rc = -1;
    return f >= 0 ? rc : -1;
}

int main(int argc, char **argv) {
    int rc = -1;
    if (argc == 4 && strcmp(argv[2], "cursor") == 0)
        rc = tamper_set_int_attr(argv[1], "/", "data_cursor", strtoll(argv[3], NULL, 10));
    else if (argc == 5 && strcmp(argv[2], "counter") == 0)
        rc = set_counter(argv[1], argv[3], strtoll(argv[4], NULL, 10));
    else {
        fprintf(stderr, "usage: ckpt_forge FILE cursor N | ckpt_forge FILE counter PATH N\n");
        return 1;
    }
    if (rc == 0) rc = tamper_reseal(argv[1]);
    if (rc != 0) fprintf(stderr, "ckpt_forge: cannot edit '%s'\n", argv[1]);
    return rc == 0 ? 0 : 1;
}
