/* test_ckpt_corrupt - every kind of bad checkpoint is detected, on every rank alike, with a
 * message naming the file and the dataset and saying what was expected and what was found:
 * truncated, bit-flipped data, missing / extra dataset, wrong shape, wrong dtype, a different
 * model, missing counter or state set, unknown format, format_version + 1, not HDF5, missing file.
 * A good copy (format 4) is written collectively, damaged on rank 0 with serial HDF5 or plain
 * writes (ckpt_tamper.h), then loaded (and verified) on all ranks. An HDF5 edit is caught first by
 * the integrity record ("its metadata changed"); the edits marked RESEALED then rewrite the record
 * as a forger would, to reach the checks behind it: structure, ranges (step = -5, data_cursor <
 * 0), hashes. Also checks that a failed load leaves HDF5's error printing as it was. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "ckpt_model.h"
#include "ckpt_tamper.h"
#include "core/runtime.h" /* tess_runtime_* */
#include "tess_test.h"

static const char *good = "good.h5", *bad = "bad.h5";

typedef enum { OP_LOAD, OP_VERIFY, OP_LOAD_OTHER_MODEL } op_kind;

/* Run op on bad.h5 (or path) on every rank; expect status want and every needle in the record. */
static void expect(const tess_group *g, int rank, int size, const char *label, op_kind op,
                   const char *path, tess_status want, const char *needle1, const char *needle2) {
    ckpt_model cm;
    TESS_TEST_CHECK(ckpt_model_build(&cm, rank, size, op == OP_LOAD_OTHER_MODEL) == TESS_OK,
                    "%s: build", label);
    tess_error_clear();
    tess_status s = op == OP_VERIFY ? tess_ckpt_verify(g, path, NULL)
                                    : tess_ckpt_load(g, path, &cm.st);
    const char *text = tess_error_text();
    TESS_TEST_CHECK(s == want, "%s: status %s, expected %s; record:\n%s", label,
                    tess_status_name(s), tess_status_name(want), text);
    TESS_TEST_CHECK(!needle1 || strstr(text, needle1), "%s: no '%s' in:\n%s", label, needle1,
                    text);
    TESS_TEST_CHECK(!needle2 || strstr(text, needle2), "%s: no '%s' in:\n%s", label, needle2,
                    text);
    /* the same verdict everywhere */
    int v[2] = {(int)s, -(int)s}, r[2];
    MPI_Allreduce(v, r, 2, MPI_INT, MPI_MAX, g->comm);
    TESS_TEST_CHECK(r[0] == -r[1], "%s: ranks disagree on the status", label);
    if (rank == 0 && s != TESS_OK) printf("--- %s:\n%s", label, text);
    tess_error_clear();
    ckpt_model_free(&cm);
}

