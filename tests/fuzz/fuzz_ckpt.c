/* fuzz_ckpt.c - the checkpoint readers (io/ckpt.h) on arbitrary bytes: the public paths a tool
 * and a resume take, tess_ckpt_open (tess-ckpt ls/meta), tess_ckpt_verify (tess-ckpt verify) and
 * tess_ckpt_load into the model of tests/io/ckpt_model.h (the entries of the seed checkpoint,
 * which ckpt_seed.c writes).
 *
 * Input: the bytes of a file, written to "<scratch>/ckpt_00000040.h5".
 * Properties checked (fuzz_fail otherwise), besides no crash and no hang:
 *   - a refusal leaves an error record;
 *   - a file that loads also verifies (a resume checks at least what verify checks).
 * The seed is a format 4 checkpoint: its integrity record is checked with plain reads before
 * HDF5 parses any byte, so no mutation of it may reach HDF5 unchecked. Inputs that begin with
 * HDF5's own signature are the older formats 1-3, which carry no record and whose metadata HDF5
 * parses unprotected by design (docs/checkpoints.md): they are skipped, so a run stays on the
 * guarantee that format 4 makes.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "io/ckpt.h"     /* tess_ckpt_* */
#include "ckpt_model.h" /* ckpt_model_* (tests/io) */

static ckpt_model fz_model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    fuzz_start(argc, argv);
    if (ckpt_model_build(&fz_model, 0, 1, false) != TESS_OK) fuzz_fail("cannot build the model");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint8_t hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (size >= sizeof hdf5_signature && memcmp(data, hdf5_signature, sizeof hdf5_signature) == 0)
        return 0; /* formats 1-3: unprotected by design */
    char path[300];
    fuzz_path(path, sizeof path, "ckpt_00000040.h5");
    fuzz_write_file(path, data, size);

    hid_t file = H5I_INVALID_HID;
    tess_ckpt_info info;
    tess_status s = tess_ckpt_open(path, &file, &info);
    fuzz_verdict("open", s);
    if (s == TESS_OK) H5Fclose(file);
    else if (tess_error_text()[0] == '\0') fuzz_fail("open refused without an error record");
    tess_error_clear();

    tess_status verified = tess_ckpt_verify(fuzz_env.rt.world, path, &info);
    fuzz_verdict("verify", verified);
    if (verified != TESS_OK && tess_error_text()[0] == '\0')
        fuzz_fail("verify refused without an error record");
    tess_error_clear();

    s = tess_ckpt_load(fuzz_env.rt.world, path, &fz_model.st);
    fuzz_verdict("load", s);
    if (s != TESS_OK && tess_error_text()[0] == '\0') fuzz_fail("load refused without an error record");
    if (s == TESS_OK && verified != TESS_OK) fuzz_fail("load accepted a file verify refuses");
    tess_error_clear();
    return 0;
}