/* Rank 0 makes bad.h5 from good.h5 and applies fn; every rank learns whether that worked. */
#define TAMPER(comm, rank, call)                                                            \
    do {                                                                                    \
        int ok_ = 1;                                                                        \
        if ((rank) == 0) ok_ = tamper_copy(good, bad) == 0 && (call) == 0;                  \
        MPI_Bcast(&ok_, 1, MPI_INT, 0, (comm));                                             \
        TESS_TEST_CHECK(ok_, "tampering failed: %s", #call);                                \
    } while (0)
/* The same, then the integrity record rewritten to match (tamper_reseal). */
#define RESEALED(comm, rank, call) TAMPER(comm, rank, (call) == 0 ? tamper_reseal(bad) : -1)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tess_runtime rt;
    if (tess_runtime_start(&rt, MPI_COMM_WORLD) != TESS_OK) return 1;
    tess_group *g = NULL; /* the checkpoint functions' group */
    if (tess_group_create(rt.comm, "test", &g) != TESS_OK) return 1;
    MPI_Comm comm = rt.comm;
    const int rank = rt.rank, size = rt.size;
    {
        ckpt_model cm;
        TESS_TEST_CHECK(ckpt_model_build(&cm, rank, size, false) == TESS_OK, "build");
        ckpt_model_fill(&cm, 100);
        TESS_TEST_CHECK(tess_ckpt_write(g, good, &cm.st) == TESS_OK, "write: %s",
                        tess_error_text());
        ckpt_model_free(&cm);
    }
    expect(g, rank, size, "good file loads", OP_LOAD, good, TESS_OK, NULL, NULL);
    expect(g, rank, size, "good file verifies", OP_VERIFY, good, TESS_OK, NULL, NULL);

    expect(g, rank, size, "missing file", OP_LOAD, "no_such.h5", TESS_ERR_NOINPUT,
           "cannot open checkpoint 'no_such.h5': No such file or directory", NULL);
    TAMPER(comm, rank, tamper_write_text(bad, "[run]\nnot = hdf5\n"));
    expect(g, rank, size, "not HDF5", OP_LOAD, bad, TESS_ERR_DATA,
           "checkpoint 'bad.h5' is not an HDF5 file", NULL);
    TAMPER(comm, rank, tamper_truncate(bad, 5000));
    expect(g, rank, size, "truncated to 5000 bytes", OP_LOAD, bad, TESS_ERR_DATA,
           "corrupt checkpoint 'bad.h5': it has 5000 bytes, its integrity record says",
           "(truncated or extended)");
    TAMPER(comm, rank, tamper_truncate(bad, 5000));
    expect(g, rank, size, "truncated: verify", OP_VERIFY, bad, TESS_ERR_DATA,
           "it has 5000 bytes", NULL);
    TAMPER(comm, rank, tamper_flip(bad, 0, 0x04));
    expect(g, rank, size, "record magic flipped", OP_LOAD, bad, TESS_ERR_DATA,
           "corrupt checkpoint 'bad.h5'", "no integrity record");
    TAMPER(comm, rank, tamper_flip(bad, 100, 0x01));
    expect(g, rank, size, "record padding flipped", OP_VERIFY, bad, TESS_ERR_DATA,
           "corrupt checkpoint 'bad.h5': its metadata changed since it was written", NULL);

    TAMPER(comm, rank, tamper_flip_dataset(bad, "/params/emb.w", 17));
    expect(g, rank, size, "flipped byte", OP_LOAD, bad, TESS_ERR_DATA,
           "corrupt checkpoint 'bad.h5' (step 100): 1 dataset changed since it was written",
           "dataset /params/emb.w does not match its hash");
    TAMPER(comm, rank, tamper_flip_dataset(bad, "/optim/v/grid.a", 0));
    expect(g, rank, size, "flipped byte in a block-cyclic optimizer moment", OP_LOAD, bad,
           TESS_ERR_DATA, "dataset /optim/v/grid.a does not match its hash", NULL);
    TAMPER(comm, rank, tamper_flip_dataset(bad, "/optim/m/layers.0.norm.g", 27));
    expect(g, rank, size, "flipped byte: verify", OP_VERIFY, bad, TESS_ERR_DATA,
           "1 of 25 datasets fail their hash check",
           "dataset /optim/m/layers.0.norm.g does not match its hash");
    TAMPER(comm, rank, tamper_flip_dataset(bad, "/optim/step_count", 0));
    expect(g, rank, size, "edited optimizer step count", OP_LOAD, bad, TESS_ERR_DATA,
           "dataset /optim/step_count does not match its hash", NULL);
    TAMPER(comm, rank, tamper_flip_dataset(bad, "/config", 3));
    expect(g, rank, size, "flipped config byte: load", OP_LOAD, bad, TESS_ERR_DATA,
           "corrupt checkpoint 'bad.h5': its metadata changed since it was written", NULL);
    RESEALED(comm, rank, tamper_flip_dataset(bad, "/config", 3));
    expect(g, rank, size, "flipped config byte, resealed: load", OP_LOAD, bad, TESS_ERR_DATA,
           "dataset /config does not match its hash", NULL);
    RESEALED(comm, rank, tamper_flip_dataset(bad, "/manifest", 2));
    expect(g, rank, size, "flipped manifest byte, resealed: verify", OP_VERIFY, bad,
           TESS_ERR_DATA, "dataset /manifest does not match its hash", NULL);

    /* root attributes a resume uses, edited (as with h5py) */
    TAMPER(comm, rank, tamper_set_int_attr(bad, "/", "step", -5));
    expect(g, rank, size, "step = -5", OP_LOAD, bad, TESS_ERR_DATA,
           "its metadata changed since it was written", NULL);
    RESEALED(comm, rank, tamper_set_int_attr(bad, "/", "step", -5));
    expect(g, rank, size, "step = -5, resealed", OP_LOAD, bad, TESS_ERR_DATA,
           "corrupt checkpoint 'bad.h5': root attribute step = -5 is negative", NULL);
    RESEALED(comm, rank, tamper_set_int_attr(bad, "/", "data_cursor", -1));
    expect(g, rank, size, "data_cursor = -1, resealed", OP_VERIFY, bad, TESS_ERR_DATA,
           "root attribute data_cursor = -1 is negative", NULL);
    TAMPER(comm, rank, tamper_set_int_attr(bad, "/", "data_cursor", 7));
    expect(g, rank, size, "data_cursor = 7", OP_VERIFY, bad, TESS_ERR_DATA,
           "its metadata changed since it was written", NULL);

    TAMPER(comm, rank, tamper_delete(bad, "/params/head.b"));
    expect(g, rank, size, "missing dataset, record not updated", OP_LOAD, bad, TESS_ERR_DATA,
           "its metadata changed since it was written", NULL);
    RESEALED(comm, rank, tamper_delete(bad, "/params/head.b"));
    /* a dataset the manifest lists is gone: the load checks the structure as verify does */
    expect(g, rank, size, "missing dataset", OP_LOAD, bad, TESS_ERR_DATA,
           "corrupt checkpoint 'bad.h5': 1 structural problem",
           "dataset /params/head.b is missing");
    RESEALED(comm, rank, tamper_delete(bad, "/params/head.b"));
    expect(g, rank, size, "missing dataset: verify", OP_VERIFY, bad, TESS_ERR_DATA,
           "dataset /params/head.b is missing", NULL);
    {
        hsize_t d2[1] = {2};
        RESEALED(comm, rank, tamper_replace(bad, "/params/bogus", H5T_IEEE_F32LE, 1, d2));
    }
    expect(g, rank, size, "extra dataset", OP_LOAD, bad, TESS_ERR_DATA,
           "dataset /params/bogus is not in the manifest", NULL);
    {
        hsize_t d2[1] = {2};
        RESEALED(comm, rank, tamper_replace(bad, "/params/bogus", H5T_IEEE_F32LE, 1, d2));
    }
    expect(g, rank, size, "extra dataset: verify", OP_VERIFY, bad, TESS_ERR_DATA,
           "dataset /params/bogus is not in the manifest", NULL);
    {
        hsize_t d2[2] = {11, 7};
        RESEALED(comm, rank, tamper_replace(bad, "/params/emb.w", H5T_IEEE_F32LE, 2, d2));
    }
    expect(g, rank, size, "wrong shape", OP_LOAD, bad, TESS_ERR_DATA,
           "dataset /params/emb.w has shape [11,7], expected [11,6]", NULL);
    {
        hsize_t d2[2] = {11, 6};
        RESEALED(comm, rank, tamper_replace(bad, "/optim/m/emb.w", H5T_IEEE_F64LE, 2, d2));
    }
    expect(g, rank, size, "wrong dtype", OP_LOAD, bad, TESS_ERR_DATA,
           "dataset /optim/m/emb.w has type float64, expected float32", NULL);
    expect(g, rank, size, "different model", OP_LOAD_OTHER_MODEL, good, TESS_ERR_DATA,
           "written for a different model (model_digest",
           "dataset /params/emb.w has shape [11,6], expected [11,8]");
    RESEALED(comm, rank, tamper_delete(bad, "/optim/step_count"));
    expect(g, rank, size, "missing counter", OP_LOAD, bad, TESS_ERR_DATA,
           "dataset /optim/step_count is missing", NULL);
    {
        hsize_t d1[1] = {1};
        RESEALED(comm, rank, tamper_replace(bad, "/optim/step_count", H5T_IEEE_F64LE, 1, d1));
    }
    expect(g, rank, size, "counter of the wrong type", OP_LOAD, bad, TESS_ERR_DATA,
           "dataset /optim/step_count has type float64, expected int64", NULL);
    RESEALED(comm, rank, tamper_delete(bad, "/optim/v"));
    expect(g, rank, size, "missing state set", OP_LOAD, bad, TESS_ERR_DATA,
           "dataset /optim/v/emb.w is missing", "8 structural problems");
    RESEALED(comm, rank,
             tamper_set_int_attr(bad, "/", "format_version", TESS_CKPT_FORMAT_VERSION + 1));
    expect(g, rank, size, "format_version + 1", OP_LOAD, bad, TESS_ERR_DATA,
           "checkpoint 'bad.h5' has format_version 5, newer than this build reads (4)", NULL);
    RESEALED(comm, rank, tamper_delete_attr(bad, "/", "format"));
    expect(g, rank, size, "no format attribute", OP_VERIFY, bad, TESS_ERR_DATA,
           "'bad.h5' is not a Tessera checkpoint (no 'format' attribute)", NULL);
    RESEALED(comm, rank, tamper_delete_attr(bad, "/", "step"));
    expect(g, rank, size, "missing root attribute", OP_LOAD, bad, TESS_ERR_DATA,
           "root attribute 'step' is missing", NULL);

    /* HDF5's automatic error printing is back on after all of this */
    H5E_auto2_t fn = NULL;
    void *data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &fn, &data);
    TESS_TEST_CHECK(fn != NULL, "HDF5 error printing left off");

    int rc = tess_test_finish_mpi("test_ckpt_corrupt", comm);
    tess_group_destroy(&g);
    tess_runtime_finish(&rt, TESS_OK, true);
    return rc;
}
